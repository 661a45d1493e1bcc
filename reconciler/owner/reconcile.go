// Package owner is the owner reconciler (Workloads through supply chains,
// Deliverables through deliveries), read top to bottom as its stages:
//
//  1. load (pass.go): the owner, its chain (selector), its templates, the
//     previous status, the service account — all from the cache;
//  2. for each step (walk.go): prepare (reconciler/prepare) → the
//     Strategy's decide/do loop (execute.go) through the lifecycle's stepIO
//     (mutable.go, immutable.go, runnablestep.go) over the ownerIO port
//     (write.go) → the step's status;
//  3. fold: the owner's conditions from its steps' (pass.go);
//  4. cleanup (cleanup.go; keep.go decides): orphans, objects never
//     recorded, stale runs and generated ClusterRunTemplates;
//  5. status (status.go): bounded, written only when it changed.
//
// The Manager (reconciler/) routes its events, keeps the index of chains
// and templates to owners and who waits for RBAC or discovery news, and
// wires it through Env. This package never imports the Manager's.
package owner

import (
	"context"
	"errors"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/fresh"
	"kontinue.dev/kontinue/reconciler/history"
	"kontinue.dev/kontinue/reconciler/render"
	"kontinue.dev/kontinue/reconciler/selector"
	"kontinue.dev/kontinue/reconciler/spans"
	"kontinue.dev/kontinue/reconciler/specs"
	"kontinue.dev/kontinue/reconciler/stamp"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/tracking"
)

// Env is what an owner's reconcile needs of the Manager: the caches, the
// writer and the clients (Kontinue's own, and one per service account),
// which accounts exist, the templates and chains, the render engines and
// options, and the hooks through which the Manager keeps its own books.
type Env struct {
	Flavor        *api.Flavor
	Tracker       *tracking.Tracker
	Writer        *stamp.Writer
	Events        Events
	Dynamic       dynamic.Interface // Kontinue's own identity (generated ClusterRunTemplates, render's getter)
	Clients       *stamp.Clients
	AccountExists func(namespace, name string) bool
	Templates     Templates
	Chains        *specs.Chains
	Engines       map[string]render.Engine
	RenderTimeout time.Duration
	// Kstatus adds Reconciling and Stalled to the owner's conditions.
	Kstatus bool

	// Index is told what the owner uses, before any template is read:
	// a template created or changed meanwhile finds the owner to wake.
	Index func(namespace, name string, u Used)
	// WaitForName is told that a step refused the object holding a
	// generated ClusterRunTemplate name: the owner is woken when it goes.
	WaitForName func(name, namespace, owner string)
	// StatusConflict is told of a status write refused as a conflict.
	StatusConflict func()
	// StatusWritten is told of the steps' statuses before (prev) and after
	// (next) a status write of an owner on chain: what the provenance of
	// its steps says ended (the lead time metrics).
	StatusWritten func(chain string, prev, next []st.Resource)
	// History, when set, records what ended after every status write, as
	// the account the owner's objects are written as (recorded.go).
	History *history.Recorder
	// Spans, when set, is told the same: OpenTelemetry spans of what ended.
	Spans func(o spans.Owner, prev, next []st.Resource)
	// TraceContext puts on each stamped object the W3C trace context of
	// its step's span (api.AnnotationTraceParent), with Spans.
	TraceContext bool

	revs *revisionBook // the roll-outs' revisions (revision.go)
}

// Templates is what an owner's reconcile reads of templates
// (specs.Templates).
type Templates interface {
	// Options are a step's compiled options (chain: its kind and name, rv
	// its resourceVersion).
	Options(chain, rv string, def api.Step) ([]selector.Candidate, error)
	// Template is a decoded template (prepare.ErrNotFound: none).
	Template(kind, name string) (*api.TemplateSpec, error)
	Exists(kind, name string) bool
}

// Events is where the owner's events go (stamp.Events).
type Events interface {
	Event(obj *unstructured.Unstructured, typ, reason, msgFmt string, args ...any)
}

// Used is what an owner used in a reconcile: the Manager's index of who
// a chain, template or service account wakes.
type Used struct {
	Chain     string // of the flavor's chain kind; "": none
	Templates []TemplateRef
	Account   api.ServiceAccountRef
}

// TemplateRef names a template.
type TemplateRef struct{ Kind, Name string }

// ErrUnreadable is an owner that cannot be read as JSON: retrying cannot
// help.
var ErrUnreadable = errors.New("owner unreadable")

// Outcome is how one reconcile of an owner ended.
type Outcome struct {
	// Requeue > 0: look again after it; Wait: it waits for something to
	// show up (a cache), not a failure's backoff.
	Requeue time.Duration
	Wait    bool
	// Gone: the owner is deleted; its watches are released.
	Gone bool
	// Session is set when the status was written: what it saw decides
	// whether the owner waits for RBAC or discovery news. Used is set with
	// it.
	Session *stamp.Session
	Used    Used
}

// Reconciler walks the owners of one flavor through their chains.
type Reconciler struct {
	env Env

	writesMu sync.Mutex
	writes   map[string]ownWrite // status written, not yet seen in the cache
	stale    fresh.Reads         // status writes refused on a stale copy
}

// New returns a Reconciler working through env.
func New(env Env) *Reconciler {
	env.revs = newRevisionBook()
	return &Reconciler{env: env, writes: map[string]ownWrite{}}
}

// Reconcile realizes the owner namespace/name: load and the steps
// (pass.realize) → cleanup → status. user names it to the tracker and in
// logs.
func (r *Reconciler) Reconcile(ctx context.Context, namespace, name, user string) (Outcome, error) {
	obj, synced := r.env.Tracker.Get(tracking.Key{GVR: r.env.Flavor.OwnerGVR}, namespace, name)
	if !synced {
		return Outcome{Requeue: time.Second, Wait: true}, nil
	}
	if obj == nil || obj.GetDeletionTimestamp() != nil {
		// Stamped objects carry our ownerReference: the garbage collector
		// removes them. Drop what this owner held.
		r.env.Tracker.ReleaseAll(user)
		r.writesMu.Lock()
		delete(r.writes, user)
		r.writesMu.Unlock()
		r.stale.Forget(user)
		return Outcome{Gone: true}, nil
	}
	if r.awaitOwnWrite(user, obj) || r.stale.Behind(user, obj.GetResourceVersion()) {
		return Outcome{Requeue: 50 * time.Millisecond, Wait: true}, nil
	}
	obj = obj.DeepCopy()
	op := newPass(ctx, &r.env, obj, user)
	requeue, runErr := op.realize()

	// Orphans first: a step that moved to another object must not leave the
	// old one behind. Failures keep the old ref in status so it is retried.
	var orphanErr error
	if !op.noAccount {
		orphanErr = (&cleanup{op}).removeOrphans()
	}

	if err := r.writeStatus(ctx, obj, op); err != nil {
		if apierrors.IsConflict(err) || errors.Is(err, stamp.ErrStaleCopy) {
			// Decided on a stale copy: decide again once the cache has a
			// newer one (fresh.Reads), not on the same copy with backoff.
			return Outcome{Requeue: 50 * time.Millisecond, Wait: true}, nil
		}
		return Outcome{}, err
	}
	if r.env.StatusWritten != nil {
		r.env.StatusWritten(op.chainName, op.prev.Resources, op.status.Resources)
	}
	recorded(ctx, obj, op)
	op.watch.Done()
	if op.sweepLater && (requeue == 0 || requeue > sweepRetry) {
		requeue = sweepRetry
	}
	out := Outcome{Requeue: requeue, Wait: op.blockerWait && requeue == blockerSync, Session: op.w, Used: op.used()}
	if runErr != nil {
		return out, runErr
	}
	return out, orphanErr
}
