package step

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/health"
	st "kontinue.dev/kontinue/reconciler/status"
)

// Shadow objects: when bad inputs make a step's object fail, a copy stamped
// from the last input set that succeeded keeps receiving external updates
// (a rebased image), and downstream steps are fed from it until the primary
// succeeds again.
const (
	// ShadowLabel marks a shadow object.
	ShadowLabel  = "kontinue.dev/shadow"
	shadowSuffix = "-last-good"
	maxNameLen   = 63 // the strictest name rule among common kinds (DNS label)
)

// Values of status.resources[].servedBy.
const (
	ServedByPrimary = "primary"
	ServedByShadow  = "shadow"
)

// ShadowCapable: the step is gated and can fail (observedCompletion.failed,
// or any gated rule but alwaysSuccessful through the progress deadline),
// the object is updated in place (immutable runs keep their old good run
// anyway), and the template did not opt out. A deployment template passes
// its input through: a copy adds nothing.
func ShadowCapable(kind string, spec *api.TemplateSpec) bool {
	if kind == api.KindClusterDeploymentTemplate || (spec.Shadow != nil && !*spec.Shadow) {
		return false
	}
	if spec.Lifecycle != "" && spec.Lifecycle != api.LifecycleMutable {
		return false
	}
	return Gated(spec) && !spec.AlwaysSuccessful
}

// ShadowName derives a name that cannot collide with the primary's and
// fits the strictest name rule: long names keep a hash of the full name.
func ShadowName(primary string) string {
	name := primary + shadowSuffix
	if len(name) <= maxNameLen {
		return name
	}
	sum := sha256.Sum256([]byte(primary))
	h := hex.EncodeToString(sum[:4])
	keep := maxNameLen - len(shadowSuffix) - len(h) - 1
	base := strings.TrimRight(primary[:keep], "-.")
	return base + "-" + h + shadowSuffix
}

// planShadow decides whether the step's shadow should exist. It should when
// the primary failed on inputs other than the last good ones; a failure on
// the very inputs that last succeeded comes from outside (external state),
// and a copy with the same inputs would fail the same way. Once wanted, it
// stays until the primary succeeds again.
func (ob *Observation) planShadow(o Observed, primary *unstructured.Unstructured, h health.Result, primarySucceeded bool) {
	s := &ob.State
	if !ShadowCapable(o.Kind, o.Spec) {
		s.ShadowRef, s.ServedBy, s.LastGoodObject = nil, "", nil
		return
	}
	s.ServedBy = ServedByPrimary
	if primarySucceeded {
		s.ShadowRef = nil // no longer kept: removed as an orphan
		return
	}
	badInputs := primary.GetAnnotations()[AnnotationDigest] != s.GoodDigest
	need := s.ShadowRef != nil || (h.Outcome == health.Failed && badInputs)
	if !need || s.LastGoodObject == nil {
		s.ShadowRef = nil
		return
	}
	obj := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(s.LastGoodObject)}
	obj.SetName(ShadowName(primary.GetName()))
	obj.SetGenerateName("")
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[ShadowLabel] = "true"
	obj.SetLabels(labels)
	ob.ShadowWant = obj
}

// WithShadow takes the shadow as stamped (ref) and live: while it is in
// success it serves the step's outputs; either way Healthy says so.
func (ob Observation) WithShadow(ref st.StampedRef, live *unstructured.Unstructured, o Observed) Observation {
	ob.State.ShadowRef = &ref
	doc, err := live.MarshalJSON()
	if err != nil || ob.Healthy == nil {
		return ob
	}
	h := *ob.Healthy
	out, outErr := ReadOutputs(o.Kind, o.Spec, doc, nil)
	hs := health.Evaluate(o.Spec, o.Kind, doc, outErr)
	if hs.Outcome == health.Succeeded && outErr == nil {
		ob.State.Good = out
		ob.State.ServedBy = ServedByShadow
		h.Message = fmt.Sprintf("%s; outputs served by shadow %s, stamped from the last good input set %s", h.Message, describe(live), ob.State.GoodDigest)
	} else {
		h.Message = fmt.Sprintf("%s; shadow %s is not in success yet (%s); downstream keeps the last good outputs", h.Message, describe(live), hs.Message)
	}
	ob.Healthy = &h
	return ob
}

// ShadowFailed records that the wanted shadow could not be stamped (why).
func (ob Observation) ShadowFailed(why string) Observation {
	if ob.Healthy != nil {
		h := *ob.Healthy
		h.Message = fmt.Sprintf("%s; shadow could not be stamped: %s", h.Message, why)
		ob.Healthy = &h
	}
	return ob
}

// Outputs are what downstream steps get (nil: they wait).
func (o Observation) Outputs() Outputs {
	if o.Gated {
		return o.State.Good
	}
	return o.out
}
