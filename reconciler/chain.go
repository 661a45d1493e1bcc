package reconciler

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/rollout"
	"kontinue.dev/kontinue/reconciler/specs"
	"kontinue.dev/kontinue/reconciler/stamp"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/tracking"
)

// chainReconciler keeps the status of ClusterSupplyChains and
// ClusterDeliveries: TemplatesReady (every referenced template exists) and
// Ready.
type chainReconciler struct {
	m    *Manager
	ctrl *Controller

	rolloutMu    sync.Mutex
	rolloutWoken map[string]string // chainrollout.go: the roll-out state whose owners were woken
}

func newChainReconciler(m *Manager) *chainReconciler {
	r := &chainReconciler{m: m, rolloutWoken: map[string]string{}}
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

// Reconcile computes one chain's conditions. A template key (a template
// changed) re-checks every chain.
func (r *chainReconciler) Reconcile(ctx context.Context, key Key) (Result, error) {
	var gvr schema.GroupVersionResource
	flavor := api.WorkloadFlavor
	switch key.Kind {
	case api.KindClusterSupplyChain:
		gvr = api.SupplyChainGVR
	case api.KindClusterDelivery:
		gvr, flavor = api.DeliveryGVR, api.DeliverableFlavor
	default:
		r.enqueueAll()
		return Result{}, nil
	}
	name := key.Name
	obj, synced := r.m.tracker.Get(tracking.Key{GVR: gvr}, "", name)
	if !synced {
		return Result{RequeueAfter: time.Second, Wait: true}, nil
	}
	if obj == nil {
		return Result{}, nil
	}
	var spec api.ChainSpec
	var conds []metav1.Condition
	missing := ""
	if err := api.Decode(obj.Object["spec"], &spec); err != nil {
		c := st.Cond(st.TemplatesReady, st.False, "InvalidSpec", fmt.Sprintf("cannot read spec: %v", err))
		conds = []metav1.Condition{c, st.Summarize(st.Ready, "Ready", c)}
	} else {
		var c metav1.Condition
		c, missing = specs.TemplatesReady(spec, r.m.templates.Exists)
		conds = []metav1.Condition{c, st.Summarize(st.Ready, "Ready", c)}
	}
	ro := r.rollout(flavor, obj) // chainrollout.go
	if ro.cond != nil {
		conds = append(conds, *ro.cond)
	}
	var prev struct {
		Conditions []metav1.Condition `json:"conditions"`
	}
	old, _ := obj.Object["status"].(map[string]any)
	_ = api.Decode(old, &prev)
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	obj = obj.DeepCopy()
	written, err := r.m.w.WriteStatus(ctx, gvr, obj, struct {
		ObservedGeneration int64              `json:"observedGeneration"`
		Conditions         []metav1.Condition `json:"conditions"`
		Rollout            *rollout.Status    `json:"rollout,omitempty"`
	}{obj.GetGeneration(), st.Merge(conds, prev.Conditions, obj.GetGeneration(), now), ro.status})
	if written != nil && missing != "" {
		r.m.w.Events.Event(obj, corev1.EventTypeWarning, stamp.EventTemplatesNotFound, "templates not found: %s", missing)
	}
	if apierrors.IsConflict(err) {
		r.m.statusConflict(key.Kind)
	}
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Gone, or the cache is behind: the watch event that follows
		// re-queues the chain if it still exists.
		return Result{RequeueAfter: ro.requeue}, nil
	}
	return Result{RequeueAfter: ro.requeue}, err
}
