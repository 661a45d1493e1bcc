package render

import "strings"

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
