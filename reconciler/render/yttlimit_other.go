//go:build !linux

package render

// limitMemory is a no-op where RLIMIT_DATA does not bound the Go heap; the
// parent's deadline still ends the child.
func limitMemory(uint64) {}

func oomFirst() {}
