package reconciler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/apply"
	"kontinue.dev/kontinue/reconciler/render"
	"kontinue.dev/kontinue/reconciler/selector"
	"kontinue.dev/kontinue/reconciler/stamp"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/step"
)

// outputs of a step: "url"/"revision", "image", "config", or none.
type outputs = step.Outputs

type stepResult struct {
	status  st.Resource
	outputs outputs // nil: not available (downstream steps wait)
	err     error   // transient: retry with backoff
	requeue time.Duration
}

// walk realizes the chain's steps in order, then sums up the conditions.
func (op *ownerPass) walk(chainReady metav1.Condition) (Result, error) {
	outs := map[string]outputs{}
	var resources []st.Resource
	var res Result
	var transient error
	for _, def := range op.chain.spec.Resources {
		sr := op.realizeStep(def, outs)
		resources = append(resources, sr.status)
		if sr.outputs != nil {
			outs[def.Name] = sr.outputs
		}
		if sr.err != nil && transient == nil {
			transient = sr.err
		}
		if sr.requeue > 0 && (res.RequeueAfter == 0 || sr.requeue < res.RequeueAfter) {
			res.RequeueAfter = sr.requeue
		}
	}
	op.status.Resources = resources
	op.keep.resources(resources)
	var submitted []metav1.Condition
	for _, r := range resources {
		if c := st.Find(r.Conditions, st.ResourceSubmitted); c != nil {
			submitted = append(submitted, *c)
		}
	}
	sub := st.Summarize(st.ResourcesSubmitted, step.ReasonSubmitted, submitted...)
	hl := healthySummary(resources)
	ready := st.Summarize(st.Ready, "Ready", chainReady, sub, hl)
	op.setConditions(chainReady, sub, hl, ready)
	return res, transient
}

// healthySummary is the owner's ResourcesHealthy: the steps' Healthy
// conditions summed up. Cartographer gives it one reason whatever the
// steps say; the steps keep their own.
func healthySummary(resources []st.Resource) metav1.Condition {
	var healthy []metav1.Condition
	for _, r := range resources {
		if c := st.Find(r.Conditions, st.Healthy); c != nil {
			// The owner's summary repeats one step's message: say which step.
			h := *c
			h.Message = strings.TrimSuffix(fmt.Sprintf("step [%s]: %s", r.Name, h.Message), ": ")
			healthy = append(healthy, h)
		}
	}
	hl := st.Summarize(st.ResourcesHealthy, step.ReasonHealthyConditionRule, healthy...)
	hl.Reason = step.ReasonHealthyConditionRule
	return hl
}

func (op *ownerPass) prevStep(name string) *st.Resource {
	for i := range op.prev.Resources {
		if op.prev.Resources[i].Name == name {
			return &op.prev.Resources[i]
		}
	}
	return nil
}

// stepCtx carries what one step's realize needs.
type stepCtx struct {
	step     api.Step
	kind     string // template kind
	tmplName string
	spec     *api.TemplateSpec
	prev     *st.Resource
	res      st.Resource
	in       render.Inputs
}

func (op *ownerPass) realizeStep(def api.Step, outs map[string]outputs) stepResult {
	sc := &stepCtx{step: def, kind: def.TemplateRef.Kind, prev: op.prevStep(def.Name)}
	sc.res = st.Resource{Name: def.Name, Inputs: stepInputs(def)}
	if sc.prev != nil {
		// Until this step stamps again, it keeps pointing at what it stamped.
		sc.res.StampedRef, sc.res.StampedObjects = sc.prev.StampedRef, sc.prev.StampedObjects
		sc.res.TemplateRef, sc.res.Outputs = sc.prev.TemplateRef, sc.prev.Outputs
		sc.res.InputDigest, sc.res.OutputValues = sc.prev.InputDigest, sc.prev.OutputValues
		sc.res.ShadowRef, sc.res.ServedBy, sc.res.LastGoodObject = sc.prev.ShadowRef, sc.prev.ServedBy, sc.prev.LastGoodObject
		sc.res.ProcessingInputDigest, sc.res.ProcessingSince = sc.prev.ProcessingInputDigest, sc.prev.ProcessingSince
	}

	name, passThrough, err := op.chooseTemplate(def)
	if err != nil {
		var oe *selector.OptionsMatchError
		reason := step.ReasonResolveOptionsError
		if errors.As(err, &oe) {
			reason = step.ReasonOptionsMatchError
		}
		return op.stepDone(sc, nil, st.Cond(st.ResourceSubmitted, st.False, reason, err.Error()), nil)
	}
	if passThrough != "" {
		return op.passThrough(sc, passThrough, outs)
	}
	sc.tmplName = name
	sc.res.TemplateRef = &st.TemplateRef{APIVersion: api.Group + "/" + api.Version, Kind: sc.kind, Name: name}
	tobj := op.r.m.template(sc.kind, name)
	if tobj == nil {
		return op.stepDone(sc, nil, st.Cond(st.ResourceSubmitted, st.False, step.ReasonRetrievalFailure,
			fmt.Sprintf("unable to get template [%s/%s] for step [%s]: not found", sc.kind, name, def.Name)), nil)
	}
	spec, err := op.r.m.templateSpec(tobj)
	if err != nil {
		return op.stepDone(sc, nil, st.Cond(st.ResourceSubmitted, st.False, step.ReasonStampFailure,
			fmt.Sprintf("template [%s/%s] for step [%s] is invalid: %v", sc.kind, name, def.Name, err)), nil)
	}
	sc.spec = spec

	in, waiting, err := op.inputs(sc, outs)
	if err != nil {
		return op.stepDone(sc, nil, st.Cond(st.ResourceSubmitted, st.False, step.ReasonStampFailure, err.Error()), nil)
	}
	if waiting != "" {
		return op.stepDone(sc, nil, st.Cond(st.ResourceSubmitted, st.Unknown, step.ReasonMissingValueAtPath, waiting), nil)
	}

	objs, err := op.render(sc, in)
	if err != nil {
		r := op.stepDone(sc, nil, st.Cond(st.ResourceSubmitted, st.False, step.ReasonStampFailure,
			fmt.Sprintf("unable to stamp object for resource [%s] for template [%s/%s] in %s [%s]: %v", def.Name, sc.kind, name, op.r.flavor.ChainNoun, op.chainName, err)), nil)
		if render.IsTransient(err) || render.Retryable(err) {
			// A chart repository that did not answer, a render out of time
			// or of slots: retried with backoff, not left failed until
			// something unrelated changes.
			r.err = err
		}
		return r
	}
	sc.in = in
	return op.execute(sc, objs, in) // execute.go
}

// stepDone finishes a step: outputs (nil when not available), its
// ResourceSubmitted condition, its Healthy condition (nil: Unknown), Ready.
func (op *ownerPass) stepDone(sc *stepCtx, out outputs, submitted metav1.Condition, healthy *metav1.Condition) stepResult {
	h := st.Cond(st.Healthy, st.Unknown, "NoStampedObject", "no object has been stamped")
	if healthy != nil {
		h = *healthy
	} else if submitted.Status == st.True {
		h = st.Cond(st.Healthy, st.Unknown, "OutputNotAvailable", "")
	}
	if out != nil {
		var changed []string
		sc.res.Outputs, changed = st.Outputs(out, prevOutputs(sc.prev), op.now)
		if len(changed) > 0 && sc.prev != nil {
			op.r.m.w.Events.Event(op.owner, corev1.EventTypeNormal, stamp.EventResourceOutputChanged, "[%s] found a new output in step [%s]: %s", op.owner.GetName(), sc.step.Name, strings.Join(changed, ", "))
		}
	}
	ready := st.Summarize(st.Ready, "Ready", submitted, h)
	conds := []metav1.Condition{submitted, h, ready}
	if submitted.Reason == step.ReasonPassThrough {
		// Nothing stamped, nothing to be healthy: Cartographer gives a
		// pass-through step no Healthy condition, and the owner's
		// ResourcesHealthy leaves it out.
		ready = st.Summarize(st.Ready, "Ready", submitted)
		conds = []metav1.Condition{submitted, ready}
	}
	var prevConds []metav1.Condition
	if sc.prev != nil {
		prevConds = sc.prev.Conditions
		if old := st.Find(prevConds, st.Healthy); old != nil && old.Status != h.Status {
			op.r.m.w.Events.Event(op.owner, eventType(h.Status), stamp.EventResourceHealthyStatusChange, "[%s] step [%s] Healthy is now %s: %s", op.owner.GetName(), sc.step.Name, h.Status, h.Reason)
		}
	}
	sc.res.Conditions = st.Merge(conds, prevConds, op.owner.GetGeneration(), op.now)
	op.logStep(sc, ready, prevConds)
	return stepResult{status: sc.res, outputs: out}
}

// logStep logs a step whose readiness changed (and every step at -v=4),
// with the owner, step, template and object on the line. A step that turns
// False is a failure someone must act on: an error line, and a Warning
// event on the owner with the step's reason (once per change).
func (op *ownerPass) logStep(sc *stepCtx, ready metav1.Condition, prev []metav1.Condition) {
	tmpl := ""
	if sc.tmplName != "" {
		tmpl = sc.kind + "/" + sc.tmplName
	}
	kv := []any{"owner", op.r.user(op.owner.GetNamespace(), op.owner.GetName()), "chain", op.chainName, "step", sc.step.Name,
		"template", tmpl}
	if ref := sc.res.StampedRef; ref != nil {
		kv = append(kv, "object", ref.Kind+"/"+ref.Namespace+"/"+ref.Name)
	}
	kv = append(kv, "ready", ready.Status, "reason", ready.Reason)
	old := st.Find(prev, st.Ready)
	if old != nil && old.Status == ready.Status && old.Reason == ready.Reason {
		klog.V(4).InfoS("step realized", kv...)
		return
	}
	if ready.Message != "" {
		kv = append(kv, "message", ready.Message)
	}
	if ready.Status != st.False {
		klog.InfoS("step changed", kv...)
		return
	}
	klog.ErrorS(nil, "step failed", kv...)
	op.r.m.w.Events.Event(op.owner, corev1.EventTypeWarning, ready.Reason, "step [%s]: %s", sc.step.Name, ready.Message)
}

// eventType is Warning for a False status, else Normal.
func eventType(s metav1.ConditionStatus) string {
	if s == st.False {
		return corev1.EventTypeWarning
	}
	return corev1.EventTypeNormal
}

func prevOutputs(p *st.Resource) []st.Output {
	if p == nil {
		return nil
	}
	return p.Outputs
}

// stepLabels are the labels every object of the step carries.
func (op *ownerPass) stepLabels(sc *stepCtx) map[string]string {
	f := op.r.flavor
	lifecycle := sc.spec.Lifecycle
	if lifecycle == "" {
		lifecycle = api.LifecycleMutable
	}
	return map[string]string{
		StampedLabel:           "true",
		f.LabelOwnerName:       op.owner.GetName(),
		f.LabelOwnerNS:         op.owner.GetNamespace(),
		f.LabelChainName:       op.chainName,
		LabelResourceName:      sc.step.Name,
		LabelTemplateKind:      sc.kind,
		LabelTemplateName:      sc.tmplName,
		LabelTemplateLifecycle: lifecycle,
	}
}

// render stamps the template into objects ready to apply: in the owner's
// namespace, with our labels and a controller reference to the owner.
func (op *ownerPass) render(sc *stepCtx, in render.Inputs) ([]*unstructured.Unstructured, error) {
	params := render.MergeParams(sc.spec.Params, op.chain.spec.Params, sc.step.Params, op.spec.Params)
	labels := op.stepLabels(sc)
	tc := render.NewContext(op.r.flavor.OwnerKind, op.owner.Object, params, in, labels)
	eng, err := render.EngineForWith(sc.spec, op.r.m.engines)
	if err != nil {
		return nil, err
	}
	ctx := op.ctx
	if d := op.r.m.opts.RenderTimeout; d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	ctx = render.WithObjectGetter(ctx, render.DynamicGetter(op.r.m.dyn))
	var rec *helmRecord
	if sc.spec.Helm != nil {
		if ctx, rec, err = op.helmRelease(ctx, sc); err != nil {
			return nil, err
		}
	}
	objs, err := eng.Render(ctx, sc.spec, tc)
	if err != nil {
		return nil, err
	}
	// Before the objects: a release that is not kept would be rendered
	// again, with new random values.
	if err := op.keepRelease(sc, rec); err != nil {
		return nil, err
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("the template rendered no object")
	}
	ns := op.owner.GetNamespace()
	for _, o := range objs {
		if o.GetName() == "" && (o.GetGenerateName() == "" || step.LifecycleOf(sc.spec) == step.Mutable) {
			return nil, fmt.Errorf("stamped %s has no metadata.name", o.GetKind())
		}
		if got := o.GetNamespace(); got != "" && got != ns {
			return nil, fmt.Errorf("stamped %s [%s] names namespace [%s], but objects are stamped only in the %s's namespace [%s]", o.GetKind(), o.GetName(), got, op.r.flavor.OwnerKind, ns)
		}
		o.SetNamespace(ns)
		l := o.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		for k, v := range labels {
			l[k] = v
		}
		o.SetLabels(l)
		o.SetOwnerReferences([]metav1.OwnerReference{{
			APIVersion: api.Group + "/" + api.Version, Kind: op.r.flavor.OwnerKind,
			Name: op.owner.GetName(), UID: op.owner.GetUID(), Controller: ptr.To(true),
		}})
		unstructured.RemoveNestedField(o.Object, "status")
		unstructured.RemoveNestedField(o.Object, "metadata", "resourceVersion")
		unstructured.RemoveNestedField(o.Object, "metadata", "managedFields")
		ann := o.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		delete(ann, AnnotationDigest)
		o.SetAnnotations(ann)
		d := apply.Digest(o.Object)
		ann[AnnotationDigest] = d
		o.SetAnnotations(ann)
		// Written as the API server keeps it (after the digest, which
		// stays the rendered object's), so that it is up to date once
		// written.
		apply.Stored(o)
	}
	return objs, nil
}

// noteApply counts applies and skipped no-op applies (metrics).
func (m *Manager) noteApply(applied bool) {
	if m.OnApply != nil {
		m.OnApply(applied)
	}
}
