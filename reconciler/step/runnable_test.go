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
