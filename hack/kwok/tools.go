//go:build tools

// Package tools pins kwok, the fake-node controller of the real-controllers
// cluster (hack/install-kwok.sh builds cmd/kwok from this module).
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
