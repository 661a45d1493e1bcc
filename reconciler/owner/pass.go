package owner

// The load and fold stages of an owner's reconcile: the owner, its chain
// and templates, its service account; then the steps (walk.go) and the
// owner's conditions summed up from theirs.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/annotations"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/prepare"
	"kontinue.dev/kontinue/reconciler/render"
	"kontinue.dev/kontinue/reconciler/selector"
	"kontinue.dev/kontinue/reconciler/specs"
	"kontinue.dev/kontinue/reconciler/stamp"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/step"
	"kontinue.dev/kontinue/tracking"
)

// pass is the state of one reconcile of one owner ("run" is kept for the
// objects an immutable step creates).
type pass struct {
	ctx    context.Context
	env    *Env
	user   string // the owner as a tracker user and in logs
	owner  *unstructured.Unstructured
	doc    []byte
	spec   api.OwnerSpec
	now    metav1.Time
	prev   st.OwnerStatus
	status st.OwnerStatus

	chainName     string
	chain         *specs.Chain
	defs          defs // what the steps render with: live, or a roll-out's revision (revision.go)
	templatesUsed []TemplateRef
	watch         *tracking.Handle // the watches this reconcile used
	w             *stamp.Session   // every write; what blocks the owner (blocked.CauseOf, in the Manager)
	keep          *keepSet         // what removal must leave alone (keep.go)
	steps         *stepObjects     // which step stamps which object (claims.go)
	blockerWait   bool             // the requeue waits for a blocker's watch to sync (claims.go)
	noAccount     bool             // the service account does not exist: write nothing
	sweepLater    bool             // a cache removeUnrecorded reads had not synced: look again (sweepRetry)
	// chainsCached are the flavor's chains in the cache, and writerOf the
	// stepIO of a step's lifecycle (stepIO): the reads and writes of the
	// load and steps stages (tests: a fake port).
	chainsCached func() []*unstructured.Unstructured
	writerOf     func(step.Lifecycle, *stepCtx) stepIO
}

func newPass(ctx context.Context, env *Env, owner *unstructured.Unstructured, user string) *pass {
	op := &pass{ctx: ctx, env: env, user: user, owner: owner, now: metav1.NewTime(time.Now().Truncate(time.Second)),
		watch: env.Tracker.Begin(user), w: env.Writer.Session(), keep: newKeepSet()}
	op.writerOf = op.stepIO
	op.chainsCached = func() []*unstructured.Unstructured {
		objs, _ := env.Tracker.List(tracking.Key{GVR: env.Flavor.ChainGVR}, "")
		return objs
	}
	if s, ok := owner.Object["status"].(map[string]any); ok {
		_ = api.Decode(s, &op.prev)
	}
	return op
}

// used is what the Manager's index records for this owner.
func (op *pass) used() Used {
	return Used{Chain: op.chainName, Templates: op.templatesUsed, Account: op.serviceAccount()}
}

// realize selects the chain and walks its steps, filling op.status.
func (op *pass) realize() (time.Duration, error) {
	f := op.env.Flavor
	// The reconcile request read at the start of this pass is handled once
	// this status is written.
	op.status = st.OwnerStatus{ObservedGeneration: op.owner.GetGeneration(),
		LastHandledReconcileAt: op.owner.GetAnnotations()[annotations.ReconcileRequest]}
	// Records of what Kontinue generated stay until their objects are gone.
	op.status.GeneratedRunTemplates = slices.Clone(op.prev.GeneratedRunTemplates)
	// The revision rendered with stays until the steps render again.
	op.status.ChainRevision = op.prev.ChainRevision
	// Keep what the owner had until a step says otherwise: a bad input must
	// never make Kontinue forget (and so delete) a stamped object.
	op.status.Resources = op.prev.Resources
	for _, res := range op.prev.Resources {
		op.keep.resource(res)
	}
	doc, err := json.Marshal(op.owner.Object)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	op.doc = doc
	if spec, ok := op.owner.Object["spec"]; ok {
		if err := api.Decode(spec, &op.spec); err != nil {
			op.fail(f.ChainReadyCondition, "InvalidSpec", fmt.Sprintf("cannot read the %s spec: %v", f.OwnerKind, err))
			return 0, nil
		}
	}

	choice, chain := op.chooseChain()
	if chain == nil {
		if prev := st.Find(op.prev.Conditions, f.ChainReadyCondition); len(choice.Candidates) > 0 && (prev == nil || prev.Reason != choice.Reason) {
			op.env.Events.Event(op.owner, corev1.EventTypeWarning, choice.Reason,
				"%s selected by %s whose selectors are equally specific: make one of them more specific",
				f.OwnerKind, strings.Join(choice.Candidates, ", "))
		}
		op.fail(f.ChainReadyCondition, choice.Reason, choice.Message)
		return 0, nil
	}
	op.chainName = chain.Name
	op.chain = chain
	ref := &st.ObjectRef{Kind: f.ChainKind, Name: chain.Name}
	if f == api.DeliverableFlavor {
		op.status.DeliveryRef = ref
	} else {
		op.status.SupplyChainRef = ref
	}
	if chain.Err != nil {
		op.fail(f.ChainReadyCondition, "InvalidChain", chain.Err.Error())
		return 0, nil
	}
	op.chooseDefs(chain) // revision.go: live, or the revision a roll-out gives the owner
	// Index the owner under every template its chain names before reading
	// any of them: a template created or changed while this reconcile runs
	// then always finds the owner to wake (a no-op reconcile at worst).
	for _, step := range chain.Spec.Resources {
		for _, n := range specs.TemplateNames(step.TemplateRef) {
			op.templatesUsed = append(op.templatesUsed, TemplateRef{step.TemplateRef.Kind, n})
		}
	}
	if op.env.Index != nil {
		op.env.Index(op.owner.GetNamespace(), op.owner.GetName(), op.used())
	}
	if c, _ := specs.TemplatesReady(*op.defs.spec, op.defs.exists); c.Status != st.True {
		op.fail(f.ChainReadyCondition, c.Reason, c.Message)
		return 0, nil
	}
	chainReady := st.Cond(f.ChainReadyCondition, st.True, "Ready", "")
	// Nothing is written as an account that does not exist. The index set
	// above names it: its creation wakes this owner.
	if sa := op.serviceAccount(); !op.env.AccountExists(sa.Namespace, sa.Name) {
		op.accountMissing(chainReady, sa)
		return 0, nil
	}
	return op.walk(chainReady)
}

// accountMissing records that the owner's service account does not exist:
// ResourcesSubmitted and Ready False, ServiceAccountError, in Cartographer's
// words; the steps keep what they had, nothing is written or deleted.
func (op *pass) accountMissing(chainReady metav1.Condition, sa api.ServiceAccountRef) {
	op.noAccount = true
	msg := stamp.NotFoundMessage(sa.Namespace, sa.Name)
	sub := st.Cond(st.ResourcesSubmitted, st.False, step.ReasonServiceAccountError, msg)
	hl := healthySummary(op.status.Resources)
	op.setConditions(chainReady, sub, hl, st.Summarize(st.Ready, "Ready", chainReady, sub, hl))
	if p := st.Find(op.prev.Conditions, st.ResourcesSubmitted); p == nil || p.Reason != sub.Reason || p.Message != msg {
		klog.InfoS("service account not found: nothing is written as it until it exists", "owner", op.user,
			"serviceAccount", sa.Namespace+"/"+sa.Name)
		op.env.Events.Event(op.owner, corev1.EventTypeWarning, step.ReasonServiceAccountError, "%s", msg)
	}
}

// fail records that the owner cannot be realized at all: the chain condition
// and Ready say why; stamped objects and step statuses stay as they were.
func (op *pass) fail(condType, reason, msg string) {
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
func (op *pass) setConditions(conds ...metav1.Condition) {
	if op.env.Kstatus {
		conds = append(conds, st.Kstatus(conds[len(conds)-1])...)
	}
	op.status.Conditions = st.Merge(conds, op.prev.Conditions, op.owner.GetGeneration(), op.now)
}

func (op *pass) chooseChain() (selector.ChainChoice, *specs.Chain) {
	f := op.env.Flavor
	objs := op.chainsCached()
	cands := make([]selector.Candidate, 0, len(objs))
	byName := map[string]*specs.Chain{}
	for _, o := range objs {
		c := op.env.Chains.Chain(o)
		if c.Selector == nil {
			continue // an invalid chain is reported on its own status
		}
		byName[c.Name] = c
		cands = append(cands, selector.Candidate{Name: c.Name, Selector: c.Selector})
	}
	owner := selector.Owner{Kind: f.OwnerKind, Labels: op.owner.GetLabels(), Doc: op.doc}
	choice := prepare.ChooseChain(owner, op.owner.GetName(), cands)
	if choice.Reason != "" {
		return choice, nil
	}
	return choice, byName[choice.Name]
}

// walk realizes the chain's steps in order (walk.go), then sums up the
// conditions.
func (op *pass) walk(chainReady metav1.Condition) (time.Duration, error) {
	op.steps = newStepObjects(op.defs.spec.Resources, op.prev.Resources)
	s := &steps{ctx: op.ctx, owner: op.owner, user: op.user, chainName: op.chainName, now: op.now, prev: op.prev.Resources,
		keep: op.keep, events: op.env.Events, prepare: op.prepareEnv(), io: op.writerOf, traced: op.env.TraceContext}
	resources, requeue, transient := s.walk(op.defs.spec.Resources)
	if op.steps.stale() && (requeue == 0 || requeue > heldRecheck) {
		// A step refused an object judged held by another step, which
		// stamped other objects since: look again, from this status.
		requeue = heldRecheck
	}
	if op.steps.waiting() && (requeue == 0 || requeue > blockerSync) {
		requeue, op.blockerWait = blockerSync, true
	}
	op.status.Resources = resources
	op.keep.resources(resources)
	var submitted []metav1.Condition
	for _, r := range resources {
		if c := st.Find(r.Conditions, st.ResourceSubmitted); c != nil {
			submitted = append(submitted, *c)
		}
	}
	sub := st.Summarize(st.ResourcesSubmitted, step.ReasonSubmitted, submitted...)
	hl := healthySummary(resources)
	ready := st.Summarize(st.Ready, "Ready", chainReady, sub, hl)
	op.setConditions(chainReady, sub, hl, ready)
	return requeue, transient
}

// prepareEnv is what prepare reads of this owner, its chain and the Env.
func (op *pass) prepareEnv() prepare.Env {
	e := op.env
	return prepare.Env{Flavor: e.Flavor, Owner: op.owner, OwnerDoc: op.doc, OwnerSpec: op.spec,
		ChainName: op.chainName, Chain: op.defs.spec,
		// Keyed by kind too: a supply chain and a delivery may share a name.
		Options: func(def api.Step) ([]selector.Candidate, error) {
			return e.Templates.Options(e.Flavor.ChainKind+"/"+op.chainName, op.defs.optsRV, def)
		},
		Template: op.defs.template,
		Engines:  e.Engines, Getter: render.DynamicGetter(e.Dynamic), Timeout: e.RenderTimeout,
		Release: (&helm{op}).release, // helm.go
	}
}

// stepIO builds the stepIO of a step's lifecycle.
func (op *pass) stepIO(l step.Lifecycle, sc *stepCtx) stepIO {
	switch l {
	case step.Immutable:
		return newImmutableWriter(op, sc) // immutable.go: a new run per input set
	case step.Runnable:
		return newRunnableWriter(op, sc) // runnablestep.go: a generated Runnable
	}
	return newMutableWriter(op, sc) // mutable.go: objects applied in place
}

// io is the port the step writers of this reconcile use.
func (op *pass) io() *ownerIO {
	f, ns, name := op.env.Flavor, op.owner.GetNamespace(), op.owner.GetName()
	return &ownerIO{ctx: op.ctx, w: op.w, watch: op.watch.Watch, keep: op.keep, owner: op.owner,
		claim: stamp.Owner{Kind: f.OwnerKind, Name: name, UID: op.owner.GetUID()}, account: op.serviceAccount(), client: op.stampClient,
		user: op.user, labels: labels.Set{api.StampedLabel: "true", f.LabelOwnerName: name, f.LabelOwnerNS: ns}, steps: op.steps}
}

// serviceAccount is the account whose permissions stamp objects:
// the owner's, else the chain's (the revision it renders with, or the live
// chain before one is chosen), else "default" in the owner's namespace.
func (op *pass) serviceAccount() api.ServiceAccountRef {
	cs := op.defs.spec
	if cs == nil && op.chain != nil {
		cs = &op.chain.Spec
	}
	return prepare.ServiceAccount(op.owner.GetNamespace(), op.spec, cs)
}

func (op *pass) stampClient() (dynamic.Interface, error) {
	sa := op.serviceAccount()
	return op.env.Clients.For(sa.Namespace, sa.Name)
}
