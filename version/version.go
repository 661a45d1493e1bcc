// Package version holds Kontinue's version. version/VERSION is the one
// source: the version the next release carries (make release refuses
// another), which CHANGELOG.md's newest entry and the chart's version and
// appVersion repeat (hack/release's TestOneVersion checks they agree).
//
// A release stamps it at link time (hack/release, the Dockerfile's
// VERSION build argument):
//
//	go build -ldflags "-X kontinue.dev/kontinue/version.Version=v0.1.0"
//
// Any other build says VERSION-dev and, in String, the commit it was
// built from.
package version

import (
	_ "embed"
	"runtime/debug"
	"strings"
)

//go:embed VERSION
var file string

// Version is the release, or version/VERSION with -dev for a build that
// stamped none (make build, go build, go install).
var Version string

func init() {
	if Version == "" {
		Version = Next() + "-dev"
	}
}

// Next is version/VERSION: the version the next release carries.
func Next() string { return strings.TrimSpace(file) }

// String is what `kontinue version` prints: the version, and for a build
// that is not a release the commit Go recorded (with ", modified" when the
// work tree had changes), when it recorded one.
func String() string {
	info, _ := debug.ReadBuildInfo()
	return describe(Version, info)
}

func describe(version string, info *debug.BuildInfo) string {
	s := "kontinue " + version
	if !strings.HasSuffix(version, "-dev") || info == nil {
		return s
	}
	var rev, modified string
	for _, kv := range info.Settings {
		switch kv.Key {
		case "vcs.revision":
			rev = kv.Value
		case "vcs.modified":
			modified = kv.Value
		}
	}
	if rev == "" {
		return s
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified == "true" {
		return s + " (commit " + rev + ", modified)"
	}
	return s + " (commit " + rev + ")"
}
