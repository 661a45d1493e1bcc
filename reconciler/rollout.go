package reconciler

// The routing of roll-outs (reconciler/chain/rollout.go): the book of what
// they decide on of each owner, kept from the owners' watch events, and
// which chain events are news to a roll-out. Nothing polls a roll-out.

import (
	"reflect"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/rollout"
	"kontinue.dev/kontinue/tracking"
)

// rolloutSettle gathers the changes of a roll-out's owners: a chain whose
// owners move is looked at once per settle at most (a wave of 5,000
// owners turning Ready is not 5,000 reconciles and status writes of the
// chain), and not at all while they do not move.
const rolloutSettle = time.Second

// noteOwner records an owner's event in its kind's book, and wakes the
// chain whose roll-out waits on the owner when something it decides on
// changed. Map lookups on the decoded event: route may call it.
func (m *Manager) noteOwner(f *api.Flavor, ev tracking.Event) {
	b := m.owners[f.OwnerKind].book
	var wake []string
	if ev.Type == tracking.Deleted {
		wake = b.Delete(ev.Obj.GetNamespace(), ev.Obj.GetName())
	} else {
		wake = b.Set(rollout.ReadOwner(ev.Obj.Object, statusRef(f)))
	}
	for _, name := range wake {
		m.chains.ctrl.EnqueueAfter(Key{Kind: f.ChainKind, NamespacedName: types.NamespacedName{Name: name}}, rolloutSettle)
	}
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
