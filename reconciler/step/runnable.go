package step

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/health"
	st "kontinue.dev/kontinue/reconciler/status"
)

// A template with runnable: true makes its step stamp a Runnable (and a
// ClusterRunTemplate generated from the template); the Runnable creates a
// run per input set and reports the newest successful run's outputs.

// RunnableOutputs are the output paths a generated ClusterRunTemplate reads
// from a run, by output name (nil: the kind has no outputs).
func RunnableOutputs(kind string, spec *api.TemplateSpec) map[string]string {
	switch kind {
	case api.KindClusterSourceTemplate:
		return map[string]string{"url": spec.URLPath, "revision": spec.RevisionPath}
	case api.KindClusterImageTemplate:
		return map[string]string{"image": spec.ImagePath}
	case api.KindClusterConfigTemplate:
		return map[string]string{"config": spec.ConfigPath}
	}
	return nil
}

// Condition types a Runnable reports besides Ready: whether its run
// template can stamp, and its newest run as the run template's rule
// judges it.
const (
	CondRunTemplateReady = "RunTemplateReady"
	CondStampedObject    = "StampedObjectCondition"
)

// ObserveRunnable reads the step's outputs from the Runnable's
// status.outputs (the newest successful run's) and its health from the
// Runnable's Ready condition.
func ObserveRunnable(o Observed, rn *unstructured.Unstructured) Observation {
	what := fmt.Sprintf("Runnable [%s/%s]", rn.GetNamespace(), rn.GetName())
	ob := Observation{State: o.State}
	ob.Healthy = runnableHealth(rn, what)
	// The Runnable reports on the newest input set it was given.
	ob.noteApplied(o.Digest, "", outcomeOfStatus(ob.Healthy.Status))
	ob.Submitted = st.Cond(st.ResourceSubmitted, st.True, ReasonSubmitted, "")
	want := RunnableOutputs(o.Kind, o.Spec)
	if want == nil {
		ob.out = Outputs{}
		return ob
	}
	got, _, _ := unstructured.NestedMap(rn.Object, "status", "outputs")
	out := Outputs{}
	var missing []string
	for name := range want {
		v, ok := got[name]
		if !ok {
			missing = append(missing, name)
			continue
		}
		out[name] = v
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		ob.Submitted = st.Cond(st.ResourceSubmitted, st.Unknown, ReasonMissingValueAtPath,
			fmt.Sprintf("waiting for %s to report status.outputs [%s] for step [%s]: none of its runs has succeeded yet", what, strings.Join(missing, ", "), o.Step))
		return ob
	}
	ob.out = out
	return ob
}

// runnableHealth is the step's Healthy condition from the Runnable. While
// the Runnable's template is fine, its health is its newest run's as the
// template's own rule judged it (StampedObjectCondition): the step carries
// the rule's reason (FailedConditionMet, SucceededCondition, …) and names
// the run, as a mutable step carries the rule's reason for its object.
// Otherwise (no run template, a run the API server refused) the Runnable's
// Ready condition is relayed as ReadyCondition.
func runnableHealth(rn *unstructured.Unstructured, what string) *metav1.Condition {
	gen, _, _ := unstructured.NestedInt64(rn.Object, "status", "observedGeneration")
	if gen < rn.GetGeneration() {
		return healthyOf(string(st.Unknown), "ReadyCondition", fmt.Sprintf("%s has not yet reported on generation %d", what, rn.GetGeneration()))
	}
	ready, found := st.ConditionOf(rn, st.Ready)
	if !found {
		return healthyOf(string(st.Unknown), "ReadyCondition", what+" has no Ready condition yet")
	}
	tmpl, _ := st.ConditionOf(rn, CondRunTemplateReady)
	run, ran := st.ConditionOf(rn, CondStampedObject)
	if tmpl.Status == string(st.True) && ran && run.Status == ready.Status && run.Reason != "" {
		return healthyOf(statusOf(run.Status), run.Reason, fmt.Sprintf("%s: %s", what, run.Message))
	}
	m := fmt.Sprintf("%s is Ready=%s", what, ready.Status)
	if ready.Reason != "" {
		m += " (" + ready.Reason + ")"
	}
	if ready.Message != "" {
		m += ": " + ready.Message
	}
	return healthyOf(statusOf(ready.Status), "ReadyCondition", m)
}

// statusOf is a condition status as another controller wrote it, anything
// but True or False being Unknown.
func statusOf(s string) string {
	if cs := metav1.ConditionStatus(s); cs == st.True || cs == st.False {
		return s
	}
	return string(st.Unknown)
}

// HasRunCriterion reports whether a template says when one of its runs has
// succeeded: runnable: true needs it, since the objects it stamps need not
// be Tekton's (whose Succeeded condition Cartographer assumes).
func HasRunCriterion(spec *api.TemplateSpec) bool {
	return spec.HealthRule != nil || spec.ObservedCompletion != nil || len(spec.ObservedMatches) > 0
}

// runnable is the Strategy of runnable: true. The executor generates the
// ClusterRunTemplate and the Runnable (Observed.Objects, the Runnable at
// Primary); both are applied, in that order, and the step observes the
// Runnable.
type runnable struct{}

func (runnable) Check(o Observed) *metav1.Condition {
	if o.Spec.Template == nil {
		return refused("step [%s]: template [%s/%s] sets runnable: true, which needs spec.template (the $(…)$ engine)", o.Step, o.Kind, o.Template)
	}
	if !HasRunCriterion(o.Spec) {
		return refused("step [%s]: template [%s/%s] sets runnable: true, which needs a rule that says when a run has succeeded: healthRule, observedCompletion or observedMatches", o.Step, o.Kind, o.Template)
	}
	if len(o.Objects) != 1 {
		return refused("step [%s]: template [%s/%s] sets runnable: true and must stamp exactly one object, not %d", o.Step, o.Kind, o.Template, len(o.Objects))
	}
	return nil
}

func (runnable) Start(o Observed, _ Seen) Plan {
	return Plan{Apply: o.Objects, Primary: o.Primary, Reached: true, phase: phaseApply}
}

func (runnable) Next(o Observed, p Plan, got Got) Plan {
	if p.phase != phaseApply {
		return p
	}
	ob := ObserveRunnable(o, got.Live[p.Primary])
	return Plan{Done: &ob, Ref: p.Apply[p.Primary], Objects: stampedOnly}
}

func (runnable) Record(Observation, *st.Resource) {}

// outcomeOfStatus reads a Healthy status as an outcome.
func outcomeOfStatus(s metav1.ConditionStatus) health.Outcome {
	switch s {
	case st.True:
		return health.Succeeded
	case st.False:
		return health.Failed
	}
	return health.Processing
}
