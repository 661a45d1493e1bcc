//go:build unix

package jsonlibs

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user and system, all threads, GC included) the
// process has used. The benchmarks report it per op as well as wall time,
// which is unreliable on a loaded machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
