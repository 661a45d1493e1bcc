package stamp

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

func cm(uid types.UID, rv string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
	u.SetUID(uid)
	u.SetResourceVersion(rv)
	return u
}

// What a Put's caller decided on, and only that, is no news.
func TestDecided(t *testing.T) {
	v1, v2 := cm("a", "1"), cm("a", "2")
	for _, tt := range []struct {
		name    string
		steps   func(e *Echoes)
		back    string // the version whose event is no news ("": none)
		notBack []string
	}{
		{"wrote v2", func(e *Echoes) { e.Decided(v1, v2, nil, false) }, "2", []string{"1"}},
		{"created v1", func(e *Echoes) { e.Decided(nil, v1, nil, false) }, "1", nil},
		// R1 wrote v2; R2 decided on the stale cached v1 (up to date for
		// what it wants): v2's event must wake the owner, to write again.
		{"a later reconcile decided on an older cached copy", func(e *Echoes) {
			e.Decided(v1, v2, nil, false)
			e.Decided(v1, v1, nil, false)
		}, "1", []string{"2"}},
		{"a gated step looks again: an earlier write's echo goes", func(e *Echoes) {
			e.Decided(v1, v2, nil, false)
			e.Decided(v1, v2, nil, true)
		}, "", []string{"1", "2"}},
		{"a failed put: an earlier write's echo goes", func(e *Echoes) {
			e.Decided(v1, v2, nil, false)
			e.Decided(v2, nil, errors.New("conflict"), false)
		}, "", []string{"1", "2"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := NewEchoes()
			tt.steps(e)
			for _, rv := range tt.notBack {
				assert.False(t, e.Back("a", rv), "version %s is news", rv)
			}
			if tt.back != "" {
				assert.True(t, e.Back("a", tt.back), "version %s is no news", tt.back)
			}
		})
	}
}
