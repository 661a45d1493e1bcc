package reconciler

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/annotations"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/fresh"
	"kontinue.dev/kontinue/reconciler/prepare"
	"kontinue.dev/kontinue/reconciler/selector"
	"kontinue.dev/kontinue/reconciler/stamp"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/step"
	"kontinue.dev/kontinue/tracking"
)

// ownerReconciler walks Workloads through supply chains, or Deliverables
// through deliveries: the same machine, two flavors.
type ownerReconciler struct {
	m      *Manager
	flavor *Flavor
	ctrl   *Controller
	idx    *index
	specs  *specCache

	writesMu sync.Mutex
	writes   map[string]ownWrite // status written, not yet seen in the cache
	stale    fresh.Reads         // status writes refused on a stale copy
}

func newOwnerReconciler(m *Manager, f *Flavor, idx *index) *ownerReconciler {
	r := &ownerReconciler{m: m, flavor: f, idx: idx, specs: newSpecCache(), writes: map[string]ownWrite{}}
	r.ctrl = NewController(f.OwnerKind, ReconcileFunc(r.Reconcile))
	return r
}

// key is the queue key of one of this reconciler's owners.
func (r *ownerReconciler) key(namespace, name string) Key {
	return Key{Kind: r.flavor.OwnerKind, NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}}
}

// user is an owner's name as a tracker user and in logs.
func (r *ownerReconciler) user(namespace, name string) string { return r.key(namespace, name).String() }

// chainChanged enqueues the owners that used the chain and those its
// selector matches now (or matched, when it was deleted): never the whole
// cluster. It runs on a worker: it lists and marshals owners.
func (r *ownerReconciler) chainChanged(name string) {
	seen := map[Key]bool{}
	for _, k := range r.idx.ownersOfChain(r.flavor.ChainKind, name) {
		seen[k] = true
		r.ctrl.Enqueue(k)
	}
	var c *chainSpec
	if chain, synced := r.m.tracker.Get(tracking.Key{GVR: r.flavor.ChainGVR}, "", name); chain != nil {
		c, _ = r.specs.chain(chain)
	} else if synced {
		c = r.specs.forget(name) // deleted: owners it matched may now pick another chain
	}
	if c == nil || c.selector == nil {
		return
	}
	owners, _ := r.m.tracker.List(tracking.Key{GVR: r.flavor.OwnerGVR}, "")
	for _, o := range owners {
		key := keyOf(r.flavor.OwnerKind, o)
		if seen[key] {
			continue
		}
		doc, err := json.Marshal(o.Object)
		if err != nil {
			continue
		}
		if ok, err := c.selector.Matches(selector.Owner{Kind: r.flavor.OwnerKind, Labels: o.GetLabels(), Doc: doc}); ok || err != nil {
			r.ctrl.Enqueue(key)
		}
	}
}

func (r *ownerReconciler) templateChanged(kind, name string) {
	for _, k := range r.idx.ownersOfTemplate(kind, name) {
		if k.Kind == r.flavor.OwnerKind {
			r.ctrl.Enqueue(k)
		}
	}
}

// Reconcile realizes one owner; a chain key finds the owners of a chain
// that changed.
func (r *ownerReconciler) Reconcile(ctx context.Context, key Key) (Result, error) {
	if key.Kind == r.flavor.ChainKind {
		r.chainChanged(key.Name)
		return Result{}, nil
	}
	ns, name := key.Namespace, key.Name
	user := key.String()
	obj, synced := r.m.tracker.Get(tracking.Key{GVR: r.flavor.OwnerGVR}, ns, name)
	if !synced {
		return Result{RequeueAfter: time.Second, Wait: true}, nil
	}
	if obj == nil || obj.GetDeletionTimestamp() != nil {
		// Stamped objects carry our ownerReference: the garbage collector
		// removes them. Drop what this owner held.
		r.m.tracker.ReleaseAll(user)
		r.idx.forget(key)
		r.m.unblockOne(key)
		r.writesMu.Lock()
		delete(r.writes, user)
		r.writesMu.Unlock()
		r.stale.Forget(user)
		return Result{}, nil
	}
	if r.awaitOwnWrite(user, obj) || r.stale.Behind(user, obj.GetResourceVersion()) {
		return Result{RequeueAfter: 50 * time.Millisecond, Wait: true}, nil
	}
	obj = obj.DeepCopy()
	op := newOwnerPass(ctx, r, obj)
	res, runErr := op.realize()

	// Orphans first: a step that moved to another object must not leave the
	// old one behind. Failures keep the old ref in status so it is retried.
	var orphanErr error
	if !op.noAccount {
		orphanErr = op.removeOrphans()
	}

	if err := r.writeStatus(ctx, obj, op); err != nil {
		if apierrors.IsConflict(err) {
			// Decided on a stale copy: decide again once the cache has a
			// newer one (fresh.Reads), not on the same copy with backoff.
			return Result{RequeueAfter: 50 * time.Millisecond, Wait: true}, nil
		}
		return Result{}, err
	}
	op.watch.Done()
	r.idx.set(key, op.used())
	blocked := blockCauseOf(op.w)
	switch {
	case blocked != 0:
		r.m.block(key, blocked)
	default:
		r.m.unblockOne(key)
	}
	if runErr != nil {
		return Result{}, runErr
	}
	if orphanErr != nil {
		return Result{}, orphanErr
	}
	if blocked != 0 && (res.RequeueAfter == 0 || res.RequeueAfter > blockedRecheck) {
		// RBAC and CRD events wake blocked owners at once; this slow look
		// covers what sends no such event (an admission policy's 403, a
		// kind served by an aggregated API server). An unchanged status is
		// not written, so it costs reads only.
		res.RequeueAfter = blockedRecheck
	}
	return res, nil
}

// blockedRecheck is how often an owner blocked on RBAC or discovery is
// looked at again without news.
const blockedRecheck = 5 * time.Minute

// ownWriteWait bounds how long a reconcile waits for the cache to show the
// status this controller just wrote.
const ownWriteWait = time.Second

// recordWrite remembers (as a digest: cheap to keep for every owner) the
// status just written for an owner.
func (r *ownerReconciler) recordWrite(user string, status map[string]any) {
	now := time.Now()
	d := stamp.StatusDigest(status)
	r.writesMu.Lock()
	defer r.writesMu.Unlock()
	if len(r.writes) >= 1024 {
		// Owners nobody reconciled since their write: the wait is over.
		for u, w := range r.writes {
			if now.Sub(w.at) > ownWriteWait {
				delete(r.writes, u)
			}
		}
	}
	r.writes[user] = ownWrite{digest: d, at: now}
}

// awaitOwnWrite reports whether the cached owner does not show the status
// this controller wrote moments ago. Its own stamped objects' events
// re-queue an owner right after its status write; reconciling the stale
// copy would only fail with a conflict and be retried. The wait is short
// and bounded: after ownWriteWait the cache is used as it is.
func (r *ownerReconciler) awaitOwnWrite(user string, obj *unstructured.Unstructured) bool {
	r.writesMu.Lock()
	w, ok := r.writes[user]
	r.writesMu.Unlock()
	if !ok {
		return false
	}
	cached, _ := obj.Object["status"].(map[string]any)
	if time.Since(w.at) <= ownWriteWait && stamp.StatusDigest(cached) != w.digest {
		return true
	}
	r.writesMu.Lock()
	delete(r.writes, user)
	r.writesMu.Unlock()
	return false
}

type ownWrite struct {
	digest [32]byte
	at     time.Time
}

// writeStatus writes the owner's status only when it changed.
func (r *ownerReconciler) writeStatus(ctx context.Context, obj *unstructured.Unstructured, op *ownerPass) error {
	op.bound(obj)
	user := r.user(obj.GetNamespace(), obj.GetName())
	written, err := r.m.w.WriteStatus(ctx, r.flavor.OwnerGVR, obj, op.status)
	if written != nil {
		r.recordWrite(user, written)
	}
	if apierrors.IsConflict(err) {
		r.stale.Note(user, obj.GetResourceVersion())
		r.m.statusConflict(r.flavor.OwnerKind)
	}
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		// The cache is behind: the owner is looked at again once it is not.
		klog.V(2).InfoS("status write raced; will retry", "owner", user, "err", err.Error())
	}
	return err
}

// ownerPass is the state of one reconcile of one owner ("run" is kept for
// the objects an immutable step creates).
type ownerPass struct {
	ctx    context.Context
	r      *ownerReconciler
	owner  *unstructured.Unstructured
	doc    []byte
	spec   api.OwnerSpec
	now    metav1.Time
	prev   st.OwnerStatus
	status st.OwnerStatus

	chainName     string
	chain         *chainSpec
	templatesUsed []templateKey
	watch         *tracking.Handle // the watches this reconcile used
	w             *stamp.Session   // every write; what blocks the owner (blockCauseOf)
	keep          *keepSet         // what removal must leave alone (keep.go)
	noAccount     bool             // the service account does not exist: write nothing
}

func newOwnerPass(ctx context.Context, r *ownerReconciler, owner *unstructured.Unstructured) *ownerPass {
	op := &ownerPass{ctx: ctx, r: r, owner: owner, now: metav1.NewTime(time.Now().Truncate(time.Second)),
		watch: r.m.tracker.Begin(r.user(owner.GetNamespace(), owner.GetName())), w: r.m.w.Session(), keep: newKeepSet()}
	if s, ok := owner.Object["status"].(map[string]any); ok {
		_ = api.Decode(s, &op.prev)
	}
	return op
}

// used is what the index records for this owner.
func (op *ownerPass) used() ownerRefs {
	sa := op.serviceAccount()
	refs := ownerRefs{templates: op.templatesUsed, account: accountRef{sa.Namespace, sa.Name}}
	if op.chainName != "" {
		refs.chain = chainRef{op.r.flavor.ChainKind, op.chainName}
	}
	return refs
}

// realize selects the chain and walks its steps, filling op.status.
func (op *ownerPass) realize() (Result, error) {
	f := op.r.flavor
	// The reconcile request read at the start of this pass is handled once
	// this status is written.
	op.status = st.OwnerStatus{ObservedGeneration: op.owner.GetGeneration(),
		LastHandledReconcileAt: op.owner.GetAnnotations()[annotations.ReconcileRequest]}
	// Records of what Kontinue generated stay until their objects are gone.
	op.status.GeneratedRunTemplates = slices.Clone(op.prev.GeneratedRunTemplates)
	// Keep what the owner had until a step says otherwise: a bad input must
	// never make Kontinue forget (and so delete) a stamped object.
	op.status.Resources = op.prev.Resources
	for _, res := range op.prev.Resources {
		op.keep.resource(res)
	}
	doc, err := json.Marshal(op.owner.Object)
	if err != nil {
		return Result{}, Terminal(err)
	}
	op.doc = doc
	if spec, ok := op.owner.Object["spec"]; ok {
		if err := api.Decode(spec, &op.spec); err != nil {
			op.fail(f.ChainReadyCondition, "InvalidSpec", fmt.Sprintf("cannot read the %s spec: %v", f.OwnerKind, err))
			return Result{}, nil
		}
	}

	choice, chain := op.chooseChain()
	if chain == nil {
		if prev := st.Find(op.prev.Conditions, f.ChainReadyCondition); len(choice.Candidates) > 0 && (prev == nil || prev.Reason != choice.Reason) {
			op.r.m.w.Events.Event(op.owner, corev1.EventTypeWarning, choice.Reason,
				"%s selected by %s whose selectors are equally specific: make one of them more specific",
				f.OwnerKind, strings.Join(choice.Candidates, ", "))
		}
		op.fail(f.ChainReadyCondition, choice.Reason, choice.Message)
		return Result{}, nil
	}
	op.chainName = chain.name
	op.chain = chain
	ref := &st.ObjectRef{Kind: f.ChainKind, Name: chain.name}
	if f == DeliverableFlavor {
		op.status.DeliveryRef = ref
	} else {
		op.status.SupplyChainRef = ref
	}
	if chain.err != nil {
		op.fail(f.ChainReadyCondition, "InvalidChain", chain.err.Error())
		return Result{}, nil
	}
	// Index the owner under every template its chain names before reading
	// any of them: a template created or changed while this reconcile runs
	// then always finds the owner to wake (a no-op reconcile at worst).
	for _, step := range chain.spec.Resources {
		for _, n := range templateNames(step.TemplateRef) {
			op.templatesUsed = append(op.templatesUsed, templateKey{step.TemplateRef.Kind, n})
		}
	}
	op.r.idx.set(op.r.key(op.owner.GetNamespace(), op.owner.GetName()), op.used())
	if c, _ := templatesReady(chain.spec, op.r.m.templateExists); c.Status != st.True {
		op.fail(f.ChainReadyCondition, c.Reason, c.Message)
		return Result{}, nil
	}
	chainReady := st.Cond(f.ChainReadyCondition, st.True, "Ready", "")
	// Nothing is written as an account that does not exist. The index set
	// above names it: its creation wakes this owner.
	if sa := op.serviceAccount(); !op.r.m.accountExists(sa.Namespace, sa.Name) {
		op.accountMissing(chainReady, sa)
		return Result{}, nil
	}
	return op.walk(chainReady)
}

// accountMissing records that the owner's service account does not exist:
// ResourcesSubmitted and Ready False, ServiceAccountError, in Cartographer's
// words; the steps keep what they had, nothing is written or deleted.
func (op *ownerPass) accountMissing(chainReady metav1.Condition, sa api.ServiceAccountRef) {
	op.noAccount = true
	msg := stamp.NotFoundMessage(sa.Namespace, sa.Name)
	sub := st.Cond(st.ResourcesSubmitted, st.False, step.ReasonServiceAccountError, msg)
	hl := healthySummary(op.status.Resources)
	op.setConditions(chainReady, sub, hl, st.Summarize(st.Ready, "Ready", chainReady, sub, hl))
	if p := st.Find(op.prev.Conditions, st.ResourcesSubmitted); p == nil || p.Reason != sub.Reason || p.Message != msg {
		klog.InfoS("service account not found: nothing is written as it until it exists", "owner", op.r.user(op.owner.GetNamespace(), op.owner.GetName()),
			"serviceAccount", sa.Namespace+"/"+sa.Name)
		op.r.m.w.Events.Event(op.owner, corev1.EventTypeWarning, step.ReasonServiceAccountError, "%s", msg)
	}
}

// fail records that the owner cannot be realized at all: the chain condition
// and Ready say why; stamped objects and step statuses stay as they were.
func (op *ownerPass) fail(condType, reason, msg string) {
	op.setConditions(st.Cond(condType, st.False, reason, msg), st.Cond(st.Ready, st.False, reason, msg))
	// A chosen chain is named even when it is not ready; without one the
	// owner keeps the chain it had (as Cartographer does).
	if op.status.SupplyChainRef == nil && op.status.DeliveryRef == nil {
		op.status.SupplyChainRef = op.prev.SupplyChainRef
		op.status.DeliveryRef = op.prev.DeliveryRef
	}
}

// setConditions sets the owner's conditions, in the contract's order and
// ending with Ready, followed by the kstatus ones when they are on.
func (op *ownerPass) setConditions(conds ...metav1.Condition) {
	if op.r.m.opts.KstatusConditions {
		conds = append(conds, st.Kstatus(conds[len(conds)-1])...)
	}
	op.status.Conditions = st.Merge(conds, op.prev.Conditions, op.owner.GetGeneration(), op.now)
}

func (op *ownerPass) chooseChain() (selector.ChainChoice, *chainSpec) {
	f := op.r.flavor
	objs, _ := op.r.m.tracker.List(tracking.Key{GVR: f.ChainGVR}, "")
	cands := make([]selector.Candidate, 0, len(objs))
	byName := map[string]*chainSpec{}
	for _, o := range objs {
		c, err := op.r.specs.chain(o)
		if err != nil {
			continue // reported on the chain's own status
		}
		if c.selector == nil {
			continue
		}
		byName[c.name] = c
		cands = append(cands, selector.Candidate{Name: c.name, Selector: c.selector})
	}
	owner := selector.Owner{Kind: f.OwnerKind, Labels: op.owner.GetLabels(), Doc: op.doc}
	choice := prepare.ChooseChain(owner, op.owner.GetName(), cands)
	if choice.Reason != "" {
		return choice, nil
	}
	return choice, byName[choice.Name]
}

// removeOrphans deletes objects the previous status listed (in its steps or
// as orphans) that no step stamps any more, when they still carry this
// owner's labels. What cannot be deleted stays in status.orphans.
func (op *ownerPass) removeOrphans() error {
	var firstErr error
	orphans := op.keep.orphans(op.prev)
	op.status.Orphans = nil
	for _, c := range orphans {
		if err := op.deleteOrphan(c.key, c.ref, c.step); err != nil {
			klog.InfoS("could not remove orphaned object; will retry", "owner", op.r.user(op.owner.GetNamespace(), op.owner.GetName()),
				"object", c.ref.Kind+"/"+c.ref.Name, "err", err.Error())
			op.status.Orphans = append(op.status.Orphans, c.ref)
			if apierrors.IsForbidden(err) {
				continue // retried when RBAC changes, not on a timer
			}
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	if err := op.removeUnrecorded(); err != nil && firstErr == nil {
		firstErr = err
	}
	if err := op.removeStaleRuns(); err != nil && firstErr == nil {
		firstErr = err // runs are found by label again on retry
	}
	return firstErr
}

// removeUnrecorded deletes the owner's objects that were applied but never
// recorded in status, once no step wants them (keepSet.unrecorded decides).
// They are found in the caches of the kinds the steps stamp; Runnables and
// run templates are stale-run removal's. What cannot be deleted is listed
// in status.orphans, so that it is retried like any orphan.
func (op *ownerPass) removeUnrecorded() error {
	if !sweepsUnrecorded(op.status) {
		return nil
	}
	f := op.r.flavor
	ns := op.owner.GetNamespace()
	sel := labels.SelectorFromSet(labels.Set{StampedLabel: "true", f.LabelOwnerName: op.owner.GetName(), f.LabelOwnerNS: ns})
	var firstErr error
	for _, gvr := range op.keep.wantedKinds() {
		if gvr == RunnableGVR || gvr == RunTemplateGVR {
			continue
		}
		objs, synced := op.r.m.tracker.ListControlledBy(tracking.Key{GVR: gvr, Selector: StampedSelector}, op.owner.GetUID())
		if !synced {
			continue // looked at again on a later reconcile
		}
		for _, o := range op.keep.unrecorded(op.prev, op.owner.GetUID(), sel, gvr, objs) {
			ref := st.StampedRef{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName(), Resource: resourceString(gvr)}
			err := op.deleteUnrecorded(gvr, o)
			if err == nil {
				continue
			}
			klog.InfoS("could not remove an object never recorded in status; will retry", "owner", op.r.user(ns, op.owner.GetName()),
				"object", ref.Kind+"/"+ref.Name, "err", err.Error())
			op.status.Orphans = append(op.status.Orphans, ref)
			if !apierrors.IsForbidden(err) && firstErr == nil {
				firstErr = err
			}
		}
	}
	return firstErr
}

func (op *ownerPass) deleteUnrecorded(gvr schema.GroupVersionResource, obj *unstructured.Unstructured) error {
	cl, err := op.stampClient()
	if err != nil {
		return err
	}
	sa := op.serviceAccount()
	step := obj.GetLabels()[LabelResourceName]
	return op.w.Remove(op.ctx, cl, gvr, obj, op.owner, sa.Namespace+"/"+sa.Name, fmt.Sprintf("(applied for step [%s] but never recorded in status, no longer wanted)", step))
}

func (op *ownerPass) deleteOrphan(k refKey, ref st.StampedRef, step string) error {
	f := op.r.flavor
	live, err := op.w.Live(op.ctx, tracking.Key{GVR: k.gvr, Selector: StampedSelector}, nil, k.namespace, k.name)
	if err != nil || live == nil {
		return err
	}
	l := live.GetLabels()
	if l[f.LabelOwnerName] != op.owner.GetName() || l[f.LabelOwnerNS] != op.owner.GetNamespace() || !op.controls(live) {
		return nil // not ours (any more), or made by someone else since: never delete it
	}
	cl, err := op.stampClient()
	if err != nil {
		return err
	}
	if step == "" {
		step = "(removed earlier)"
	}
	sa := op.serviceAccount()
	return op.w.Remove(op.ctx, cl, k.gvr, live, op.owner, sa.Namespace+"/"+sa.Name, fmt.Sprintf("no longer stamped by step [%s]", step))
}

// controls reports whether obj was stamped by this very owner: its
// controller reference names the owner's UID. Labels anyone can set are not
// proof.
func (op *ownerPass) controls(obj *unstructured.Unstructured) bool {
	return controlledBy(obj, op.owner.GetUID())
}

// bound keeps the status within what the API server takes for the owner
// obj (st.Bound), and says what it cut in the StatusTruncated condition,
// with a Warning event when that changes: a status that fails to write
// would leave the owner stale for good.
func (op *ownerPass) bound(obj *unstructured.Unstructured) {
	notes := st.Bound(&op.status, st.Free(obj.Object))
	if len(notes) == 0 {
		return
	}
	msg := strings.Join(notes, "; ")
	c := st.Merge([]metav1.Condition{st.Cond(CondStatusTruncated, st.True, ReasonStatusTooLarge, msg)}, op.prev.Conditions, obj.GetGeneration(), op.now)[0]
	op.status.Conditions = append(op.status.Conditions, c)
	if p := st.Find(op.prev.Conditions, CondStatusTruncated); p == nil || p.Message != msg {
		klog.InfoS("status too large; cut", "owner", op.r.user(obj.GetNamespace(), obj.GetName()), "cut", msg)
		op.r.m.w.Events.Event(op.owner, corev1.EventTypeWarning, stamp.EventStatusTooLarge, "%s", msg)
	}
}

// The condition an owner carries while its status had to be cut.
const (
	CondStatusTruncated  = "StatusTruncated"
	ReasonStatusTooLarge = "StatusTooLarge"
)
