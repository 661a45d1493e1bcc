package stamp

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/types"
)

func TestEchoes(t *testing.T) {
	e := NewEchoes()
	e.Wrote("a", "2")
	assert.False(t, e.Back("a", "1"), "an older version is news")
	assert.True(t, e.Back("a", "2"), "the version written comes back")
	assert.False(t, e.Back("a", "2"), "each write's event is dropped once")

	e.Wrote("a", "3")
	e.Wrote("a", "5")
	assert.False(t, e.Back("a", "3"), "a write replaced by a later one")
	assert.True(t, e.Back("a", "5"))

	e.Wrote("b", "7")
	e.Gone("b")
	assert.False(t, e.Back("b", "7"), "forgotten with the object")
	assert.False(t, e.Back("", "7"))
	e.Wrote("", "1")
	e.Wrote("c", "")
	assert.Equal(t, 0, e.Len(), "nothing kept without a uid or a version")

	var none *Echoes
	none.Wrote("a", "1")
	assert.False(t, none.Back("a", "1"))
}

// Versions whose events never come do not pile up: past echoSweepAt, those
// older than echoMaxAge go.
func TestEchoesBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	e := NewEchoes()
	e.now = func() time.Time { return now }
	for i := range echoSweepAt {
		e.Wrote(types.UID(fmt.Sprint("old", i)), "1")
	}
	assert.Equal(t, echoSweepAt, e.Len())
	now = now.Add(echoMaxAge + time.Second)
	e.Wrote("new", "1")
	assert.Equal(t, 1, e.Len(), "the old versions went")
	assert.True(t, e.Back("new", "1"))
}
