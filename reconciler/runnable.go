package reconciler

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/blocked"
	"kontinue.dev/kontinue/reconciler/loop"
	"kontinue.dev/kontinue/reconciler/owner"
	"kontinue.dev/kontinue/reconciler/render"
	"kontinue.dev/kontinue/reconciler/runnable"
	"kontinue.dev/kontinue/tracking"
)

// runnableReconciler routes the events of Runnables, their runs, selected
// objects and run templates to the Runnable reconciler (reconciler/runnable),
// and keeps what the owners' generated ClusterRunTemplates need
// (runnablestep.go).
type runnableReconciler struct {
	m    *Manager
	ctrl *Controller
	rec  *runnable.Reconciler

	selMu sync.Mutex
	bySel map[tracking.Key]map[Key]struct{} // selector watch → Runnables
	selOf map[Key]tracking.Key              // Runnable → its selector watch
	// gen sweeps the generated ClusterRunTemplates of deleted owners
	// (owner/sweep.go).
	gen *owner.Sweep
}

func newRunnableReconciler(m *Manager) *runnableReconciler {
	r := &runnableReconciler{m: m,
		bySel: map[tracking.Key]map[Key]struct{}{}, selOf: map[Key]tracking.Key{}}
	r.rec = runnable.New(runnable.Env{Tracker: m.tracker, Writer: m.w, Clients: m.clients, AccountExists: m.accountExists,
		StatusConflict: func() { m.statusConflict(api.KindRunnable) }, TraceContext: m.opts.Spans != nil,
		Schema: func() *render.Schema { return m.schemas.For(api.KindRunnable) }})
	r.ctrl = loop.NewController(api.KindRunnable, loop.ReconcileFunc(r.Reconcile))
	r.gen = owner.NewSweep(m.tracker, m.w, m.dyn, func(name string) {
		r.ctrl.Enqueue(Key{Kind: api.KindClusterRunTemplate, NamespacedName: types.NamespacedName{Name: name}})
	})
	return r
}

// route turns watch events into keys: a Runnable for the Runnable itself,
// its runs (stamped objects labelled with its name, in its namespace) and the
// objects its selector watches; a ClusterRunTemplate for a run template
// (its Runnables are looked up, and a generated one swept, on a worker). It
// never blocks.
func (r *runnableReconciler) route(ev tracking.Event) {
	k := ev.Key
	switch {
	case k == tracking.Key{GVR: api.RunnableGVR}:
		if ev.Type == tracking.Added && !r.m.Synced() {
			r.ctrl.EnqueueFanOut(keyOf(api.KindRunnable, ev.Obj)) // the initial list
		} else if ev.Type != tracking.Updated || ownerChanged(ev.Old, ev.Obj) {
			r.ctrl.Enqueue(keyOf(api.KindRunnable, ev.Obj))
		}
	case k == tracking.Key{GVR: api.RunTemplateGVR}:
		if ev.Type == tracking.Deleted {
			for _, o := range r.gen.NameFreed(ev.Obj.GetName()) {
				// a step refused the object that held the name
				r.m.enqueue(Key{Kind: o.Kind, NamespacedName: types.NamespacedName{Namespace: o.Namespace, Name: o.Name}})
			}
		}
		if ev.Type != tracking.Updated || specOrLabelsChanged(ev.Old, ev.Obj) {
			r.ctrl.Enqueue(keyOf(api.KindClusterRunTemplate, ev.Obj))
		}
	case (k == tracking.Key{GVR: api.WorkloadGVR} || k == tracking.Key{GVR: api.DeliverableGVR}) && ev.Type == tracking.Deleted:
		// The owner's last status records what Kontinue generated for it.
		r.gen.OwnerDeleted(owner.OwnerRef{Kind: flavorOfOwner(k.GVR).OwnerKind, Namespace: ev.Obj.GetNamespace(), Name: ev.Obj.GetName()}, ev.Obj.GetUID(), owner.RecordsOf(ev.Obj))
	case k.Selector == api.StampedSelector:
		if name := ev.Obj.GetLabels()[api.LabelRunnableName]; name != "" {
			r.ctrl.EnqueueProgress(Key{Kind: api.KindRunnable, NamespacedName: types.NamespacedName{Namespace: ev.Obj.GetNamespace(), Name: name}})
		}
	}
	r.selMu.Lock()
	var keys []Key
	for key := range r.bySel[k] {
		if ns := ev.Obj.GetNamespace(); ns == "" || key.Namespace == ns {
			keys = append(keys, key)
		}
	}
	r.selMu.Unlock()
	for _, key := range keys {
		r.ctrl.EnqueueProgress(key)
	}
}

// runTemplateChanged enqueues the Runnables that name the run template.
func (r *runnableReconciler) runTemplateChanged(name string) {
	objs, _ := r.m.tracker.List(tracking.Key{GVR: api.RunnableGVR}, "")
	for _, o := range objs {
		if n, _, _ := unstructured.NestedString(o.Object, "spec", "runTemplateRef", "name"); n == name {
			r.ctrl.EnqueueFanOut(keyOf(api.KindRunnable, o))
		}
	}
}

// setSelector records which selector watch a Runnable uses (nil: none).
func (r *runnableReconciler) setSelector(key Key, sel *tracking.Key) {
	r.selMu.Lock()
	defer r.selMu.Unlock()
	if old, ok := r.selOf[key]; ok {
		removeFrom(r.bySel, old, key)
		delete(r.selOf, key)
	}
	if sel != nil {
		addTo(r.bySel, *sel, key)
		r.selOf[key] = *sel
	}
}

// Reconcile realizes one Runnable (reconciler/runnable). A
// ClusterRunTemplate key wakes the Runnables that name it and removes it if
// a deleted owner recorded it; a service account key wakes who writes as it.
func (r *runnableReconciler) Reconcile(ctx context.Context, key Key) (Result, error) {
	switch key.Kind {
	case api.KindClusterRunTemplate:
		r.runTemplateChanged(key.Name)
		return Result{}, r.gen.Run(ctx, key.Name)
	case kindServiceAccount:
		r.m.accountChanged(key.Namespace, key.Name)
		return Result{}, nil
	}
	out, err := r.rec.Reconcile(ctx, key.Namespace, key.Name, key.String())
	switch {
	case out.Gone:
		r.setSelector(key, nil)
		r.m.blocked.Unblock(key)
	case out.Session != nil:
		r.setSelector(key, out.Selector)
		if cause := blocked.CauseOf(out.Session); cause != 0 {
			r.m.blocked.Block(key, cause)
		} else {
			r.m.blocked.Unblock(key)
		}
	}
	if err != nil {
		return Result{}, err
	}
	return Result{RequeueAfter: out.Requeue, Wait: true}, nil // a Runnable's requeue is always a wait
}
