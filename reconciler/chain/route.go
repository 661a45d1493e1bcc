package chain

// The routing of roll-outs: the book of what they decide on of each owner,
// kept from the owners' watch events (NoteOwner, told by the Manager's
// routing), the other shards' owners watched while a chain needs them
// (everyone), and which chain events are news to a roll-out (Moved).
// Nothing polls a roll-out: a chain is looked at again (Env.Again) when an
// owner it waits on changes.

import (
	"reflect"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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

// flavors are the owner flavors whose chains roll out.
var flavors = []*api.Flavor{api.WorkloadFlavor, api.DeliverableFlavor}

// owners is what the roll-outs know of the owners of one flavor: the book,
// and the chains that need every shard's owners.
type owners struct {
	book *book.Book

	mu     sync.Mutex
	chains map[string]bool // chains with a policy: they need the others' owners
}

// NoteOwner records an owner's event, told by the watch src, in its
// flavor's book, and looks again at the chains whose roll-out waits on the
// owner when something it decides on changed. Map lookups on the decoded
// event: the Manager's routing calls it on informer goroutines.
func (r *Reconciler) NoteOwner(f *api.Flavor, src book.Source, ev tracking.Event) {
	b := r.owners[f.OwnerKind].book
	var again []string
	if ev.Type == tracking.Deleted {
		again = b.Delete(src, ev.Obj.GetNamespace(), ev.Obj.GetName())
	} else {
		chain, o := rollout.ReadOwner(ev.Obj.Object, statusRef(f))
		again = b.Set(src, ev.Obj.GetResourceVersion(), chain, o)
	}
	r.again(f, again)
}

func (r *Reconciler) again(f *api.Flavor, chains []string) {
	for _, name := range chains {
		if r.env.Again != nil {
			r.env.Again(f, name, rolloutSettle)
		}
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

// othersKey is the watch of the owners of f that this replica does not
// serve (shard.Others).
func (r *Reconciler) othersKey(f *api.Flavor) tracking.Key {
	return tracking.Key{GVR: f.OwnerGVR, Selector: r.othersSelector}
}

// OthersFlavor is the flavor whose others' watch k is, if it is one: its
// events are for NoteOwner (book.Others) only. The Manager's routing asks
// it of every event: a string comparison, no allocation.
func (r *Reconciler) OthersFlavor(k tracking.Key) (*api.Flavor, bool) {
	if k.Selector != r.othersSelector || k.Namespace != "" || k.As != "" {
		return nil, false
	}
	for _, f := range flavors {
		if k.GVR == f.OwnerGVR {
			return f, true
		}
	}
	return nil, false
}

// Trim keeps, of the objects of the others' watches, what a roll-out
// reads (tracking.TrimWith).
func (r *Reconciler) Trim(k tracking.Key) func(map[string]any) map[string]any {
	if _, ok := r.OthersFlavor(k); ok {
		return rollout.Trim
	}
	return nil
}

// everyone says whether chain (of f) needs the facts of every owner of f
// (it has a roll-out policy), and reports whether the book holds them all
// (always, when it does not need them). The first chain that needs them
// starts the others' watch; the last that no longer does stops it, and
// the book forgets what it told.
func (r *Reconciler) everyone(f *api.Flavor, chain string, need bool) bool {
	o := r.owners[f.OwnerKind]
	k := r.othersKey(f)
	o.mu.Lock()
	defer o.mu.Unlock()
	if need {
		o.chains[chain] = true
		r.env.Tracker.Ensure(k, othersUser)
		return r.env.Tracker.Synced(k)
	}
	if o.chains[chain] {
		delete(o.chains, chain)
		if len(o.chains) == 0 {
			r.env.Tracker.Release(k, othersUser) // its handler is done when it returns
			r.again(f, o.book.Forget(book.Others))
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

// Moved reports whether a chain's update moved its roll-out (its stable
// or target revision, or its wave: the owners due change) or steered it
// (pause, resume): the chain looks again. Its status write of a tally is
// not: nothing would change.
func Moved(old, cur *unstructured.Unstructured) bool {
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
