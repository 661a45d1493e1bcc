package render

import "syscall"

// limitMemory caps the data segment of this process, which on Linux
// includes the Go heap: a template that allocates without end makes the
// child fail with "out of memory" instead of the pod being OOM-killed.
func limitMemory(max uint64) {
	_ = syscall.Setrlimit(syscall.RLIMIT_DATA, &syscall.Rlimit{Cur: max, Max: max})
}
