//go:build tools

// Package tools pins Tekton Pipelines: hack/install-tekton.sh builds its
// controller and webhook from this module, and the e2e suite reads its CRDs and config
// maps (config/) from the same module in the module cache.
package tools

import (
	_ "github.com/tektoncd/pipeline/cmd/controller"
	_ "github.com/tektoncd/pipeline/cmd/webhook"
)
