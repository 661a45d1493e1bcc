package reconciler

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/failure"
	"kontinue.dev/kontinue/reconciler/health"
	"kontinue.dev/kontinue/reconciler/runs"
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

// runnableStatus is the status of a Runnable.
type runnableStatus struct {
	ObservedGeneration     int64              `json:"observedGeneration,omitempty"`
	Conditions             []metav1.Condition `json:"conditions,omitempty"`
	Outputs                map[string]any     `json:"outputs,omitempty"`
	LatestRunRef           *runRef            `json:"latestRunRef,omitempty"`
	LatestSuccessfulRunRef *runRef            `json:"latestSuccessfulRunRef,omitempty"`
}

type runRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
}

func refOfRun(u *unstructured.Unstructured) *runRef {
	return &runRef{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
}

// runnableReconciler stamps a new object from a ClusterRunTemplate for each
// new set of inputs of a Runnable and reports the outputs of the newest one
// that succeeded.
type runnableReconciler struct {
	m    *Manager
	ctrl *Controller

	selMu sync.Mutex
	bySel map[tracking.Key]map[Key]struct{} // selector watch → Runnables
	selOf map[Key]tracking.Key              // Runnable → its selector watch
	// Generated ClusterRunTemplates (runnablestep.go): the records of
	// deleted owners, by name, until their objects are gone; owners waiting
	// for a name someone else's object holds; objects logged as unproven.
	doomed      map[string][]doomedRunTemplate
	nameWaiters map[string]map[Key]struct{}
	unproven    map[types.UID]struct{}
	// stale: status writes refused on a stale copy (fresh.go).
	stale staleReads
}

func newRunnableReconciler(m *Manager) *runnableReconciler {
	r := &runnableReconciler{m: m,
		bySel: map[tracking.Key]map[Key]struct{}{}, selOf: map[Key]tracking.Key{},
		doomed: map[string][]doomedRunTemplate{}, nameWaiters: map[string]map[Key]struct{}{}, unproven: map[types.UID]struct{}{}}
	r.ctrl = NewController(api.KindRunnable, ReconcileFunc(r.Reconcile))
	return r
}

// route turns watch events into keys: a Runnable for the Runnable itself,
// its runs (stamped objects labelled with its name, in its namespace) and the
// objects its selector watches; a ClusterRunTemplate for a run template
// (its Runnables are looked up, and a generated one swept, on a worker). It
// never blocks.
func (r *runnableReconciler) route(ev tracking.Event) {
	k := ev.Key
	switch {
	case k == tracking.Key{GVR: RunnableGVR}:
		if ev.Type != tracking.Updated || ownerChanged(ev.Old, ev.Obj) {
			r.ctrl.Enqueue(keyOf(api.KindRunnable, ev.Obj))
		}
	case k == tracking.Key{GVR: RunTemplateGVR}:
		if ev.Type == tracking.Deleted {
			for _, owner := range r.nameFreed(ev.Obj.GetName()) {
				r.m.enqueue(owner) // a step refused the object that held the name
			}
		}
		if ev.Type != tracking.Updated || specOrLabelsChanged(ev.Old, ev.Obj) {
			r.ctrl.Enqueue(keyOf(api.KindClusterRunTemplate, ev.Obj))
		}
	case (k == tracking.Key{GVR: WorkloadGVR} || k == tracking.Key{GVR: DeliverableGVR}) && ev.Type == tracking.Deleted:
		// The owner's last status records what Kontinue generated for it.
		r.ownerDeleted(keyOf(flavorOfOwner(k.GVR).OwnerKind, ev.Obj), recordsOf(ev.Obj))
	case k.Selector == StampedSelector:
		if name := ev.Obj.GetLabels()[LabelRunnableName]; name != "" {
			r.ctrl.Enqueue(Key{Kind: api.KindRunnable, NamespacedName: types.NamespacedName{Namespace: ev.Obj.GetNamespace(), Name: name}})
		}
	}
	r.selMu.Lock()
	var keys []Key
	for key := range r.bySel[k] {
		if ns := ev.Obj.GetNamespace(); ns == "" || key.Namespace == ns {
			keys = append(keys, key)
		}
	}
	r.selMu.Unlock()
	for _, key := range keys {
		r.ctrl.Enqueue(key)
	}
}

// runTemplateChanged enqueues the Runnables that name the run template.
func (r *runnableReconciler) runTemplateChanged(name string) {
	objs, _ := r.m.tracker.List(tracking.Key{GVR: RunnableGVR}, "")
	for _, o := range objs {
		if n, _, _ := unstructured.NestedString(o.Object, "spec", "runTemplateRef", "name"); n == name {
			r.ctrl.Enqueue(keyOf(api.KindRunnable, o))
		}
	}
}

// setSelector records which selector watch a Runnable uses (nil: none).
func (r *runnableReconciler) setSelector(key Key, sel *tracking.Key) {
	r.selMu.Lock()
	defer r.selMu.Unlock()
	if old, ok := r.selOf[key]; ok {
		removeFrom(r.bySel, old, key)
		delete(r.selOf, key)
	}
	if sel != nil {
		addTo(r.bySel, *sel, key)
		r.selOf[key] = *sel
	}
}

// Reconcile realizes one Runnable. A ClusterRunTemplate key wakes the
// Runnables that name it and removes it if a deleted owner recorded it.
func (r *runnableReconciler) Reconcile(ctx context.Context, key Key) (Result, error) {
	switch key.Kind {
	case api.KindClusterRunTemplate:
		r.runTemplateChanged(key.Name)
		return r.sweep(ctx, key.Name)
	case kindServiceAccount:
		r.m.accountChanged(key.Namespace, key.Name)
		return Result{}, nil
	}
	ns, name := key.Namespace, key.Name
	user := key.String()
	obj, synced := r.m.tracker.Get(tracking.Key{GVR: RunnableGVR}, ns, name)
	if !synced {
		return Result{RequeueAfter: time.Second, Wait: true}, nil
	}
	if obj == nil || obj.GetDeletionTimestamp() != nil {
		// Runs carry a controller reference to the Runnable: the garbage
		// collector removes them.
		r.m.tracker.ReleaseAll(user)
		r.setSelector(key, nil)
		r.m.w.ForgetRuns(user)
		r.stale.forget(user)
		r.m.unblockOne(key)
		return Result{}, nil
	}
	if r.stale.behind(user, obj.GetResourceVersion()) {
		return Result{RequeueAfter: 50 * time.Millisecond, Wait: true}, nil
	}
	rp := &runnablePass{ctx: ctx, r: r, obj: obj.DeepCopy(), key: key, user: user, watch: r.m.tracker.Begin(user), w: r.m.w.Session(),
		now: metav1.NewTime(time.Now().Truncate(time.Second))}
	if s, ok := obj.Object["status"].(map[string]any); ok {
		_ = api.Decode(s, &rp.prev)
	}
	runErr := rp.realize()
	if !rp.keepStatus {
		if err := r.writeStatus(ctx, rp); err != nil {
			if apierrors.IsConflict(err) {
				// Decided on a stale copy: decide again once the cache
				// has a newer one (staleReads).
				r.m.statusConflict(api.KindRunnable)
				klog.V(2).InfoS("status write raced; will retry", "runnable", user, "err", err.Error())
				return Result{RequeueAfter: 50 * time.Millisecond, Wait: true}, nil
			}
			return Result{}, err
		}
	}
	rp.watch.Done()
	r.setSelector(key, rp.selKey)
	if blocked := blockCauseOf(rp.w); blocked != 0 {
		r.m.block(key, blocked)
	} else {
		r.m.unblockOne(key)
	}
	if runErr != nil {
		return Result{}, runErr
	}
	return Result{RequeueAfter: rp.requeue, Wait: true}, nil // rp.requeue is always a wait
}

func (r *runnableReconciler) writeStatus(ctx context.Context, rp *runnablePass) error {
	rp.bound()
	read := rp.obj.GetResourceVersion()
	written, err := r.m.w.WriteStatus(ctx, RunnableGVR, rp.obj, rp.status)
	if written != nil || apierrors.IsConflict(err) {
		// The copy read is stale now (this write replaced it, or another
		// had): the next reconcile waits for the cache to show a newer
		// one. A run's event often wakes the Runnable again a moment after
		// its status write, before the cache has it.
		r.stale.note(rp.user, read)
	}
	if apierrors.IsNotFound(err) {
		return nil // deleted meanwhile; its delete event cleans up
	}
	return err
}

// runnablePass is the state of one reconcile of one Runnable.
type runnablePass struct {
	ctx    context.Context
	r      *runnableReconciler
	obj    *unstructured.Unstructured
	key    Key
	user   string
	spec   api.RunnableSpec
	crit   *api.TemplateSpec // the run template's success rule (nil: Succeeded)
	now    metav1.Time
	prev   runnableStatus
	status runnableStatus

	watch      *tracking.Handle // the watches this reconcile used
	selKey     *tracking.Key
	w          *stamp.Session // every write; what blocks the Runnable (blockCauseOf)
	requeue    time.Duration
	keepStatus bool // a cache is still syncing: decide nothing, write nothing
}

// setStatus fills the status from the RunTemplateReady condition and the
// StampedObjectCondition (nil: the previous one, or NoStampedObject).
func (rp *runnablePass) setStatus(rtReady metav1.Condition, stamped *metav1.Condition) {
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
func (rp *runnablePass) bound() {
	if rp.status.Outputs == nil {
		return
	}
	rest := make(map[string]any, len(rp.obj.Object))
	for k, v := range rp.obj.Object {
		if k != "status" {
			rest[k] = v
		}
	}
	b, _ := json.Marshal(rest)
	free := st.ObjectLimit - len(b) - statusMargin
	whole, _ := json.Marshal(rp.status)
	if len(whole) <= free {
		return
	}
	out, _ := json.Marshal(rp.status.Outputs)
	rp.status.Outputs = nil
	run := "its runs"
	if ref := rp.status.LatestSuccessfulRunRef; ref != nil {
		run = "run [" + ref.Name + "]"
	}
	stamped := st.Find(rp.status.Conditions, CondStampedObject)
	rp.setStatus(st.Cond(CondRunTemplateReady, st.False, ReasonOutputsTooLarge,
		fmt.Sprintf("%s: the outputs of %s take %d KiB, more than the %d KiB its status can hold; they are not written", rp.what(), run, (len(out)+1023)/1024, max(free, 0)/1024)), stamped)
}

// fail records why the Runnable cannot stamp: outputs and run references
// stay as they were, so consumers keep the last good values.
func (rp *runnablePass) fail(reason, format string, args ...any) {
	rp.status.Outputs = rp.prev.Outputs
	rp.status.LatestRunRef = rp.prev.LatestRunRef
	rp.status.LatestSuccessfulRunRef = rp.prev.LatestSuccessfulRunRef
	rp.setStatus(st.Cond(CondRunTemplateReady, st.False, reason, fmt.Sprintf(format, args...)), nil)
}

func (rp *runnablePass) what() string { return runnableWhat(rp.obj) }

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
func (rp *runnablePass) failed(f failure.Condition, r failure.Reasons) error {
	c := f.Cond(CondRunTemplateReady, r)
	rp.fail(c.Reason, "%s", c.Message)
	return f.Retry
}

// subject names a call made for the Runnable, as its service account, for
// failure's messages.
func (rp *runnablePass) subject(verb, what, home string) failure.Subject {
	return failure.Subject{Verb: verb, What: what, Account: rp.obj.GetNamespace() + "/" + rp.serviceAccount(), Home: home}
}

// realize loads what the Runnable's decisions need (runnableplan.go) and
// executes them: create a run for a new input set, fill the status from the
// runs, delete what retention lets go. The error is transient (retry with
// backoff); everything else ends as a condition and waits for an event.
func (rp *runnablePass) realize() error {
	// Load: the spec, the run template, the selected object.
	if s, ok := rp.obj.Object["spec"]; ok {
		if err := api.Decode(s, &rp.spec); err != nil {
			rp.fail(ReasonRunnableInvalidSpec, "cannot read the spec of %s: %v", rp.what(), err)
			return nil
		}
	}
	// Nothing is written, listed or selected as an account that does not
	// exist; its creation wakes the Runnable (Manager.accountChanged).
	if ns, sa := rp.obj.GetNamespace(), rp.serviceAccount(); !rp.r.m.accountExists(ns, sa) {
		msg := stamp.NotFoundMessage(ns, sa)
		if p := st.Find(rp.prev.Conditions, CondRunTemplateReady); p == nil || p.Reason != step.ReasonServiceAccountError || p.Message != msg {
			klog.InfoS("service account not found: nothing is written as it until it exists", "runnable", rp.user, "serviceAccount", ns+"/"+sa)
		}
		rp.fail(step.ReasonServiceAccountError, "%s", msg)
		return nil
	}
	tmplName := rp.spec.RunTemplateRef.Name
	if k := rp.spec.RunTemplateRef.Kind; k != "" && k != api.KindClusterRunTemplate {
		rp.fail(ReasonRunnableInvalidSpec, "%s: spec.runTemplateRef.kind must be %s, not [%s]", rp.what(), api.KindClusterRunTemplate, k)
		return nil
	}
	tobj, _ := rp.r.m.tracker.Get(tracking.Key{GVR: RunTemplateGVR}, "", tmplName)
	if tobj == nil {
		rp.fail(ReasonRunTemplateNotFound, "ClusterRunTemplate [%s] named by %s not found", tmplName, rp.what())
		return nil
	}
	var rt api.RunTemplateSpec
	if err := api.Decode(tobj.Object["spec"], &rt); err != nil || rt.Template == nil {
		if err == nil {
			err = fmt.Errorf("spec.template is empty")
		}
		rp.fail(step.ReasonStampFailure, "ClusterRunTemplate [%s] is invalid: %v", tmplName, err)
		return nil
	}
	rp.crit = rt.Criterion()
	if err := health.Validate(rp.crit, api.KindClusterRunTemplate); err != nil {
		rp.fail(step.ReasonStampFailure, "ClusterRunTemplate [%s] is invalid: %v", tmplName, err)
		return nil
	}
	var selected *unstructured.Unstructured
	if rp.spec.Selector != nil {
		var err error
		if selected, err = rp.selected(); selected == nil {
			return err
		}
	}

	// Plan the run; load its kind and the runs.
	run, digest, no := stampRun(rp.ctx, rp.obj, rt, tmplName, selected)
	if no != nil {
		rp.fail(no.reason, "%s", no.message)
		return nil
	}
	gvk := run.GroupVersionKind()
	tg, err := rp.w.Resolve(gvk)
	if f := failure.Kind(rp.subject("stamp", fmt.Sprintf("object for %s from ClusterRunTemplate [%s]", rp.what(), tmplName), "runs are created in the Runnable's namespace"), gvk.Kind, tg.Namespaced, err); f != nil {
		return rp.failed(*f, runReasons)
	}
	key := tg.Watch()
	if !rp.watch.Watch(key) {
		rp.keepStatus, rp.requeue = true, 200*time.Millisecond
		return nil
	}
	list, pending, err := rp.w.LoadRuns(rp.ctx, rp.runs(key, digest))
	if err != nil {
		return err
	}
	rp.judge(list)

	// Execute.
	switch runs.Decide(list, digest, pending) {
	case runs.Wait:
		// Created a moment ago; the cache has not shown it yet.
		rp.keepStatus, rp.requeue = true, runs.PendingWait
		return nil
	case runs.Create:
		created, err := rp.create(run, tg.GVR, digest, tmplName)
		if created == nil {
			return err
		}
		list = append([]runs.Run{runs.FromObject(created, runOutcome(rp.crit, created))}, list...)
	}
	status, rtReady, stamped := runsStatus(rp.prev, list, rt.Outputs, rp.crit, tmplName)
	rp.status.Outputs, rp.status.LatestRunRef, rp.status.LatestSuccessfulRunRef = status.Outputs, status.LatestRunRef, status.LatestSuccessfulRunRef
	rp.setStatus(rtReady, stamped)
	return rp.prune(tg.GVR, runs.Prune(list, runs.PolicyOf(rp.spec.RetentionPolicy)))
}

// selected loads the one object the Runnable's selector matches, or nil
// (the status says why, or a cache is still syncing) and the error to
// retry.
func (rp *runnablePass) selected() (*unstructured.Unstructured, error) {
	s := rp.spec.Selector
	ns := rp.obj.GetNamespace()
	gv, err := schema.ParseGroupVersion(s.Resource.APIVersion)
	if err != nil || s.Resource.Kind == "" {
		rp.fail(ReasonRunnableInvalidSpec, "%s: spec.selector.resource [%s %s] is not a valid apiVersion and kind", rp.what(), s.Resource.APIVersion, s.Resource.Kind)
		return nil, nil
	}
	gvk := gv.WithKind(s.Resource.Kind)
	tg, err := rp.w.Resolve(gvk)
	if f := failure.Kind(rp.subject("select", fmt.Sprintf("%s for %s (spec.selector)", gvk.Kind, rp.what()), "a Runnable selects only objects of its own namespace"), gvk.Kind, tg.Namespaced, err); f != nil {
		return nil, rp.failed(*f, selectReasons)
	}
	ls, err := labels.ValidatedSelectorFromSet(s.MatchingLabels)
	if err != nil {
		rp.fail(ReasonRunnableInvalidSpec, "%s: spec.selector.matchingLabels: %v", rp.what(), err)
		return nil, nil
	}
	// The selection sees what the Runnable's service account may list in
	// its namespace, and nothing else: the watch lists as that account,
	// in that namespace only. Kontinue's own rights never widen it.
	sa := rp.serviceAccount()
	key := tracking.Key{GVR: tg.GVR, Selector: ls.String(), Namespace: ns, As: ns + "/" + sa}
	synced := rp.watch.Glance(key)
	if err := rp.r.m.tracker.Err(key); err != nil && failure.Classify(err) == failure.Forbidden {
		// Not kept: the watch stops at the end of this reconcile (its
		// cache, if any, is not used), and RBAC news brings the Runnable
		// back with a new one.
		_ = rp.w.Note(err)
		rp.fail(ReasonSelectorMatchError, "%s: service account [%s/%s] may not list %s in namespace [%s]; spec.selector sees only what it may read", rp.what(), ns, sa, tg.GVR.Resource, ns)
		return nil, nil
	}
	if !synced {
		rp.watch.Watch(key)
		rp.selKey = &key
		rp.keepStatus, rp.requeue = true, 200*time.Millisecond
		return nil, nil
	}
	rp.watch.Watch(key)
	rp.selKey = &key
	objs, _ := rp.r.m.tracker.List(key, ns)
	sel, no := selectOne(rp.obj, gvk.Kind, ls, objs)
	if no != nil {
		rp.fail(no.reason, "%s", no.message)
	}
	return sel, nil
}

// runs finds this Runnable's runs: those labelled with its name whose
// controller is this very Runnable (by UID), so that a Runnable deleted and
// created again does not adopt old runs.
func (rp *runnablePass) runs(key tracking.Key, digest string) stamp.RunQuery {
	return stamp.RunQuery{Kind: key, Watch: rp.watch.Watch, Namespace: rp.obj.GetNamespace(), Controller: rp.obj.GetUID(), Current: digest, Memo: rp.user,
		Labels: labels.Set{LabelRunnableName: rp.obj.GetName()}}
}

// judge sets the Outcome of every run by the run template's criterion.
func (rp *runnablePass) judge(list []runs.Run) {
	for i := range list {
		list[i].Outcome = runOutcome(rp.crit, list[i].Obj)
	}
}

func (rp *runnablePass) serviceAccount() string {
	if rp.spec.ServiceAccountName != "" {
		return rp.spec.ServiceAccountName
	}
	return "default"
}

// create creates a run (stampRun) as the Runnable's service account. On
// failure it records the condition and returns nil (and an error when
// retrying helps).
func (rp *runnablePass) create(run *unstructured.Unstructured, gvr schema.GroupVersionResource, digest, tmplName string) (*unstructured.Unstructured, error) {
	ns := rp.obj.GetNamespace()
	sa := rp.serviceAccount()
	what := fmt.Sprintf("%s for %s from ClusterRunTemplate [%s]", run.GetKind(), rp.what(), tmplName)
	cl, err := rp.r.m.clients.For(ns, sa)
	if err != nil {
		return nil, rp.failed(failure.Client(err), runReasons)
	}
	created, err := rp.w.CreateRun(rp.ctx, stamp.For{Client: cl, Owner: rp.obj}, gvr, run, digest, rp.user)
	if err != nil {
		return nil, rp.failed(failure.Write(rp.subject("create", what, ""), run.GetName(), err), runReasons)
	}
	return created, nil
}

// prune deletes the finished runs retention lets go. A forbidden deletion
// is not returned (retrying cannot help until RBAC changes): the Session
// notes it.
func (rp *runnablePass) prune(gvr schema.GroupVersionResource, doomed []runs.Run) error {
	if len(doomed) == 0 {
		return nil
	}
	ns, sa := rp.obj.GetNamespace(), rp.serviceAccount()
	cl, err := rp.r.m.clients.For(ns, sa)
	if err != nil {
		return err
	}
	_, err = rp.w.RemoveRuns(rp.ctx, cl, gvr, doomed, rp.obj, ns+"/"+sa, "(retention policy)")
	return err
}
