package main

import (
	"runtime/debug"

	"k8s.io/klog/v2"
)

// The garbage collector lets the heap grow to twice what is live (GOGC=100)
// before collecting. A controller's live heap is mostly its informer
// caches, which it holds for its whole life: Kontinue collects at 1.5×
// live instead. Measured with `make bench` at 1,000 workloads: peak RSS
// 104 → 94 MiB, Kontinue's CPU during convergence 6.2 → 6.3 s (the live
// heap is small since owners and stamped objects are cached as JSON, so a
// collection is cheap). Set from the start rather than past a mark: a
// restart fills the caches in seconds, faster than a sampled policy
// reacts. GOGC or GOMEMLIMIT in the environment (the chart sets GOMEMLIMIT
// from the container's limit) turn this off: the operator chose.
const kontinueGOGC = 50

// gcPercent returns the GOGC to set, and whether to set one, given the
// environment.
func gcPercent(getenv func(string) string) (int, bool) {
	if getenv("GOGC") != "" || getenv("GOMEMLIMIT") != "" {
		return 0, false
	}
	return kontinueGOGC, true
}

// setGCPercent applies gcPercent.
func setGCPercent(getenv func(string) string) {
	if p, ok := gcPercent(getenv); ok {
		debug.SetGCPercent(p)
		klog.V(1).InfoS("garbage collection target set", "gogc", p)
	}
}
