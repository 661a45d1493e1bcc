// Package runnable is the Runnable reconciler: load (the spec, the run
// template, the selected object, the runs) → decide (plan.go: the selected
// object, the run stamped, runs.Decide, the status the runs give) → execute
// through a stamp.Session (stamp's run protocol, retention) → status. The
// Manager routes its events and wires it (Env).
package runnable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/failure"
	"kontinue.dev/kontinue/reconciler/fresh"
	"kontinue.dev/kontinue/reconciler/jsonvalue"
	"kontinue.dev/kontinue/reconciler/stamp"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/step"
	"kontinue.dev/kontinue/tracking"
)

// Runnable condition types and reasons (the contract's; Cartographer's
// names where it has them).
const (
	CondRunTemplateReady   = step.CondRunTemplateReady
	CondStampedObject      = step.CondStampedObject
	ReasonRunTemplateFound = "Ready"

	ReasonRunnableInvalidSpec     = "InvalidSpec"
	ReasonRunTemplateNotFound     = "RunTemplateNotFound"
	ReasonSelectorMatchError      = "SelectorMatchError"
	ReasonStampedObjectRejected   = "StampedObjectRejectedByAPIServer"
	ReasonOutputPathNotSatisfied  = "OutputPathNotSatisfied"
	ReasonSucceededCondition      = "SucceededCondition"
	ReasonSucceededNotReported    = "SucceededConditionNotReported"
	ReasonNoStampedObjectRunnable = "NoStampedObject"
	ReasonOutputsTooLarge         = "OutputsTooLarge"
)

// Status is the status of a Runnable (a status type, as the CRD's schema is
// generated from reconciler/status).
type Status = st.RunnableStatus

type runRef = st.RunRef

func refOfRun(u *unstructured.Unstructured) *runRef {
	return &runRef{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
}

// Env is what a Runnable's reconcile needs of the Manager: the caches, the
// writer, the clients of service accounts, which accounts exist, and a
// hook told of a status write refused as a conflict (metrics).
type Env struct {
	Tracker        *tracking.Tracker
	Writer         *stamp.Writer
	Clients        *stamp.Clients
	AccountExists  func(namespace, name string) bool
	StatusConflict func()
	// TraceContext passes a Runnable's trace context
	// (api.AnnotationTraceParent, as its owner's step put it there) on to
	// the runs it creates.
	TraceContext bool
}

// Reconciler stamps a new object from a ClusterRunTemplate for each new
// set of inputs of a Runnable and reports the outputs of the newest one
// that succeeded. Routing its events, and which watches wake it, is the
// Manager's.
type Reconciler struct {
	env Env
	// stale: status writes refused on a stale copy.
	stale fresh.Reads
}

// New returns a Reconciler working through env.
func New(env Env) *Reconciler { return &Reconciler{env: env} }

// Outcome is how one reconcile of a Runnable ended.
type Outcome struct {
	// Requeue > 0: look again after it; always a wait for something to
	// show up (a cache, a run just created).
	Requeue time.Duration
	// Gone: the Runnable is deleted; its watches are released.
	Gone bool
	// Session is set when the reconcile ran to its end: what it saw
	// decides whether the Runnable waits for RBAC or discovery news.
	Session *stamp.Session
	// Selector is the watch of the objects its selector matches (nil:
	// none); set with Session.
	Selector *tracking.Key
}

// Reconcile realizes the Runnable namespace/name: load → decide → execute
// (pass.realize) → status. user names it to the tracker and the writer.
func (r *Reconciler) Reconcile(ctx context.Context, namespace, name, user string) (Outcome, error) {
	obj, synced := r.env.Tracker.Get(tracking.Key{GVR: api.RunnableGVR}, namespace, name)
	if !synced {
		return Outcome{Requeue: time.Second}, nil
	}
	if obj == nil || obj.GetDeletionTimestamp() != nil {
		// Runs carry a controller reference to the Runnable: the garbage
		// collector removes them.
		r.env.Tracker.ReleaseAll(user)
		r.env.Writer.ForgetRuns(user)
		r.stale.Forget(user)
		return Outcome{Gone: true}, nil
	}
	if r.stale.Behind(user, obj.GetResourceVersion()) {
		return Outcome{Requeue: 50 * time.Millisecond}, nil
	}
	rp := &pass{ctx: ctx, r: r, obj: obj.DeepCopy(), user: user, watch: r.env.Tracker.Begin(user), w: r.env.Writer.Session(),
		now: metav1.NewTime(time.Now().Truncate(time.Second))}
	if s, ok := obj.Object["status"].(map[string]any); ok {
		_ = api.Decode(s, &rp.prev)
	}
	runErr := rp.realize()
	if !rp.keepStatus {
		if err := r.writeStatus(ctx, rp); err != nil {
			if errors.Is(err, stamp.ErrStaleCopy) {
				return Outcome{Requeue: 50 * time.Millisecond}, nil
			}
			if apierrors.IsConflict(err) {
				// Decided on a stale copy: decide again once the cache
				// has a newer one (fresh.Reads).
				if r.env.StatusConflict != nil {
					r.env.StatusConflict()
				}
				klog.V(2).InfoS("status write raced; will retry", "runnable", user, "err", err.Error())
				return Outcome{Requeue: 50 * time.Millisecond}, nil
			}
			return Outcome{}, err
		}
	}
	rp.watch.Done()
	return Outcome{Requeue: rp.requeue, Session: rp.w, Selector: rp.selKey}, runErr
}

func (r *Reconciler) writeStatus(ctx context.Context, rp *pass) error {
	rp.bound()
	read := rp.obj.GetResourceVersion()
	// Not on a copy the cache has replaced (the owner applied a new spec,
	// a run's outputs came in): stamp.ErrStaleCopy.
	written, err := r.env.Writer.WriteStatus(ctx, api.RunnableGVR, rp.obj, rp.status, r.env.Tracker)
	if written != nil || apierrors.IsConflict(err) {
		// The copy read is stale now (this write replaced it, or another
		// had): the next reconcile waits for the cache to show a newer
		// one. A run's event often wakes the Runnable again a moment after
		// its status write, before the cache has it.
		r.stale.Note(rp.user, read)
	}
	if apierrors.IsNotFound(err) {
		return nil // deleted meanwhile; its delete event cleans up
	}
	return err
}

// pass is the state of one reconcile of one Runnable.
type pass struct {
	ctx    context.Context
	r      *Reconciler
	obj    *unstructured.Unstructured
	user   string
	spec   api.RunnableSpec
	crit   *api.TemplateSpec // the run template's success rule (nil: Succeeded)
	now    metav1.Time
	prev   Status
	status Status

	watch      *tracking.Handle // the watches this reconcile used
	selKey     *tracking.Key
	w          *stamp.Session // every write; what blocks the Runnable (blocked.CauseOf)
	requeue    time.Duration
	keepStatus bool // a cache is still syncing: decide nothing, write nothing
}

// setStatus fills the status from the RunTemplateReady condition and the
// StampedObjectCondition (nil: the previous one, or NoStampedObject).
func (rp *pass) setStatus(rtReady metav1.Condition, stamped *metav1.Condition) {
	if stamped == nil {
		if p := st.Find(rp.prev.Conditions, CondStampedObject); p != nil {
			c := st.Cond(CondStampedObject, p.Status, p.Reason, p.Message)
			stamped = &c
		} else {
			c := st.Cond(CondStampedObject, st.Unknown, ReasonNoStampedObjectRunnable, "no object has been stamped yet")
			stamped = &c
		}
	}
	ready := st.Summarize(st.Ready, "Ready", rtReady, *stamped)
	rp.status.ObservedGeneration = rp.obj.GetGeneration()
	rp.status.Conditions = st.Merge([]metav1.Condition{rtReady, *stamped, ready}, rp.prev.Conditions, rp.obj.GetGeneration(), rp.now)
}

// bound keeps the status within what the API server takes for the
// Runnable: outputs that would not fit are not written (a value is there
// whole or not at all) and RunTemplateReady says so; whoever reads them
// waits as for a run without outputs. A status that fails to write would
// leave the Runnable stale for good.
func (rp *pass) bound() {
	if rp.status.Outputs == nil {
		return
	}
	run := "its runs"
	if ref := rp.status.LatestSuccessfulRunRef; ref != nil {
		run = "run [" + ref.Name + "]"
	}
	if st.TooDeep(rp.status.Outputs) {
		rp.status.Outputs = nil
		stamped := st.Find(rp.status.Conditions, CondStampedObject)
		rp.setStatus(st.Cond(CondRunTemplateReady, st.False, ReasonOutputsTooLarge,
			fmt.Sprintf("%s: the outputs of %s are nested deeper than the %d levels Kontinue writes; they are not written", rp.what(), run, jsonvalue.MaxDepth)), stamped)
		return
	}
	free := st.Free(rp.obj.Object)
	whole, _ := json.Marshal(rp.status)
	if len(whole) <= free {
		return
	}
	out, _ := json.Marshal(rp.status.Outputs)
	rp.status.Outputs = nil
	stamped := st.Find(rp.status.Conditions, CondStampedObject)
	rp.setStatus(st.Cond(CondRunTemplateReady, st.False, ReasonOutputsTooLarge,
		fmt.Sprintf("%s: the outputs of %s take %d KiB, more than the %d KiB its status can hold; they are not written", rp.what(), run, (len(out)+1023)/1024, max(free, 0)/1024)), stamped)
}

// fail records why the Runnable cannot stamp: outputs and run references
// stay as they were, so consumers keep the last good values.
func (rp *pass) fail(reason, format string, args ...any) {
	rp.status.Outputs = rp.prev.Outputs
	rp.status.LatestRunRef = rp.prev.LatestRunRef
	rp.status.LatestSuccessfulRunRef = rp.prev.LatestSuccessfulRunRef
	rp.setStatus(st.Cond(CondRunTemplateReady, st.False, reason, fmt.Sprintf(format, args...)), nil)
}

func (rp *pass) what() string { return runnableWhat(rp.obj) }

// runReasons name a failed write of a run (RunTemplateReady);
// selectReasons a selector whose kind cannot be selected.
var (
	runReasons = failure.Reasons{Unknown: step.ReasonUnknownError, Refused: ReasonStampedObjectRejected,
		Account: step.ReasonServiceAccountError, NameTaken: ReasonStampedObjectRejected, Scope: step.ReasonStampFailure,
		Taken: ReasonStampedObjectRejected}
	selectReasons = failure.Reasons{Unknown: step.ReasonUnknownError, Refused: ReasonSelectorMatchError,
		Account: step.ReasonServiceAccountError, Scope: ReasonRunnableInvalidSpec}
)

// failed records f, its reason named by r, and returns the error to retry.
func (rp *pass) failed(f failure.Condition, r failure.Reasons) error {
	c := f.Cond(CondRunTemplateReady, r)
	rp.fail(c.Reason, "%s", c.Message)
	return f.Retry
}

// subject names a call made for the Runnable, as its service account, for
// failure's messages.
func (rp *pass) subject(verb, what, home string) failure.Subject {
	return failure.Subject{Verb: verb, What: what, Account: rp.obj.GetNamespace() + "/" + rp.serviceAccount(), Home: home}
}
