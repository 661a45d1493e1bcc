// Command bare is a Go binary without CA roots: the release refuses to put
// it in an image (hack/release's TestImageNeedsRoots).
package main

import "fmt"

func main() { fmt.Println("bare") }
