package reconciler

import (
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/apply"
	"kontinue.dev/kontinue/reconciler/health"
	"kontinue.dev/kontinue/reconciler/render"
	"kontinue.dev/kontinue/reconciler/selector"
	"kontinue.dev/kontinue/reconciler/stamp"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/step"
	"kontinue.dev/kontinue/tracking"
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
	var submitted, healthy []metav1.Condition
	for _, r := range resources {
		if c := st.Find(r.Conditions, st.ResourceSubmitted); c != nil {
			submitted = append(submitted, *c)
		}
		if c := st.Find(r.Conditions, st.Healthy); c != nil {
			// The owner's summary repeats one step's message: say which step.
			h := *c
			h.Message = strings.TrimSuffix(fmt.Sprintf("step [%s]: %s", r.Name, h.Message), ": ")
			healthy = append(healthy, h)
		}
	}
	sub := st.Summarize(st.ResourcesSubmitted, step.ReasonSubmitted, submitted...)
	// Cartographer gives the owner's ResourcesHealthy one reason whatever
	// the steps say; the steps keep their own.
	hl := st.Summarize(st.ResourcesHealthy, step.ReasonHealthyConditionRule, healthy...)
	hl.Reason = step.ReasonHealthyConditionRule
	ready := st.Summarize(st.Ready, "Ready", chainReady, sub, hl)
	op.status.Conditions = st.Merge([]metav1.Condition{chainReady, sub, hl, ready}, op.prev.Conditions, op.owner.GetGeneration(), op.now)
	return res, transient
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
		if render.IsTransient(err) {
			r.err = err // a chart repository that did not answer: retry with backoff
		}
		return r
	}
	return executors[step.LifecycleOf(sc.spec)](op, sc, objs, in)
}

// An executor realizes a step of one lifecycle: it writes through stamp
// what the step's decisions (reconciler/step) ask for.
type executor func(op *ownerPass, sc *stepCtx, objs []*unstructured.Unstructured, in render.Inputs) stepResult

var executors = map[step.Lifecycle]executor{
	step.Mutable:   (*ownerPass).stampAndObserve, // this file
	step.Immutable: (*ownerPass).stampImmutable,  // immutable.go: a new run per input set
	step.Runnable:  (*ownerPass).stampRunnable,   // runnablestep.go: a generated Runnable
}

// chooseTemplate returns the template name, or the input a passThrough
// option forwards.
func (op *ownerPass) chooseTemplate(def api.Step) (name, passThrough string, err error) {
	ref := def.TemplateRef
	if len(ref.Options) == 0 {
		return ref.Name, "", nil
	}
	// Keyed by kind too: a supply chain and a delivery may share a name.
	cands, err := op.r.m.optionCandidates(op.r.flavor.ChainKind+"/"+op.chainName, op.chain.rv, def)
	if err != nil {
		re := &selector.ResolveOptionsError{Err: err}
		errors.As(err, &re) // names the option that does not compile
		re.Step, re.ChainKind, re.Chain = def.Name, op.r.flavor.ChainKind, op.chainName
		return "", "", re
	}
	owner := selector.Owner{Kind: op.r.flavor.OwnerKind, Labels: op.owner.GetLabels(), Doc: op.doc}
	chosen, err := selector.ChooseOption(owner, op.r.flavor.ChainKind, op.chainName, def.Name, cands)
	if err != nil {
		return "", "", err
	}
	if strings.HasPrefix(chosen, passThroughPrefix) {
		return "", strings.TrimPrefix(chosen, passThroughPrefix), nil
	}
	return chosen, "", nil
}

const passThroughPrefix = "passThrough:"

// passThrough forwards an input as the step's output, stamping nothing.
func (op *ownerPass) passThrough(sc *stepCtx, input string, outs map[string]outputs) stepResult {
	sc.res.StampedRef, sc.res.StampedObjects, sc.res.TemplateRef = nil, nil, nil
	from := ""
	for _, list := range [][]api.StepInput{sc.step.Sources, sc.step.Images, sc.step.Configs} {
		for _, i := range list {
			if i.Name == input {
				from = i.Resource
			}
		}
	}
	if from == "" && sc.step.Deployment != nil && input == "deployment" {
		from = sc.step.Deployment.Resource
	}
	if from == "" {
		return op.stepDone(sc, nil, st.Cond(st.ResourceSubmitted, st.False, step.ReasonStampFailure,
			fmt.Sprintf("step [%s] passes through input [%s], which the step does not declare", sc.step.Name, input)), nil)
	}
	o, ok := outs[from]
	if !ok {
		return op.stepDone(sc, nil, st.Cond(st.ResourceSubmitted, st.Unknown, step.ReasonMissingValueAtPath,
			fmt.Sprintf("step [%s] waits for the outputs of step [%s]", sc.step.Name, from)), nil)
	}
	healthy := st.Cond(st.Healthy, st.True, step.ReasonPassThrough, "")
	return op.stepDone(sc, o, st.Cond(st.ResourceSubmitted, st.True, step.ReasonPassThrough, fmt.Sprintf("input [%s] passed through", input)), &healthy)
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
			op.r.m.w.Events.Event(op.owner, corev1.EventTypeNormal, stamp.EventResourceHealthyStatusChange, "[%s] step [%s] Healthy is now %s: %s", op.owner.GetName(), sc.step.Name, h.Status, h.Reason)
		}
	}
	sc.res.Conditions = st.Merge(conds, prevConds, op.owner.GetGeneration(), op.now)
	op.logStep(sc, ready, prevConds)
	return stepResult{status: sc.res, outputs: out}
}

// logStep logs a step whose readiness changed (and every step at -v=4),
// with the owner, step and template on the line.
func (op *ownerPass) logStep(sc *stepCtx, ready metav1.Condition, prev []metav1.Condition) {
	tmpl := ""
	if sc.tmplName != "" {
		tmpl = sc.kind + "/" + sc.tmplName
	}
	kv := []any{"owner", op.r.user(op.owner.GetNamespace(), op.owner.GetName()), "chain", op.chainName, "step", sc.step.Name,
		"template", tmpl, "ready", ready.Status, "reason", ready.Reason}
	if old := st.Find(prev, st.Ready); old == nil || old.Status != ready.Status || old.Reason != ready.Reason {
		if ready.Message != "" {
			kv = append(kv, "message", ready.Message)
		}
		klog.InfoS("step changed", kv...)
		return
	}
	klog.V(4).InfoS("step realized", kv...)
}

func prevOutputs(p *st.Resource) []st.Output {
	if p == nil {
		return nil
	}
	return p.Outputs
}

func stepInputs(def api.Step) []st.Input {
	var out []st.Input
	seen := map[string]bool{}
	add := func(r string) {
		if r != "" && !seen[r] {
			seen[r] = true
			out = append(out, st.Input{Name: r})
		}
	}
	for _, list := range [][]api.StepInput{def.Sources, def.Images, def.Configs} {
		for _, i := range list {
			add(i.Resource)
		}
	}
	if def.Deployment != nil {
		add(def.Deployment.Resource)
	}
	return out
}

// inputs collects a step's inputs from earlier steps' outputs. waiting names
// the first missing one.
func (op *ownerPass) inputs(sc *stepCtx, outs map[string]outputs) (in render.Inputs, waiting string, err error) {
	def := sc.step
	earlier := map[string]bool{}
	for _, s := range op.chain.spec.Resources {
		if s.Name == def.Name {
			break
		}
		earlier[s.Name] = true
	}
	get := func(typ string, i api.StepInput) (outputs, bool, error) {
		if !earlier[i.Resource] {
			return nil, false, fmt.Errorf("step [%s] reads %s [%s] from step [%s], which is not an earlier step of %s [%s]", def.Name, typ, i.Name, i.Resource, op.r.flavor.ChainNoun, op.chainName)
		}
		o, ok := outs[i.Resource]
		if !ok && waiting == "" {
			waiting = fmt.Sprintf("step [%s] waits for the outputs of step [%s]", def.Name, i.Resource)
		}
		return o, ok, nil
	}
	in = render.Inputs{Sources: map[string]render.Source{}, Images: map[string]any{}, Configs: map[string]any{}}
	for _, i := range def.Sources {
		o, ok, err := get("source", i)
		if err != nil {
			return in, "", err
		}
		if ok {
			in.Sources[i.Name] = render.Source{URL: o["url"], Revision: o["revision"]}
		}
	}
	for _, i := range def.Images {
		o, ok, err := get("image", i)
		if err != nil {
			return in, "", err
		}
		if ok {
			in.Images[i.Name] = o["image"]
		}
	}
	for _, i := range def.Configs {
		o, ok, err := get("config", i)
		if err != nil {
			return in, "", err
		}
		if ok {
			in.Configs[i.Name] = o["config"]
		}
	}
	if def.Deployment != nil {
		if sc.kind != api.KindClusterDeploymentTemplate {
			return in, "", fmt.Errorf("step [%s] receives deployment, but only a %s step can take it (the step uses a %s)", def.Name, api.KindClusterDeploymentTemplate, sc.kind)
		}
		o, ok, err := get("deployment", api.StepInput{Name: "deployment", Resource: def.Deployment.Resource})
		if err != nil {
			return in, "", err
		}
		if ok {
			in.Deployment = &render.Source{URL: o["url"], Revision: o["revision"]}
		}
	} else if sc.kind == api.KindClusterDeploymentTemplate {
		return in, "", fmt.Errorf("step [%s] uses a %s but has no deployment input", def.Name, api.KindClusterDeploymentTemplate)
	}
	return in, waiting, nil
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
	eng, err := render.EngineFor(sc.spec)
	if err != nil {
		return nil, err
	}
	objs, err := eng.Render(render.WithObjectGetter(op.ctx, render.DynamicGetter(op.r.m.dyn)), sc.spec, tc)
	if err != nil {
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
	}
	return objs, nil
}

// stampAndObserve applies the step's objects and reads outputs and health
// from its primary object. A step whose template says what success is
// (gated) does not take new inputs while its object is still working on the
// previous ones.
func (op *ownerPass) stampAndObserve(sc *stepCtx, objs []*unstructured.Unstructured, in render.Inputs) stepResult {
	primaryIdx := primaryIndex(sc.spec, objs)
	targets := make([]target, len(objs))
	for i, desired := range objs {
		t, cond, err := op.resolve(sc, desired)
		if cond != nil {
			r := op.stepDone(sc, nil, *cond, nil)
			r.err = err
			return r
		}
		targets[i] = t
	}
	o := op.observed(sc, objs[primaryIdx], in)
	if step.Gated(sc.spec) {
		// Decided on the live object before anything is applied.
		live, _ := op.current(targets[primaryIdx].key, objs[primaryIdx].GetNamespace(), objs[primaryIdx].GetName())
		ob := step.Admit(o, live)
		o.State = ob.State
		if ob.Held {
			sc.res.StampedRef = &targets[primaryIdx].ref
			sc.res.HeldInputDigest = o.Digest
			return op.finish(sc, o, ob)
		}
	}
	var refs []st.StampedRef
	var primary *unstructured.Unstructured
	changed := false
	for i, desired := range objs {
		live, wrote, cond, err := op.stampOne(sc, targets[i], desired)
		if cond != nil {
			r := op.stepDone(sc, nil, *cond, nil)
			r.err = err
			return r
		}
		refs = append(refs, targets[i].ref)
		if i == primaryIdx {
			primary, changed = live, wrote
		}
	}
	sc.res.StampedRef = &refs[primaryIdx]
	sc.res.StampedObjects = nil
	if len(refs) > 1 {
		sc.res.StampedObjects = refs
	}
	return op.finish(sc, o, step.Observe(o, primary, changed))
}

// observed is what the step's decisions start from.
func (op *ownerPass) observed(sc *stepCtx, primary *unstructured.Unstructured, in render.Inputs) step.Observed {
	o := step.Observed{Kind: sc.kind, Step: sc.step.Name, Template: sc.tmplName, Spec: sc.spec, Desired: primary,
		Digest: primary.GetAnnotations()[AnnotationDigest], State: step.StateOf(sc.prev)}
	if in.Deployment != nil {
		o.Deployment = outputs{"url": in.Deployment.URL, "revision": in.Deployment.Revision}
	}
	return o
}

// finish stamps the shadow the observation wants (its health decides who
// serves the outputs), then records the step.
func (op *ownerPass) finish(sc *stepCtx, o step.Observed, ob step.Observation) stepResult {
	if want := ob.ShadowWant; want != nil {
		t, cond, err := op.resolve(sc, want)
		if cond == nil {
			var live *unstructured.Unstructured
			if live, _, cond, err = op.stampOne(sc, t, want); cond == nil {
				ob = ob.WithShadow(t.ref, live, o)
			}
		}
		if cond != nil {
			klog.V(1).InfoS("could not stamp shadow", "owner", op.r.user(op.owner.GetNamespace(), op.owner.GetName()), "step", sc.step.Name, "reason", cond.Reason, "message", cond.Message, "err", err)
			ob = ob.ShadowFailed(cond.Message)
		}
	}
	s := ob.State
	sc.res.ShadowRef, sc.res.ServedBy, sc.res.LastGoodObject = s.ShadowRef, s.ServedBy, s.LastGoodObject
	if ob.Gated {
		sc.res.InputDigest, sc.res.OutputValues = s.GoodDigest, s.Good
	}
	return op.stepDoneWith(sc, ob)
}

// stepDoneWith finishes a step as its Observation says.
func (op *ownerPass) stepDoneWith(sc *stepCtx, ob step.Observation) stepResult {
	return op.stepDone(sc, ob.Outputs(), ob.Submitted, ob.Healthy)
}

func primaryIndex(spec *api.TemplateSpec, objs []*unstructured.Unstructured) int {
	if spec.Primary == nil {
		return 0
	}
	for i, o := range objs {
		if o.GetKind() == spec.Primary.Kind && (spec.Primary.Name == "" || o.GetName() == spec.Primary.Name) &&
			(spec.Primary.APIVersion == "" || o.GetAPIVersion() == spec.Primary.APIVersion) {
			return i
		}
	}
	return 0
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
// fails never loses track of its object).
func (op *ownerPass) resolve(sc *stepCtx, desired *unstructured.Unstructured) (target, *metav1.Condition, error) {
	gvk := desired.GroupVersionKind()
	what := fmt.Sprintf("%s [%s] for step [%s] from template [%s/%s]", gvk.Kind, desired.GetName(), sc.step.Name, sc.kind, sc.tmplName)
	tg, err := op.r.m.w.Resolve(gvk)
	switch {
	case err != nil && stamp.Classify(err) == stamp.NotServed:
		op.blocked = blockedDiscovery
		c := st.Cond(st.ResourceSubmitted, st.False, step.ReasonRejected, fmt.Sprintf("unable to apply %s: %v", what, err))
		return target{}, &c, nil
	case err != nil:
		c := st.Cond(st.ResourceSubmitted, st.Unknown, step.ReasonUnknownError, err.Error())
		return target{}, &c, err
	case !tg.Namespaced:
		c := st.Cond(st.ResourceSubmitted, st.False, step.ReasonStampFailure, fmt.Sprintf("unable to apply %s: kind [%s] is cluster-scoped; stamped objects must live in the %s's namespace", what, gvk.Kind, op.r.flavor.OwnerKind))
		return target{}, &c, nil
	}
	t := target{gvr: tg.GVR, key: tg.Watch(), what: what}
	t.ref = st.StampedRef{APIVersion: desired.GetAPIVersion(), Kind: desired.GetKind(), Namespace: desired.GetNamespace(), Name: desired.GetName(), Resource: resourceString(t.gvr)}
	op.watch.Watch(t.key)
	op.keep.ref(t.ref)
	return t, nil, nil
}

// stampOne applies one object unless the cached live object already has
// it, and reports whether the object was written. On failure it returns the
// step's condition (and a transient error to retry, if retrying can help).
func (op *ownerPass) stampOne(sc *stepCtx, t target, desired *unstructured.Unstructured) (*unstructured.Unstructured, bool, *metav1.Condition, error) {
	cached, _ := op.current(t.key, desired.GetNamespace(), desired.GetName())
	cl, err := op.stampClient()
	if err != nil {
		c := st.Cond(st.ResourceSubmitted, st.False, step.ReasonServiceAccountError, err.Error())
		return nil, false, &c, nil
	}
	live, wrote, err := op.r.m.w.Apply(op.ctx, cl, t.gvr, desired, cached)
	if err != nil {
		c, transient := op.applyFailure(t.what, err)
		return nil, false, &c, transient
	}
	if wrote {
		op.r.m.w.Events.Event(op.owner, corev1.EventTypeNormal, stamp.EventStampedObjectApplied, "Applied %s %s/%s for step [%s]", live.GetKind(), live.GetNamespace(), live.GetName(), sc.step.Name)
	}
	return live, wrote, nil, nil
}

// current is the live object (nil: missing), watched for this owner.
func (op *ownerPass) current(key tracking.Key, namespace, name string) (*unstructured.Unstructured, error) {
	return op.r.m.w.Live(op.ctx, key, op.watch.Watch, namespace, name)
}

// applyFailure turns an API error into the step's condition. Errors that
// retrying cannot fix end as a False condition and no retry; they come back
// when RBAC, discovery, the template or the owner change.
func (op *ownerPass) applyFailure(what string, err error) (metav1.Condition, error) {
	sa := op.serviceAccount()
	switch stamp.Classify(err) {
	case stamp.Forbidden:
		op.blocked = blockedRBAC
		return st.Cond(st.ResourceSubmitted, st.False, step.ReasonRejected, fmt.Sprintf("unable to apply %s: service account [%s/%s] is not allowed: %v", what, sa.Namespace, sa.Name, err)), nil
	case stamp.Rejected:
		return st.Cond(st.ResourceSubmitted, st.False, step.ReasonRejected, fmt.Sprintf("unable to apply %s: %v", what, err)), nil
	case stamp.Unauthorized:
		return st.Cond(st.ResourceSubmitted, st.False, step.ReasonServiceAccountError, fmt.Sprintf("unable to apply %s as service account [%s/%s]: %v", what, sa.Namespace, sa.Name, err)), err
	default:
		return st.Cond(st.ResourceSubmitted, st.Unknown, step.ReasonUnknownError, fmt.Sprintf("unable to apply %s: %v", what, err)), err
	}
}

// serviceAccount is the account whose permissions stamp objects:
// the owner's, else the chain's, else "default" in the owner's namespace.
func (op *ownerPass) serviceAccount() api.ServiceAccountRef {
	ns := op.owner.GetNamespace()
	if op.spec.ServiceAccountName != "" {
		return api.ServiceAccountRef{Namespace: ns, Name: op.spec.ServiceAccountName}
	}
	if op.chain != nil && op.chain.spec.ServiceAccountRef != nil && op.chain.spec.ServiceAccountRef.Name != "" {
		ref := *op.chain.spec.ServiceAccountRef
		if ref.Namespace == "" {
			ref.Namespace = ns
		}
		return ref
	}
	return api.ServiceAccountRef{Namespace: ns, Name: "default"}
}

func (op *ownerPass) stampClient() (dynamic.Interface, error) {
	sa := op.serviceAccount()
	return op.r.m.clients.For(sa.Namespace, sa.Name)
}

// templateSpec decodes a template once per resourceVersion and validates
// its rules.
func (m *Manager) templateSpec(obj *unstructured.Unstructured) (*api.TemplateSpec, error) {
	key := obj.GetKind() + "/" + obj.GetName()
	m.tmplMu.Lock()
	defer m.tmplMu.Unlock()
	if m.tmplCache == nil {
		m.tmplCache = map[string]*cachedTemplate{}
	}
	if c, ok := m.tmplCache[key]; ok && c.rv == obj.GetResourceVersion() {
		return c.spec, c.err
	}
	c := &cachedTemplate{rv: obj.GetResourceVersion(), spec: &api.TemplateSpec{}}
	if err := api.Decode(obj.Object["spec"], c.spec); err != nil {
		c.err = err
	} else if err := health.Validate(c.spec, obj.GetKind()); err != nil {
		c.err = err
	}
	m.tmplCache[key] = c
	return c.spec, c.err
}

type cachedTemplate struct {
	rv   string
	spec *api.TemplateSpec
	err  error
}

// optionCandidates compiles a step's options once per chain version.
func (m *Manager) optionCandidates(chain, rv string, def api.Step) ([]selector.Candidate, error) {
	key := chain + "/" + def.Name
	m.optMu.Lock()
	defer m.optMu.Unlock()
	if m.optCache == nil {
		m.optCache = map[string]cachedOptions{}
	}
	if c, ok := m.optCache[key]; ok && c.rv == rv {
		return c.cands, nil
	}
	var cands []selector.Candidate
	for i, o := range def.TemplateRef.Options {
		name := o.Name
		if o.PassThrough != "" {
			name = passThroughPrefix + o.PassThrough
		}
		s, err := selector.Compile(o.Selector.MatchLabels, o.Selector.MatchExpressions, o.Selector.MatchFields)
		if err != nil {
			return nil, &selector.ResolveOptionsError{Option: name, Err: fmt.Errorf("option [%d]: %w", i, err)}
		}
		cands = append(cands, selector.Candidate{Name: name, Selector: s})
	}
	m.optCache[key] = cachedOptions{rv: rv, cands: cands}
	return cands, nil
}

type cachedOptions struct {
	rv    string
	cands []selector.Candidate
}

// noteApply counts applies and skipped no-op applies (metrics).
func (m *Manager) noteApply(applied bool) {
	if m.OnApply != nil {
		m.OnApply(applied)
	}
}
