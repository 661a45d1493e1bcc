package shrink

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMinimize(t *testing.T) {
	ops := make([]int, 100)
	for i := range ops {
		ops[i] = i
	}
	// Fails when 17, 42 and 90 are all there, in that order.
	fails := func(c []int) bool {
		i, j, k := slices.Index(c, 17), slices.Index(c, 42), slices.Index(c, 90)
		return i >= 0 && j > i && k > j
	}
	runs := 0
	got := Minimize(ops, func(c []int) bool { runs++; return fails(c) }, 1000)
	assert.Equal(t, []int{17, 42, 90}, got)
	assert.Less(t, runs, 200)

	// A single culprit.
	assert.Equal(t, []int{5}, Minimize(ops, func(c []int) bool { return slices.Contains(c, 5) }, 1000))

	// The budget stops it with what it has, which still fails.
	got = Minimize(ops, func(c []int) bool { return fails(c) }, 10)
	assert.True(t, fails(got))
	assert.Less(t, len(got), 100)
}
