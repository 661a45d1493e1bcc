package fresh

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestStaleReads(t *testing.T) {
	var s Reads
	assert.False(t, s.Behind("Workload/ns/a", "10"), "no conflict: the cache is used")
	s.Note("Workload/ns/a", "10")
	assert.True(t, s.Behind("Workload/ns/a", "10"), "the copy the write was refused on: wait")
	assert.False(t, s.Behind("Workload/ns/b", "10"), "keys do not share")
	assert.False(t, s.Behind("Workload/ns/a", "11"), "a newer copy: go on")
	assert.False(t, s.Behind("Workload/ns/a", "10"), "forgotten once a newer copy was seen")

	s.Note("Workload/ns/a", "12")
	s.m["Workload/ns/a"] = staleRead{rv: "12", at: time.Now().Add(-staleWait)}
	assert.False(t, s.Behind("Workload/ns/a", "12"), "after staleWait the cache is used as it is")

	s.Note("Workload/ns/a", "13")
	s.Forget("Workload/ns/a")
	assert.False(t, s.Behind("Workload/ns/a", "13"))
}
