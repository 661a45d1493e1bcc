package reconciler

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/blocked"
	"kontinue.dev/kontinue/reconciler/chain"
	"kontinue.dev/kontinue/reconciler/loop"
	"kontinue.dev/kontinue/reconciler/owner"
	"kontinue.dev/kontinue/reconciler/render"
	"kontinue.dev/kontinue/reconciler/specs"
	"kontinue.dev/kontinue/tracking"
)

// ownerReconciler routes the keys of Workloads and their supply chains, or
// Deliverables and their deliveries, to the owner reconciler
// (reconciler/owner), and keeps the Manager's books of what it reported:
// the index, who waits for RBAC or discovery news.
type ownerReconciler struct {
	m      *Manager
	flavor *api.Flavor
	ctrl   *Controller
	idx    *index
	chains *specs.Chains
	rec    *owner.Reconciler
}

func newOwnerReconciler(m *Manager, f *api.Flavor, idx *index) *ownerReconciler {
	r := &ownerReconciler{m: m, flavor: f, idx: idx, chains: specs.NewChains()}
	r.rec = owner.New(owner.Env{Flavor: f, Tracker: m.tracker, Writer: m.w, Events: m.w.Events, Dynamic: m.dyn, Clients: m.clients,
		AccountExists: m.accountExists, Templates: m.templates, Chains: r.chains, Engines: m.engines,
		RenderTimeout: m.opts.RenderTimeout, Kstatus: m.opts.KstatusConditions,
		Index: func(namespace, name string, u owner.Used) { idx.set(r.key(namespace, name), r.refsOf(u)) },
		WaitForName: func(name, namespace, ownerName string) {
			m.runnables.gen.WaitForName(name, owner.OwnerRef{Kind: f.OwnerKind, Namespace: namespace, Name: ownerName}) // owner/sweep.go
		},
		StatusConflict: func() { m.statusConflict(f.OwnerKind) },
		StatusWritten:  m.inputSetsEnded,
		History:        m.history, Spans: m.opts.Spans, TraceContext: m.opts.Spans != nil,
		Schema: func() *render.Schema { return m.schemas.For(f.OwnerKind) },
		Verify: m.verifier, InputRefused: m.opts.Verify.OnRefused,
		Written: m.written}) // written.go
	r.ctrl = loop.NewController(f.OwnerKind, loop.ReconcileFunc(r.Reconcile))
	return r
}

// key is the queue key of one of this reconciler's owners.
func (r *ownerReconciler) key(namespace, name string) Key {
	return Key{Kind: r.flavor.OwnerKind, NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}}
}

// refsOf is what the index records of what an owner used.
func (r *ownerReconciler) refsOf(u owner.Used) ownerRefs {
	refs := ownerRefs{account: accountRef{u.Account.Namespace, u.Account.Name}}
	for _, t := range u.Templates {
		refs.templates = append(refs.templates, templateKey{t.Kind, t.Name})
	}
	if u.Chain != "" {
		refs.chain = chainRef{r.flavor.ChainKind, u.Chain}
	}
	return refs
}

// chainChanged enqueues the owners that used the chain (under a roll-out,
// those it no longer selects: its waves wake the rest, chain/rollout.go)
// and those its selector matches now (or matched, when it was deleted):
// never the whole cluster. It runs on a worker: it lists and marshals owners.
func (r *ownerReconciler) chainChanged(name string) {
	seen := map[Key]bool{}
	gated := r.idx.gated(r.flavor.ChainKind, chain.Gate(r.m.tracker, r.flavor))
	for _, k := range r.idx.ownersOfChain(r.flavor.ChainKind, name) {
		seen[k] = true
		if !gated(k) || !chain.Selects(r.m.tracker, r.chains, r.flavor, name, k.Namespace, k.Name) {
			r.edited(k)
		}
	}
	var c *specs.Chain
	if chain, synced := r.m.tracker.Get(tracking.Key{GVR: r.flavor.ChainGVR}, "", name); chain != nil {
		c = r.chains.Chain(chain)
	} else if synced {
		c = r.chains.Forget(name) // deleted: owners it matched may now pick another chain
	}
	if c == nil || c.Selector == nil {
		return
	}
	// One owner at a time, as the JSON the cache holds (Chain.Reaches).
	r.m.tracker.EachJSON(tracking.Key{GVR: r.flavor.OwnerGVR}, "", func(doc []byte) {
		ns, name, ok := c.Reaches(r.flavor.OwnerKind, doc)
		if key := r.key(ns, name); ok && !seen[key] {
			r.edited(key)
		}
	})
}

func (r *ownerReconciler) templateChanged(kind, name string) {
	gated := r.idx.gated(r.flavor.ChainKind, chain.Gate(r.m.tracker, r.flavor)) // the waves wake them
	for _, k := range r.idx.ownersOfTemplate(kind, name) {
		if k.Kind == r.flavor.OwnerKind && !gated(k) {
			r.edited(k)
		}
	}
}

// edited wakes an owner whose chain or template was edited, with its
// backoff reset: its failures were the old spec's (a template that never
// finished rendering, say), and the edit that may have fixed them must
// not wait behind a backoff grown to minutes.
func (r *ownerReconciler) edited(k Key) {
	r.ctrl.Forget(k)
	r.ctrl.EnqueueFanOut(k)
}

// Reconcile realizes one owner (reconciler/owner); a chain key finds the
// owners of a chain that changed.
func (r *ownerReconciler) Reconcile(ctx context.Context, key Key) (Result, error) {
	if key.Kind == r.flavor.ChainKind {
		r.chainChanged(key.Name)
		return Result{}, nil
	}
	out, err := r.rec.Reconcile(ctx, key.Namespace, key.Name, key.String())
	var cause blocked.Cause
	switch {
	case out.Gone:
		r.idx.forget(key)
		r.m.blocked.Unblock(key)
		r.m.history.Forget(r.flavor.OwnerKind, key.Namespace, key.Name) // a failed write's retry state
	case out.Session != nil:
		r.idx.set(key, r.refsOf(out.Used))
		if cause = blocked.CauseOf(out.Session); cause != 0 {
			r.m.blocked.Block(key, cause)
		} else {
			r.m.blocked.Unblock(key)
		}
	}
	if errors.Is(err, owner.ErrUnreadable) {
		return Result{}, loop.Terminal(err)
	}
	if ns := render.BusyNamespace(err); ns != "" {
		r.m.slotWait.add(ns, key) // and the backoff, should nothing end
	}
	if err != nil {
		return Result{}, err
	}
	res := Result{RequeueAfter: out.Requeue, Wait: out.Wait}
	if cause != 0 && (res.RequeueAfter == 0 || res.RequeueAfter > blockedRecheck) {
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
