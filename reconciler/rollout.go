package reconciler

// The routing of roll-outs (reconciler/chain/rollout.go): the book of what
// they decide on of each owner, kept from the owners' watch events, and
// which chain events are news to a roll-out. Nothing polls a roll-out.

import (
	"reflect"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/rollout"
	"kontinue.dev/kontinue/reconciler/rollout/book"
	"kontinue.dev/kontinue/tracking"
)

// rolloutSettle gathers the changes of a roll-out's owners: a chain whose
// owners move is looked at once per settle at most (a wave of 5,000
// owners turning Ready is not 5,000 reconciles and status writes of the
// chain), and not at all while they do not move.
const rolloutSettle = time.Second

// noteOwner records an owner's event, told by the watch src, in its
// kind's book, and wakes the chain whose roll-out waits on the owner when
// something it decides on changed. Map lookups on the decoded event:
// route may call it.
func (m *Manager) noteOwner(f *api.Flavor, src book.Source, ev tracking.Event) {
	b := m.owners[f.OwnerKind].book
	var wake []string
	if ev.Type == tracking.Deleted {
		wake = b.Delete(src, ev.Obj.GetNamespace(), ev.Obj.GetName())
	} else {
		chain, o := rollout.ReadOwner(ev.Obj.Object, statusRef(f))
		wake = b.Set(src, ev.Obj.GetResourceVersion(), chain, o)
	}
	m.wakeChains(f, wake)
}

func (m *Manager) wakeChains(f *api.Flavor, names []string) {
	for _, name := range names {
		m.chains.ctrl.EnqueueAfter(Key{Kind: f.ChainKind, NamespacedName: types.NamespacedName{Name: name}}, rolloutSettle)
	}
}

// Every replica decides every chain's roll-out (chains are watched by all
// shards), so each must decide on every owner of the chain, not only on
// its own shard's: else a shard whose owners of a wave are all Ready would
// move the wave on while another shard's canary fails. The owners of the
// other shards are watched, trimmed to what a roll-out reads
// (rollout.Trim), while some chain of the kind has a roll-out policy
// (everyone): their events only feed the book (book.Others).

// othersUser is the tracker user of the others' watches.
const othersUser = "<roll-outs>"

// others is, per owner kind, the chains that need every owner's facts.
type others struct {
	mu     sync.Mutex
	chains map[string]bool
}

// othersKey is the watch of the owners of f that this replica does not
// serve (shard.Others).
func (m *Manager) othersKey(f *api.Flavor) tracking.Key {
	return tracking.Key{GVR: f.OwnerGVR, Selector: m.othersSelector}
}

// othersFlavor is the flavor whose others' watch k is, if it is one. Route
// asks it of every event: a string comparison, no allocation.
func (m *Manager) othersFlavor(k tracking.Key) (*api.Flavor, bool) {
	if k.Selector != m.othersSelector || k.Namespace != "" || k.As != "" {
		return nil, false
	}
	for _, f := range []*api.Flavor{api.WorkloadFlavor, api.DeliverableFlavor} {
		if k.GVR == f.OwnerGVR {
			return f, true
		}
	}
	return nil, false
}

// trimOthers keeps, of the objects of the others' watches, what a roll-out
// reads (tracking.TrimWith).
func (m *Manager) trimOthers(k tracking.Key) func(map[string]any) map[string]any {
	if _, ok := m.othersFlavor(k); ok {
		return rollout.Trim
	}
	return nil
}

// everyone says whether chain (of f) needs the facts of every owner of f
// (it has a roll-out policy), and reports whether the book holds them all
// (always, when it does not need them). The first chain that needs them
// starts the others' watch; the last that no longer does stops it, and
// the book forgets what it told.
func (m *Manager) everyone(f *api.Flavor, chain string, need bool) bool {
	o := m.owners[f.OwnerKind]
	k := m.othersKey(f)
	o.others.mu.Lock()
	defer o.others.mu.Unlock()
	if need {
		o.others.chains[chain] = true
		m.tracker.Ensure(k, othersUser)
		return m.tracker.Synced(k)
	}
	if o.others.chains[chain] {
		delete(o.others.chains, chain)
		if len(o.others.chains) == 0 {
			m.tracker.Release(k, othersUser) // its handler is done when it returns
			m.wakeChains(f, o.book.Forget(book.Others))
		}
	}
	return true
}

// statusRef is where an owner's status names its chain.
func statusRef(f *api.Flavor) string {
	if f == api.DeliverableFlavor {
		return rollout.RefDelivery
	}
	return rollout.RefSupplyChain
}

// flavorOfChain is the flavor whose chains live in gvr.
func flavorOfChain(gvr schema.GroupVersionResource) *api.Flavor {
	if gvr == api.DeliveryGVR {
		return api.DeliverableFlavor
	}
	return api.WorkloadFlavor
}

// rolloutMoved reports whether a chain's update moved its roll-out (its
// stable or target revision, or its wave: the owners due change) or
// steered it (pause, resume): the chain looks again. Its status write of
// a tally is not: nothing would change.
func rolloutMoved(old, cur *unstructured.Unstructured) bool {
	if old == nil {
		return true
	}
	for _, a := range []string{rollout.AnnotationPaused, rollout.AnnotationResume} {
		if old.GetAnnotations()[a] != cur.GetAnnotations()[a] {
			return true
		}
	}
	for _, f := range []string{"stable", "target", "wave"} {
		o, _, _ := unstructured.NestedFieldNoCopy(old.Object, "status", "rollout", f)
		c, _, _ := unstructured.NestedFieldNoCopy(cur.Object, "status", "rollout", f)
		if !reflect.DeepEqual(o, c) { // whatever a hand-written status holds
			return true
		}
	}
	return false
}
