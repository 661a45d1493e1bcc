package chain

// The edge of a chain's roll-out (reconciler/rollout decides): the live
// revision of the chain and its templates, what its owners rendered with
// (the book, reconciler/rollout/book), the status the chain reconciler
// writes, and waking the owners whose turn it is. A template edit under a
// roll-out policy wakes no owner by itself (Gate): the waves do. Nothing
// polls: while a roll-out is under way the book wakes the chain when one
// of its owners changes, and the chain's own status write wakes it
// (the Manager's routing), to wake the next wave's owners.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/rollout"
	"kontinue.dev/kontinue/reconciler/selector"
	"kontinue.dev/kontinue/reconciler/specs"
	"kontinue.dev/kontinue/tracking"
)

// maxRolloutBytes bounds a chain's status.rollout (an object may take
// 1.5 MiB in all).
const maxRolloutBytes = 512 << 10

// rolloutStep is what a chain's roll-out adds to its status; wait: decide
// nothing yet, look again after it; err: the confirmation failed.
type rolloutStep struct {
	cond   *metav1.Condition
	status *rollout.Status
	wait   time.Duration
	err    error
}

// How long a chain's roll-out waits before it looks again: for the first
// list of the other shards' owners (an empty one, unsharded, takes a few
// milliseconds: owners walked meanwhile record no revision), and for this
// replica's cache of templates to catch up with the API server (the
// template's event is on its way).
const (
	waitOthersListed = 100 * time.Millisecond
	waitTemplates    = time.Second
)

// rollout decides the roll-out of chain obj (of flavor f) and wakes the
// owners of this replica's shard due under the status the cache shows.
func (r *Reconciler) rollout(ctx context.Context, f *api.Flavor, obj *unstructured.Unstructured) rolloutStep {
	name, book := obj.GetName(), r.env.Book(f)
	policy, prev, err := rollout.Read(obj.Object)
	if err != nil || policy == nil {
		book.Unwatch(name)
		r.env.Everyone(f, name, false)
		if err == nil {
			return rolloutStep{}
		}
		c := rollout.Invalid(err)
		return rolloutStep{cond: &c}
	}
	if !r.env.Everyone(f, name, true) {
		return rolloutStep{wait: waitOthersListed} // the other shards' owners are being listed
	}
	live, missing := r.liveRevision(obj, r.cached)
	if rollout.Moves(*prev, live) {
		// Another replica may have moved the roll-out on definitions this
		// replica's cache has not seen yet: it must not take them back.
		var failed error
		fresh, _ := r.liveRevision(obj, func(gvr schema.GroupVersionResource, n string) (*unstructured.Unstructured, error) {
			t, err := r.env.Template(ctx, gvr, n)
			if err != nil && !apierrors.IsNotFound(err) && failed == nil {
				failed = fmt.Errorf("cannot confirm the live revision: %w", err)
			}
			return t, err
		})
		if failed != nil {
			return rolloutStep{err: failed}
		}
		if fresh == nil || fresh.Name != live.Name {
			klog.V(1).InfoS("roll-out waits for the cache of templates", "chain", f.ChainKind+"/"+name, "cached", live.Name)
			return rolloutStep{wait: waitTemplates}
		}
	}
	ann := obj.GetAnnotations()
	var served map[string]bool
	if r.env.Served != nil {
		served = r.env.Served()
	}
	// Watched from the read on: an owner that changes after it wakes the
	// chain again (and a change of the shards served, every chain).
	out := rollout.Next(rollout.Input{Policy: policy, Prev: *prev, Live: live, Owners: book.Watch(name),
		Paused: ann[rollout.AnnotationPaused] == "true", Resume: ann[rollout.AnnotationResume], Shard: r.env.Shard, Served: served})
	if b, _ := json.Marshal(out.Status); len(b) > maxRolloutBytes {
		// The chain's status holds every kept revision's definitions: past
		// this bound it could no longer be written (or would crowd the
		// object). The owners render with the live definitions.
		book.Unwatch(name)
		r.env.Everyone(f, name, false)
		c := rollout.Invalid(fmt.Errorf("the definitions of the revisions to keep take %d bytes, more than the %d a chain's status may hold for them", len(b), maxRolloutBytes))
		return rolloutStep{cond: &c}
	}
	if out.Status.Target == "" && len(out.Due) == 0 {
		// Nothing waits on the owners: their changes are no news to the
		// chain (the tally of a complete roll-out is refreshed when the
		// chain is looked at for another reason).
		book.Unwatch(name)
	}
	r.wake(f, name, obj.GetGeneration(), prev, out.Due)
	if missing != "" && (out.Status.Target != "" || out.Status.Stable == "") {
		out.Condition.Message += fmt.Sprintf("; the live definitions cannot be taken: %s not found", missing)
	}
	return rolloutStep{cond: &out.Condition, status: &out.Status}
}

// cached reads a template from the cache (nil: not there).
func (r *Reconciler) cached(gvr schema.GroupVersionResource, name string) (*unstructured.Unstructured, error) {
	t, _ := r.env.Tracker.Get(tracking.Key{GVR: gvr}, "", name)
	return t, nil
}

// liveRevision is the revision of the chain and its templates as get
// reads them (the cache, or the API server); nil and the first template
// missing (or unreadable) when one is.
func (r *Reconciler) liveRevision(obj *unstructured.Unstructured, get func(gvr schema.GroupVersionResource, name string) (*unstructured.Unstructured, error)) (*rollout.Revision, string) {
	spec, _ := obj.Object["spec"].(map[string]any)
	var cs api.ChainSpec
	if err := api.Decode(spec, &cs); err != nil {
		return nil, ""
	}
	gvrs := map[string]schema.GroupVersionResource{}
	for _, gvr := range specs.TemplateGVRs() {
		gvrs[specs.TemplateKind(gvr)] = gvr
	}
	var ts []rollout.Template
	seen := map[string]bool{}
	for _, s := range cs.Resources {
		for _, n := range specs.TemplateNames(s.TemplateRef) {
			id := s.TemplateRef.Kind + "/" + n
			if seen[id] {
				continue
			}
			seen[id] = true
			gvr, ok := gvrs[s.TemplateRef.Kind]
			var t *unstructured.Unstructured
			if ok {
				t, _ = get(gvr, n)
			}
			if t == nil {
				return nil, id
			}
			tspec, _ := t.Object["spec"].(map[string]any)
			ts = append(ts, rollout.Template{Kind: s.TemplateRef.Kind, Name: n, Spec: tspec})
		}
	}
	rev := rollout.Snapshot(spec, ts)
	return &rev, ""
}

// wake enqueues the owners due under prev (the status the cache shows,
// which they read too) once per state of the roll-out: a wave's owners
// are woken when it begins, not on every poll.
func (r *Reconciler) wake(f *api.Flavor, chain string, generation int64, prev *rollout.Status, due []string) {
	// The generation: an edit of the policy may admit other owners.
	state := fmt.Sprintf("%s/%s/%d/%d", prev.Stable, prev.Target, prev.Wave, generation)
	key := f.ChainKind + "/" + chain
	r.mu.Lock()
	woken := r.woken[key] == state
	r.woken[key] = state
	r.mu.Unlock()
	if woken || len(due) == 0 {
		return
	}
	klog.InfoS("roll-out wakes owners", "chain", key, "stable", prev.Stable, "target", prev.Target, "wave", prev.Wave, "owners", len(due))
	for _, k := range due {
		if ns, name, ok := strings.Cut(k, "/"); ok && r.env.Wake != nil {
			r.env.Wake(f, ns, name)
		}
	}
}

// Gate reports, for the chains of flavor f, whether a chain has a
// roll-out under way-or-ready (a policy and a stable revision): its owners
// render with revisions, and the roll-out wakes them in waves, so a
// template edit itself wakes none of them. Decided once per chain per
// event, by map lookups only: it runs on an informer goroutine.
func Gate(tracker *tracking.Tracker, f *api.Flavor) func(chain string) bool {
	memo := map[string]bool{}
	return func(chain string) bool {
		gated, ok := memo[chain]
		if !ok {
			if obj, _ := tracker.Get(tracking.Key{GVR: f.ChainGVR}, "", chain); obj != nil {
				policy, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "rollout")
				stable, _, _ := unstructured.NestedString(obj.Object, "status", "rollout", "stable")
				gated = policy != nil && stable != ""
			}
			memo[chain] = gated
		}
		return gated
	}
}

// Selects reports whether chain (of flavor f, read through chains) still
// selects the owner namespace/name: a change of a gated chain need not
// wake such an owner, it renders with its revision and the waves wake it.
// An owner the chain no longer selects is woken, to find its chain. It
// lists nothing but marshals the owner: it runs on a worker.
func Selects(tracker *tracking.Tracker, chains *specs.Chains, f *api.Flavor, chain, namespace, name string) bool {
	c, _ := tracker.Get(tracking.Key{GVR: f.ChainGVR}, "", chain)
	o, _ := tracker.Get(tracking.Key{GVR: f.OwnerGVR}, namespace, name)
	if c == nil || o == nil {
		return false
	}
	cs := chains.Chain(c)
	if cs.Selector == nil {
		return false
	}
	doc, err := json.Marshal(o.Object)
	if err != nil {
		return false
	}
	ok, err := cs.Selector.Matches(selector.Owner{Kind: f.OwnerKind, Labels: o.GetLabels(), Doc: doc})
	return ok && err == nil
}
