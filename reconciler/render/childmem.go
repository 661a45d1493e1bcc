package render

import (
	"os"
	"runtime/debug"
	"strings"
)

// outOfMemory reports whether a child renderer's stderr says it ran out of
// the memory limitMemory gave it. Thread stacks count against that limit
// too: a template that fills the heap can make the Go runtime fail to start
// a thread (with cgo, pthread_create gets EAGAIN when it cannot map the
// stack), which is the same limit met, not a fault of the renderer.
func outOfMemory(stderr string) bool {
	for _, s := range []string{"out of memory", "cannot allocate memory",
		"pthread_create failed: Resource temporarily unavailable", "failed to create new OS thread"} {
		if strings.Contains(stderr, s) {
			return true
		}
	}
	return false
}

// asChild turns this process into a render child when env is set to "1"
// (the pool starts the controller's own binary so): first in line for the
// OOM killer, its heap and goroutine stacks bounded, and it exits with what
// run returns instead of starting the controller.
func asChild(env string, maxMemory uint64, maxStack int, run func() int) {
	if os.Getenv(env) != "1" {
		return
	}
	oomFirst()
	if !raceEnabled {
		limitMemory(maxMemory)
	}
	debug.SetMaxStack(maxStack)
	os.Exit(run())
}
