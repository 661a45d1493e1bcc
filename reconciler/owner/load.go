package owner

// The load stage of an owner's reconcile: the owner, its chain (selector;
// the definitions a roll-out gives it: revision.go) and templates, its
// service account, all from the cache; what fails there is the owner's
// chain condition and Ready, and nothing is written.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/annotations"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/prepare"
	"kontinue.dev/kontinue/reconciler/selector"
	"kontinue.dev/kontinue/reconciler/specs"
	"kontinue.dev/kontinue/reconciler/stamp"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/step"
)

// loaded is what the load stage read of one owner, and the status the later
// stages start from.
type loaded struct {
	owner *unstructured.Unstructured
	user  string // the owner as a tracker user and in logs
	doc   []byte // the owner as JSON
	spec  api.OwnerSpec
	now   metav1.Time
	prev  st.OwnerStatus

	chainName string
	chain     *specs.Chain
	defs      defs // what the steps render with: live, or a roll-out's revision (revision.go)
	templates []TemplateRef

	// status is what the later stages start from: what carries over from
	// prev, the chain named, and, when the owner stops here, the
	// conditions that say why.
	status st.OwnerStatus
	// walk: the steps run, under chainReady.
	walk       bool
	chainReady metav1.Condition
	// noAccount: the service account does not exist: nothing is written
	// or deleted.
	noAccount bool
	// err: the owner cannot be read (ErrUnreadable).
	err error
}

// load reads the owner obj (user names it) and what it uses: chains are
// the flavor's chains in the cache.
func load(env *Env, chains []*unstructured.Unstructured, obj *unstructured.Unstructured, user string, now metav1.Time) *loaded {
	l := &loaded{owner: obj, user: user, now: now}
	if s, ok := obj.Object["status"].(map[string]any); ok {
		_ = api.Decode(s, &l.prev)
	}
	f := env.Flavor
	// The reconcile request read at the start of this reconcile is handled
	// once this status is written.
	l.status = st.OwnerStatus{ObservedGeneration: obj.GetGeneration(),
		LastHandledReconcileAt: obj.GetAnnotations()[annotations.ReconcileRequest]}
	// Records of what Kontinue generated stay until their objects are gone.
	l.status.GeneratedRunTemplates = slices.Clone(l.prev.GeneratedRunTemplates)
	// So do the orphans, when the cleanup does not run (no account to
	// delete them as): named until they are gone (robustness seed 9: a
	// Workload moved to another chain just before its account was deleted
	// forgot its old chain's objects). The cleanup lists them again.
	l.status.Orphans = slices.Clone(l.prev.Orphans)
	// The revision rendered with stays until the steps render again.
	l.status.ChainRevision = l.prev.ChainRevision
	// The shard that holds its objects, until the cleanup has moved them.
	l.status.Shard = l.prev.Shard
	// Keep what the owner had until a step says otherwise: a bad input must
	// never make Kontinue forget (and so delete) a stamped object.
	l.status.Resources = l.prev.Resources
	doc, err := json.Marshal(obj.Object)
	if err != nil {
		l.err = fmt.Errorf("%w: %w", ErrUnreadable, err)
		return l
	}
	l.doc = doc
	if spec, ok := obj.Object["spec"]; ok {
		if err := api.Decode(spec, &l.spec); err != nil {
			l.fail(env, f.ChainReadyCondition, "InvalidSpec", fmt.Sprintf("cannot read the %s spec: %v", f.OwnerKind, err))
			return l
		}
	}

	choice, chain := l.chooseChain(env, chains)
	if chain == nil {
		if prev := st.Find(l.prev.Conditions, f.ChainReadyCondition); len(choice.Candidates) > 0 && (prev == nil || prev.Reason != choice.Reason) {
			env.Events.Event(obj, corev1.EventTypeWarning, choice.Reason,
				"%s selected by %s whose selectors are equally specific: make one of them more specific",
				f.OwnerKind, strings.Join(choice.Candidates, ", "))
		}
		l.fail(env, f.ChainReadyCondition, choice.Reason, choice.Message)
		return l
	}
	l.chainName, l.chain = chain.Name, chain
	ref := &st.ObjectRef{Kind: f.ChainKind, Name: chain.Name}
	if f == api.DeliverableFlavor {
		l.status.DeliveryRef = ref
	} else {
		l.status.SupplyChainRef = ref
	}
	if chain.Err != nil {
		l.fail(env, f.ChainReadyCondition, "InvalidChain", chain.Err.Error())
		return l
	}
	// Live, or the revision a roll-out gives the owner (revision.go).
	l.defs, l.status.ChainRevision = chooseDefs(env, chains, chain, obj, l.prev.ChainRevision)
	// Index the owner under every template its chain names before reading
	// any of them: a template created or changed while this reconcile runs
	// then always finds the owner to wake (a no-op reconcile at worst).
	for _, step := range chain.Spec.Resources {
		for _, n := range specs.TemplateNames(step.TemplateRef) {
			l.templates = append(l.templates, TemplateRef{step.TemplateRef.Kind, n})
		}
	}
	if env.Index != nil {
		env.Index(obj.GetNamespace(), obj.GetName(), l.used())
	}
	if c, _ := specs.TemplatesReady(*l.defs.spec, l.defs.exists); c.Status != st.True {
		l.fail(env, f.ChainReadyCondition, c.Reason, c.Message)
		return l
	}
	l.chainReady = st.Cond(f.ChainReadyCondition, st.True, "Ready", "")
	// Nothing is written as an account that does not exist. The index set
	// above names it: its creation wakes this owner.
	if sa := l.account(); !env.AccountExists(sa.Namespace, sa.Name) {
		l.accountMissing(env, sa)
		return l
	}
	l.walk = true
	return l
}

// used is what the Manager's index records for this owner.
func (l *loaded) used() Used {
	return Used{Chain: l.chainName, Templates: l.templates, Account: l.account()}
}

// account is the account whose permissions stamp objects: the owner's,
// else the chain's (the revision it renders with, or the live chain before
// one is chosen), else "default" in the owner's namespace.
func (l *loaded) account() api.ServiceAccountRef {
	cs := l.defs.spec
	if cs == nil && l.chain != nil {
		cs = &l.chain.Spec
	}
	return prepare.ServiceAccount(l.owner.GetNamespace(), l.spec, cs)
}

// accountMissing records that the owner's service account does not exist:
// ResourcesSubmitted and Ready False, ServiceAccountError, in Cartographer's
// words; the steps keep what they had, nothing is written or deleted.
func (l *loaded) accountMissing(env *Env, sa api.ServiceAccountRef) {
	l.noAccount = true
	msg := stamp.NotFoundMessage(sa.Namespace, sa.Name)
	sub := st.Cond(st.ResourcesSubmitted, st.False, step.ReasonServiceAccountError, msg)
	hl := healthySummary(l.status.Resources)
	setConditions(env, l, &l.status, l.chainReady, sub, hl, st.Summarize(st.Ready, "Ready", l.chainReady, sub, hl))
	if p := st.Find(l.prev.Conditions, st.ResourcesSubmitted); p == nil || p.Reason != sub.Reason || p.Message != msg {
		klog.InfoS("service account not found: nothing is written as it until it exists", "owner", l.user,
			"serviceAccount", sa.Namespace+"/"+sa.Name)
		env.Events.Event(l.owner, corev1.EventTypeWarning, step.ReasonServiceAccountError, "%s", msg)
	}
}

// fail records that the owner cannot be realized at all: the chain condition
// and Ready say why; stamped objects and step statuses stay as they were.
func (l *loaded) fail(env *Env, condType, reason, msg string) {
	setConditions(env, l, &l.status, st.Cond(condType, st.False, reason, msg), st.Cond(st.Ready, st.False, reason, msg))
	// A chosen chain is named even when it is not ready; without one the
	// owner keeps the chain it had (as Cartographer does).
	if l.status.SupplyChainRef == nil && l.status.DeliveryRef == nil {
		l.status.SupplyChainRef = l.prev.SupplyChainRef
		l.status.DeliveryRef = l.prev.DeliveryRef
	}
}

// setConditions sets the owner's conditions in status, in the contract's
// order and ending with Ready, followed by the kstatus ones when they are
// on.
func setConditions(env *Env, l *loaded, status *st.OwnerStatus, conds ...metav1.Condition) {
	if env.Kstatus {
		conds = append(conds, st.Kstatus(conds[len(conds)-1])...)
	}
	status.Conditions = st.Merge(conds, l.prev.Conditions, l.owner.GetGeneration(), l.now)
}

func (l *loaded) chooseChain(env *Env, chains []*unstructured.Unstructured) (selector.ChainChoice, *specs.Chain) {
	f := env.Flavor
	cands := make([]selector.Candidate, 0, len(chains))
	byName := map[string]*specs.Chain{}
	for _, o := range chains {
		c := env.Chains.Chain(o)
		if c.Selector == nil {
			continue // an invalid chain is reported on its own status
		}
		byName[c.Name] = c
		cands = append(cands, selector.Candidate{Name: c.Name, Selector: c.Selector})
	}
	owner := selector.Owner{Kind: f.OwnerKind, Labels: l.owner.GetLabels(), Doc: l.doc}
	choice := prepare.ChooseChain(owner, l.owner.GetName(), cands)
	if choice.Reason != "" {
		return choice, nil
	}
	return choice, byName[choice.Name]
}
