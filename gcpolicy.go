package main

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"k8s.io/klog/v2"
)

// The garbage collector lets the heap grow to twice what is live (GOGC=100)
// before collecting. For a controller whose live heap is its informer
// caches, that doubles its memory at scale: 10,000 workloads hold ~300 MiB
// live and peaked at 750 MiB. Past largeHeap, Kontinue collects at 1.5× live
// instead (GOGC=50), which costs GC CPU only where the memory matters; a
// small heap keeps Go's default. GOGC or GOMEMLIMIT in the environment (the
// chart sets GOMEMLIMIT from the container's limit) turn this off: the
// operator chose.
const (
	largeHeap   = 128 << 20
	smallAgain  = 96 << 20 // hysteresis: no flapping at the edge
	largeGOGC   = 50
	defaultGOGC = 100
)

// gcPercentFor returns the GOGC for a live heap of live bytes, given the
// current one.
func gcPercentFor(live uint64, current int) int {
	switch {
	case live >= largeHeap:
		return largeGOGC
	case live < smallAgain:
		return defaultGOGC
	default:
		return current
	}
}

// tuneGC adjusts GOGC to the live heap every few seconds until ctx ends.
func tuneGC(ctx context.Context) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	current := defaultGOGC
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return
		}
		live := sample[0].Value.Uint64()
		if next := gcPercentFor(live, current); next != current {
			debug.SetGCPercent(next)
			klog.V(1).InfoS("garbage collection target changed", "gogc", next, "liveHeapMiB", live>>20)
			current = next
		}
	}
}
