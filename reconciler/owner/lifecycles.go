package owner

import "kontinue.dev/kontinue/reconciler/step"

// writers are the doing side of the lifecycles (reconciler/step's
// Lifecycle, registered there once): how the steps of each writer key
// (step.Lifecycle.IO) read and write through the ownerIO port. Every
// lifecycle's key has one (TestEveryLifecycleHasAWriter).
var writers = map[string]func(x *ownerIO, sc *stepCtx) stepIO{
	step.IOApply:    newMutableWriter,   // mutable.go: objects applied in place
	step.IORuns:     newImmutableWriter, // immutable.go: a new run per input set
	step.IORunnable: newRunnableWriter,  // runnablestep.go: a generated Runnable
}
