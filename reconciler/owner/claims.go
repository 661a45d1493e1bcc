package owner

// Which step of the owner stamps which object. An object belongs to one
// owner and one step: two steps whose templates render one name would undo
// each other's write on every reconcile. The step an object's label
// (carto.run/resource-name) names keeps it while it still stamps it; the
// other is refused, naming it (stamp.Claim). A step that left the chain
// (renamed, removed) holds nothing, nor does one seen to render another
// name now, and the step that renders the name takes the object over.
//
// Whether a step of the chain renders another name now is known only once
// it has run in this reconcile. Until then the object's label is what
// says whose it is, not the previous status: the status write after the
// apply that made the object can be lost (refused as decided on a stale
// copy, a kill, an outage), and a step later in the chain would lose its
// object to an earlier one (robustness seed 504). A step seen to leave an
// object is remembered (leftBook) while that object is unchanged, so that
// the look again after the refusal (heldRecheck) takes it over.

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

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
// the objects each stamps in this reconcile, once it has resolved them.
type stepObjects struct {
	chain map[string]bool
	now   map[string]map[objKey]bool
	// held are the writes refused because another step held the object,
	// judged before that step ran: stale once it resolved other objects in
	// this reconcile.
	held []heldBy
	// blocked: a write was refused for an object whose watch (by its name,
	// ownerIO.refused) has not synced yet.
	blocked bool
	// left (nil: none) remembers across reconciles the objects owner's
	// steps were seen to leave.
	left  *leftBook
	owner types.UID
}

type heldBy struct {
	obj  objKey
	step string
	// uid and version of the object refused.
	uid     types.UID
	version string
}

func newStepObjects(chain []api.Step, left *leftBook, owner types.UID) *stepObjects {
	s := &stepObjects{chain: map[string]bool{}, now: map[string]map[objKey]bool{}, left: left, owner: owner}
	for _, d := range chain {
		s.chain[d.Name] = true
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
// its label names, still stamps it. A step of the chain that has not run
// yet holds what it labelled, unless it was seen to leave that very
// version of the object.
func (s *stepObjects) holds(ref st.StampedRef) func(step string, live *unstructured.Unstructured) bool {
	if s == nil {
		return nil
	}
	k := objKeyOf(ref)
	return func(step string, live *unstructured.Unstructured) bool {
		if !s.chain[step] {
			return false
		}
		if now, ran := s.now[step]; ran {
			return now[k]
		}
		return !s.left.seen(s.owner, step, k, live)
	}
}

// refused notes a write of ref, the object of uid at version, refused
// because step holds it.
func (s *stepObjects) refused(ref st.StampedRef, step string, uid types.UID, version string) {
	if s != nil {
		s.held = append(s.held, heldBy{objKeyOf(ref), step, uid, version})
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

// stale reports whether a refusal of this reconcile was judged before the
// step holding the object ran, which then resolved other objects.
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

// remember keeps, at the end of the walk, what it saw: the step holding a
// stale refusal's object left that version of it; a step that resolved
// an object holds it again.
func (s *stepObjects) remember() {
	if s == nil || s.left == nil {
		return
	}
	for step, objs := range s.now {
		for k := range objs {
			s.left.forget(s.owner, step, k)
		}
	}
	for _, h := range s.held {
		if now, ran := s.now[h.step]; ran && !now[h.obj] {
			s.left.note(s.owner, h.step, h.obj, h.uid, h.version)
		}
	}
}

// leftBook remembers which step of which owner was seen to leave which
// object, at which version: the step ran and resolved other objects, and
// the object was at that version when another step was refused it. While
// the object is unchanged, the step has not written it since, whichever
// replica serves the owner. Kept leftTTL: forgotten, a step is refused
// once more, and seen to leave again.
type leftBook struct {
	mu sync.Mutex
	m  map[leftKey]leftAt
}

type leftKey struct {
	owner types.UID
	step  string
	obj   objKey
}

type leftAt struct {
	uid     types.UID
	version string
	at      time.Time
}

// leftTTL is how long a step's leaving is remembered: well past the look
// again it is for (heldRecheck).
const leftTTL = 10 * time.Minute

func newLeftBook() *leftBook { return &leftBook{m: map[leftKey]leftAt{}} }

func (b *leftBook) note(owner types.UID, step string, obj objKey, uid types.UID, version string) {
	if b == nil || uid == "" || version == "" {
		return
	}
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, l := range b.m {
		if now.Sub(l.at) > leftTTL {
			delete(b.m, k)
		}
	}
	b.m[leftKey{owner, step, obj}] = leftAt{uid, version, now}
}

func (b *leftBook) forget(owner types.UID, step string, obj objKey) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.m, leftKey{owner, step, obj})
}

// seen reports whether step of owner was seen to leave live, the object
// obj, at its present version.
func (b *leftBook) seen(owner types.UID, step string, obj objKey, live *unstructured.Unstructured) bool {
	if b == nil || live == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	l, ok := b.m[leftKey{owner, step, obj}]
	return ok && l.uid == live.GetUID() && l.version == live.GetResourceVersion() && time.Since(l.at) <= leftTTL
}
