package reconciler

import (
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"kontinue.dev/kontinue/annotations"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/blocked"
	"kontinue.dev/kontinue/reconciler/rollout/book"
	"kontinue.dev/kontinue/reconciler/shard"
	"kontinue.dev/kontinue/reconciler/specs"
	"kontinue.dev/kontinue/tracking"
)

// Routing: watch events to queue keys (on informer goroutines: map lookups
// and Enqueue only), and the fan-out a key does on a worker.

// route turns a watch event into queue keys. It runs on informer goroutines:
// it must not block, list a cache or marshal an object; work that needs to is
// handed to a worker as a key of its own (a chain or template key).
func (m *Manager) route(ev tracking.Event) {
	if ev.Key.Name != "" {
		m.blockerChanged(ev)
		return
	}
	gvr := ev.Key.GVR
	if f, ok := m.othersFlavor(ev.Key); ok {
		m.noteOwner(f, book.Others, ev) // other shards' owners: for roll-outs only (rollout.go)
		return
	}
	shard.Foreign(m.opts.Shard, ev, m.OnForeign)
	m.runnables.route(ev) // Runnables, run templates, runs, selected objects
	if ev.Key.Selector == api.StampedSelector {
		m.routeStamped(ev)
		return
	}
	switch {
	case gvr == api.WorkloadGVR || gvr == api.DeliverableGVR:
		f := flavorOfOwner(gvr)
		m.noteOwner(f, book.Own, ev) // roll-outs read their owners' status (rollout.go)
		if ev.Type == tracking.Updated && !ownerChanged(ev.Old, ev.Obj) {
			return // our own status write, or nothing we read
		}
		k := keyOf(f.OwnerKind, ev.Obj)
		if ev.Type == tracking.Updated && reconcileRequested(ev.Old, ev.Obj) {
			// A person asked for a reconcile now (`kontinue reconcile`):
			// whatever the owner waited for (RBAC, discovery, a backoff),
			// it is looked at at once, and a new failure backs off from
			// the start again.
			m.blocked.Unblock(k)
			m.owners[f.OwnerKind].ctrl.Forget(k)
		}
		if ev.Type == tracking.Added && !m.Synced() {
			// The initial list at start: every owner, none of them news.
			m.owners[f.OwnerKind].ctrl.EnqueueFanOut(k)
			return
		}
		m.owners[f.OwnerKind].ctrl.Enqueue(k) // an edit, a create: before any fan-out
	case gvr == api.SupplyChainGVR || gvr == api.DeliveryGVR:
		if ev.Type == tracking.Updated && !specOrLabelsChanged(ev.Old, ev.Obj) {
			if rolloutMoved(ev.Old, ev.Obj) {
				// Its roll-out moved (a wave began: its owners are woken
				// from the status they read) or was steered: the chain
				// only.
				m.chains.ctrl.Enqueue(keyOf(flavorOfChain(gvr).ChainKind, ev.Obj))
			}
			return
		}
		for _, o := range m.owners {
			if o.flavor.ChainGVR == gvr {
				k := keyOf(o.flavor.ChainKind, ev.Obj)
				m.chains.ctrl.Enqueue(k)
				o.ctrl.Enqueue(k) // the owner controller finds the owners concerned
			}
		}
	case specs.TemplateKind(gvr) != "":
		kind := specs.TemplateKind(gvr)
		for _, o := range m.owners {
			o.templateChanged(kind, ev.Obj.GetName())
		}
		m.chains.ctrl.Enqueue(keyOf(kind, ev.Obj)) // re-checks every chain
	case gvr == CRDGVR:
		m.crdChanged(ev)
	case gvr.Group == rbacGroupVersion.Group:
		m.blocked.News(blocked.RBAC)
	case gvr == shard.LeaseGVR:
		if m.presence != nil {
			m.presence.changed() // which shards run (presence.go)
		}
	case gvr == ServiceAccountGVR:
		// An account created or deleted: its owners and Runnables say so
		// (or write at last). Updates (its secrets) change nothing. The
		// first list at start is not news: every owner is reconciled then.
		if ev.Type != tracking.Updated && m.Synced() {
			m.runnables.ctrl.Enqueue(Key{Kind: kindServiceAccount, NamespacedName: types.NamespacedName{Namespace: ev.Obj.GetNamespace(), Name: ev.Obj.GetName()}})
		}
	}
}

// kindServiceAccount is the queue key of a service account created or
// deleted: a worker finds its owners and Runnables (accountChanged).
const kindServiceAccount = "ServiceAccount"

// accountExists reports whether the service account exists, from the
// cache of the permanent watch (synced before any worker runs). Kontinue
// writes nothing as an account it does not know: the API server does not
// check that an impersonated account exists, so a deleted account whose
// RoleBindings remain (or a permissive authorizer) would still write.
func (m *Manager) accountExists(namespace, name string) bool {
	return m.tracker.UID(tracking.Key{GVR: ServiceAccountGVR}, namespace, name) != ""
}

// accountChanged wakes the owners and Runnables that stamp as the account:
// the owners of the index (every owner records its account), the Runnables
// of its namespace that name it.
func (m *Manager) accountChanged(namespace, name string) {
	for _, k := range m.owners[api.WorkloadFlavor.OwnerKind].idx.ownersOfAccount(namespace, name) {
		m.enqueueFanOut(k)
	}
	rns, _ := m.tracker.List(tracking.Key{GVR: api.RunnableGVR}, namespace)
	for _, rn := range rns {
		sa, _, _ := unstructured.NestedString(rn.Object, "spec", "serviceAccountName")
		if sa == "" {
			sa = "default"
		}
		if sa == name {
			m.runnables.ctrl.EnqueueFanOut(keyOf(api.KindRunnable, rn))
		}
	}
}

// routeStamped sends an event about a stamped object to its owner: the
// one its controller reference names, in its own namespace, if that owner
// is the one in the cache (same UID). Labels alone decide nothing: anyone
// who may write an object can set them, and an object in another
// namespace carrying them must not wake (or keep busy) someone else's
// owner. The owner the object had before an update is told too: a hand
// edit must reach the owner that stamped the object, to be undone.
func (m *Manager) routeStamped(ev tracking.Event) {
	if ev.Type == tracking.Deleted {
		m.w.Echoes.Gone(ev.Obj.GetUID())
		m.w.Fights.Forget(ev.Obj.GetUID())
	}
	cur, hasCur := m.stampedBy(ev.Obj)
	if hasCur {
		if ev.Type == tracking.Deleted {
			m.owners[cur.Kind].ctrl.EnqueueProgress(cur)
		} else {
			// Perhaps a version its owner wrote: judged when a worker
			// takes the key (wake.go).
			m.owners[cur.Kind].ctrl.EnqueueStamped(cur, ev.Obj.GetUID(), ev.Obj.GetResourceVersion())
		}
	}
	if ev.Old != nil {
		if prev, ok := m.stampedBy(ev.Old); ok && (!hasCur || prev != cur) {
			m.owners[prev.Kind].ctrl.EnqueueProgress(prev) // it left that owner
		}
	}
}

// blockerChanged wakes the owners that watch one object by its name
// (tracking.Key.Name): an object that blocks a write of theirs, watched
// while the refusal stands (owner/write.go). Its removal or change (a
// hand over) may free the name. The first list's Added is not news: the
// owner looks again once the watch has synced.
func (m *Manager) blockerChanged(ev tracking.Event) {
	if ev.Type == tracking.Added {
		return
	}
	for _, u := range m.tracker.Users(ev.Key) {
		if k, ok := parseKey(u); ok {
			if o := m.owners[k.Kind]; o != nil {
				o.ctrl.EnqueueProgress(k)
			}
		}
	}
}

// stampedBy is the owner that stamped obj: its controller reference names
// an owner kind, and the owner of that name in obj's namespace has that
// UID. A map lookup in the owners' cache, no listing: route may call it.
func (m *Manager) stampedBy(obj *unstructured.Unstructured) (Key, bool) {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil {
		return Key{}, false
	}
	o := m.owners[ref.Kind]
	if o == nil {
		return Key{}, false
	}
	if uid := m.tracker.UID(tracking.Key{GVR: o.flavor.OwnerGVR}, obj.GetNamespace(), ref.Name); uid == "" || uid != ref.UID {
		return Key{}, false
	}
	return Key{Kind: o.flavor.OwnerKind, NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: ref.Name}}, true
}

func (m *Manager) crdChanged(ev tracking.Event) {
	m.mapper.Reset(true)
	if ev.Type == tracking.Deleted {
		group, _, _ := unstructured.NestedString(ev.Obj.Object, "spec", "group")
		plural, _, _ := unstructured.NestedString(ev.Obj.Object, "spec", "names", "plural")
		for _, user := range m.tracker.StopResource(schema.GroupResource{Group: group, Resource: plural}) {
			if k, ok := parseKey(user); ok {
				m.enqueueFanOut(k)
			}
		}
	}
	m.blocked.News(blocked.Discovery)
}

// enqueue sends an owner or Runnable key to its controller.
func (m *Manager) enqueue(k Key) {
	if o := m.owners[k.Kind]; o != nil {
		o.ctrl.Enqueue(k)
	}
	if k.Kind == api.KindRunnable {
		m.runnables.ctrl.Enqueue(k)
	}
}

// enqueueFanOut is enqueue behind every owner's own events: one change
// (a CRD, an account, a permission) wakes many owners.
func (m *Manager) enqueueFanOut(k Key) {
	if o := m.owners[k.Kind]; o != nil {
		o.ctrl.EnqueueFanOut(k)
	}
	if k.Kind == api.KindRunnable {
		m.runnables.ctrl.EnqueueFanOut(k)
	}
}

// flavorOfOwner is the flavor whose owners live in gvr.
func flavorOfOwner(gvr schema.GroupVersionResource) *api.Flavor {
	if gvr == api.DeliverableGVR {
		return api.DeliverableFlavor
	}
	return api.WorkloadFlavor
}

// ownerChanged reports whether anything an owner's reconcile reads changed:
// anything but its status and bookkeeping metadata.
func ownerChanged(old, cur *unstructured.Unstructured) bool {
	if old == nil {
		return true
	}
	if old.GetGeneration() != cur.GetGeneration() ||
		!reflect.DeepEqual(old.GetLabels(), cur.GetLabels()) ||
		!reflect.DeepEqual(old.GetAnnotations(), cur.GetAnnotations()) ||
		(old.GetDeletionTimestamp() == nil) != (cur.GetDeletionTimestamp() == nil) {
		return true
	}
	return !reflect.DeepEqual(old.Object["spec"], cur.Object["spec"])
}

// reconcileRequested reports whether the reconcile request annotation
// changed.
func reconcileRequested(old, cur *unstructured.Unstructured) bool {
	return old != nil && old.GetAnnotations()[annotations.ReconcileRequest] != cur.GetAnnotations()[annotations.ReconcileRequest]
}

func specOrLabelsChanged(old, cur *unstructured.Unstructured) bool {
	return old == nil || old.GetGeneration() != cur.GetGeneration() ||
		!reflect.DeepEqual(old.GetLabels(), cur.GetLabels()) ||
		!reflect.DeepEqual(old.Object["spec"], cur.Object["spec"])
}
