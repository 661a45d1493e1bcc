// Command tiny stands in for kontinue in hack/release's test: a Go binary
// with build information and one dependency, small and quick to build.
package main

import (
	"fmt"

	"github.com/tidwall/gjson"
)

func main() { fmt.Println(gjson.Get(`{"a":"tiny"}`, "a")) }
