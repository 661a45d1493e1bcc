package step

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
	st "kontinue.dev/kontinue/reconciler/status"
)

func TestObserveRunnable(t *testing.T) {
	runnable := func(gen, observed int64, ready string, outputs map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "carto.run/v1alpha1", "kind": "Runnable",
			"metadata": map[string]any{"name": "app-lint", "namespace": "ns", "generation": gen}}}
		status := map[string]any{"observedGeneration": observed}
		if ready != "" {
			status["conditions"] = []any{map[string]any{"type": "Ready", "status": ready, "reason": "Because"}}
		}
		if outputs != nil {
			status["outputs"] = outputs
		}
		u.Object["status"] = status
		return u
	}
	src := Observed{Kind: api.KindClusterSourceTemplate, Step: "lint", Spec: &api.TemplateSpec{URLPath: ".u", RevisionPath: ".r"}}
	tests := []struct {
		name      string
		o         Observed
		rn        *unstructured.Unstructured
		healthy   metav1.ConditionStatus
		submitted metav1.ConditionStatus
		out       Outputs
	}{
		{"not caught up with its spec", src, runnable(2, 1, "True", nil), st.Unknown, st.Unknown, nil},
		{"no Ready yet", src, runnable(1, 1, "", nil), st.Unknown, st.Unknown, nil},
		{"ready with outputs", src, runnable(1, 1, "True", map[string]any{"url": "u", "revision": "r"}), st.True, st.True, Outputs{"url": "u", "revision": "r"}},
		{"an output missing: waits", src, runnable(1, 1, "False", map[string]any{"url": "u"}), st.False, st.Unknown, nil},
		{"a ClusterTemplate has no outputs", Observed{Kind: api.KindClusterTemplate, Spec: &api.TemplateSpec{}}, runnable(1, 1, "True", nil), st.True, st.True, Outputs{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ob := ObserveRunnable(tt.o, tt.rn)
			assert.Equal(t, tt.healthy, ob.Healthy.Status, ob.Healthy.Message)
			assert.Equal(t, tt.submitted, ob.Submitted.Status, ob.Submitted.Message)
			assert.Equal(t, tt.out, ob.Outputs())
		})
	}
	ob := ObserveRunnable(src, runnable(1, 1, "False", map[string]any{}))
	assert.Contains(t, ob.Submitted.Message, "[revision, url]")
	assert.Contains(t, ob.Healthy.Message, "Ready=False (Because)")
}

// A run the template's rule judged gives the step the rule's reason and
// names the run; a Runnable that cannot stamp is relayed as ReadyCondition.
func TestRunnableHealthCarriesTheRulesReason(t *testing.T) {
	cond := func(typ, status, reason, msg string) any {
		return map[string]any{"type": typ, "status": status, "reason": reason, "message": msg}
	}
	runnable := func(conds ...any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "carto.run/v1alpha1", "kind": "Runnable",
			"metadata": map[string]any{"name": "app-lint", "namespace": "ns", "generation": int64(1)},
			"status":   map[string]any{"observedGeneration": int64(1), "conditions": conds}}}
	}
	run := "PipelineRun [ns/app-lint-x7k2p]"
	tests := []struct {
		name           string
		rn             *unstructured.Unstructured
		status, reason string
		msg            []string
	}{
		{"the rule calls the run failed", runnable(
			cond("RunTemplateReady", "True", "Ready", ""),
			cond("StampedObjectCondition", "False", "FailedConditionMet", run+": failed condition met: status.phase is Error"),
			cond("Ready", "False", "FailedConditionMet", run+": failed condition met: status.phase is Error")),
			"False", "FailedConditionMet", []string{"Runnable [ns/app-lint]", run, "status.phase is Error"}},
		{"the rule calls the run successful", runnable(
			cond("RunTemplateReady", "True", "Ready", ""),
			cond("StampedObjectCondition", "True", "SucceededCondition", run+": condition [Succeeded] is [True]"),
			cond("Ready", "True", "Ready", "")),
			"True", "SucceededCondition", []string{run}},
		{"the run is still running", runnable(
			cond("RunTemplateReady", "True", "Ready", ""),
			cond("StampedObjectCondition", "Unknown", "ConditionNotMet", run+": succeeded condition not met"),
			cond("Ready", "Unknown", "ConditionNotMet", run+": succeeded condition not met")),
			"Unknown", "ConditionNotMet", []string{run}},
		{"the run was refused: the Runnable's Ready is relayed", runnable(
			cond("RunTemplateReady", "False", "StampedObjectRejectedByAPIServer", "pods is forbidden"),
			cond("StampedObjectCondition", "Unknown", "NoStampedObject", "no object has been stamped yet"),
			cond("Ready", "False", "StampedObjectRejectedByAPIServer", "pods is forbidden")),
			"False", "ReadyCondition", []string{"Runnable [ns/app-lint] is Ready=False (StampedObjectRejectedByAPIServer): pods is forbidden"}},
		{"a Runnable of another controller without the two conditions", runnable(
			cond("Ready", "False", "Broken", "it broke")),
			"False", "ReadyCondition", []string{"Ready=False (Broken): it broke"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ob := ObserveRunnable(Observed{Kind: api.KindClusterTemplate, Spec: &api.TemplateSpec{}}, tt.rn)
			assert.Equal(t, metav1.ConditionStatus(tt.status), ob.Healthy.Status)
			assert.Equal(t, tt.reason, ob.Healthy.Reason)
			for _, m := range tt.msg {
				assert.Contains(t, ob.Healthy.Message, m)
			}
		})
	}
}
