package reconciler

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/health"
	"kontinue.dev/kontinue/reconciler/render"
	st "kontinue.dev/kontinue/reconciler/status"
)

// ReasonInputsHeld: the step holds newer inputs until its object has
// succeeded or failed on the ones it has.
const ReasonInputsHeld = "InputsHeld"

// gated reports whether a template says when its object has succeeded
// (seed 002): such a step applies new inputs only once the object finished
// with the current ones, and releases outputs only on success. Templates with
// only Cartographer's healthRule, or none, keep Cartographer's behaviour.
func gated(spec *api.TemplateSpec) bool {
	return spec.AlwaysSuccessful || spec.ObservedCompletion != nil || len(spec.ObservedMatches) > 0
}

// lastGood returns the outputs of the step's last success, or nil.
func lastGood(prev *st.Resource) outputs {
	if prev == nil || prev.OutputValues == nil {
		return nil
	}
	return outputs(prev.OutputValues)
}

// holdIfBusy decides whether a gated step must hold its new inputs: the live
// object carries other inputs and has not yet succeeded or failed on them.
// Sets in between are never queued: the next reconcile renders the newest.
func (ru *run) holdIfBusy(sc *stepCtx, t target, desired *unstructured.Unstructured, in render.Inputs) (stepResult, bool) {
	live, err := ru.current(t.key, desired.GetNamespace(), desired.GetName())
	if err != nil || live == nil {
		return stepResult{}, false
	}
	liveDigest := live.GetAnnotations()[AnnotationDigest]
	if liveDigest == "" || liveDigest == sc.digest {
		return stepResult{}, false // same inputs (a hand edit is re-applied at once)
	}
	doc, err := live.MarshalJSON()
	if err != nil {
		return stepResult{}, false
	}
	h := health.Evaluate(sc.spec, sc.kind, doc, nil)
	if h.Outcome == health.Succeeded {
		// The previous input set succeeded: its outputs are good and tied to
		// it. Record them before the new inputs go in.
		if sc.kind == api.KindClusterDeploymentTemplate {
			// Its outputs are its inputs, and the new ones are not what
			// succeeded: the last good ones are already in sc.good.
		} else if out, err := readOutputs(sc.kind, sc.spec, doc, in); err == nil {
			sc.good, sc.goodDigest = out, liveDigest
			if shadowCapable(sc.kind, sc.spec) {
				sc.res.LastGoodObject = objectFromLive(live)
			}
		}
	}
	if h.Outcome != health.Processing {
		return stepResult{}, false
	}
	sc.res.StampedRef = &t.ref
	sc.res.HeldInputDigest = sc.digest
	what := fmt.Sprintf("%s [%s/%s]", live.GetKind(), live.GetNamespace(), live.GetName())
	msg := fmt.Sprintf("step [%s] holds new inputs (input set %s) until %s has succeeded or failed on input set %s: %s",
		sc.step.Name, sc.digest, what, liveDigest, h.Message)
	healthy := st.Cond(st.Healthy, metav1.ConditionStatus(h.Status), h.Reason, h.Message)
	healthy = ru.shadow(sc, live, h, false, healthy)
	sc.res.InputDigest, sc.res.OutputValues = sc.goodDigest, sc.good
	return ru.stepDone(sc, sc.good, st.Cond(st.ResourceSubmitted, st.Unknown, ReasonInputsHeld, msg), &healthy), true
}
