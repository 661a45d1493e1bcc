//go:build linux

// Package e2erelease installs Kontinue from a release, as a user would,
// and runs it as the release's Deployment would: `make release`'s files,
// the packaged chart installed with Helm's engine into a local cluster
// with the workload controllers and kwok's fake nodes, and the binary of
// the release image's layer run as a container of the chart's Deployment
// (container_test.go). See TestInstallFromRelease.
package e2erelease

import (
	"fmt"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	// Re-executed as a container's init (container_test.go).
	if spec := os.Getenv(containerEnv); spec != "" {
		err := runContainer(spec)
		fmt.Fprintln(os.Stderr, "container:", err)
		os.Exit(127)
	}
	os.Exit(m.Run())
}
