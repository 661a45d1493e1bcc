package step

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/jsonvalue"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/health"
	st "kontinue.dev/kontinue/reconciler/status"
)

// Gated reports whether a template says when its object has succeeded: such
// a step applies new inputs only once the object finished with the current
// ones, and releases outputs only on success. Templates with only
// Cartographer's healthRule, or none, keep Cartographer's behaviour, unless
// a healthRule template asks for shadows (shadow: true): a shadow needs the
// last input set that succeeded, which only a gated step knows, so the
// opt-in makes healthRule a success rule (Healthy=True succeeded, False
// failed, Unknown processing).
func Gated(spec *api.TemplateSpec) bool {
	return spec.AlwaysSuccessful || spec.ObservedCompletion != nil || len(spec.ObservedMatches) > 0 ||
		(spec.HealthRule != nil && spec.Shadow != nil && *spec.Shadow)
}

// DefaultProgressDeadline is the progress deadline of a template that sets
// none: long enough for a build, short enough that an input set an object
// never finishes does not hold the newer ones for good.
const DefaultProgressDeadline = 10 * time.Minute

// ProgressDeadline is the template's progressDeadline (the default when
// unset or not a positive duration; the CRD refuses those).
func ProgressDeadline(spec *api.TemplateSpec) time.Duration {
	if d, err := time.ParseDuration(spec.ProgressDeadline); err == nil && d > 0 {
		return d
	}
	return DefaultProgressDeadline
}

// Deadline applies the template's progress deadline to h, what the object
// (what) reports on input set digest at now. The clock runs from the
// first reconcile that saw the object processing that set, and stops
// when the object itself succeeds or fails; past the deadline the set
// counts as failed (ProgressDeadlineExceeded), and stays so until the
// object reports an outcome or gets another set. It returns the result,
// the state with the clock, and when to look again (0: no need).
func Deadline(spec *api.TemplateSpec, s State, digest, what string, h health.Result, now time.Time) (health.Result, State, time.Duration) {
	if h.Outcome != health.Processing || digest == "" {
		s.ProcessingDigest, s.ProcessingSince = "", time.Time{}
		return h, s, 0
	}
	if s.ProcessingDigest != digest || s.ProcessingSince.IsZero() {
		s.ProcessingDigest, s.ProcessingSince = digest, now
	}
	d := ProgressDeadline(spec)
	left := s.ProcessingSince.Add(d).Sub(now)
	if left > 0 {
		// A moment past the deadline, so that the recheck finds it passed.
		return h, s, left + time.Second
	}
	return health.Result{Outcome: health.Failed, Status: health.StatusFalse, Reason: ReasonProgressDeadlineExceeded, HasRule: true, CanFail: true,
		Message: fmt.Sprintf("%s has neither succeeded nor failed on input set %s within the progress deadline %s (processing since %s): %s",
			what, digest, d, s.ProcessingSince.UTC().Format(time.RFC3339), h.Message)}, s, 0
}

// Admit decides, before a gated step applies o.Desired, whether it must hold
// the new input set: the live primary carries another input set and has not
// yet succeeded or failed on it. Sets in between are never queued: the next
// reconcile renders the newest.
//
// What the live object did with its input set is recorded before the newer
// set goes in: once applied, the object no longer shows it. So a success the
// step's state does not have yet, or a failure whose shadow is not in the
// state yet, holds the newer set for one reconcile: this one records it (and
// stamps the shadow), the status write keeps it, and the next reconcile lets
// the newer set in (Recheck). A status write that loses a race is decided
// again on the same live object instead of being forgotten.
func Admit(o Observed, live *unstructured.Unstructured) Observation {
	ob := Observation{State: o.State}
	if live == nil {
		return ob
	}
	liveDigest := live.GetAnnotations()[AnnotationDigest]
	if liveDigest == "" || liveDigest == o.Digest {
		return ob // same inputs (a hand edit is re-applied at once)
	}
	doc, err := live.MarshalJSON()
	if err != nil {
		return ob
	}
	h := health.EvaluateWith(o.Spec, LifecycleOf(o.Spec).Health, o.Kind, doc, nil)
	var recheck time.Duration
	h, ob.State, recheck = Deadline(o.Spec, ob.State, liveDigest, describe(live), h, o.Now)
	var record string // what must be in the status before the newer set goes in
	if h.Outcome == health.Succeeded {
		// The outputs of the live object's set, not of the new render's
		// (outputsOn): every kind records its success here alike.
		if out, err := outputsOn(o, liveDigest, live, doc); err == nil {
			if ob.State.GoodDigest != liveDigest {
				record = fmt.Sprintf("the success of %s on input set %s is recorded", describe(live), liveDigest)
				if ShadowCapable(o.Kind, o.Spec) {
					// The object as rendered for that set, never the live
					// one: a shadow stamped from the API server's defaults
					// and other controllers' fields would fight them.
					ob.State.LastGoodObject = appliedObject(o.State, liveDigest)
				}
			}
			ob.State.Good, ob.State.GoodDigest = out, liveDigest
			// The primary succeeded: the shadow has served its purpose
			// (design document 004), also when the next set goes in now.
			ob.State.ShadowRef = nil
		}
	}
	if h.Outcome == health.Failed && ob.State.ShadowRef == nil && ShadowCapable(o.Kind, o.Spec) &&
		liveDigest != ob.State.GoodDigest && ob.State.LastGoodObject != nil {
		// A failure (its rule's or the progress deadline's) on inputs
		// other than the last good ones wants the shadow now, although the
		// newest set goes in next: once it is in, the object shows that
		// set processing, not the failure.
		record = fmt.Sprintf("the shadow for the failure of %s on input set %s is stamped and recorded", describe(live), liveDigest)
		ob.shadowHold = true
	}
	if liveSet := setOf(o, liveDigest, saidSet(live)); record == "" && h.Outcome == health.Failed && o.PrevProvenance != nil &&
		liveDigest != ob.State.GoodDigest && !isCurrent(o.PrevProvenance, liveSet) && !endedIn(o.PrevProvenance, liveSet, st.OutcomeFailed) {
		// The failure goes into the step's provenance (and the lead time
		// metrics) before the newer set replaces it on the object. Only a
		// step that records provenance already (not the first reconcile
		// after an upgrade), and only a set that can be recorded as failed
		// (not the last good one, failing on external state or in a
		// re-render, which NextProvenance leaves succeeded), or the hold
		// would never end.
		record = fmt.Sprintf("the failure of %s on input set %s is recorded", describe(live), liveDigest)
	}
	switch {
	case record != "":
		ob.Held, ob.HeldDigest, ob.Gated, ob.Recheck = true, o.Digest, true, recordRecheck
		ob.Submitted = st.Cond(st.ResourceSubmitted, st.Unknown, ReasonInputsHeld,
			fmt.Sprintf("step [%s] holds new inputs (input set %s) for one reconcile, until %s: %s", o.Step, o.Digest, record, h.Message))
	case h.Outcome != health.Processing:
		return ob
	default:
		ob.Held, ob.HeldDigest, ob.Gated, ob.Recheck = true, o.Digest, true, recheck
		ob.Submitted = st.Cond(st.ResourceSubmitted, st.Unknown, ReasonInputsHeld,
			fmt.Sprintf("step [%s] holds new inputs (input set %s) until %s has succeeded or failed on input set %s: %s",
				o.Step, o.Digest, describe(live), liveDigest, h.Message))
	}
	ob.Healthy = healthyOf(h.Status, h.Reason, h.Message)
	ob.noteApplied(liveDigest, saidSet(live), h.Outcome)
	ob.planShadow(o, live, h, h.Outcome == health.Succeeded && record != "" && ob.State.GoodDigest == liveDigest)
	return ob
}

// outputsOn reads the outputs of input set digest, which the object live
// (doc) is on: from the object, as the template's paths say; a
// deployment's are its inputs, those the set was rendered with: the
// render's at hand, or those recorded when the set was applied
// (State.AppliedOutputs) or succeeded (State.Good), or else those the
// object was written with (AnnotationDeploymentInputs): the status write
// after an apply can be lost (refused as decided on a stale copy, a kill,
// a failover), the object's own annotation not. An older set whose inputs
// are not known (an object written before Kontinue recorded them) has no
// outputs to record.
func outputsOn(o Observed, digest string, live *unstructured.Unstructured, doc []byte) (Outputs, error) {
	in := o.Deployment
	if o.Kind == api.KindClusterDeploymentTemplate && digest != o.Digest {
		in = deploymentInputsOf(o.State, digest, live)
		if in == nil {
			return nil, fmt.Errorf("the deployment inputs of input set %s are not known", digest)
		}
	}
	return ReadOutputs(o.Kind, o.Spec, doc, in)
}

// deploymentInputsOf are the deployment inputs input set digest, on the
// object live, was applied with (nil: not known).
func deploymentInputsOf(s State, digest string, live *unstructured.Unstructured) Outputs {
	switch {
	case digest == "":
		return nil
	case s.AppliedDigest == digest && s.AppliedOutputs != nil:
		return s.AppliedOutputs
	case s.GoodDigest == digest && s.Good != nil:
		return s.Good
	case live != nil && live.GetAnnotations()[AnnotationDigest] == digest:
		return riddenInputs(live.GetAnnotations()[AnnotationDeploymentInputs])
	}
	return nil
}

// AnnotationDeploymentInputs holds the deployment inputs a deployment
// step's primary was applied with (DeploymentRider).
const AnnotationDeploymentInputs = api.AnnotationDeploymentInputs

// deploymentRiderLimit bounds the annotation: annotations share 256 KiB
// (the API server's limit) with the template's own. Larger inputs are
// kept in the status only, as before the annotation.
const deploymentRiderLimit = 64 << 10

// DeploymentRider is the value of AnnotationDeploymentInputs for the
// primary o renders ("": not a deployment step, or inputs too large).
func DeploymentRider(o Observed) string {
	if o.Kind != api.KindClusterDeploymentTemplate || o.Deployment == nil {
		return ""
	}
	b, err := jsonvalue.Marshal(map[string]any{"url": o.Deployment["url"], "revision": o.Deployment["revision"]})
	if err != nil || len(b) > deploymentRiderLimit {
		return ""
	}
	return string(b)
}

// riddenInputs reads a DeploymentRider back (nil: none, or not one: the
// object is editable by others, and what is not an object of url and
// revision is no record).
func riddenInputs(v string) Outputs {
	if v == "" || len(v) > deploymentRiderLimit {
		return nil
	}
	m, ok := jsonvalue.DecodeObject([]byte(v))
	if !ok {
		return nil
	}
	for k := range m {
		if k != "url" && k != "revision" {
			return nil
		}
	}
	return Outputs{"url": m["url"], "revision": m["revision"]}
}

// applied notes that the object is on the set o renders, as rendered: what
// its success records should it be seen only once a newer set is rendered.
func (s *State) applied(o Observed) {
	s.AppliedDigest, s.AppliedObject, s.AppliedOutputs = o.Digest, nil, nil
	if ShadowCapable(o.Kind, o.Spec) {
		s.AppliedObject = o.Desired.Object
	}
	if o.Kind == api.KindClusterDeploymentTemplate {
		s.AppliedOutputs = o.Deployment
	}
}

// appliedObject is the object rendered from input set digest, as recorded
// when it was applied (nil: not known, and no shadow can be stamped from
// it).
func appliedObject(s State, digest string) map[string]any {
	if s.AppliedDigest == digest {
		return s.AppliedObject
	}
	return nil
}

// recordRecheck is how soon a step that held its new inputs only to record
// what the live object did looks again: at once, after its status write.
const recordRecheck = time.Millisecond

// Observe reads a mutable step's outputs and health from its primary object
// after the apply. changed says the object was written in this reconcile: a
// gated step does not trust what the object reports until it has reported
// on the new spec.
func Observe(o Observed, live *unstructured.Unstructured, changed bool) Observation {
	ob := Observation{State: o.State}
	doc, err := live.MarshalJSON()
	if err != nil {
		ob.Submitted = st.Cond(st.ResourceSubmitted, st.Unknown, ReasonUnknownError, err.Error())
		return ob
	}
	what := describe(live)
	liveDigest := live.GetAnnotations()[AnnotationDigest]
	out, outErr := outputsOn(o, liveDigest, live, doc)
	h := health.EvaluateWith(o.Spec, LifecycleOf(o.Spec).Health, o.Kind, doc, outErr)
	if !Gated(o.Spec) {
		ob.Healthy = healthyOf(h.Status, h.Reason, h.Message)
		ob.noteApplied(live.GetAnnotations()[AnnotationDigest], saidSet(live), h.Outcome)
		if outErr != nil {
			ob.Submitted = outputsCondition(o, live, h.Status, outErr)
			return ob
		}
		ob.out = out
		ob.Submitted = st.Cond(st.ResourceSubmitted, st.True, ReasonSubmitted, "")
		return ob
	}

	ob.Gated = true
	if changed && h.Outcome != health.Processing && !o.Spec.AlwaysSuccessful {
		// What the object reports now is about the inputs it had before.
		h = health.Result{Outcome: health.Processing, Status: health.StatusUnknown, Reason: ReasonConditionNotMet, HasRule: true, CanFail: h.CanFail,
			Message: fmt.Sprintf("new inputs applied to %s; waiting for it to report on them", what)}
	}
	h, ob.State, ob.Recheck = Deadline(o.Spec, ob.State, liveDigest, what, h, o.Now)
	ob.Healthy = healthyOf(h.Status, h.Reason, h.Message)
	ob.noteApplied(liveDigest, saidSet(live), h.Outcome)
	if liveDigest == o.Digest {
		ob.State.applied(o)
	}
	// Outputs only from success on the inputs Kontinue applied; until then
	// (and after a failure) downstream keeps the last good ones.
	succeeded := h.Outcome == health.Succeeded && outErr == nil && liveDigest == o.Digest
	if succeeded {
		ob.State.Good, ob.State.GoodDigest = out, o.Digest
		if ShadowCapable(o.Kind, o.Spec) {
			ob.State.LastGoodObject = o.Desired.Object
		}
	}
	ob.planShadow(o, live, h, succeeded)
	switch {
	case o.Kind == api.KindClusterDeploymentTemplate && h.Reason == ReasonProgressDeadlineExceeded:
		ob.Submitted = st.Cond(st.ResourceSubmitted, st.False, ReasonProgressDeadlineExceeded, fmt.Sprintf("resource [%s] %s", o.Step, h.Message))
	case o.Kind == api.KindClusterDeploymentTemplate && h.Outcome == health.Failed:
		ob.Submitted = st.Cond(st.ResourceSubmitted, st.False, ReasonFailedConditionMet,
			fmt.Sprintf("resource [%s] failed condition met: %s", o.Step, deploymentMessage(o.Spec, doc, h)))
	case o.Kind == api.KindClusterDeploymentTemplate && h.Outcome == health.Processing:
		ob.Submitted = st.Cond(st.ResourceSubmitted, st.Unknown, ReasonConditionNotMet,
			fmt.Sprintf("resource [%s] condition not met: %s", o.Step, deploymentMessage(o.Spec, doc, h)))
	case h.Outcome == health.Succeeded && outErr != nil:
		ob.Submitted = outputsCondition(o, live, h.Status, outErr)
	default:
		ob.Submitted = st.Cond(st.ResourceSubmitted, st.True, ReasonSubmitted, "")
	}
	return ob
}

// deploymentMessage is why a deployment step's condition is unmet, in
// Cartographer's words where it has some (the owner's ResourcesSubmitted
// repeats it); the step's Healthy condition keeps Kontinue's own detail.
func deploymentMessage(spec *api.TemplateSpec, doc []byte, h health.Result) string {
	if m := health.DeploymentConditionMessage(spec, doc); m != "" {
		return m
	}
	return h.Message
}

// mutable is the Strategy of steps whose objects are updated in place. A
// gated step first decides on the live primary whether it holds the new
// input set (Admit); then every object is applied and the primary observed
// (Observe); last, the shadow the observation wants is stamped and reports
// who serves the outputs (WithShadow).
type mutable struct{}

func (mutable) Check(Observed) *metav1.Condition { return nil }

// needsLive: a gated step holds new inputs on what its live object says
// (Admit).
func (mutable) needsLive(spec *api.TemplateSpec) bool { return Gated(spec) }

func (mutable) Start(o Observed, seen Seen) Plan {
	var admitted Observation
	if Gated(o.Spec) {
		admitted = Admit(o, seen.Live)
		if admitted.Held {
			p := withShadow(admitted)
			p.Ref = o.Desired
			return p
		}
	} else {
		admitted.State = o.State
	}
	return Plan{Apply: o.Objects, Primary: o.Primary, phase: phaseApply, pending: admitted}
}

func (mutable) Next(o Observed, p Plan, got Got) Plan {
	switch p.phase {
	case phaseApply:
		// What Admit recorded (a success on the previous input set) counts.
		o.State = p.pending.State
		next := withShadow(Observe(o, got.Live[p.Primary], got.Wrote))
		next.Ref, next.Objects = p.Apply[p.Primary], stampedOnly
		if len(p.Apply) > 1 {
			next.Objects = p.Apply
		}
		return next
	case phaseShadow:
		ob := p.pending
		if got.Failed != "" && ob.shadowHold {
			// The shadow cannot be stamped (its name taken, a quota):
			// waiting for it would hold the newer set for good, and the
			// newer set may be the fix. It goes in now, as it would have
			// without a shadow; the writer logged why.
			return Plan{Apply: o.Objects, Primary: o.Primary, phase: phaseApply, pending: Observation{State: ob.State}}
		}
		if got.Failed != "" {
			ob = ob.ShadowFailed(got.Failed)
		} else {
			ob = ob.WithShadow(got.Refs[0], got.Live[0], o)
		}
		return Plan{Done: &ob, Ref: p.Ref, Objects: p.Objects}
	}
	return p
}

// withShadow is the decision, after the shadow it wants is stamped.
func withShadow(ob Observation) Plan {
	if ob.ShadowWant == nil {
		return done(ob)
	}
	return Plan{Apply: []*unstructured.Unstructured{ob.ShadowWant}, Shadow: true, phase: phaseShadow, pending: ob}
}

func (mutable) Record(ob Observation, res *st.Resource) {
	s := ob.State
	res.HeldInputDigest = ob.HeldDigest
	res.AppliedInputDigest, res.AppliedObject, res.AppliedOutputValues = "", nil, nil
	if s.AppliedDigest != "" && s.AppliedDigest != s.GoodDigest {
		// Once the set on the object is the last good one, LastGoodObject
		// and OutputValues hold what it rendered and published.
		res.AppliedInputDigest, res.AppliedObject, res.AppliedOutputValues = s.AppliedDigest, s.AppliedObject, s.AppliedOutputs
	}
	res.ProcessingInputDigest, res.ProcessingSince = s.ProcessingDigest, nil
	if !s.ProcessingSince.IsZero() {
		t := metav1.NewTime(s.ProcessingSince)
		res.ProcessingSince = &t
	}
	res.ShadowRef, res.ServedBy, res.LastGoodObject = s.ShadowRef, s.ServedBy, s.LastGoodObject
	if ob.Gated {
		res.InputDigest, res.OutputValues = s.GoodDigest, s.Good
	}
}
