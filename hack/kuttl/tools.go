//go:build tools

// Package tools pins kuttl, the runner of Cartographer's own end-to-end suite
// (`make conformance`).
package tools

import _ "github.com/kudobuilder/kuttl/cmd/kubectl-kuttl"
