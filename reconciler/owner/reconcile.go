// Package owner is the owner reconciler (Workloads through supply chains,
// Deliverables through deliveries), read top to bottom as its stages
// (Reconcile), each a function of what the stages before it left:
//
//  1. load (load.go): the owner, its chain (selector), its templates, the
//     previous status, the service account — all from the cache → loaded;
//  2. steps (walk.go): for each step, prepare (reconciler/prepare) → the
//     Strategy's decide/do loop (execute.go) through the lifecycle's stepIO
//     (lifecycles.go: mutable.go, immutable.go, runnablestep.go) over the
//     ownerIO port (write.go) → walked: the steps' statuses;
//  3. fold (fold.go): the owner's conditions from its steps' → its status;
//  4. cleanup (cleanup.go; keep.go decides), through the same port:
//     orphans, objects never recorded, stale runs and generated
//     ClusterRunTemplates → cleaned: what stays listed;
//  5. status (status.go): bounded, written only when it changed.
//
// The Manager (reconciler/) routes its events, keeps the index of chains
// and templates to owners and who waits for RBAC or discovery news, and
// wires it through Env. This package never imports the Manager's.
package owner

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	"kontinue.dev/kontinue/reconciler/step"
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
	// Written, when set, is told of every status write of an owner
	// (written.go): the DORA metrics and notifications. It only enqueues.
	Written func(Written)
	// TraceContext puts on each stamped object the W3C trace context of
	// its step's span (api.AnnotationTraceParent), with Spans.
	TraceContext bool
	// Schema is the owner kind's schema as served (nil: none): what tags
	// naming fields the owner leaves unset render (render.Schema).
	Schema func() *render.Schema
	// Verify, when set, checks steps' inputs against their chain's verify
	// policies (verify.go); InputRefused is told of each new refusal.
	Verify       Verifier
	InputRefused func(chain, step, rule string)

	revs *revisionBook // the roll-outs' revisions (revision.go)
	left *leftBook     // the objects steps were seen to leave (claims.go)
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

// deferStatus says whether user's status waits for an input's decision
// (w.verifyUntil: one asked about just now), and when to look again (0:
// the verifier wakes the owner): not after an error, and in all no later
// than the end of the grace it first waited for (so an owner whose inputs
// change faster than they are decided is written).
func (r *Reconciler) deferStatus(user string, w walked, lerr error) (time.Duration, bool) {
	if w.verifyUntil.IsZero() || w.err != nil || lerr != nil {
		return 0, false
	}
	r.writesMu.Lock()
	until, ok := r.deferred[user]
	if !ok {
		until = w.verifyUntil
		r.deferred[user] = until
	}
	r.writesMu.Unlock()
	return deferral(time.Now(), until, w.verifyUntil, w.requeue)
}

// deferral says whether a status waits at now for a decision, until the
// end of the first grace it waited for, with soonest the end of the
// grace of the inputs being fetched (the verifier wakes the owner then at
// the latest), the walk asking to be looked at again after requeue (0:
// not asked); and after how long to look again (0: the verifier's wake
// comes first). The times are the verifier's own (absolute), so the wake
// at a grace's end finds it over.
func deferral(now, until, soonest time.Time, requeue time.Duration) (time.Duration, bool) {
	if !now.Before(until) {
		return 0, false
	}
	var wait time.Duration
	if soonest.After(until) {
		// No fetch's grace ends by then to wake it.
		wait = until.Sub(now)
	}
	if requeue > 0 && (wait == 0 || requeue < wait) {
		wait = requeue
	}
	return wait, true
}

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
	// deferred: owners whose status waits for an input's decision, until
	// when at most (deferStatus).
	deferred map[string]time.Time
}

// New returns a Reconciler working through env.
func New(env Env) *Reconciler {
	env.revs = newRevisionBook()
	env.left = newLeftBook()
	return &Reconciler{env: env, writes: map[string]ownWrite{}, deferred: map[string]time.Time{}}
}

// Reconcile realizes the owner namespace/name through its stages: load →
// steps → fold → cleanup → status. user names it to the tracker and in
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
		delete(r.deferred, user)
		r.writesMu.Unlock()
		r.stale.Forget(user)
		return Outcome{Gone: true}, nil
	}
	if r.awaitOwnWrite(user, obj) || r.stale.Behind(user, obj.GetResourceVersion()) {
		return Outcome{Requeue: 50 * time.Millisecond, Wait: true}, nil
	}
	obj = obj.DeepCopy()
	env := &r.env
	sess, watches := env.Writer.Session(), env.Tracker.Begin(user) // every write; what this reconcile watches
	chains, _ := env.Tracker.List(tracking.Key{GVR: env.Flavor.ChainGVR}, "")

	l := load(env, chains, obj, user, metav1.NewTime(time.Now().Truncate(time.Second))) // 1. load
	x := newOwnerIO(ctx, env, l, sess, watches)                                         // the port of the stages that write
	var w walked
	if l.walk {
		w = walkSteps(ctx, env, l, x, func(lc *step.Lifecycle, sc *stepCtx) stepIO { return writers[lc.IO](x, sc) }) // 2. steps
	}
	if wait, ok := r.deferStatus(user, w, l.err); ok {
		// An input was first asked about just now and is being fetched,
		// mostly in milliseconds; the owner is woken when it is decided.
		// The status is written then, once, rather than now saying the
		// step is verifying and again when it takes the input; past the
		// grace it is written as it is (InputVerifying). What the walk
		// stamped is written already; cleanup waits with the status.
		watches.Done()
		return Outcome{Requeue: wait, Wait: true}, nil
	}
	status := fold(env, l, w) // 3. fold
	// 4. cleanup. Orphans first: a step that moved to another object must
	// not leave the old one behind. Failures keep the old ref in status so
	// it is retried. Nothing is deleted as an account that does not exist.
	var c cleaned
	if !l.noAccount {
		c = clean(env, x, l, status)
		status.Orphans, status.GeneratedRunTemplates, status.Shard = c.orphans, c.records, c.shard
		if len(c.shadows) > 0 {
			status.Resources = slices.Clone(status.Resources) // the walk's stay as the steps left them
			for i := range status.Resources {
				if ref, ok := c.shadows[status.Resources[i].Name]; ok {
					status.Resources[i].ShadowRef = &ref
				}
			}
		}
	}

	if err := r.writeStatus(ctx, obj, l, &status); err != nil { // 5. status
		if apierrors.IsConflict(err) || errors.Is(err, stamp.ErrStaleCopy) {
			// Decided on a stale copy: decide again once the cache has a
			// newer one (fresh.Reads), not on the same copy with backoff.
			return Outcome{Requeue: 50 * time.Millisecond, Wait: true}, nil
		}
		return Outcome{}, err
	}
	r.writesMu.Lock()
	delete(r.deferred, user)
	r.writesMu.Unlock()
	if env.StatusWritten != nil {
		env.StatusWritten(l.chainName, l.prev.Resources, status.Resources)
	}
	recorded(ctx, env, obj, l, &status)
	watches.Done()
	requeue, wait := lookAgain(w.requeue, w.blockerWait, c.sweepLater)
	out := Outcome{Requeue: requeue, Wait: wait, Session: sess, Used: l.used()}
	if l.err != nil {
		return out, l.err
	}
	if w.err != nil {
		return out, w.err
	}
	return out, c.err
}

// lookAgain is when a reconcile's owner is looked at again: the steps'
// requeue, or sooner a look for unrecorded objects in a cache not synced
// yet (sweepLater). It is a wait (loop.Result.Wait: consecutive ones back
// off) when it waits for something to show up, a blocker's watch or that
// cache, so that one that never shows up (a list that hangs) is not looked
// at every second for as long; a step's timer is kept as it is.
func lookAgain(steps time.Duration, blockerWait, sweepLater bool) (time.Duration, bool) {
	if sweepLater && (steps == 0 || steps > sweepRetry) {
		return sweepRetry, true
	}
	return steps, blockerWait && steps == blockerSync
}
