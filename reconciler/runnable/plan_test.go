package runnable

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"kontinue.dev/kontinue/annotations"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/runs"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/step"
)

func testRunnable() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "carto.run/v1alpha1", "kind": "Runnable",
		"metadata": map[string]any{"name": "lint", "namespace": "ns", "uid": "u-1", "resourceVersion": "7", "managedFields": []any{}},
		"spec":     map[string]any{"inputs": map[string]any{"url": "git://a"}},
		"status":   map[string]any{"outputs": map[string]any{"x": "y"}},
	}}
}

// taskRun is a run whose Succeeded condition is status ("": none) with
// reason and message, and status.out out.
func taskRun(name, status, reason, msg string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "tekton.dev/v1", "kind": "TaskRun",
		"metadata": map[string]any{"name": name, "namespace": "ns"}}}
	if status != "" {
		u.Object["status"] = map[string]any{"out": name + "-out", "conditions": []any{
			map[string]any{"type": "Succeeded", "status": status, "reason": reason, "message": msg}}}
	}
	return u
}

func TestSelectOne(t *testing.T) {
	obj := func(name string, deleting bool) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"kind": "Pipeline", "metadata": map[string]any{"name": name}}}
		if deleting {
			now := metav1.Now()
			u.SetDeletionTimestamp(&now)
		}
		return u
	}
	sel := labels.SelectorFromSet(labels.Set{"app": "x"})
	tests := []struct {
		name    string
		listed  []*unstructured.Unstructured
		want    string
		message string
	}{
		{"exactly one", []*unstructured.Unstructured{obj("p", false)}, "p", ""},
		{"one live, one being deleted", []*unstructured.Unstructured{obj("old", true), obj("p", false)}, "p", ""},
		{"none", nil, "", "no Pipeline in namespace [ns] matches spec.selector labels [app=x]; exactly one must"},
		{"only one being deleted", []*unstructured.Unstructured{obj("old", true)}, "", "no Pipeline"},
		{"several, named in order", []*unstructured.Unstructured{obj("b", false), obj("a", false)}, "", "2 objects of kind Pipeline in namespace [ns] match spec.selector labels [app=x]: [a, b]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, no := selectOne(testRunnable(), "Pipeline", sel, tt.listed)
			if tt.want != "" {
				require.Nil(t, no)
				assert.Equal(t, tt.want, got.GetName())
				return
			}
			assert.Nil(t, got)
			require.NotNil(t, no)
			assert.Equal(t, ReasonSelectorMatchError, no.reason)
			assert.Contains(t, no.message, tt.message)
			assert.Contains(t, no.message, "Runnable [ns/lint]")
		})
	}
}

// A Runnable's runs land in its shard, and its shard is no input: a
// Runnable that moves shard does not run again.
func TestStampRunInTheRunnablesShard(t *testing.T) {
	rt := api.RunTemplateSpec{Template: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"generateName": "x-", "labels": map[string]any{api.ShardLabel: "rendered"}}}}
	run, d0, no := stampRun(context.Background(), testRunnable(), rt, "tmpl", nil)
	require.Nil(t, no)
	_, has := run.GetLabels()[api.ShardLabel]
	assert.False(t, has, "a Runnable of the default shard stamps runs without the label")
	r := testRunnable()
	r.SetLabels(map[string]string{api.ShardLabel: "a"})
	run, d1, no := stampRun(context.Background(), r, rt, "tmpl", nil)
	require.Nil(t, no)
	assert.Equal(t, "a", run.GetLabels()[api.ShardLabel])
	assert.Equal(t, d0, d1, "the shard is not part of the input set")
}

func TestStampRun(t *testing.T) {
	tmpl := func(md map[string]any) api.RunTemplateSpec {
		return api.RunTemplateSpec{Template: map[string]any{"apiVersion": "tekton.dev/v1", "kind": "TaskRun", "metadata": md,
			"spec": map[string]any{"url": "$(runnable.spec.inputs.url)$", "sel": "$(selected.metadata.name)$"}}}
	}
	selected := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "pipeline"}}}
	tests := []struct {
		name    string
		rt      api.RunTemplateSpec
		reason  string
		message string
	}{
		{"generateName", tmpl(map[string]any{"generateName": "lint-", "labels": map[string]any{"team": "a"}}), "", ""},
		{"a name", tmpl(map[string]any{"name": "lint-run"}), "", ""},
		{"no name", tmpl(map[string]any{}), step.ReasonStampFailure, "neither metadata.name nor metadata.generateName"},
		{"another namespace", tmpl(map[string]any{"generateName": "x-", "namespace": "other"}), step.ReasonStampFailure, "names namespace [other]"},
		{"the Runnable's resourceVersion is hidden: its status writes never start a run",
			api.RunTemplateSpec{Template: map[string]any{"kind": "X", "metadata": map[string]any{"generateName": "x-"}, "rv": "$(runnable.metadata.resourceVersion)$"}},
			step.ReasonStampFailure, "runnable.metadata.resourceVersion"},
		{"a bad tag", api.RunTemplateSpec{Template: map[string]any{"kind": "X", "metadata": map[string]any{"generateName": "x-"}, "a": "$(nope.x)$"}}, step.ReasonStampFailure, "from ClusterRunTemplate [tmpl]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run, digest, no := stampRun(context.Background(), testRunnable(), tt.rt, "tmpl", selected)
			if tt.reason != "" {
				require.NotNil(t, no)
				assert.Equal(t, tt.reason, no.reason)
				assert.Contains(t, no.message, tt.message)
				return
			}
			require.Nil(t, no, "%v", no)
			assert.NotEmpty(t, digest)
			assert.Equal(t, "ns", run.GetNamespace())
			assert.Equal(t, "git://a", run.Object["spec"].(map[string]any)["url"])
			assert.Equal(t, "pipeline", run.Object["spec"].(map[string]any)["sel"])
			l := run.GetLabels()
			assert.Equal(t, "true", l[api.StampedLabel])
			assert.Equal(t, "lint", l[api.LabelRunnableName])
			assert.Equal(t, "tmpl", l[api.LabelRunTemplateName])
			c := metav1.GetControllerOf(run)
			require.NotNil(t, c)
			assert.Equal(t, "u-1", string(c.UID))

			again, d2, _ := stampRun(context.Background(), testRunnable(), tt.rt, "tmpl", selected)
			assert.Equal(t, digest, d2, "same inputs, same input set")
			assert.Equal(t, run, again)
		})
	}
	r := testRunnable()
	_ = unstructured.SetNestedField(r.Object, "git://b", "spec", "inputs", "url")
	_, d1, _ := stampRun(context.Background(), testRunnable(), tmpl(map[string]any{"generateName": "x-"}), "tmpl", selected)
	_, d2, _ := stampRun(context.Background(), r, tmpl(map[string]any{"generateName": "x-"}), "tmpl", selected)
	assert.NotEqual(t, d1, d2, "new inputs, new input set")
}

func TestRunsStatus(t *testing.T) {
	prev := Status{Outputs: map[string]any{"out": "old"}, LatestRunRef: &runRef{Name: "r0"}, LatestSuccessfulRunRef: &runRef{Name: "r0"}}
	run := func(u *unstructured.Unstructured) runs.Run { return runs.FromObject(u, runs.TektonOutcome(u)) }
	outs := map[string]string{"out": ".status.out"}
	tests := []struct {
		name       string
		list       []runs.Run
		outs       map[string]string
		outputs    map[string]any
		latest     string
		successful string
		stamped    metav1.ConditionStatus // "": no condition (the previous stays)
		rtReady    metav1.ConditionStatus
	}{
		{"no runs: the previous status stays", nil, outs, prev.Outputs, "r0", "r0", "", st.True},
		{"newest running: last good outputs", []runs.Run{run(taskRun("r2", "Unknown", "Running", "")), run(taskRun("r1", "True", "", ""))}, outs,
			map[string]any{"out": "r1-out"}, "r2", "r1", st.Unknown, st.True},
		{"newest succeeded", []runs.Run{run(taskRun("r2", "True", "", "")), run(taskRun("r1", "True", "", ""))}, outs,
			map[string]any{"out": "r2-out"}, "r2", "r2", st.True, st.True},
		{"newest failed: outputs of the last success", []runs.Run{run(taskRun("r2", "False", "Failed", "boom")), run(taskRun("r1", "True", "", ""))}, outs,
			map[string]any{"out": "r1-out"}, "r2", "r1", st.False, st.True},
		{"no Succeeded condition yet", []runs.Run{run(taskRun("r1", "", "", ""))}, outs, prev.Outputs, "r1", "r0", st.Unknown, st.True},
		{"an output path that is not there", []runs.Run{run(taskRun("r1", "True", "", ""))}, map[string]string{"out": ".status.nope"},
			prev.Outputs, "r1", "r1", st.True, st.False},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, rtReady, stamped := runsStatus(prev, tt.list, tt.outs, nil, "tmpl")
			assert.Equal(t, tt.outputs, s.Outputs)
			assert.Equal(t, tt.latest, s.LatestRunRef.Name)
			assert.Equal(t, tt.successful, s.LatestSuccessfulRunRef.Name)
			if tt.stamped == "" {
				assert.Nil(t, stamped)
			} else {
				require.NotNil(t, stamped)
				assert.Equal(t, tt.stamped, stamped.Status, stamped.Message)
			}
			assert.Equal(t, tt.rtReady, rtReady.Status, rtReady.Message)
			if tt.rtReady == st.False {
				assert.Equal(t, ReasonOutputPathNotSatisfied, rtReady.Reason)
				assert.Contains(t, rtReady.Message, "ClusterRunTemplate [tmpl]")
			}
		})
	}
}

func TestMirrorSucceeded(t *testing.T) {
	tests := []struct {
		name    string
		run     *unstructured.Unstructured
		status  metav1.ConditionStatus
		reason  string
		message string
	}{
		{"not reported", taskRun("r", "", "", ""), st.Unknown, ReasonSucceededNotReported, "TaskRun [ns/r] has not reported a Succeeded condition yet"},
		{"succeeded, no reason", taskRun("r", "True", "", ""), st.True, ReasonSucceededCondition, "TaskRun [ns/r]: Succeeded is True"},
		{"failed, its reason and message", taskRun("r", "False", "TaskRunFailed", "step lint exited 1"), st.False, "TaskRunFailed", "TaskRun [ns/r]: Succeeded is False: step lint exited 1"},
		{"an odd status is Unknown", taskRun("r", "Maybe", "Hmm", ""), st.Unknown, "Hmm", "Succeeded is Maybe"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mirrorSucceeded(tt.run)
			assert.Equal(t, CondStampedObject, c.Type)
			assert.Equal(t, tt.status, c.Status)
			assert.Equal(t, tt.reason, c.Reason)
			assert.Contains(t, c.Message, tt.message)
		})
	}
}

// A run template's criterion (runnable: true copies the template's) decides
// a run's outcome and the StampedObjectCondition; without one, Succeeded.
func TestRunOutcomeByCriterion(t *testing.T) {
	phase := func(name, p string, gen, observed int64) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Job",
			"metadata": map[string]any{"name": name, "namespace": "ns", "generation": gen}}}
		if p != "" {
			u.Object["status"] = map[string]any{"phase": p, "observedGeneration": observed}
		}
		return u
	}
	completion := api.RunTemplateSpec{ObservedCompletion: &api.ObservedCompletion{
		Succeeded: api.Rules{{Key: "status.phase", Value: "Done"}},
		Failed:    api.Rules{{Key: "status.phase", Value: "Error"}},
	}}.Criterion()
	unhealthy := api.RunTemplateSpec{HealthRule: &api.HealthRule{MultiMatch: &api.MultiMatch{
		Healthy:   api.MatchSet{MatchFields: []api.FieldRequirement{{Key: "status.phase", Operator: "In", Values: []any{"Done"}}}},
		Unhealthy: api.MatchSet{MatchFields: []api.FieldRequirement{{Key: "status.phase", Operator: "In", Values: []any{"Error"}}}},
	}}}.Criterion()
	matches := api.RunTemplateSpec{ObservedMatches: []api.ObservedMatch{{Input: "metadata.name", Output: "status.phase"}}}.Criterion()
	tests := []struct {
		name    string
		crit    *api.TemplateSpec
		run     *unstructured.Unstructured
		outcome runs.Outcome
		status  metav1.ConditionStatus
	}{
		{"no criterion: Succeeded True", nil, taskRun("r", "True", "", ""), runs.Succeeded, st.True},
		{"no criterion: a phase means nothing", nil, phase("r", "Done", 1, 1), runs.Running, st.Unknown},
		{"observedCompletion succeeded", completion, phase("r", "Done", 1, 1), runs.Succeeded, st.True},
		{"observedCompletion failed", completion, phase("r", "Error", 1, 1), runs.Failed, st.False},
		{"observedCompletion, no status yet", completion, phase("r", "", 1, 0), runs.Running, st.Unknown},
		{"observedCompletion on an older generation", completion, phase("r", "Done", 2, 1), runs.Running, st.Unknown},
		{"a criterion ignores Succeeded", completion, taskRun("r", "True", "", ""), runs.Running, st.Unknown},
		{"healthRule healthy", unhealthy, phase("r", "Done", 1, 1), runs.Succeeded, st.True},
		{"healthRule unhealthy", unhealthy, phase("r", "Error", 1, 1), runs.Failed, st.False},
		{"observedMatches", matches, phase("r", "r", 1, 1), runs.Succeeded, st.True},
		{"observedMatches unmet", matches, phase("r", "x", 1, 1), runs.Running, st.Unknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.outcome, runOutcome(tt.crit, tt.run))
			c := runCondition(tt.crit, tt.run)
			assert.Equal(t, CondStampedObject, c.Type)
			assert.Equal(t, tt.status, c.Status, c.Message)
			assert.Contains(t, c.Message, "[ns/r]")
		})
	}

	// The newest run failing by the criterion: outputs stay the last
	// success's, the condition is False.
	list := []runs.Run{runs.FromObject(phase("r2", "Error", 1, 1), runs.Failed), runs.FromObject(phase("r1", "Done", 1, 1), runs.Succeeded)}
	s, _, stamped := runsStatus(Status{}, list, map[string]string{"phase": "status.phase"}, completion, "tmpl")
	assert.Equal(t, map[string]any{"phase": "Done"}, s.Outputs)
	assert.Equal(t, "r1", s.LatestSuccessfulRunRef.Name)
	require.NotNil(t, stamped)
	assert.Equal(t, st.False, stamped.Status)
	assert.Equal(t, "FailedConditionMet", stamped.Reason)
}

func TestRunOutputs(t *testing.T) {
	run := taskRun("r", "True", "", "")
	run.Object["status"].(map[string]any)["results"] = []any{map[string]any{"name": "digest", "value": "sha256:1"}}
	tests := []struct {
		name string
		outs map[string]string
		want map[string]any
		err  string
	}{
		{"none", nil, map[string]any{}, ""},
		{"plain and tagged paths", map[string]string{"out": ".status.out", "tagged": "$(status.out)$"}, map[string]any{"out": "r-out", "tagged": "r-out"}, ""},
		{"a filter", map[string]string{"digest": `status.results[?(@.name=="digest")].value`}, map[string]any{"digest": "sha256:1"}, ""},
		{"missing", map[string]string{"a": ".status.out", "b": ".status.nope"}, nil, "output [b] at path [.status.nope]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := runOutputs(tt.outs, run)
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestRetryAsked(t *testing.T) {
	obj := func(token string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "r"}}}
		if token != "" {
			u.SetAnnotations(map[string]string{annotations.Retry: token})
		}
		return u
	}
	for _, tt := range []struct {
		name, token, handled, want string
	}{
		{"none", "", "", ""},
		{"a new token", "t1", "", "t1"},
		{"handled", "t1", "t1", ""},
		{"another token", "t2", "t1", "t2"},
		{"the annotation removed", "", "t1", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, retryAsked(obj(tt.token), Status{LastHandledRetry: tt.handled}))
		})
	}
}

// A run template renders with spec.ytt as with spec.template: data values
// runnable and selected, the same naming, labels and owner; exactly one
// engine, one object; ytt's own error is in the refusal.
func TestStampRunWithYtt(t *testing.T) {
	const head = "#@ load(\"@ytt:data\", \"data\")\n"
	const good = head + `apiVersion: tekton.dev/v1
kind: TaskRun
metadata:
  generateName: #@ data.values.runnable.metadata.name + "-run-"
  labels: {team: a}
spec:
  url: #@ data.values.runnable.spec.inputs.url
  sel: #@ data.values.selected.metadata.name if data.values.selected else "none"
`
	selected := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "pipeline"}}}
	tests := []struct {
		name     string
		rt       api.RunTemplateSpec
		selected *unstructured.Unstructured
		sel      string // the run's spec.sel when it renders
		message  string // the refusal's, when it does not
	}{
		{"inputs and the selected object", api.RunTemplateSpec{Ytt: good}, selected, "pipeline", ""},
		{"no selector: selected is null", api.RunTemplateSpec{Ytt: good}, nil, "none", ""},
		{"two objects", api.RunTemplateSpec{Ytt: good + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: b-}\n"}, selected, "",
			"the template rendered 2 objects, want 1"},
		{"a ytt error", api.RunTemplateSpec{Ytt: head + "kind: #@ data.values.runnable.spec.nope\n"}, selected, "",
			"unable to apply ytt template: ytt: Error: "},
		{"both template and ytt", api.RunTemplateSpec{Ytt: good, Template: map[string]any{"kind": "X"}}, selected, "",
			"ClusterRunTemplate [tmpl] named by Runnable [ns/lint] is invalid: it sets both spec.template and spec.ytt"},
		{"neither", api.RunTemplateSpec{Ytt: "  \n"}, selected, "", "it sets neither spec.template nor spec.ytt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run, digest, no := stampRun(context.Background(), testRunnable(), tt.rt, "tmpl", tt.selected)
			if tt.message != "" {
				require.NotNil(t, no)
				assert.Nil(t, run)
				assert.Equal(t, step.ReasonStampFailure, no.reason)
				assert.Contains(t, no.message, tt.message)
				assert.Contains(t, no.message, "ClusterRunTemplate [tmpl]")
				return
			}
			require.Nil(t, no, "%v", no)
			assert.NotEmpty(t, digest)
			assert.Equal(t, "lint-run-", run.GetGenerateName())
			assert.Equal(t, "ns", run.GetNamespace())
			assert.Equal(t, "git://a", run.Object["spec"].(map[string]any)["url"])
			assert.Equal(t, tt.sel, run.Object["spec"].(map[string]any)["sel"])
			l := run.GetLabels()
			assert.Equal(t, "a", l["team"])
			assert.Equal(t, "true", l[api.StampedLabel])
			assert.Equal(t, "lint", l[api.LabelRunnableName])
			assert.Equal(t, "tmpl", l[api.LabelRunTemplateName])
			require.NotNil(t, metav1.GetControllerOf(run))
		})
	}
	// The ytt error names where ytt failed.
	_, _, no := stampRun(context.Background(), testRunnable(), api.RunTemplateSpec{Ytt: head + "kind: #@ data.values.runnable.spec.nope\n"}, "tmpl", nil)
	require.NotNil(t, no)
	assert.Contains(t, no.message, "stdin.yml")
	// The status the template sees is hidden, as with $(...)$ tags.
	_, _, no = stampRun(context.Background(), testRunnable(), api.RunTemplateSpec{Ytt: head + "kind: #@ data.values.runnable.status.outputs.x\n"}, "tmpl", nil)
	require.NotNil(t, no)
	assert.Contains(t, no.message, "status")
}

func TestRunTemplateEngine(t *testing.T) {
	tests := []struct {
		name  string
		rt    api.RunTemplateSpec
		field string // "": refused
	}{
		{"template", api.RunTemplateSpec{Template: map[string]any{"kind": "X"}}, "template"},
		{"ytt", api.RunTemplateSpec{Ytt: "kind: X"}, "ytt"},
		{"both", api.RunTemplateSpec{Template: map[string]any{"kind": "X"}, Ytt: "kind: X"}, ""},
		{"an empty template", api.RunTemplateSpec{Template: map[string]any{}}, ""},
		{"neither", api.RunTemplateSpec{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, err := runTemplateEngine(tt.rt)
			switch tt.field {
			case "":
				assert.Error(t, err)
			case "ytt":
				require.NoError(t, err)
				assert.Equal(t, tt.rt.Ytt, spec.Ytt)
				assert.Nil(t, spec.Template)
			default:
				require.NoError(t, err)
				assert.Equal(t, tt.rt.Template, spec.Template)
				assert.Empty(t, spec.Ytt)
			}
		})
	}
}

// TestRunTraceParent: a run carries its Runnable's trace context, which
// anyone may have written: only a valid one is passed on, as version 00.
func TestRunTraceParent(t *testing.T) {
	const trace, span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for _, tt := range []struct {
		name, annotation, want string
	}{
		{"Kontinue's", "00-" + trace + "-" + span + "-01", "00-" + trace + "-" + span + "-01"},
		{"a later version, passed on as 00", "01-" + trace + "-" + span + "-01-more", "00-" + trace + "-" + span + "-01"},
		{"none", "", ""},
		{"not a traceparent", "hello", ""},
		{"all-zero trace", "00-00000000000000000000000000000000-" + span + "-01", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := testRunnable()
			if tt.annotation != "" {
				r.SetAnnotations(map[string]string{api.AnnotationTraceParent: tt.annotation})
			}
			assert.Equal(t, tt.want, runTraceParent(r))
		})
	}
}
