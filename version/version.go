// Package version holds Kontinue's version, stamped at build time:
//
//	go build -ldflags "-X kontinue.dev/kontinue/version.Version=$(git describe --tags --always --dirty)"
//
// `make build` and the Dockerfile (build arg VERSION) do so.
package version

// Version is the release, or "dev" for a plain `go build`.
var Version = "dev"

// String is what `kontinue version` prints.
func String() string { return "kontinue " + Version }
