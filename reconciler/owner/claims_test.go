package owner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"kontinue.dev/kontinue/reconciler/api"
	st "kontinue.dev/kontinue/reconciler/status"
)

// Which step holds an object, asked by another step that renders its
// name: the step of the label, while it is in the chain and stamps it (in
// this reconcile once it has resolved its objects; before it has run,
// whatever the previous status says, unless it was seen to leave that
// version of the object). A refusal judged before the holder ran, which
// then resolved other objects, is stale: the owner looks again, and the
// holder's leaving is remembered.
func TestStepObjects(t *testing.T) {
	cm := func(name string) st.StampedRef {
		return st.StampedRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "dev", Name: name, Resource: "configmaps"}
	}
	live := func(uid, version string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetUID(types.UID(uid))
		u.SetResourceVersion(version)
		return u
	}
	const owner = types.UID("u-app")
	chain := []api.Step{{Name: "a"}, {Name: "b"}}

	cases := []struct {
		name   string
		now    map[string][]string // what steps resolved in this reconcile so far
		obj    string
		holder string
		holds  bool
	}{
		{"the holder has not run: its label", nil, "x", "a", true},
		{"the holder has not run, whatever its previous status (a status write can be lost: seed 504)", nil, "y", "a", true},
		{"the holder ran and stamps it", map[string][]string{"a": {"x"}}, "x", "a", true},
		{"the holder ran and stamps another name now", map[string][]string{"a": {"z"}}, "x", "a", false},
		{"the holder left the chain (renamed, removed)", nil, "y", "gone", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newStepObjects(chain, newLeftBook(), owner)
			for step, names := range c.now {
				for _, n := range names {
					s.resolved(step, cm(n))
				}
			}
			assert.Equal(t, c.holds, s.holds(cm(c.obj))(c.holder, live("u-x", "1")))
		})
	}

	// Refused for a holder that has not run yet; it then stamps another
	// name: stale, look again. Had it stamped the object: not stale.
	left := newLeftBook()
	s := newStepObjects(chain, left, owner)
	s.refused(cm("x"), "a", "u-x", "1")
	assert.False(t, s.stale(), "the holder has not run")
	s.resolved("a", cm("z"))
	assert.True(t, s.stale())
	s.remember()
	s = newStepObjects(chain, left, owner)
	s.refused(cm("x"), "a", "u-x", "1")
	s.resolved("a", cm("x"))
	assert.False(t, s.stale())

	// The next reconcile: a left the object at that version, and holds it
	// no more before it runs; not once the object changed, nor another
	// object of that name, nor for another owner.
	left = newLeftBook()
	s = newStepObjects(chain, left, owner)
	s.refused(cm("x"), "a", "u-x", "1")
	s.resolved("a", cm("z"))
	s.remember()
	next := newStepObjects(chain, left, owner)
	assert.False(t, next.holds(cm("x"))("a", live("u-x", "1")), "seen to leave it")
	assert.True(t, next.holds(cm("x"))("a", live("u-x", "2")), "written since")
	assert.True(t, next.holds(cm("x"))("a", live("u-other", "1")), "another object")
	assert.True(t, newStepObjects(chain, left, "u-other").holds(cm("x"))("a", live("u-x", "1")), "another owner")
	// a resolves the object again: it holds it again.
	next.resolved("a", cm("x"))
	next.remember()
	assert.True(t, newStepObjects(chain, left, owner).holds(cm("x"))("a", live("u-x", "1")))

	// A refusal whose blocker's watch has not synced: the owner waits.
	s = newStepObjects(chain, nil, owner)
	assert.False(t, s.waiting())
	s.unsynced()
	assert.True(t, s.waiting())

	var none *stepObjects // a port without the reconcile's book (tests)
	none.resolved("a", cm("x"))
	none.refused(cm("x"), "a", "u-x", "1")
	none.unsynced()
	none.remember()
	assert.Nil(t, none.holds(cm("x")))
	assert.False(t, none.stale())
	assert.False(t, none.waiting())
}
