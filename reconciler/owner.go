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
		r.m.blocked.unblockOne(key)
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
	r.m.inputSetsEnded(op.chainName, op.prev.Resources, op.status.Resources)
	op.watch.Done()
	r.idx.set(key, op.used())
	blocked := blockCauseOf(op.w)
	switch {
	case blocked != 0:
		r.m.blocked.block(key, blocked)
	default:
		r.m.blocked.unblockOne(key)
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
	if c, _ := templatesReady(chain.spec, op.r.m.templates.exists); c.Status != st.True {
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
