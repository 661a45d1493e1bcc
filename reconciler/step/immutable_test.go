package step

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/runs"
	st "kontinue.dev/kontinue/reconciler/status"
)

// run is a Tekton-like run of input set digest whose Succeeded condition is
// status ("" for none yet) and whose result is out.
func run(name, digest, status, out string) runs.Run {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "tekton.dev/v1", "kind": "TaskRun",
		"metadata": map[string]any{"name": name, "namespace": "ns", "labels": map[string]any{runs.LabelInputDigest: digest}},
	}}
	if status != "" {
		u.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Succeeded", "status": status}}, "out": out}
	}
	return runs.FromObject(u, runs.Running)
}

func TestObserveRuns(t *testing.T) {
	spec := &api.TemplateSpec{ConfigPath: ".status.out", Lifecycle: api.LifecycleTekton}
	o := Observed{Kind: api.KindClusterConfigTemplate, Step: "test", Template: "tests", Spec: spec}
	tests := []struct {
		name      string
		list      []runs.Run // newest first
		newest    string
		submitted metav1.ConditionStatus
		healthy   metav1.ConditionStatus
		out       Outputs
		digest    string
		outcomes  []runs.Outcome
	}{
		{name: "run just created, not listed yet", submitted: st.Unknown},
		{name: "newest running, none succeeded: downstream waits", list: []runs.Run{run("r1", "d1", "Unknown", "")},
			newest: "r1", submitted: st.True, healthy: st.Unknown, outcomes: []runs.Outcome{runs.Running}},
		{name: "newest succeeded: its outputs, tied to its input set", list: []runs.Run{run("r2", "d2", "True", "b"), run("r1", "d1", "True", "a")},
			newest: "r2", submitted: st.True, healthy: st.True, out: Outputs{"config": "b"}, digest: "d2", outcomes: []runs.Outcome{runs.Succeeded, runs.Succeeded}},
		{name: "newest running: outputs of the newest success", list: []runs.Run{run("r3", "d3", "Unknown", ""), run("r2", "d2", "False", ""), run("r1", "d1", "True", "a")},
			newest: "r3", submitted: st.True, healthy: st.True, out: Outputs{"config": "a"}, digest: "d1", outcomes: []runs.Outcome{runs.Running, runs.Failed, runs.Succeeded}},
		{name: "newest failed after a success: outputs stay, Healthy says failed", list: []runs.Run{run("r2", "d2", "False", ""), run("r1", "d1", "True", "a")},
			newest: "r2", submitted: st.True, healthy: st.False, out: Outputs{"config": "a"}, digest: "d1", outcomes: []runs.Outcome{runs.Failed, runs.Succeeded}},
		{name: "an empty output is an output", list: []runs.Run{run("r1", "d1", "True", "")},
			newest: "r1", submitted: st.True, healthy: st.True, out: Outputs{"config": ""}, digest: "d1", outcomes: []runs.Outcome{runs.Succeeded}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ObserveRuns(o, tt.list)
			assert.Equal(t, tt.submitted, r.Submitted.Status, r.Submitted.Message)
			if tt.newest == "" {
				assert.Nil(t, r.Newest)
				assert.Nil(t, r.Healthy)
			} else {
				assert.Equal(t, tt.newest, r.Newest.GetName())
				assert.Equal(t, tt.healthy, r.Healthy.Status, r.Healthy.Message)
			}
			assert.Equal(t, tt.out, r.Outputs())
			assert.Equal(t, tt.digest, r.InputDigest)
			for i, want := range tt.outcomes {
				assert.Equal(t, want, r.Judged[i].Outcome, "run %d", i)
				assert.Equal(t, runs.Running, tt.list[i].Outcome, "the list handed in is not changed")
			}
		})
	}
}

// A run per input set, and retention over the judged runs.
func TestRunPerInputSetAndRetention(t *testing.T) {
	spec := &api.TemplateSpec{ConfigPath: ".status.out", Lifecycle: api.LifecycleTekton}
	o := Observed{Kind: api.KindClusterConfigTemplate, Step: "test", Spec: spec}
	list := []runs.Run{run("r4", "d4", "Unknown", ""), run("r3", "d3", "True", "c"), run("r2", "d2", "True", "b"), run("r1", "d1", "False", "")}
	assert.False(t, runs.NeedsCreate(list, "d4"), "the newest run has these inputs")
	assert.True(t, runs.NeedsCreate(list, "d5"), "new inputs, new run")
	assert.True(t, runs.NeedsCreate(list, "d3"), "back to older inputs: a new run (only the newest counts)")

	judged := ObserveRuns(o, list).Judged
	doomed := runs.Prune(judged, runs.Policy{MaxFailed: 0, MaxSucceeded: 1})
	var names []string
	for _, d := range doomed {
		names = append(names, d.Name)
	}
	assert.ElementsMatch(t, []string{"r2", "r1"}, names, "running runs are never pruned; the newest success is kept")
}
