package owner

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"kontinue.dev/kontinue/reconciler/api"
	st "kontinue.dev/kontinue/reconciler/status"
)

// Which step holds an object, asked by another step that renders its
// name: the step of the label, while it is in the chain and stamps it (in
// this reconcile once it has resolved its objects, else by its previous
// status). A refusal judged on a previous status the holder then left is
// stale: the owner looks again.
func TestStepObjects(t *testing.T) {
	cm := func(name string) st.StampedRef {
		return st.StampedRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "dev", Name: name, Resource: "configmaps"}
	}
	// Cartographer's status names no resource.
	carto := st.StampedRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "dev", Name: "x"}
	chain := []api.Step{{Name: "a"}, {Name: "b"}}
	prev := []st.Resource{{Name: "a", StampedRef: &carto}, {Name: "gone", StampedRef: ptrRef(cm("y"))}}

	cases := []struct {
		name   string
		now    map[string][]string // what steps resolved in this reconcile so far
		obj    string
		holder string
		holds  bool
	}{
		{"the holder has not run: its previous status", nil, "x", "a", true},
		{"the holder has not run and did not stamp it", nil, "y", "a", false},
		{"the holder ran and stamps it", map[string][]string{"a": {"x"}}, "x", "a", true},
		{"the holder ran and stamps another name now", map[string][]string{"a": {"z"}}, "x", "a", false},
		{"the holder left the chain (renamed, removed)", nil, "y", "gone", false},
		{"a step that never stamped it", nil, "x", "b", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newStepObjects(chain, prev)
			for step, names := range c.now {
				for _, n := range names {
					s.resolved(step, cm(n))
				}
			}
			assert.Equal(t, c.holds, s.holds(cm(c.obj))(c.holder))
		})
	}

	// Refused for a holder that has not run yet; it then stamps another
	// name: stale, look again. Had it stamped the object: not stale.
	s := newStepObjects(chain, prev)
	s.refused(cm("x"), "a")
	assert.False(t, s.stale(), "the holder has not run")
	s.resolved("a", cm("z"))
	assert.True(t, s.stale())
	s = newStepObjects(chain, prev)
	s.refused(cm("x"), "a")
	s.resolved("a", cm("x"))
	assert.False(t, s.stale())

	// A refusal whose blocker's watch has not synced: the owner waits.
	s = newStepObjects(chain, prev)
	assert.False(t, s.waiting())
	s.unsynced()
	assert.True(t, s.waiting())

	var none *stepObjects // a port without the reconcile's book (tests)
	none.resolved("a", cm("x"))
	none.refused(cm("x"), "a")
	none.unsynced()
	assert.Nil(t, none.holds(cm("x")))
	assert.False(t, none.stale())
	assert.False(t, none.waiting())
}

func ptrRef(r st.StampedRef) *st.StampedRef { return &r }
