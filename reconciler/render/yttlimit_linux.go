package render

import (
	"os"
	"syscall"
)

// limitMemory caps the data segment of this process, which on Linux
// includes the Go heap: a template that allocates without end makes the
// child fail with "out of memory" instead of the pod being OOM-killed.
func limitMemory(max uint64) {
	_ = syscall.Setrlimit(syscall.RLIMIT_DATA, &syscall.Rlimit{Cur: max, Max: max})
}

// oomFirst makes this process the first the kernel kills when the pod runs
// out of memory: a child renderer, not the controller. Raising one's own
// score needs no privilege.
func oomFirst() {
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0)
}
