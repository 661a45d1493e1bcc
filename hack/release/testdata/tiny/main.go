// Command tiny stands in for kontinue in hack/release's test: a Go binary
// with build information and one dependency, small and quick to build,
// carrying CA roots as kontinue does (the recipe refuses an image without).
package main

import (
	"fmt"

	"github.com/tidwall/gjson"
	_ "golang.org/x/crypto/x509roots/fallback"
)

func main() { fmt.Println(gjson.Get(`{"a":"tiny"}`, "a")) }
