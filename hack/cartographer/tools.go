//go:build tools

// Package tools pins Cartographer v0.8.11: its kuttl suite (read from the
// module cache by hack/conformance) and its controller binary (built by the
// benchmarks to compare against).
package tools

import _ "github.com/vmware-tanzu/cartographer/cmd/cartographer"
