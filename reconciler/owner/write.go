package owner

// The port between deciding and doing for an owner's steps: the step
// writers (mutable.go, immutable.go, runnablestep.go) read and write only
// through an ownerIO, never through the reconcile (pass), and a
// failure comes back to the executor as a stepFail (execute.go builds the
// step's status from it).

import (
	"context"
	"errors"
	"fmt"
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

// ownerIO is what a step writer may do for one owner's reconcile: read and
// write through its stamp Session as its service account, watch, and note
// the refs it touched (keepSet). It is all writers see of the reconcile.
type ownerIO struct {
	ctx     context.Context
	w       stamper
	watch   stamp.Watch // the watches of this reconcile (tracking.Handle.Watch)
	keep    *keepSet
	owner   *unstructured.Unstructured // events, the controller reference
	claim   stamp.Owner
	account api.ServiceAccountRef
	client  func() (dynamic.Interface, error)
	user    string       // the owner, for logs and the memory of runs just created
	labels  labels.Set   // what every object stamped for the owner carries
	steps   *stepObjects // which step stamps which object (claims.go)
}

// stamper is what the step writers do through stamp: a *stamp.Session,
// the write protocol's side of the port (tests: a fake).
type stamper interface {
	Resolve(gvk schema.GroupVersionKind) (stamp.Target, error)
	Put(ctx context.Context, f stamp.For, t stamp.Target, watch stamp.Watch, desired *unstructured.Unstructured) (*unstructured.Unstructured, bool, error)
	Live(ctx context.Context, key tracking.Key, watch stamp.Watch, namespace, name string) (*unstructured.Unstructured, error)
	LoadRuns(ctx context.Context, q stamp.RunQuery) ([]runs.Run, bool, error)
	CreateRun(ctx context.Context, f stamp.For, gvr schema.GroupVersionResource, run *unstructured.Unstructured, digest, memo string) (*unstructured.Unstructured, error)
	RemoveRuns(ctx context.Context, cl dynamic.Interface, gvr schema.GroupVersionResource, doomed []runs.Run, owner *unstructured.Unstructured, account, why string) (bool, error)
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
// trace context and the provenance id of its input set ("": none).
type riders struct{ trace, set string }

// ridersOf are the riders of what step sc writes for o.
func ridersOf(sc *stepCtx, o step.Observed) riders { return riders{sc.traceParent, step.SetID(o)} }

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
		TraceParent: r.trace, InputSet: r.set, LooksAgain: looksAgain}
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
		x.steps.refused(t.ref, held.Step)
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

// writeFailed is the stepFail of a failed write of what.
func (x *ownerIO) writeFailed(what string, err error) *stepFail {
	return failed(failure.Write(x.subject("apply", what), "", err))
}

// subject names a write of the owner's for failure's messages.
func (x *ownerIO) subject(verb, what string) failure.Subject {
	return failure.Subject{Verb: verb, What: what, Account: x.account.Namespace + "/" + x.account.Name,
		Home: fmt.Sprintf("stamped objects must live in the %s's namespace", x.claim.Kind)}
}
