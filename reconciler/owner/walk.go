package owner

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// steps is the walk of the steps stage of an owner's reconcile: each step prepared
// (reconciler/prepare), executed (execute.go) through its lifecycle's
// stepIO, and its status built, in the chain's order; earlier outputs
// feed later inputs. It sees the owner only through these fields and
// writes only through the stepIO io builds: tests give it a fake one.
type steps struct {
	ctx       context.Context
	owner     *unstructured.Unstructured
	user      string // the owner, in logs
	chainName string
	now       metav1.Time
	prev      []st.Resource // the steps' previous statuses
	keep      *keepSet
	events    Events
	prepare   prepare.Env
	io        func(*step.Lifecycle, *stepCtx) stepIO
	// traced: objects carry the trace context of their input set
	// (api.AnnotationTraceParent), traced through done, the statuses of
	// the steps walked so far.
	traced bool
	done   []st.Resource
	// verify checks inputs against the chain's policies (verify.go); nil:
	// no verifier.
	verify *inputCheck
}

// walked is what the steps stage left: the steps' statuses, the soonest
// requeue any asked for (waits: for a blocker's watch to sync), the first
// transient error, and the owner's records of generated ClusterRunTemplates.
type walked struct {
	resources   []st.Resource
	requeue     time.Duration
	blockerWait bool
	err         error
	records     []st.GeneratedRunTemplate
	// verifyUntil, when set: an input is being verified since just now
	// (inputCheck.until): the status may wait for it until then.
	verifyUntil time.Time
}

// walkSteps is the steps stage: the steps of l's chain prepared and
// executed in order, writing through x; writerOf gives each step the
// stepIO of its lifecycle (writers, over x; tests: a fake).
func walkSteps(ctx context.Context, env *Env, l *loaded, x *ownerIO, writerOf func(*step.Lifecycle, *stepCtx) stepIO) walked {
	s := &steps{ctx: ctx, owner: l.owner, user: l.user, chainName: l.chainName, now: l.now, prev: l.prev.Resources,
		keep: x.keep, events: env.Events, prepare: prepareEnv(env, l, x), io: writerOf, traced: env.TraceContext}
	checkInputs(env, l, s) // verify.go
	w := walked{}
	w.resources, w.requeue, w.err = s.walk(l.defs.spec.Resources)
	x.steps.remember()
	if x.steps.stale() && (w.requeue == 0 || w.requeue > heldRecheck) {
		// A step refused an object judged held by another step, which
		// stamped other objects since: look again (claims.go, leftBook).
		w.requeue = heldRecheck
	}
	if x.steps.waiting() && (w.requeue == 0 || w.requeue > blockerSync) {
		w.requeue, w.blockerWait = blockerSync, true
	}
	x.keep.resources(w.resources)
	w.records = x.records.list
	if s.verify != nil {
		w.verifyUntil = s.verify.until
	}
	return w
}

// prepareEnv is what prepare reads of the owner, its chain and the Env.
func prepareEnv(env *Env, l *loaded, x *ownerIO) prepare.Env {
	return prepare.Env{Flavor: env.Flavor, Owner: l.owner, OwnerDoc: l.doc, OwnerSpec: l.spec,
		ChainName: l.chainName, Chain: l.defs.spec,
		// Keyed by kind too: a supply chain and a delivery may share a name.
		Options: func(def api.Step) ([]selector.Candidate, error) {
			return env.Templates.Options(env.Flavor.ChainKind+"/"+l.chainName, l.defs.optsRV, def)
		},
		Template: l.defs.template,
		Engines:  env.Engines, Getter: render.DynamicGetter(env.Dynamic), Timeout: env.RenderTimeout,
		Release: (&helm{io: x, flavor: env.Flavor, resolve: func(gvk schema.GroupVersionKind) (stamp.Target, error) {
			return env.Writer.Session().Resolve(gvk)
		}}).release, // helm.go
		Schema: env.schema(),
	}
}

// schema is the owner kind's schema (nil: none).
func (e *Env) schema() *render.Schema {
	if e.Schema == nil {
		return nil
	}
	return e.Schema()
}

// walk realizes the steps in order: their statuses, the soonest requeue
// any asked for, the first transient error.
func (s *steps) walk(defs []api.Step) ([]st.Resource, time.Duration, error) {
	outs := map[string]outputs{}
	var resources []st.Resource
	var requeue time.Duration
	var transient error
	for _, def := range defs {
		s.done = resources
		sr := s.realizeStep(def, outs)
		resources = append(resources, sr.status)
		if sr.outputs != nil {
			outs[def.Name] = sr.outputs
		}
		if sr.err != nil && transient == nil {
			transient = sr.err
		}
		if sr.requeue > 0 && (requeue == 0 || sr.requeue < requeue) {
			requeue = sr.requeue
		}
	}
	return resources, requeue, transient
}

func (s *steps) prevStep(name string) *st.Resource {
	for i := range s.prev {
		if s.prev[i].Name == name {
			return &s.prev[i]
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
	// generated are what a runnable: true step stamps (prepare.Prepared).
	generated []*unstructured.Unstructured
	// traceParent is the trace context of the input set the step renders
	// now ("": none), put on what it writes.
	traceParent string
}

// realizeStep prepares one step and executes what it rendered.
func (s *steps) realizeStep(def api.Step, outs map[string]outputs) stepResult {
	sc := &stepCtx{step: def, kind: def.TemplateRef.Kind, prev: s.prevStep(def.Name)}
	sc.res = st.Resource{Name: def.Name, Inputs: stepInputs(def)}
	if sc.prev != nil {
		// Until this step stamps again, it keeps pointing at what it stamped.
		sc.res = sc.prev.Carried(sc.res.Inputs)
	}

	p := prepare.Step(s.ctx, s.prepare, def, outs)
	sc.spec, sc.in, sc.params, sc.labels, sc.generated = p.Spec, p.Inputs, p.Params, p.Labels, p.Generated
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
		if len(r.Waiting) > 0 || r.Pending {
			status = st.Unknown
		}
		res := s.stepDone(sc, nil, st.Cond(st.ResourceSubmitted, status, r.Reason, r.Message), nil)
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
		return s.stepDone(sc, p.Outputs, st.Cond(st.ResourceSubmitted, st.True, step.ReasonPassThrough, fmt.Sprintf("input [%s] passed through", p.PassThrough)), &healthy)
	}
	if len(p.Objects) == 1 {
		s.prefetch(def, sc.kind, p.Spec, p.Objects[0]) // verify.go
	}
	return s.execute(sc, p.Objects, p.Inputs) // execute.go
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
func (s *steps) stepDone(sc *stepCtx, out outputs, submitted metav1.Condition, healthy *metav1.Condition) stepResult {
	submitted, recheck := s.verified(sc, submitted) // verify.go
	h := st.Cond(st.Healthy, st.Unknown, "NoStampedObject", "no object has been stamped")
	if healthy != nil {
		h = *healthy
	} else if submitted.Status == st.True {
		h = st.Cond(st.Healthy, st.Unknown, "OutputNotAvailable", "")
	}
	if out != nil {
		var changed []string
		sc.res.Outputs, changed = st.Outputs(out, prevOutputs(sc.prev), s.now)
		if len(changed) > 0 && sc.prev != nil {
			s.events.Event(s.owner, corev1.EventTypeNormal, stamp.EventResourceOutputChanged, "[%s] found a new output in step [%s]: %s", s.owner.GetName(), sc.step.Name, strings.Join(changed, ", "))
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
			s.events.Event(s.owner, eventType(h.Status), stamp.EventResourceHealthyStatusChange, "[%s] step [%s] Healthy is now %s: %s", s.owner.GetName(), sc.step.Name, h.Status, h.Reason)
		}
	}
	sc.res.Conditions = st.Merge(conds, prevConds, s.owner.GetGeneration(), s.now)
	s.logStep(sc, ready, prevConds)
	return stepResult{status: sc.res, outputs: out, requeue: recheck}
}

// logStep logs a step whose readiness changed (and every step at -v=4),
// with the owner, step, template and object on the line. A step that turns
// False is a failure someone must act on: an error line, and a Warning
// event on the owner with the step's reason (once per change).
func (s *steps) logStep(sc *stepCtx, ready metav1.Condition, prev []metav1.Condition) {
	tmpl := ""
	if sc.tmplName != "" {
		tmpl = sc.kind + "/" + sc.tmplName
	}
	kv := []any{"owner", s.user, "chain", s.chainName, "step", sc.step.Name,
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
	if ready.Reason == ReasonInputNotVerified {
		return // verify.go tells each refusal once (refusedEvent)
	}
	s.events.Event(s.owner, corev1.EventTypeWarning, ready.Reason, "step [%s]: %s", sc.step.Name, ready.Message)
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
