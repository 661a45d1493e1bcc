package runnable

// The Runnable reconciler's decisions, without the API server: which object
// the selector picks, the run a ClusterRunTemplate stamps, whether a run is
// created, which runs retention lets go, and the status the runs give. The
// reconciler (reconcile.go, realize.go) loads what they need and executes what they
// decide.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"kontinue.dev/kontinue/annotations"
	"kontinue.dev/kontinue/paths"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/apply"
	"kontinue.dev/kontinue/reconciler/health"
	"kontinue.dev/kontinue/reconciler/render"
	"kontinue.dev/kontinue/reconciler/runs"
	"kontinue.dev/kontinue/reconciler/spans"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/step"
)

// refusal is why a Runnable cannot stamp: its RunTemplateReady condition.
type refusal struct{ reason, message string }

func refuse(reason, format string, args ...any) *refusal {
	return &refusal{reason: reason, message: fmt.Sprintf(format, args...)}
}

func runnableWhat(obj *unstructured.Unstructured) string {
	return fmt.Sprintf("Runnable [%s/%s]", obj.GetNamespace(), obj.GetName())
}

// selectOne picks the one object the Runnable's selector matches among the
// listed ones: objects being deleted do not count, and none or several is
// a refusal that names them.
func selectOne(obj *unstructured.Unstructured, kind string, sel labels.Selector, listed []*unstructured.Unstructured) (*unstructured.Unstructured, *refusal) {
	var live []*unstructured.Unstructured
	for _, o := range listed {
		if o.GetDeletionTimestamp() == nil {
			live = append(live, o)
		}
	}
	slices.SortFunc(live, func(a, b *unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
	ns := obj.GetNamespace()
	switch len(live) {
	case 1:
		return live[0], nil
	case 0:
		return nil, refuse(ReasonSelectorMatchError, "%s: no %s in namespace [%s] matches spec.selector labels [%s]; exactly one must", runnableWhat(obj), kind, ns, sel)
	}
	names := make([]string, len(live))
	for i, o := range live {
		names[i] = o.GetName()
	}
	return nil, refuse(ReasonSelectorMatchError, "%s: %d objects of kind %s in namespace [%s] match spec.selector labels [%s]: [%s]; exactly one must",
		runnableWhat(obj), len(live), kind, ns, sel, strings.Join(names, ", "))
}

// stampRun renders the run template for the Runnable (and the object its
// selector picked, nil: none) and returns the run to create and its input
// set. The run lives in the Runnable's namespace, labelled with it and the
// template, controlled by it.
func stampRun(ctx context.Context, obj *unstructured.Unstructured, rt api.RunTemplateSpec, tmplName string, selected *unstructured.Unstructured) (*unstructured.Unstructured, string, *refusal) {
	what := runnableWhat(obj)
	spec, err := runTemplateEngine(rt)
	if err != nil {
		return nil, "", refuse(step.ReasonStampFailure, "ClusterRunTemplate [%s] named by %s is invalid: %v", tmplName, what, err)
	}
	objs, err := renderRun(ctx, spec, runContext(spec, obj, selected))
	if err == nil && len(objs) != 1 {
		err = fmt.Errorf("the template rendered %d objects, want 1", len(objs))
	}
	if err != nil {
		return nil, "", refuse(step.ReasonStampFailure, "unable to stamp object for %s from ClusterRunTemplate [%s]: %v", what, tmplName, err)
	}
	desired := objs[0]
	if desired.GetName() == "" && desired.GetGenerateName() == "" {
		return nil, "", refuse(step.ReasonStampFailure, "unable to stamp object for %s from ClusterRunTemplate [%s]: the object has neither metadata.name nor metadata.generateName (use generateName: every input set creates a new object)", what, tmplName)
	}
	ns := obj.GetNamespace()
	if got := desired.GetNamespace(); got != "" && got != ns {
		return nil, "", refuse(step.ReasonStampFailure, "unable to stamp object for %s from ClusterRunTemplate [%s]: it names namespace [%s]; runs are created only in the Runnable's namespace", what, tmplName, got)
	}
	digest := apply.Digest(desired.Object)
	run := desired.DeepCopy()
	run.SetNamespace(ns)
	l := run.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[api.StampedLabel] = "true"
	l[api.LabelRunnableName] = obj.GetName()
	l[api.LabelRunTemplateName] = tmplName
	// The Runnable's shard: its replica's watch of runs selects it.
	api.SetShard(l, api.ShardOf(obj.GetLabels()))
	run.SetLabels(l)
	run.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: api.Group + "/" + api.Version, Kind: api.KindRunnable,
		Name: obj.GetName(), UID: obj.GetUID(), Controller: ptr.To(true),
	}})
	return run, digest, nil
}

// runTraceParent is the trace context a run of obj carries: obj's own
// (api.AnnotationTraceParent), which a generated Runnable's owner put
// there for the input set the Runnable carries. Anyone may write a
// Runnable's annotations: a value W3C Trace Context refuses is not passed
// on, and a valid one is passed on as version 00.
func runTraceParent(obj *unstructured.Unstructured) string {
	tp, err := spans.Parse(obj.GetAnnotations()[api.AnnotationTraceParent])
	if err != nil {
		return ""
	}
	return tp.String()
}

// runTemplateEngine is the template spec a run template renders with:
// exactly one of spec.template ($(...)$ tags) and spec.ytt. The other
// engines of the template kinds are not offered for runs.
func runTemplateEngine(rt api.RunTemplateSpec) (*api.TemplateSpec, error) {
	hasYtt := strings.TrimSpace(rt.Ytt) != ""
	switch {
	case rt.Template != nil && hasYtt:
		return nil, fmt.Errorf("it sets both spec.template and spec.ytt; set exactly one")
	case hasYtt:
		return &api.TemplateSpec{Ytt: rt.Ytt}, nil
	case len(rt.Template) > 0:
		return &api.TemplateSpec{Template: rt.Template}, nil
	}
	return nil, fmt.Errorf("it sets neither spec.template nor spec.ytt (or one is empty); set exactly one")
}

// runContext is what a run template sees: for $(...)$ tags, the Runnable's
// template context (runnable, and selected when the selector picked one);
// for ytt, exactly the data values runnable and selected (null without a
// selector, so a template can test it), the keys of Cartographer's
// Runnable templating context, each a whole data value as its other ytt
// templates get them.
func runContext(spec *api.TemplateSpec, obj, selected *unstructured.Unstructured) render.Context {
	if spec.Ytt != "" {
		tc := render.Context{"runnable": runnableForContext(obj), "selected": nil}
		if selected != nil {
			tc["selected"] = selected.Object
		}
		return tc
	}
	tc := render.NewContext(api.KindRunnable, runnableForContext(obj), nil, render.Inputs{}, nil)
	if selected != nil {
		tc["selected"] = selected.Object
	}
	return tc
}

// renderRun renders spec with the engine its field names.
func renderRun(ctx context.Context, spec *api.TemplateSpec, tc render.Context) ([]*unstructured.Unstructured, error) {
	e, err := render.EngineFor(spec)
	if err != nil {
		return nil, err
	}
	return e.Render(ctx, spec, tc)
}

// runnableForContext is the Runnable as templates see it: without status
// and write bookkeeping, so that Kontinue's own status writes can never
// change a rendered run and start a run storm.
func runnableForContext(obj *unstructured.Unstructured) map[string]any {
	out := make(map[string]any, len(obj.Object))
	for k, v := range obj.Object {
		if k != "status" {
			out[k] = v
		}
	}
	if md, ok := obj.Object["metadata"].(map[string]any); ok {
		m := make(map[string]any, len(md))
		for k, v := range md {
			if k != "managedFields" && k != "resourceVersion" {
				m[k] = v
			}
		}
		out["metadata"] = m
	}
	return out
}

// retryAsked is the Runnable's retry token when its status has not
// handled it yet ("": none asked).
func retryAsked(obj *unstructured.Unstructured, prev Status) string {
	if t := obj.GetAnnotations()[annotations.Retry]; t != prev.LastHandledRetry {
		return t
	}
	return ""
}

// runOutcome judges a run by the run template's criterion (nil: its
// Succeeded condition, as Cartographer does).
func runOutcome(crit *api.TemplateSpec, run *unstructured.Unstructured) runs.Outcome {
	if crit == nil {
		return runs.TektonOutcome(run)
	}
	switch judgeRun(crit, run).Outcome {
	case health.Succeeded:
		return runs.Succeeded
	case health.Failed:
		return runs.Failed
	}
	return runs.Running
}

func judgeRun(crit *api.TemplateSpec, run *unstructured.Unstructured) health.Result {
	doc, err := json.Marshal(run.Object)
	if err != nil {
		return health.Result{Outcome: health.Processing, Status: health.StatusUnknown, Reason: health.ReasonInvalidObject, Message: err.Error()}
	}
	return health.Evaluate(crit, api.KindClusterRunTemplate, doc, nil)
}

// runCondition is the StampedObjectCondition of the newest run: what the
// criterion says of it, or its Succeeded condition when there is none.
func runCondition(crit *api.TemplateSpec, run *unstructured.Unstructured) metav1.Condition {
	if crit == nil {
		return mirrorSucceeded(run)
	}
	h := judgeRun(crit, run)
	what := fmt.Sprintf("%s [%s/%s]", run.GetKind(), run.GetNamespace(), run.GetName())
	return st.Cond(CondStampedObject, metav1.ConditionStatus(h.Status), h.Reason, what+": "+h.Message)
}

// runsStatus is the status the runs (newest first, their Outcome judged by
// crit) give, from the previous one: the newest run's condition
// (StampedObjectCondition; nil: no run, the previous one stays) and the
// outputs of the newest succeeded run. RunTemplateReady says when those
// outputs cannot be read.
func runsStatus(prev Status, list []runs.Run, outs map[string]string, crit *api.TemplateSpec, tmplName string) (Status, metav1.Condition, *metav1.Condition) {
	s := Status{Outputs: prev.Outputs, LatestRunRef: prev.LatestRunRef, LatestSuccessfulRunRef: prev.LatestSuccessfulRunRef}
	rtReady := st.Cond(CondRunTemplateReady, st.True, ReasonRunTemplateFound, "")
	var stamped *metav1.Condition
	if len(list) > 0 {
		newest := list[0].Obj
		s.LatestRunRef = refOfRun(newest)
		c := runCondition(crit, newest)
		stamped = &c
	}
	if i := runs.NewestSucceeded(list); i >= 0 {
		ok := list[i].Obj
		s.LatestSuccessfulRunRef = refOfRun(ok)
		out, err := runOutputs(outs, ok)
		if err != nil {
			rtReady = st.Cond(CondRunTemplateReady, st.False, ReasonOutputPathNotSatisfied,
				fmt.Sprintf("unable to read outputs of ClusterRunTemplate [%s] from succeeded %s [%s/%s]: %v", tmplName, ok.GetKind(), ok.GetNamespace(), ok.GetName(), err))
		} else {
			s.Outputs = out
		}
	}
	return s, rtReady, stamped
}

// mirrorSucceeded is the StampedObjectCondition: the run's Succeeded
// condition, its message prefixed with the run so a person can find it.
func mirrorSucceeded(run *unstructured.Unstructured) metav1.Condition {
	what := fmt.Sprintf("%s [%s/%s]", run.GetKind(), run.GetNamespace(), run.GetName())
	status, reason, msg, found := runs.SucceededCondition(run)
	if !found {
		return st.Cond(CondStampedObject, st.Unknown, ReasonSucceededNotReported, what+" has not reported a Succeeded condition yet")
	}
	s := metav1.ConditionStatus(status)
	if s != st.True && s != st.False {
		s = st.Unknown
	}
	if reason == "" {
		reason = ReasonSucceededCondition
	}
	m := what + ": Succeeded is " + status
	if msg != "" {
		m += ": " + msg
	}
	return st.Cond(CondStampedObject, s, reason, m)
}

// runOutputs evaluates the run template's output paths on a run.
func runOutputs(outs map[string]string, run *unstructured.Unstructured) (map[string]any, error) {
	doc, err := json.Marshal(run.Object)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(outs))
	for n := range outs {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make(map[string]any, len(outs))
	for _, n := range names {
		p, err := paths.Compile(step.TrimTag(outs[n]))
		if err != nil {
			return nil, fmt.Errorf("output [%s]: %w", n, err)
		}
		v, err := p.Value(doc)
		if err != nil {
			return nil, fmt.Errorf("output [%s] at path [%s]: %w", n, outs[n], err)
		}
		out[n] = v
	}
	return out, nil
}
