package owner

// Which step of the owner stamps which object. An object belongs to one
// owner and one step: two steps whose templates render one name would undo
// each other's write on every reconcile. The step an object's label
// (carto.run/resource-name) names keeps it while it still stamps it; the
// other is refused, naming it (stamp.Claim). A step that left the chain
// (renamed, removed) or renders another name now holds nothing, and the
// step that renders the name takes the object over.

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"kontinue.dev/kontinue/reconciler/api"
	st "kontinue.dev/kontinue/reconciler/status"
)

// objKey identifies a stamped object by what both a step's status and a
// write know of it (not the version or resource, which a status written
// by Cartographer may not carry).
type objKey struct{ group, kind, namespace, name string }

func objKeyOf(ref st.StampedRef) objKey {
	gv, _ := schema.ParseGroupVersion(ref.APIVersion)
	return objKey{gv.Group, ref.Kind, ref.Namespace, ref.Name}
}

// stepObjects are, for one reconcile, the steps of the owner's chain and
// the objects each stamps: those it resolved in this reconcile once it
// has, else those its previous status records.
type stepObjects struct {
	chain map[string]bool
	prev  map[string]map[objKey]bool
	now   map[string]map[objKey]bool
	// held are the writes refused because another step held the object,
	// judged on that step's previous status: stale once it resolved other
	// objects in this reconcile.
	held []heldBy
	// blocked: a write was refused for an object whose watch (by its name,
	// ownerIO.refused) has not synced yet.
	blocked bool
}

type heldBy struct {
	obj  objKey
	step string
}

func newStepObjects(chain []api.Step, prev []st.Resource) *stepObjects {
	s := &stepObjects{chain: map[string]bool{}, prev: map[string]map[objKey]bool{}, now: map[string]map[objKey]bool{}}
	for _, d := range chain {
		s.chain[d.Name] = true
	}
	for _, r := range prev {
		m := map[objKey]bool{}
		for _, ref := range refsOf(r) {
			m[objKeyOf(ref)] = true
		}
		s.prev[r.Name] = m
	}
	return s
}

// resolved notes that step stamps ref in this reconcile.
func (s *stepObjects) resolved(step string, ref st.StampedRef) {
	if s == nil {
		return
	}
	if s.now[step] == nil {
		s.now[step] = map[objKey]bool{}
	}
	s.now[step][objKeyOf(ref)] = true
}

// holds is stamp.Claimant.Holds for the object ref: whether step, the one
// its label names, still stamps it.
func (s *stepObjects) holds(ref st.StampedRef) func(step string) bool {
	if s == nil {
		return nil
	}
	k := objKeyOf(ref)
	return func(step string) bool {
		if !s.chain[step] {
			return false
		}
		if now, ran := s.now[step]; ran {
			return now[k]
		}
		return s.prev[step][k]
	}
}

// refused notes a write of ref refused because step holds it.
func (s *stepObjects) refused(ref st.StampedRef, step string) {
	if s != nil {
		s.held = append(s.held, heldBy{objKeyOf(ref), step})
	}
}

// unsynced notes that the watch of an object that refused a write has not
// synced yet.
func (s *stepObjects) unsynced() {
	if s != nil {
		s.blocked = true
	}
}

// blockerSync is when an owner whose write was refused looks again while
// the watch on the object that blocks it has not synced: the object may
// have gone before the watch's first list, which no event then says. A
// wait (Outcome.Wait): a watch that never syncs is looked at less and less
// often, not four times a second.
const blockerSync = 250 * time.Millisecond

// waiting reports whether the owner waits for a blocker's watch to sync.
func (s *stepObjects) waiting() bool { return s != nil && s.blocked }

// heldRecheck is when an owner looks again at a write refused for a step
// that, later in the same reconcile, stamped other objects: the object is
// free, and no event will say so (nothing changed it).
const heldRecheck = 100 * time.Millisecond

// stale reports whether a refusal of this reconcile was judged on a
// previous status that the step holding the object has since left.
func (s *stepObjects) stale() bool {
	if s == nil {
		return false
	}
	for _, h := range s.held {
		if now, ran := s.now[h.step]; ran && !now[h.obj] {
			return true
		}
	}
	return false
}
