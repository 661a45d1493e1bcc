package step

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	o := Observed{Kind: api.KindClusterConfigTemplate, Step: "test", Template: "tests", Spec: spec, Resource: "taskruns.tekton.dev"}
	tests := []struct {
		name      string
		list      []runs.Run // newest first
		newest    string
		submitted metav1.ConditionStatus
		message   string // of ResourceSubmitted, when set
		healthy   metav1.ConditionStatus
		out       Outputs
		digest    string
		outcomes  []runs.Outcome
		spec      *api.TemplateSpec // o's when nil
	}{
		{name: "run just created, not listed yet", submitted: st.Unknown},
		{name: "newest running, none succeeded: downstream waits, in Cartographer's words", list: []runs.Run{run("r1", "d1", "Unknown", "")},
			newest: "r1", submitted: st.Unknown, healthy: st.Unknown, outcomes: []runs.Outcome{runs.Running},
			message: "waiting to read value [.status.out] from object [taskruns.tekton.dev/r1] in namespace [ns]"},
		{name: "newest failed, none succeeded", list: []runs.Run{run("r1", "d1", "False", "")},
			newest: "r1", submitted: st.Unknown, healthy: st.False, outcomes: []runs.Outcome{runs.Failed},
			message: "cannot read value [.status.out] from unhealthy object [taskruns.tekton.dev/r1] in namespace [ns], examine object, particularly whether it is receiving proper inputs"},
		{name: "the newest success has no value at the path", list: []runs.Run{run("r1", "d1", "True", "a")},
			newest: "r1", submitted: st.Unknown, healthy: st.True, outcomes: []runs.Outcome{runs.Succeeded}, spec: &api.TemplateSpec{ConfigPath: ".status.nope", Lifecycle: api.LifecycleTekton},
			message: "cannot read value [.status.nope] from healthy object [taskruns.tekton.dev/r1] in namespace [ns], contact Platform Eng"},
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
			o := o
			if tt.spec != nil {
				o.Spec = tt.spec
			}
			r := ObserveRuns(o, tt.list)
			assert.Equal(t, tt.submitted, r.Submitted.Status, r.Submitted.Message)
			if tt.message != "" {
				assert.Equal(t, tt.message, r.Submitted.Message)
			}
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

// A retry token makes one more run of the same inputs when the newest run
// of them failed, once per token, and the step records the token handled.
func TestImmutableRetry(t *testing.T) {
	spec := &api.TemplateSpec{ConfigPath: ".status.out", Lifecycle: api.LifecycleTekton}
	desired := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "tekton.dev/v1", "kind": "TaskRun",
		"metadata": map[string]any{"generateName": "t-", "namespace": "ns"}}}
	retried := func(r runs.Run, token string) runs.Run {
		u := runs.RetryRun(r.Obj, token, runs.Run{Name: "r0"})
		return runs.FromObject(u, runs.Running)
	}
	tests := []struct {
		name    string
		list    []runs.Run
		token   string
		handled string
		pending bool
		want    bool // a run is created, for the token
	}{
		{name: "newest run of these inputs failed", list: []runs.Run{run("r1", "d1", "False", "")}, token: "t1", want: true},
		{name: "no token", list: []runs.Run{run("r1", "d1", "False", "")}},
		{name: "the token handled already", list: []runs.Run{run("r1", "d1", "False", "")}, token: "t1", handled: "t1"},
		{name: "a new token after a handled one", list: []runs.Run{run("r1", "d1", "False", "")}, token: "t2", handled: "t1", want: true},
		{name: "the newest run succeeded", list: []runs.Run{run("r1", "d1", "True", "a")}, token: "t1"},
		{name: "the newest run still runs", list: []runs.Run{run("r1", "d1", "Unknown", "")}, token: "t1"},
		{name: "the token's run exists (its status write was lost)", list: []runs.Run{retried(run("r2", "d1", "False", ""), "t1"), run("r1", "d1", "False", "")}, token: "t1"},
		{name: "the retry's run created a moment ago", list: []runs.Run{run("r1", "d1", "False", "")}, token: "t1", pending: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Observed{Kind: api.KindClusterConfigTemplate, Step: "test", Spec: spec, Desired: desired, Digest: "d1",
				Objects: []*unstructured.Unstructured{desired}, Retry: tt.token, State: State{RetryHandled: tt.handled}}
			s := immutable{}
			p := s.Start(o, Seen{Runs: tt.list, Pending: tt.pending})
			if !tt.want {
				assert.Nil(t, p.Create)
				require.NotNil(t, p.Done)
			} else {
				require.NotNil(t, p.Create)
				assert.Equal(t, tt.token, p.Create.GetAnnotations()[runs.AnnotationRetry])
				assert.Equal(t, "r1", p.Create.GetAnnotations()[runs.AnnotationRetryOf])
				assert.Empty(t, desired.GetAnnotations(), "the rendered object is not changed")
				p = s.Next(o, p, world{}.got(p))
				require.NotNil(t, p.Done)
				assert.Equal(t, "created", p.Ref.GetName(), "the new run is the step's stampedRef")
			}
			var res st.Resource
			s.Record(*p.Done, &res)
			assert.Equal(t, tt.token, res.LastHandledRetry, "handled, whatever the runs said")
		})
	}
}
