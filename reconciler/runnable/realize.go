package runnable

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/annotations"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/failure"
	"kontinue.dev/kontinue/reconciler/health"
	"kontinue.dev/kontinue/reconciler/render"
	"kontinue.dev/kontinue/reconciler/runs"
	"kontinue.dev/kontinue/reconciler/stamp"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/step"
	"kontinue.dev/kontinue/tracking"
)

// realize loads what the Runnable's decisions need (plan.go) and
// executes them: create a run for a new input set, fill the status from the
// runs, delete what retention lets go. The error is transient (retry with
// backoff); everything else ends as a condition and waits for an event.
func (rp *pass) realize() error {
	rp.status.LastHandledRetry = rp.prev.LastHandledRetry
	// Load: the spec, the run template, the selected object.
	if s, ok := rp.obj.Object["spec"]; ok {
		if err := api.Decode(s, &rp.spec); err != nil {
			rp.fail(ReasonRunnableInvalidSpec, "cannot read the spec of %s: %v", rp.what(), err)
			return nil
		}
	}
	// Nothing is written, listed or selected as an account that does not
	// exist; its creation wakes the Runnable (Manager.accountChanged).
	if ns, sa := rp.obj.GetNamespace(), rp.serviceAccount(); !rp.r.env.AccountExists(ns, sa) {
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
	tobj, _ := rp.r.env.Tracker.Get(tracking.Key{GVR: api.RunTemplateGVR}, "", tmplName)
	if tobj == nil {
		rp.fail(ReasonRunTemplateNotFound, "ClusterRunTemplate [%s] named by %s not found", tmplName, rp.what())
		return nil
	}
	var rt api.RunTemplateSpec
	if err := api.Decode(tobj.Object["spec"], &rt); err != nil {
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
	ctx := rp.ctx
	if rp.r.env.Schema != nil {
		ctx = render.WithSchema(ctx, rp.r.env.Schema())
	}
	run, digest, no := stampRun(ctx, rp.obj, rt, tmplName, selected)
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
	q := rp.runs(key, digest)
	if err := rp.adopting(&q, run); err != nil {
		return err
	}
	list, pending, err := rp.w.LoadRuns(rp.ctx, q)
	if adopt := (*stamp.AdoptError)(nil); errors.As(err, &adopt) {
		return rp.failed(failure.Write(rp.subject("take over the runs another controller created of", fmt.Sprintf("%s for %s from ClusterRunTemplate [%s]", run.GetKind(), rp.what(), tmplName), ""), "", err), runReasons)
	}
	if err != nil {
		return err
	}
	rp.judge(list)
	token := retryAsked(rp.obj, rp.prev)
	retry := runs.Retry(list, digest, token)

	// Execute.
	switch runs.Decide(list, digest, pending, retry) {
	case runs.Wait:
		// Created a moment ago; the cache has not shown it yet.
		rp.keepStatus, rp.requeue = true, runs.PendingWait
		return nil
	case runs.Create:
		if retry {
			run = runs.RetryRun(run, token, list[0])
		}
		created, err := rp.create(run, tg.GVR, digest, tmplName)
		if created == nil {
			return err
		}
		list = append([]runs.Run{runs.FromObject(created, runOutcome(rp.crit, created))}, list...)
	}
	// Handled, whatever the runs said: a token asks once.
	rp.status.LastHandledRetry = rp.obj.GetAnnotations()[annotations.Retry]
	status, rtReady, stamped := runsStatus(rp.prev, list, rt.Outputs, rp.crit, tmplName)
	rp.status.Outputs, rp.status.LatestRunRef, rp.status.LatestSuccessfulRunRef = status.Outputs, status.LatestRunRef, status.LatestSuccessfulRunRef
	rp.setStatus(rtReady, stamped)
	return rp.prune(tg.GVR, runs.Prune(list, runs.PolicyOf(rp.spec.RetentionPolicy)))
}

// selected loads the one object the Runnable's selector matches, or nil
// (the status says why, or a cache is still syncing) and the error to
// retry.
func (rp *pass) selected() (*unstructured.Unstructured, error) {
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
	if err := rp.r.env.Tracker.Err(key); err != nil && failure.Classify(err) == failure.Forbidden {
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
	objs, _ := rp.r.env.Tracker.List(key, ns)
	sel, no := selectOne(rp.obj, gvk.Kind, ls, objs)
	if no != nil {
		rp.fail(no.reason, "%s", no.message)
	}
	return sel, nil
}

// runs finds this Runnable's runs: those labelled with its name whose
// controller is this very Runnable (by UID), so that a Runnable deleted and
// created again does not adopt old runs.
func (rp *pass) runs(key tracking.Key, digest string) stamp.RunQuery {
	return stamp.RunQuery{Kind: key, Watch: rp.watch.Watch, Namespace: rp.obj.GetNamespace(), Controller: rp.obj.GetUID(), Current: digest, Memo: rp.user,
		Labels: labels.Set{api.LabelRunnableName: rp.obj.GetName()},
		Client: func() (dynamic.Interface, error) {
			return rp.r.env.Clients.For(rp.obj.GetNamespace(), rp.serviceAccount())
		}}
}

// adopting lets q adopt the runs another controller created for the
// Runnable (stamp/foreign.go): those of run, rendered now, created as its
// account with the riders create gives; its status names its newest run.
func (rp *pass) adopting(q *stamp.RunQuery, run *unstructured.Unstructured) error {
	cl, err := rp.r.env.Clients.For(rp.obj.GetNamespace(), rp.serviceAccount())
	if err != nil {
		return rp.failed(failure.Client(err), runReasons)
	}
	f := stamp.For{Client: cl, Owner: rp.obj}
	if rp.r.env.TraceContext {
		f.TraceParent = runTraceParent(rp.obj)
	}
	q.Adopt = &stamp.Adoption{For: f, Desired: run}
	if rp.prev.LatestRunRef != nil {
		q.Recorded = rp.prev.LatestRunRef.Name
	}
	return nil
}

// judge sets the Outcome of every run by the run template's criterion.
func (rp *pass) judge(list []runs.Run) {
	for i := range list {
		list[i].Outcome = runOutcome(rp.crit, list[i].Obj)
	}
}

func (rp *pass) serviceAccount() string {
	if rp.spec.ServiceAccountName != "" {
		return rp.spec.ServiceAccountName
	}
	return "default"
}

// create creates a run (stampRun) as the Runnable's service account. On
// failure it records the condition and returns nil (and an error when
// retrying helps).
func (rp *pass) create(run *unstructured.Unstructured, gvr schema.GroupVersionResource, digest, tmplName string) (*unstructured.Unstructured, error) {
	ns := rp.obj.GetNamespace()
	sa := rp.serviceAccount()
	what := fmt.Sprintf("%s for %s from ClusterRunTemplate [%s]", run.GetKind(), rp.what(), tmplName)
	cl, err := rp.r.env.Clients.For(ns, sa)
	if err != nil {
		return nil, rp.failed(failure.Client(err), runReasons)
	}
	f := stamp.For{Client: cl, Owner: rp.obj}
	if rp.r.env.TraceContext {
		f.TraceParent = runTraceParent(rp.obj)
	}
	created, err := rp.w.CreateRun(rp.ctx, f, gvr, run, digest, rp.user)
	if err != nil {
		return nil, rp.failed(failure.Write(rp.subject("create", what, ""), run.GetName(), err), runReasons)
	}
	return created, nil
}

// prune deletes the finished runs retention lets go. A forbidden deletion
// is not returned (retrying cannot help until RBAC changes): the Session
// notes it.
func (rp *pass) prune(gvr schema.GroupVersionResource, doomed []runs.Run) error {
	if len(doomed) == 0 {
		return nil
	}
	ns, sa := rp.obj.GetNamespace(), rp.serviceAccount()
	cl, err := rp.r.env.Clients.For(ns, sa)
	if err != nil {
		return err
	}
	_, err = rp.w.RemoveRuns(rp.ctx, cl, gvr, doomed, rp.obj, ns+"/"+sa, "(retention policy)")
	return err
}
