package owner

// The port between deciding and doing for an owner's reconcile: the step
// writers (mutable.go, immutable.go, runnablestep.go), the Helm release
// (helm.go) and the cleanup stage (cleanup.go) read and write only through
// an ownerIO, and a step's failure comes back to the executor as a stepFail
// (execute.go builds the step's status from it).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/failure"
	"kontinue.dev/kontinue/reconciler/runs"
	"kontinue.dev/kontinue/reconciler/stamp"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/step"
	"kontinue.dev/kontinue/tracking"
)

// ownerIO is what the writing stages may do for one owner's reconcile: read
// and write through its stamp Session as its service account (or, for
// what is Kontinue's own, as Kontinue), read the caches, watch, and note
// the refs they touched (keepSet). It is all they see of the reconcile.
type ownerIO struct {
	ctx     context.Context
	w       stamper
	cache   cache       // the caches (tracking.Tracker)
	watch   stamp.Watch // the watches of this reconcile (tracking.Handle.Watch)
	glance  stamp.Watch // a look at a kind that keeps no watch (tracking.Handle.Glance)
	keep    *keepSet
	owner   *unstructured.Unstructured // events, the controller reference
	claim   stamp.Owner
	account api.ServiceAccountRef
	client  func() (dynamic.Interface, error) // as the service account
	// kontinue is Kontinue's own identity: the generated ClusterRunTemplates
	// (runnablestep.go), a read of an object no cache of this shard holds.
	kontinue dynamic.Interface
	user     string       // the owner, for logs and the memory of runs just created
	labels   labels.Set   // what every object stamped for the owner carries
	steps    *stepObjects // which step stamps which object (claims.go)
	records  *records     // the owner's records of generated ClusterRunTemplates (generated.go)
	// waitForName is told that a step refused the object holding a
	// generated ClusterRunTemplate name: the owner is woken when it goes.
	waitForName func(name string)
}

// stamper is what the writing stages do through stamp: a *stamp.Session,
// the write protocol's side of the port (tests: a fake).
type stamper interface {
	Resolve(gvk schema.GroupVersionKind) (stamp.Target, error)
	Put(ctx context.Context, f stamp.For, t stamp.Target, watch stamp.Watch, desired *unstructured.Unstructured) (*unstructured.Unstructured, bool, error)
	Live(ctx context.Context, key tracking.Key, watch stamp.Watch, namespace, name string) (*unstructured.Unstructured, error)
	Read(ctx context.Context, cl dynamic.Interface, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error)
	Create(ctx context.Context, f stamp.For, gvr schema.GroupVersionResource, desired *unstructured.Unstructured) (*unstructured.Unstructured, error)
	ApplyTo(ctx context.Context, f stamp.For, gvr schema.GroupVersionResource, desired, live *unstructured.Unstructured) (*unstructured.Unstructured, error)
	Remove(ctx context.Context, cl dynamic.Interface, gvr schema.GroupVersionResource, obj, owner *unstructured.Unstructured, account, why string) error
	LoadRuns(ctx context.Context, q stamp.RunQuery) ([]runs.Run, bool, error)
	ListRuns(ctx context.Context, q stamp.RunQuery) ([]runs.Run, error)
	CreateRun(ctx context.Context, f stamp.For, gvr schema.GroupVersionResource, run *unstructured.Unstructured, digest, memo string) (*unstructured.Unstructured, error)
	RemoveRuns(ctx context.Context, cl dynamic.Interface, gvr schema.GroupVersionResource, doomed []runs.Run, owner *unstructured.Unstructured, account, why string) (bool, error)
	// AdoptMoved: objects an owner that moved shard left in others (stamp/shard.go).
	AdoptMoved(ctx context.Context, cl func() (dynamic.Interface, error), gvr schema.GroupVersionResource, namespace string, owner labels.Set, controller types.UID) (int, error)
	// Record and KeepRecord: a record such as a Helm release (stamp/records.go).
	Record(cached *unstructured.Unstructured, namespace, name string) *unstructured.Unstructured
	KeepRecord(ctx context.Context, cl dynamic.Interface, secret *unstructured.Unstructured, uid types.UID) error
}

// cache is what the port reads of the caches (a *tracking.Tracker).
type cache interface {
	Get(k tracking.Key, namespace, name string) (*unstructured.Unstructured, bool)
	ListControlledBy(k tracking.Key, uid types.UID) ([]*unstructured.Unstructured, bool)
	Err(k tracking.Key) error
}

// newOwnerIO is the port of one owner's reconcile, after load: its stamp
// Session w, its watches h, what removal must leave alone (keep: what the
// previous status points at, to start with) and, when the steps run, which
// step stamps which object.
func newOwnerIO(ctx context.Context, env *Env, l *loaded, w *stamp.Session, h *tracking.Handle) *ownerIO {
	f, ns, name := env.Flavor, l.owner.GetNamespace(), l.owner.GetName()
	sa := l.account()
	x := &ownerIO{ctx: ctx, w: w, cache: env.Tracker, watch: h.Watch, glance: h.Glance, keep: newKeepSet(), owner: l.owner,
		claim: stamp.Owner{Kind: f.OwnerKind, Name: name, UID: l.owner.GetUID()}, account: sa,
		client: func() (dynamic.Interface, error) { return env.Clients.For(sa.Namespace, sa.Name) }, kontinue: env.Dynamic,
		user: l.user, labels: labels.Set{api.StampedLabel: "true", f.LabelOwnerName: name, f.LabelOwnerNS: ns},
		records: &records{prev: l.prev, list: slices.Clone(l.status.GeneratedRunTemplates)}}
	for _, res := range l.prev.Resources {
		x.keep.resource(res)
	}
	if l.walk {
		x.steps = newStepObjects(l.defs.spec.Resources, env.left, l.owner.GetUID())
	}
	if env.WaitForName != nil {
		x.waitForName = func(gen string) { env.WaitForName(gen, ns, name) }
	}
	return x
}

// stepFail ends a step: a read or write failed and cond says why; err is
// transient (retry with backoff), requeue a look again soon.
type stepFail struct {
	cond    metav1.Condition
	err     error
	requeue time.Duration
}

// failed is the stepFail of a failed call.
func failed(f failure.Condition) *stepFail {
	return &stepFail{cond: f.Cond(st.ResourceSubmitted, step.Reasons), err: f.Retry}
}

// target is where one desired object goes.
type target struct {
	gvr  schema.GroupVersionResource
	key  tracking.Key
	ref  st.StampedRef
	what string // for messages
}

// resolve maps a desired object to its resource, refuses cluster-scoped
// kinds, and registers the watch and the ref (so that a step that holds or
// fails never loses track of its object). verb and what name the write in
// messages.
func (x *ownerIO) resolve(desired *unstructured.Unstructured, verb, what string) (target, *stepFail) {
	gvk := desired.GroupVersionKind()
	tg, err := x.w.Resolve(gvk)
	if f := failure.Kind(x.subject(verb, what), gvk.Kind, tg.Namespaced, err); f != nil {
		return target{}, failed(*f)
	}
	t := target{gvr: tg.GVR, key: tg.Watch(), what: what}
	t.ref = st.StampedRef{APIVersion: desired.GetAPIVersion(), Kind: desired.GetKind(), Namespace: desired.GetNamespace(), Name: desired.GetName(), Resource: resourceString(t.gvr)}
	x.watch(t.key)
	return t, nil
}

// resolveObject is resolve for an object applied in place, whose ref the
// owner keeps.
func (x *ownerIO) resolveObject(sc *stepCtx, desired *unstructured.Unstructured) (target, *stepFail) {
	what := fmt.Sprintf("%s [%s] for step [%s] from template [%s/%s]", desired.GetKind(), desired.GetName(), sc.step.Name, sc.kind, sc.tmplName)
	t, fail := x.resolve(desired, "apply", what)
	if fail == nil {
		x.keep.ref(t.ref)
		x.keep.want(t.ref)
		x.steps.resolved(sc.step.Name, t.ref)
	}
	return t, fail
}

// riders are what an object of a step is written with besides itself: the
// trace context, the provenance id of its input set and a deployment's
// inputs ("": none).
type riders struct{ trace, set, inputs string }

// ridersOf are the riders of what step sc writes for o.
func ridersOf(sc *stepCtx, o step.Observed) riders {
	return riders{sc.traceParent, step.SetID(o), step.DeploymentRider(o)}
}

// put writes one object (stamp.Session.Put) for the step, with riders r,
// and reports whether it was written. looksAgain: the step looks at the
// object again at its next event, the write's own included (stamp.For).
func (x *ownerIO) put(stepName string, r riders, t target, desired *unstructured.Unstructured, looksAgain bool) (*unstructured.Unstructured, bool, *stepFail) {
	cl, err := x.client()
	if err != nil {
		return nil, false, failed(failure.Client(err))
	}
	x.steps.resolved(stepName, t.ref)
	f := stamp.For{Client: cl, Owner: x.owner, Claim: x.claim, Step: stepName, Holds: x.steps.holds(t.ref),
		TraceParent: r.trace, InputSet: r.set, DeploymentInputs: r.inputs, LooksAgain: looksAgain}
	live, wrote, err := x.w.Put(x.ctx, f, stamp.Target{GVR: t.gvr, Namespaced: true}, x.watch, desired)
	if err != nil {
		if failure.Classify(err) == failure.NotOwned {
			x.refused(t, desired, err)
		}
		sf := failed(failure.Write(x.subject("apply", t.what), desired.GetName(), err))
		if fight := (*stamp.Fight)(nil); errors.As(err, &fight) {
			// Nothing may wake the step when the hold ends: look again then.
			sf.requeue = time.Until(fight.Until) + time.Second
		}
		return nil, false, sf
	}
	return live, wrote, nil
}

// blocker is the watch of the one object namespace/name of gvr that
// refused a write (refused).
func blocker(gvr schema.GroupVersionResource, namespace, name string) tracking.Key {
	return tracking.Key{GVR: gvr, Namespace: namespace, Name: name}
}

// refused keeps the owner informed of the object that refused a write:
// while the refusal stands (each reconcile that is refused again asks
// again; the first that is not lets the watch go, tracking.Handle.Done),
// the object is watched by its name (tracking.Key.Name, slim: names and
// versions only), and its removal or change (a person's kontinue.dev/adopt-by)
// wakes the owner within the watch's latency (route.go, blockerChanged).
// The cost is one watch per refused object for as long as it is refused:
// a LIST of one object when it starts, then an idle watch stream, and
// nothing when nothing changes; no timer, whatever the number of
// refusals. Until the watch has synced, the owner looks again (claims.go,
// blockerSync): the object may have gone before its first list.
func (x *ownerIO) refused(t target, desired *unstructured.Unstructured, err error) {
	if held := (*stamp.HeldByStep)(nil); errors.As(err, &held) {
		// Another step of this owner: its writes wake the owner already.
		x.steps.refused(t.ref, held.Step, held.UID, held.Version)
		return
	}
	if !x.watch(blocker(t.gvr, desired.GetNamespace(), desired.GetName())) {
		x.steps.unsynced()
	}
}

// live is the live object (nil: missing), watched for this owner.
func (x *ownerIO) live(key tracking.Key, namespace, name string) (*unstructured.Unstructured, error) {
	return x.w.Live(x.ctx, key, x.watch, namespace, name)
}

// stamps reports whether obj, the object of ref, is what step stamped: its
// controller reference names this owner, and no other step of the owner
// holds it (stamp.Stamps). Only such an object may hold the step or lend
// it health.
func (x *ownerIO) stamps(stepName string, ref st.StampedRef, obj *unstructured.Unstructured) bool {
	return stamp.Stamps(obj, stamp.Claimant{Owner: x.claim, Step: stepName, Holds: x.steps.holds(ref)})
}

// controlledBy reports whether obj's controller reference names uid.
func controlledBy(obj *unstructured.Unstructured, uid types.UID) bool {
	if obj == nil {
		return false
	}
	ref := metav1.GetControllerOfNoCopy(obj)
	return ref != nil && ref.UID == uid
}

// stepRuns finds the step's runs: objects of the kind of key carrying this
// owner's and step's labels, whose controller is this very owner. digest
// is the input set rendered now.
func (x *ownerIO) stepRuns(stepName string, key tracking.Key, digest string) stamp.RunQuery {
	l := labels.Merge(x.labels, labels.Set{api.LabelResourceName: stepName})
	return stamp.RunQuery{Kind: key, Watch: x.watch, Namespace: x.owner.GetNamespace(), Controller: x.owner.GetUID(), Current: digest,
		Memo: x.user + "/" + stepName, Labels: l, Client: x.client}
}

// createRun creates a run of the step as the stamping service account
// (stamp's run protocol), with riders r.
func (x *ownerIO) createRun(q stamp.RunQuery, stepName string, r riders, desired *unstructured.Unstructured, gvr schema.GroupVersionResource, what string) (*unstructured.Unstructured, *stepFail) {
	cl, err := x.client()
	if err != nil {
		return nil, failed(failure.Client(err))
	}
	created, err := x.w.CreateRun(x.ctx, stamp.For{Client: cl, Owner: x.owner, Step: stepName, TraceParent: r.trace, InputSet: r.set}, gvr, desired, q.Current, q.Memo)
	if err != nil {
		return nil, failed(failure.Write(x.subject("create", what), desired.GetName(), err))
	}
	return created, nil
}

// removeRuns deletes the runs retention lets go. A forbidden deletion is
// not returned (retrying cannot help until RBAC changes): the Session
// notes it.
func (x *ownerIO) removeRuns(gvr schema.GroupVersionResource, doomed []runs.Run, why string) error {
	if len(doomed) == 0 {
		return nil
	}
	cl, err := x.client()
	if err != nil {
		return err
	}
	_, err = x.w.RemoveRuns(x.ctx, cl, gvr, doomed, x.owner, x.account.Namespace+"/"+x.account.Name, why)
	return err
}

// remove deletes obj of gvr as the service account, only if it is still
// the object seen (UID precondition); why says so in the event.
func (x *ownerIO) remove(gvr schema.GroupVersionResource, obj *unstructured.Unstructured, why string) error {
	cl, err := x.client()
	if err != nil {
		return err
	}
	return x.w.Remove(x.ctx, cl, gvr, obj, x.owner, x.account.Namespace+"/"+x.account.Name, why)
}

// writeFailed is the stepFail of a failed write of what.
func (x *ownerIO) writeFailed(what string, err error) *stepFail {
	return failed(failure.Write(x.subject("apply", what), "", err))
}

// subject names a write of the owner's for failure's messages.
func (x *ownerIO) subject(verb, what string) failure.Subject {
	return failure.Subject{Verb: verb, What: what, Account: x.account.Namespace + "/" + x.account.Name,
		Home: fmt.Sprintf("stamped objects must live in the %s's namespace", x.claim.Kind)}
}
