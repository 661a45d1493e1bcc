package reconciler

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/prepare"
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
	env := op.prepareEnv()
	for _, def := range op.chain.spec.Resources {
		sr := op.realizeStep(env, def, outs)
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
	params   map[string]any
	labels   map[string]string // on every object of the step
}

// prepareEnv is what prepare reads of this owner, its chain and the manager.
func (op *ownerPass) prepareEnv() prepare.Env {
	m := op.r.m
	return prepare.Env{Flavor: op.r.flavor, Owner: op.owner, OwnerDoc: op.doc, OwnerSpec: op.spec,
		ChainName: op.chainName, Chain: &op.chain.spec,
		// Keyed by kind too: a supply chain and a delivery may share a name.
		Options: func(def api.Step) ([]selector.Candidate, error) {
			return m.templates.options(op.r.flavor.ChainKind+"/"+op.chainName, op.chain.rv, def)
		},
		Template: func(kind, name string) (*api.TemplateSpec, error) {
			tobj := m.templates.get(kind, name)
			if tobj == nil {
				return nil, prepare.ErrNotFound
			}
			return m.templates.spec(tobj)
		},
		Engines: m.engines, Getter: render.DynamicGetter(m.dyn), Timeout: m.opts.RenderTimeout,
		Release: op.helmRelease, // helmrelease.go
	}
}

func (op *ownerPass) realizeStep(env prepare.Env, def api.Step, outs map[string]outputs) stepResult {
	sc := &stepCtx{step: def, kind: def.TemplateRef.Kind, prev: op.prevStep(def.Name)}
	sc.res = st.Resource{Name: def.Name, Inputs: stepInputs(def)}
	if sc.prev != nil {
		// Until this step stamps again, it keeps pointing at what it stamped.
		sc.res.StampedRef, sc.res.StampedObjects = sc.prev.StampedRef, sc.prev.StampedObjects
		sc.res.TemplateRef, sc.res.Outputs = sc.prev.TemplateRef, sc.prev.Outputs
		sc.res.InputDigest, sc.res.OutputValues = sc.prev.InputDigest, sc.prev.OutputValues
		sc.res.ShadowRef, sc.res.ServedBy, sc.res.LastGoodObject = sc.prev.ShadowRef, sc.prev.ServedBy, sc.prev.LastGoodObject
		sc.res.ProcessingInputDigest, sc.res.ProcessingSince = sc.prev.ProcessingInputDigest, sc.prev.ProcessingSince
		sc.res.Provenance = sc.prev.Provenance
	}

	p := prepare.Step(op.ctx, env, def, outs)
	sc.spec, sc.in, sc.params, sc.labels = p.Spec, p.Inputs, p.Params, p.Labels
	if p.PassThrough != "" {
		// A pass-through stamps nothing.
		sc.res.StampedRef, sc.res.StampedObjects, sc.res.TemplateRef = nil, nil, nil
	}
	if p.Template != "" {
		sc.tmplName = p.Template
		sc.res.TemplateRef = &st.TemplateRef{APIVersion: api.Group + "/" + api.Version, Kind: sc.kind, Name: p.Template}
	}
	if r := p.Refusal; r != nil {
		status := st.False
		if len(r.Waiting) > 0 {
			status = st.Unknown
		}
		res := op.stepDone(sc, nil, st.Cond(st.ResourceSubmitted, status, r.Reason, r.Message), nil)
		if render.IsTransient(r.Err) || render.Retryable(r.Err) {
			// A chart repository that did not answer, a render out of time
			// or of slots: retried with backoff, not left failed until
			// something unrelated changes.
			res.err = r.Err
		}
		return res
	}
	if p.PassThrough != "" {
		healthy := st.Cond(st.Healthy, st.True, step.ReasonPassThrough, "")
		return op.stepDone(sc, p.Outputs, st.Cond(st.ResourceSubmitted, st.True, step.ReasonPassThrough, fmt.Sprintf("input [%s] passed through", p.PassThrough)), &healthy)
	}
	return op.execute(sc, p.Objects, p.Inputs) // execute.go
}

// stepInputs are the earlier steps a step reads, for its status.
func stepInputs(def api.Step) []st.Input {
	var out []st.Input
	for _, s := range prepare.InputSteps(def) {
		out = append(out, st.Input{Name: s})
	}
	return out
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
