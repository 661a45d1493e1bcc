package step

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
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

// ObserveRunnable reads the step's outputs from the Runnable's
// status.outputs (the newest successful run's) and its health from the
// Runnable's Ready condition.
func ObserveRunnable(o Observed, rn *unstructured.Unstructured) Observation {
	what := fmt.Sprintf("Runnable [%s/%s]", rn.GetNamespace(), rn.GetName())
	ob := Observation{State: o.State}
	gen, _, _ := unstructured.NestedInt64(rn.Object, "status", "observedGeneration")
	ready, found := st.ConditionOf(rn, st.Ready)
	switch {
	case gen < rn.GetGeneration():
		ob.Healthy = healthyOf(string(st.Unknown), "ReadyCondition", fmt.Sprintf("%s has not yet reported on generation %d", what, rn.GetGeneration()))
	case !found:
		ob.Healthy = healthyOf(string(st.Unknown), "ReadyCondition", what+" has no Ready condition yet")
	default:
		cs := metav1.ConditionStatus(ready.Status)
		if cs != st.True && cs != st.False {
			cs = st.Unknown
		}
		m := fmt.Sprintf("%s is Ready=%s", what, ready.Status)
		if ready.Reason != "" {
			m += " (" + ready.Reason + ")"
		}
		if ready.Message != "" {
			m += ": " + ready.Message
		}
		ob.Healthy = healthyOf(string(cs), "ReadyCondition", m)
	}
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

func (runnable) Lifecycle() Lifecycle { return Runnable }

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
