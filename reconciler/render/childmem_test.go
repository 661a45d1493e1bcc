package render

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestOutOfMemory(t *testing.T) {
	for _, c := range []struct {
		stderr string
		want   bool
	}{
		{"fatal error: runtime: out of memory", true},
		{"runtime: cannot allocate memory", true},
		// A heap filled to the limit leaves no room for a thread's stack
		// (seen under load in TestHelmRunawayTemplates).
		{"runtime/cgo: pthread_create failed: Resource temporarily unavailable\nSIGABRT: abort", true},
		{"runtime: failed to create new OS thread (have 7 already; errno=12)", true},
		{"goroutine stack exceeds 67108864-byte limit\nfatal error: stack overflow", false},
		{"panic: nil map", false},
		{"", false},
	} {
		assert.Equal(t, c.want, outOfMemory(c.stderr), c.stderr)
	}
}
