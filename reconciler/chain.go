package reconciler

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/chain"
	"kontinue.dev/kontinue/reconciler/rollout/book"
	"kontinue.dev/kontinue/tracking"
)

// chainReconciler routes the keys of ClusterSupplyChains and
// ClusterDeliveries to chain.Reconciler; a template key (a template
// changed) re-checks every chain.
type chainReconciler struct {
	m    *Manager
	ctrl *Controller
	rec  *chain.Reconciler
}

func newChainReconciler(m *Manager) *chainReconciler {
	r := &chainReconciler{m: m, rec: chain.New(chain.Env{Tracker: m.tracker, Writer: m.w, Exists: m.templates.Exists,
		StatusConflict: m.statusConflict, Wake: func(f *api.Flavor, namespace, name string) { // a roll-out's wave
			m.owners[f.OwnerKind].ctrl.EnqueueFanOut(m.owners[f.OwnerKind].key(namespace, name))
		},
		Book:     func(f *api.Flavor) *book.Book { return m.owners[f.OwnerKind].book },
		Everyone: m.everyone, Shard: m.opts.Shard, Served: m.presence.Served,
		Template: func(ctx context.Context, gvr schema.GroupVersionResource, name string) (*unstructured.Unstructured, error) {
			return m.dyn.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
		}})}
	r.ctrl = NewController("Chain", ReconcileFunc(r.Reconcile))
	return r
}

// enqueueAll enqueues every chain (a template changed; chains are few).
func (r *chainReconciler) enqueueAll() {
	for _, f := range []*api.Flavor{api.WorkloadFlavor, api.DeliverableFlavor} {
		objs, _ := r.m.tracker.List(tracking.Key{GVR: f.ChainGVR}, "")
		for _, o := range objs {
			r.ctrl.EnqueueFanOut(keyOf(f.ChainKind, o))
		}
	}
}

// Reconcile reconciles one chain, or re-checks every chain for a template
// key.
func (r *chainReconciler) Reconcile(ctx context.Context, key Key) (Result, error) {
	for _, f := range []*api.Flavor{api.WorkloadFlavor, api.DeliverableFlavor} {
		if key.Kind == f.ChainKind {
			wait, err := r.rec.Reconcile(ctx, f, key.Name)
			return Result{RequeueAfter: wait, Wait: wait > 0}, err
		}
	}
	r.enqueueAll()
	return Result{}, nil
}
