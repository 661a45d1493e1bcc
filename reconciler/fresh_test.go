package reconciler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestStaleReads(t *testing.T) {
	var s staleReads
	assert.False(t, s.behind("Workload/ns/a", "10"), "no conflict: the cache is used")
	s.note("Workload/ns/a", "10")
	assert.True(t, s.behind("Workload/ns/a", "10"), "the copy the write was refused on: wait")
	assert.False(t, s.behind("Workload/ns/b", "10"), "keys do not share")
	assert.False(t, s.behind("Workload/ns/a", "11"), "a newer copy: go on")
	assert.False(t, s.behind("Workload/ns/a", "10"), "forgotten once a newer copy was seen")

	s.note("Workload/ns/a", "12")
	s.m["Workload/ns/a"] = staleRead{rv: "12", at: time.Now().Add(-staleWait)}
	assert.False(t, s.behind("Workload/ns/a", "12"), "after staleWait the cache is used as it is")

	s.note("Workload/ns/a", "13")
	s.forget("Workload/ns/a")
	assert.False(t, s.behind("Workload/ns/a", "13"))
}
