// Package chain is the chain reconciler: the status of ClusterSupplyChains
// and ClusterDeliveries, TemplatesReady (every referenced template exists)
// and Ready, the edge of a chain's roll-out in waves (rollout.go;
// reconciler/rollout decides) and what wakes a roll-out (route.go: the
// owners' facts it decides on, the other shards' owners). The Manager
// routes its keys (a template's news re-checks every chain) and the owners'
// events (NoteOwner), and wires it through Env.
package chain

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/rollout"
	"kontinue.dev/kontinue/reconciler/rollout/book"
	"kontinue.dev/kontinue/reconciler/shard"
	"kontinue.dev/kontinue/reconciler/specs"
	"kontinue.dev/kontinue/reconciler/stamp"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/verify"
	"kontinue.dev/kontinue/tracking"
)

// Env is what a chain's reconcile needs of the Manager: the cache, the
// writer, whether a template exists, a hook told of a status write
// refused as a conflict (metrics: the chain's kind), one that wakes an
// owner of f whose turn in a roll-out came, one that looks at a chain of
// f again after a while (an owner its roll-out waits on changed).
//
// Every replica of every shard decides every chain's roll-out
// (rollout.go), on the facts of every shard's owners (route.go); Shard is
// the shard whose owners this replica wakes; Served, the shards running
// replicas serve (nil: not known); Template reads a template from the API
// server, to confirm a revision before it moves a roll-out.
type Env struct {
	Tracker        *tracking.Tracker
	Writer         *stamp.Writer
	Exists         func(kind, name string) bool
	StatusConflict func(kind string)
	Wake           func(f *api.Flavor, namespace, name string)
	Again          func(f *api.Flavor, chain string, after time.Duration)
	Shard          string
	Served         func() map[string]bool
	Template       func(ctx context.Context, gvr schema.GroupVersionResource, name string) (*unstructured.Unstructured, error)
}

// Reconciler keeps the status of the chains of both flavors.
type Reconciler struct {
	env Env
	// owners are, by owner kind, what the roll-outs know of the owners
	// (route.go); othersSelector selects the owners of the other shards.
	owners         map[string]*owners
	othersSelector string

	mu    sync.Mutex
	woken map[string]string // rollout.go: the roll-out state whose owners were woken, by chain
}

// New returns a Reconciler working through env.
func New(env Env) *Reconciler {
	r := &Reconciler{env: env, woken: map[string]string{}, owners: map[string]*owners{}, othersSelector: shard.Others(env.Shard)}
	for _, f := range flavors {
		r.owners[f.OwnerKind] = &owners{book: book.New(), chains: map[string]bool{}}
	}
	return r
}

// Reconcile computes the conditions of the chain name of f's chain kind
// (and its roll-out's status) and writes them when they changed. wait > 0:
// its cache has not synced, look again after it.
func (r *Reconciler) Reconcile(ctx context.Context, f *api.Flavor, name string) (wait time.Duration, _ error) {
	gvr := f.ChainGVR
	obj, synced := r.env.Tracker.Get(tracking.Key{GVR: gvr}, "", name)
	if !synced {
		return time.Second, nil
	}
	if obj == nil {
		r.owners[f.OwnerKind].book.Unwatch(name)
		r.everyone(f, name, false)
		return 0, nil
	}
	var spec api.ChainSpec
	var conds []metav1.Condition
	missing := ""
	if err := api.Decode(obj.Object["spec"], &spec); err != nil {
		c := st.Cond(st.TemplatesReady, st.False, "InvalidSpec", fmt.Sprintf("cannot read spec: %v", err))
		conds = []metav1.Condition{c, st.Summarize(st.Ready, "Ready", c)}
	} else {
		var c metav1.Condition
		c, missing = specs.TemplatesReady(spec, r.env.Exists)
		conds = []metav1.Condition{c}
		if pc, ok := policiesValid(spec); ok {
			conds = append(conds, pc)
		}
		conds = append(conds, st.Summarize(st.Ready, "Ready", conds...))
	}
	ro := r.rollout(ctx, f, obj) // rollout.go
	if ro.err != nil {
		return 0, ro.err
	}
	if ro.wait > 0 {
		// The book does not hold every owner yet, or this replica's cache
		// of the templates is behind the API server: decide nothing yet.
		return ro.wait, nil
	}
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
	written, err := r.env.Writer.WriteStatus(ctx, gvr, obj, struct {
		ObservedGeneration int64              `json:"observedGeneration"`
		Conditions         []metav1.Condition `json:"conditions"`
		Rollout            *rollout.Status    `json:"rollout,omitempty"`
	}{obj.GetGeneration(), st.Merge(conds, prev.Conditions, obj.GetGeneration(), now), ro.status}, r.env.Tracker)
	if written != nil && missing != "" {
		r.env.Writer.Events.Event(obj, corev1.EventTypeWarning, stamp.EventTemplatesNotFound, "templates not found: %s", missing)
	}
	if apierrors.IsConflict(err) && r.env.StatusConflict != nil {
		r.env.StatusConflict(f.ChainKind)
	}
	if apierrors.IsNotFound(err) {
		return 0, nil // gone
	}
	if apierrors.IsConflict(err) || errors.Is(err, stamp.ErrStaleCopy) {
		// The cache is behind (or ahead): look again once it caught up. A
		// status-only change of the chain is no event the chain is
		// enqueued for (unless it moves a roll-out), so the decision must
		// not wait for one.
		return time.Second, nil
	}
	return 0, err
}

// PoliciesValid (a Kontinue condition, on chains whose steps name a verify
// policy): every policy can be used. A step whose policy cannot be used
// takes none of the inputs it names (fail closed, owner/verify.go); this
// says so once, on the chain the platform team wrote, instead of only on
// each owner's step.
const PoliciesValid = "VerifyPoliciesValid"

// policiesValid is the chain's PoliciesValid condition; ok false when no
// step names a policy (the condition is left out: a chain Cartographer
// would read keeps Cartographer's conditions).
func policiesValid(spec api.ChainSpec) (metav1.Condition, bool) {
	has := false
	for _, s := range spec.Resources {
		has = has || s.Verify != nil
	}
	if !has {
		return metav1.Condition{}, false
	}
	if err := verify.ValidateChain(spec); err != nil {
		return st.Cond(PoliciesValid, st.False, "InvalidVerifyPolicy", err.Error()), true
	}
	return st.Cond(PoliciesValid, st.True, "Valid", ""), true
}
