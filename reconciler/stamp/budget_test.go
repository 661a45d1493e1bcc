package stamp

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestEventBudget(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := newEventBudget(1, 3)
	for i := 0; i < 3; i++ {
		assert.True(t, b.allow("a", t0), "the burst goes through")
	}
	assert.False(t, b.allow("a", t0), "past the burst, dropped")
	assert.True(t, b.allow("b", t0), "another namespace has its own budget")
	assert.False(t, b.allow("a", t0.Add(500*time.Millisecond)))
	assert.True(t, b.allow("a", t0.Add(time.Second)), "refilled at the rate")
}

func TestEventBudgetForgetsIdleNamespaces(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := newEventBudget(1, 2)
	for i := 0; i < budgetNamespaces; i++ {
		b.allow(string(rune('a'+i%26))+time.Duration(i).String(), t0)
	}
	assert.Equal(t, budgetNamespaces, b.size())
	// Later every budget has refilled: the next new namespace forgets them.
	b.allow("new", t0.Add(time.Minute))
	assert.Equal(t, 1, b.size())
	// A namespace still short of tokens is kept (it would otherwise get a
	// fresh burst).
	b.allow("busy", t0.Add(time.Minute))
	b.allow("busy", t0.Add(time.Minute))
	assert.False(t, b.allow("busy", t0.Add(time.Minute)))
}
