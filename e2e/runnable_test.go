package e2e

// Tests of issue 6: Runnables and ClusterRunTemplates, immutable steps
// (lifecycle immutable/tekton) and `runnable: true` (seed 000). Helpers are
// methods of runKit so that their names cannot collide with other files'.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	immRunnableGVR    = schema.GroupVersionResource{Group: "carto.run", Version: "v1alpha1", Resource: "runnables"}
	immRunTemplateGVR = schema.GroupVersionResource{Group: "carto.run", Version: "v1alpha1", Resource: "clusterruntemplates"}
	immPipelineRunGVR = schema.GroupVersionResource{Group: "tekton.dev", Version: "v1beta1", Resource: "pipelineruns"}
)

// runKit is one test's namespace and its helpers.
type runKit struct {
	t       *testing.T
	ns      string
	stopped bool
}

func newRunKit(t *testing.T) *runKit {
	k := &runKit{t: t, ns: newNamespace(t)}
	// A test that fails while Kontinue is stopped must not leave the rest
	// of the suite without a controller.
	t.Cleanup(func() {
		if k.stopped {
			k.startController()
		}
	})
	return k
}

// stopController stops the in-process Kontinue; startController starts a
// fresh one (empty caches and memory: a restart).
func (k *runKit) stopController() {
	k.t.Helper()
	if env.external {
		k.t.Skip("Kontinue runs outside the test process: cannot restart it")
	}
	env.kontinue.stop()
	k.stopped = true
}

func (k *runKit) startController() {
	env.kontinue = startKontinue(env.cfg)
	k.stopped = false
}

func (k *runKit) restartController() {
	k.t.Helper()
	k.stopController()
	k.startController()
}

// runTemplate is a ClusterRunTemplate stamping a PipelineRun whose params
// carry the Runnable's inputs; outputs are YAML lines indented by 4.
func (k *runKit) runTemplate(name, metadata, outputs string) string {
	return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterRunTemplate
metadata: {name: %s}
spec:
  outputs:
%s
  template:
    apiVersion: tekton.dev/v1beta1
    kind: PipelineRun
    metadata: %s
    spec:
      pipelineRef: {name: linter}
      params:
      - {name: revision, value: $(runnable.spec.inputs.revision)$}
`, name, outputs, metadata)
}

const genName = "{generateName: $(runnable.metadata.name)$-run-}"

func (k *runKit) runnable(name, template, revision, extra string) {
	k.t.Helper()
	apply(k.t, k.ns, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: Runnable
metadata: {name: %s}
spec:
  runTemplateRef: {name: %s}
  inputs: {revision: %q}
%s`, name, template, revision, extra))
}

// runs lists the PipelineRuns of a Runnable, newest first.
func (k *runKit) runs(runnable string) []unstructured.Unstructured {
	k.t.Helper()
	l, err := env.dyn.Resource(immPipelineRunGVR).Namespace(k.ns).List(context.Background(),
		metav1.ListOptions{LabelSelector: "carto.run/runnable-name=" + runnable})
	require.NoError(k.t, err)
	items := l.Items
	sort.Slice(items, func(i, j int) bool {
		return items[i].GetAnnotations()["kontinue.dev/created-at"] > items[j].GetAnnotations()["kontinue.dev/created-at"]
	})
	return items
}

func revisionOf(u unstructured.Unstructured) string {
	params, _, _ := unstructured.NestedSlice(u.Object, "spec", "params")
	for _, p := range params {
		if m, ok := p.(map[string]any); ok && m["name"] == "revision" {
			return fmt.Sprint(m["value"])
		}
	}
	return ""
}

// revisions are the revisions of a Runnable's runs, newest first.
func (k *runKit) revisions(runnable string) []string {
	var out []string
	for _, r := range k.runs(runnable) {
		out = append(out, revisionOf(r))
	}
	return out
}

// waitRevisions waits until the Runnable's runs carry exactly these
// revisions, newest first.
func (k *runKit) waitRevisions(runnable string, want ...string) []unstructured.Unstructured {
	k.t.Helper()
	eventually(k.t, 30*time.Second, func() string {
		if got := k.revisions(runnable); strings.Join(got, ",") != strings.Join(want, ",") {
			return fmt.Sprintf("runs of %s have revisions %v, want %v", runnable, got, want)
		}
		return ""
	})
	return k.runs(runnable)
}

// finish marks a run Succeeded (True/False), playing Tekton; extra status
// fields come with it.
func (k *runKit) finish(name, status string, extra map[string]any) {
	k.t.Helper()
	reason := map[string]string{"True": "Succeeded", "False": "Failed", "Unknown": "Running"}[status]
	s := map[string]any{"conditions": []any{map[string]any{"type": "Succeeded", "status": status, "reason": reason, "message": "run " + reason}}}
	for key, v := range extra {
		s[key] = v
	}
	setStatus(k.t, immPipelineRunGVR, k.ns, name, s)
}

// waitRunnable waits for a condition of the Runnable and returns it.
func (k *runKit) waitRunnable(name, typ, status, reason string) *unstructured.Unstructured {
	k.t.Helper()
	return waitOwner(k.t, immRunnableGVR, k.ns, name, typ, status, reason)
}

func (k *runKit) outputs(name string) any {
	return nested(get(k.t, immRunnableGVR, k.ns, name).Object, "status", "outputs")
}

// poke changes an annotation of an object: an update event, a reconcile.
func (k *runKit) poke(gvr schema.GroupVersionResource, name string) {
	k.t.Helper()
	eventually(k.t, 10*time.Second, func() string {
		u, err := tryGet(gvr, k.ns, name)
		if err != nil {
			return err.Error()
		}
		ann := u.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann["e2e/poke"] = time.Now().Format(time.RFC3339Nano)
		u.SetAnnotations(ann)
		if _, err := env.dyn.Resource(gvr).Namespace(k.ns).Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
			return err.Error()
		}
		return ""
	})
}

// assertNoRepeat checks that no two consecutive runs share an input set:
// a run is created only when the inputs differ from the newest run's.
func (k *runKit) assertNoRepeat(runnable string) {
	k.t.Helper()
	runs := k.runs(runnable)
	for i := range runs {
		d := runs[i].GetLabels()["kontinue.dev/input-digest"]
		assert.Len(k.t, d, 32, "run %s records its input digest", runs[i].GetName())
		if i > 0 {
			assert.NotEqual(k.t, runs[i-1].GetLabels()["kontinue.dev/input-digest"], d, "runs %s and %s", runs[i-1].GetName(), runs[i].GetName())
		}
	}
}

// with is the kit for a subtest.
func (k *runKit) with(t *testing.T) *runKit { return &runKit{t: t, ns: k.ns} }

// A Runnable creates one run per new input set, none for unchanged inputs
// (also across restarts of the controller), and takes its outputs only from
// a run that succeeded.
func TestRunnableOneRunPerInputSet(t *testing.T) {
	k := newRunKit(t)
	tmpl := uniq(k.ns, "lint")
	apply(t, k.ns, k.runTemplate(tmpl, genName, `    revision: spec.params[?(@.name=="revision")].value
    report: .status.report`))
	k.runnable("lint", tmpl, "r1", "")

	runs := k.waitRevisions("lint", "r1")
	run1 := runs[0]
	assert.True(t, strings.HasPrefix(run1.GetName(), "lint-run-"), "generateName from the template: %s", run1.GetName())
	l := run1.GetLabels()
	assert.Equal(t, "lint", l["carto.run/runnable-name"])
	assert.Equal(t, tmpl, l["carto.run/run-template-name"])
	assert.Equal(t, "true", l["kontinue.dev/stamped"])
	require.Len(t, run1.GetOwnerReferences(), 1)
	assert.Equal(t, "Runnable", run1.GetOwnerReferences()[0].Kind)
	assert.True(t, *run1.GetOwnerReferences()[0].Controller)

	r := k.waitRunnable("lint", "StampedObjectCondition", "Unknown", "SucceededConditionNotReported")
	assert.Contains(t, condition(r.Object, "StampedObjectCondition", "status")["message"], run1.GetName())
	assert.Equal(t, "Unknown", condition(r.Object, "Ready", "status")["status"])
	assert.Nil(t, nested(r.Object, "status", "outputs"), "no outputs before a run succeeded")
	assert.Equal(t, run1.GetName(), nested(r.Object, "status", "latestRunRef", "name"))

	// Unchanged inputs: reconciles create nothing.
	k.poke(immRunnableGVR, "lint")
	k.poke(immRunnableGVR, "lint")
	time.Sleep(1500 * time.Millisecond) // proving that nothing happens
	assert.Equal(t, []string{"r1"}, k.revisions("lint"))

	// A run that is still running gives no outputs; success does.
	k.finish(run1.GetName(), "Unknown", nil)
	k.waitRunnable("lint", "StampedObjectCondition", "Unknown", "Running")
	k.finish(run1.GetName(), "True", map[string]any{"report": "clean-1"})
	r = k.waitRunnable("lint", "Ready", "True", "Ready")
	assert.Equal(t, map[string]any{"revision": "r1", "report": "clean-1"}, nested(r.Object, "status", "outputs"))
	assert.Equal(t, run1.GetName(), nested(r.Object, "status", "latestSuccessfulRunRef", "name"))
	assert.Equal(t, "True", condition(r.Object, "RunTemplateReady", "status")["status"])

	// New inputs: a second run; outputs stay those of the first until it succeeds.
	k.runnable("lint", tmpl, "r2", "")
	runs = k.waitRevisions("lint", "r2", "r1")
	run2 := runs[0]
	r = k.waitRunnable("lint", "StampedObjectCondition", "Unknown", "SucceededConditionNotReported")
	assert.Equal(t, map[string]any{"revision": "r1", "report": "clean-1"}, nested(r.Object, "status", "outputs"))
	assert.Equal(t, run2.GetName(), nested(r.Object, "status", "latestRunRef", "name"))
	assert.Equal(t, run1.GetName(), nested(r.Object, "status", "latestSuccessfulRunRef", "name"))

	// A failed run: Ready False with the run's reason; outputs unchanged.
	k.finish(run2.GetName(), "False", map[string]any{"report": "dirty"})
	r = k.waitRunnable("lint", "Ready", "False", "Failed")
	assert.Contains(t, condition(r.Object, "Ready", "status")["message"], run2.GetName())
	assert.Equal(t, map[string]any{"revision": "r1", "report": "clean-1"}, nested(r.Object, "status", "outputs"))

	// Inputs changed while Kontinue is down: exactly one run after restart.
	k.stopController()
	k.runnable("lint", tmpl, "r3", "")
	k.startController()
	runs = k.waitRevisions("lint", "r3", "r2", "r1")
	k.finish(runs[0].GetName(), "True", map[string]any{"report": "clean-3"})
	eventually(t, 30*time.Second, func() string {
		if got := k.outputs("lint"); fmt.Sprint(got) != fmt.Sprint(map[string]any{"revision": "r3", "report": "clean-3"}) {
			return fmt.Sprintf("outputs %v", got)
		}
		return ""
	})

	// Restarts with unchanged inputs create nothing: the digest is on the runs.
	for i := 0; i < 2; i++ {
		k.restartController()
		k.poke(immRunnableGVR, "lint")
		k.waitRunnable("lint", "Ready", "True", "Ready")
	}
	time.Sleep(1500 * time.Millisecond) // proving that nothing happens
	assert.Equal(t, []string{"r3", "r2", "r1"}, k.revisions("lint"))

	// Going back to earlier inputs runs them again (the newest run always
	// matches the inputs), once.
	k.runnable("lint", tmpl, "r1", "")
	k.waitRevisions("lint", "r1", "r3", "r2", "r1")
	time.Sleep(time.Second) // proving that nothing more happens
	assert.Equal(t, []string{"r1", "r3", "r2", "r1"}, k.revisions("lint"))
	k.assertNoRepeat("lint")

	// A run template that renders another object is a new input set too;
	// one that only changes its outputs is not.
	apply(t, k.ns, k.runTemplate(tmpl, genName, `    revision: spec.params[0].value`))
	k.poke(immRunnableGVR, "lint")
	time.Sleep(time.Second) // proving that nothing happens
	assert.Len(t, k.runs("lint"), 4)
	apply(t, k.ns, k.runTemplate(tmpl, "{generateName: $(runnable.metadata.name)$-lint-}", `    revision: spec.params[0].value`))
	runs = k.waitRevisions("lint", "r1", "r1", "r3", "r2", "r1")
	assert.True(t, strings.HasPrefix(runs[0].GetName(), "lint-lint-"), runs[0].GetName())
}

// Rapid input changes create at most one run per input set: never a storm.
func TestRunnableNoRunStorm(t *testing.T) {
	k := newRunKit(t)
	tmpl := uniq(k.ns, "lint")
	apply(t, k.ns, k.runTemplate(tmpl, genName, `    revision: spec.params[0].value`))
	var want []string
	for i := 1; i <= 8; i++ {
		k.runnable("lint", tmpl, fmt.Sprintf("r%d", i), "")
		want = append([]string{fmt.Sprintf("r%d", i)}, want...)
	}
	eventually(t, 30*time.Second, func() string {
		got := k.revisions("lint")
		if len(got) == 0 || got[0] != "r8" {
			return fmt.Sprintf("runs %v: no run of the last inputs yet", got)
		}
		return ""
	})
	for i := 0; i < 5; i++ {
		k.poke(immRunnableGVR, "lint")
	}
	time.Sleep(2 * time.Second) // proving that nothing more happens
	got := k.revisions("lint")
	seen := map[string]int{}
	for _, r := range got {
		seen[r]++
		assert.Equal(t, 1, seen[r], "one run per input set: %v", got)
	}
	assert.LessOrEqual(t, len(got), 8)
	t.Logf("8 input sets applied back to back: %d runs (%v)", len(got), got)

	// Each new input set followed at once by a burst of reconciles (while
	// the cache may not show the new run yet): exactly one run each.
	before := len(got)
	for i := 1; i <= 5; i++ {
		k.runnable("lint", tmpl, fmt.Sprintf("s%d", i), "")
		for j := 0; j < 3; j++ {
			k.poke(immRunnableGVR, "lint")
		}
		eventually(t, 30*time.Second, func() string {
			if got := k.revisions("lint"); got[0] != fmt.Sprintf("s%d", i) {
				return fmt.Sprintf("newest run %s", got[0])
			}
			return ""
		})
	}
	time.Sleep(time.Second) // proving that nothing more happens
	assert.Len(t, k.revisions("lint"), before+5)
	k.assertNoRepeat("lint")
}

// Retention keeps the newest succeeded and failed runs per the policy, and
// never a running one or the newest succeeded one.
func TestRunnableRetention(t *testing.T) {
	k := newRunKit(t)
	tmpl := uniq(k.ns, "lint")
	apply(t, k.ns, k.runTemplate(tmpl, genName, `    revision: spec.params[0].value`))
	policy := "  retentionPolicy: {maxFailedRuns: 1, maxSuccessfulRuns: 1}"
	step := func(rev, outcome string, want ...string) {
		t.Helper()
		k.runnable("lint", tmpl, rev, policy)
		runs := k.waitRevisions("lint", append([]string{rev}, want...)...)
		if outcome != "" {
			k.finish(runs[0].GetName(), outcome, nil)
		}
	}
	step("r1", "True")
	step("r2", "True", "r1")
	step("r3", "False", "r2") // r1: a second succeeded run beyond 1
	step("r4", "False", "r3", "r2")
	step("r5", "", "r4", "r2") // r3: a second failed run beyond 1
	// r5 runs; r4 (newest failed) and r2 (newest succeeded) stay.
	k.runnable("lint", tmpl, "r6", policy)
	k.waitRevisions("lint", "r6", "r5", "r4", "r2")
	r := get(t, immRunnableGVR, k.ns, "lint")
	assert.Equal(t, "r2", nested(r.Object, "status", "outputs", "revision"), "outputs from the newest succeeded run")

	// Even with nothing to keep, the newest succeeded run (it holds the
	// outputs) and the newest run (it records the inputs) remain.
	k.runnable("lint", tmpl, "r6", "  retentionPolicy: {maxFailedRuns: 0, maxSuccessfulRuns: 0}")
	runs := k.runs("lint")
	k.finish(runs[0].GetName(), "False", nil)
	k.finish(runs[1].GetName(), "False", nil)
	k.waitRevisions("lint", "r6", "r2")
}

// Bad input ends as a clear condition, and recovers when fixed.
func TestRunnableBadInput(t *testing.T) {
	parent := newRunKit(t)

	t.Run("missing run template", func(t *testing.T) {
		k := parent.with(t)
		tmpl := uniq(k.ns, "later")
		k.runnable("missing", tmpl, "r1", "")
		r := k.waitRunnable("missing", "RunTemplateReady", "False", "RunTemplateNotFound")
		assert.Contains(t, condition(r.Object, "RunTemplateReady", "status")["message"], tmpl)
		assert.Equal(t, "RunTemplateNotFound", condition(r.Object, "Ready", "status")["reason"])
		apply(t, k.ns, k.runTemplate(tmpl, genName, `    revision: spec.params[0].value`))
		k.waitRevisions("missing", "r1")
		k.waitRunnable("missing", "RunTemplateReady", "True", "Ready")
	})

	t.Run("selector matching zero or two objects", func(t *testing.T) {
		k := parent.with(t)
		tmpl := uniq(k.ns, "selected")
		apply(t, k.ns, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterRunTemplate
metadata: {name: %s}
spec:
  template:
    apiVersion: tekton.dev/v1beta1
    kind: PipelineRun
    metadata: %s
    spec:
      pipelineRef: {name: $(selected.spec.pipeline)$}
      params: [{name: revision, value: $(runnable.spec.inputs.revision)$}]
`, tmpl, genName))
		k.runnable("sel", tmpl, "r1", `  selector:
    resource: {apiVersion: test.run/v1alpha1, kind: Test}
    matchingLabels: {e2e/pipeline: lint}`)
		r := k.waitRunnable("sel", "RunTemplateReady", "False", "SelectorMatchError")
		assert.Contains(t, condition(r.Object, "RunTemplateReady", "status")["message"], "no Test in namespace")
		assert.Empty(t, k.runs("sel"))

		apply(t, k.ns, `
apiVersion: test.run/v1alpha1
kind: Test
metadata: {name: pipeline-a, labels: {e2e/pipeline: lint}}
spec: {pipeline: lint-pipeline-a}`)
		runs := k.waitRevisions("sel", "r1")
		assert.Equal(t, "lint-pipeline-a", nested(runs[0].Object, "spec", "pipelineRef", "name"), "the selected object is in the context")
		k.waitRunnable("sel", "RunTemplateReady", "True", "Ready")

		apply(t, k.ns, `
apiVersion: test.run/v1alpha1
kind: Test
metadata: {name: pipeline-b, labels: {e2e/pipeline: lint}}
spec: {pipeline: lint-pipeline-b}`)
		r = k.waitRunnable("sel", "RunTemplateReady", "False", "SelectorMatchError")
		assert.Contains(t, condition(r.Object, "RunTemplateReady", "status")["message"], "[pipeline-a, pipeline-b]")
		k.runnable("sel", tmpl, "r2", `  selector:
    resource: {apiVersion: test.run/v1alpha1, kind: Test}
    matchingLabels: {e2e/pipeline: lint}`)
		time.Sleep(time.Second) // proving that nothing is stamped
		assert.Equal(t, []string{"r1"}, k.revisions("sel"))
	})

	t.Run("output path a succeeded run lacks", func(t *testing.T) {
		k := parent.with(t)
		tmpl := uniq(k.ns, "outputs")
		apply(t, k.ns, k.runTemplate(tmpl, genName, `    report: status.report`))
		k.runnable("out", tmpl, "r1", "")
		runs := k.waitRevisions("out", "r1")
		k.finish(runs[0].GetName(), "True", nil)
		r := k.waitRunnable("out", "RunTemplateReady", "False", "OutputPathNotSatisfied")
		msg := condition(r.Object, "RunTemplateReady", "status")["message"]
		assert.Contains(t, msg, "report")
		assert.Contains(t, msg, runs[0].GetName())
		assert.Nil(t, nested(r.Object, "status", "outputs"))
		k.finish(runs[0].GetName(), "True", map[string]any{"report": "ok"})
		k.waitRunnable("out", "Ready", "True", "Ready")
	})

	t.Run("a run that never finishes", func(t *testing.T) {
		k := parent.with(t)
		tmpl := uniq(k.ns, "forever")
		apply(t, k.ns, k.runTemplate(tmpl, genName, `    revision: spec.params[0].value`))
		k.runnable("forever", tmpl, "r1", "")
		runs := k.waitRevisions("forever", "r1")
		k.finish(runs[0].GetName(), "Unknown", nil)
		r := k.waitRunnable("forever", "Ready", "Unknown", "Running")
		assert.Contains(t, condition(r.Object, "Ready", "status")["message"], runs[0].GetName())
		time.Sleep(time.Second) // proving that nothing else is stamped
		assert.Len(t, k.runs("forever"), 1)
	})

	t.Run("fixed name: a second input set is rejected, not retried", func(t *testing.T) {
		k := parent.with(t)
		tmpl := uniq(k.ns, "fixed")
		apply(t, k.ns, k.runTemplate(tmpl, "{name: fixed-run}", `    revision: spec.params[0].value`))
		k.runnable("fixed", tmpl, "r1", "")
		k.waitRevisions("fixed", "r1")
		k.runnable("fixed", tmpl, "r2", "")
		r := k.waitRunnable("fixed", "RunTemplateReady", "False", "StampedObjectRejectedByAPIServer")
		assert.Contains(t, condition(r.Object, "RunTemplateReady", "status")["message"], "generateName")
		assert.Equal(t, []string{"r1"}, k.revisions("fixed"))
	})

	t.Run("template without name or generateName", func(t *testing.T) {
		k := parent.with(t)
		tmpl := uniq(k.ns, "noname")
		apply(t, k.ns, k.runTemplate(tmpl, "{labels: {a: b}}", `    revision: spec.params[0].value`))
		k.runnable("noname", tmpl, "r1", "")
		r := k.waitRunnable("noname", "RunTemplateReady", "False", "TemplateStampFailure")
		assert.Contains(t, condition(r.Object, "RunTemplateReady", "status")["message"], "generateName")
	})
}

// listBy lists objects of gvr by label selector, newest first.
func (k *runKit) listBy(gvr schema.GroupVersionResource, selector string) []unstructured.Unstructured {
	k.t.Helper()
	l, err := env.dyn.Resource(gvr).Namespace(k.ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	require.NoError(k.t, err)
	items := l.Items
	sort.Slice(items, func(i, j int) bool {
		return items[i].GetAnnotations()["kontinue.dev/created-at"] > items[j].GetAnnotations()["kontinue.dev/created-at"]
	})
	return items
}

// waitStepRuns waits until the runs of a workload's step carry these
// revisions (spec.params[name=revision]), newest first.
func (k *runKit) waitStepRuns(workload, step string, want ...string) []unstructured.Unstructured {
	k.t.Helper()
	sel := "carto.run/workload-name=" + workload + ",carto.run/resource-name=" + step
	var items []unstructured.Unstructured
	eventually(k.t, 30*time.Second, func() string {
		items = k.listBy(immPipelineRunGVR, sel)
		var got []string
		for _, r := range items {
			got = append(got, revisionOf(r))
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			w, _ := tryGet(workloadGVR, k.ns, workload)
			return fmt.Sprintf("runs of step %s have revisions %v, want %v; workload conditions %v; events %v", step, got, want, nested(w.Object, "status", "conditions"), (&kit{t: k.t, ns: k.ns}).events(workload))
		}
		return ""
	})
	return items
}

func (k *runKit) setCommit(workload, chain, commit string) {
	k.t.Helper()
	apply(k.t, k.ns, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: Workload
metadata:
  name: %s
  labels: {app.example.com/chain: %s}
spec:
  source:
    git: {url: "https://git.example.com/app.git", ref: {commit: %s}}
`, workload, chain, commit))
}

// tektonChain is lint (a PipelineRun per input set, lifecycle tekton) →
// deploy (a ConfigMap reading the lint step's source outputs).
func (k *runKit) tektonChain(chain, lint, deploy string) string {
	return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterSourceTemplate
metadata: {name: %[2]s}
spec:
  lifecycle: tekton
  retentionPolicy: {maxFailedRuns: 1, maxSuccessfulRuns: 1}
  urlPath: spec.params[?(@.name=="url")].value
  revisionPath: spec.params[?(@.name=="revision")].value
  template:
    apiVersion: tekton.dev/v1beta1
    kind: PipelineRun
    metadata: {generateName: $(workload.metadata.name)$-lint-}
    spec:
      pipelineRef: {name: linter}
      params:
      - {name: url, value: $(workload.spec.source.git.url)$}
      - {name: revision, value: $(workload.spec.source.git.ref.commit)$}
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[3]s}
spec:
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-deploy}
    data: {url: $(source.url)$, revision: $(source.revision)$}
---
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: %[1]s}
spec:
  selector: {app.example.com/chain: %[1]s}
  resources:
  - name: lint
    templateRef: {kind: ClusterSourceTemplate, name: %[2]s}
  - name: deploy
    templateRef: {kind: ClusterTemplate, name: %[3]s}
    sources: [{name: source, resource: lint}]
`, chain, lint, deploy)
}

func (k *runKit) deployedRevision() string {
	cm, err := tryGet(configMapGVR, k.ns, "app-deploy")
	if err != nil {
		return "<none>"
	}
	return fmt.Sprint(nested(cm.Object, "data", "revision"))
}

func (k *runKit) waitDeployed(rev string) {
	k.t.Helper()
	eventually(k.t, 30*time.Second, func() string {
		if got := k.deployedRevision(); got != rev {
			return fmt.Sprintf("deployed revision %s, want %s", got, rev)
		}
		return ""
	})
}

// A supply chain step with lifecycle tekton creates a PipelineRun per input
// set; downstream steps wait for a successful run and keep the last good
// outputs while newer runs work or fail; retention prunes; a restart
// creates nothing; a step that leaves the chain takes its runs with it.
func TestTektonStepDownstreamWaitsForSuccess(t *testing.T) {
	k := newRunKit(t)
	chain, lint, deploy := uniq(k.ns, "chain"), uniq(k.ns, "lint"), uniq(k.ns, "deploy")
	apply(t, k.ns, k.tektonChain(chain, lint, deploy))
	k.setCommit("app", chain, "c1")

	runs := k.waitStepRuns("app", "lint", "c1")
	run1 := runs[0]
	assert.True(t, strings.HasPrefix(run1.GetName(), "app-lint-"), run1.GetName())
	l := run1.GetLabels()
	assert.Equal(t, "tekton", l["carto.run/template-lifecycle"])
	assert.Len(t, l["kontinue.dev/input-digest"], 32)
	assert.Equal(t, "Workload", run1.GetOwnerReferences()[0].Kind)
	w := waitOwner(t, workloadGVR, k.ns, "app", "ResourcesSubmitted", "Unknown", "MissingValueAtPath")
	assert.Equal(t, run1.GetName(), nested(stepStatus(w, "lint"), "stampedRef", "name"))
	assert.Equal(t, "pipelineruns.tekton.dev", nested(stepStatus(w, "lint"), "stampedRef", "resource"))
	assert.Equal(t, "<none>", k.deployedRevision(), "downstream waits for a successful run")

	k.finish(run1.GetName(), "True", nil)
	k.waitDeployed("c1")
	w = waitOwner(t, workloadGVR, k.ns, "app", "Ready", "True", "Ready")
	assert.Equal(t, "SucceededCondition", condition(stepStatus(w, "lint"), "Healthy")["reason"])

	// New inputs: a new run; downstream keeps c1 while it runs and after it fails.
	k.setCommit("app", chain, "c2")
	runs = k.waitStepRuns("app", "lint", "c2", "c1")
	run2 := runs[0]
	eventually(t, 30*time.Second, func() string {
		w := get(t, workloadGVR, k.ns, "app")
		if got := nested(stepStatus(w, "lint"), "stampedRef", "name"); got != run2.GetName() {
			return fmt.Sprintf("stampedRef %v, want the newest run %s", got, run2.GetName())
		}
		if msg := fmt.Sprint(condition(stepStatus(w, "lint"), "Healthy")["message"]); !strings.Contains(msg, "still running") {
			return "Healthy message: " + msg
		}
		return ""
	})
	time.Sleep(time.Second) // proving that downstream does not move
	assert.Equal(t, "c1", k.deployedRevision())
	k.finish(run2.GetName(), "False", nil)
	w = waitOwner(t, workloadGVR, k.ns, "app", "Ready", "False", "HealthyConditionRule")
	assert.Equal(t, "False", condition(stepStatus(w, "lint"), "Healthy")["status"])
	assert.Equal(t, "SucceededCondition", condition(stepStatus(w, "lint"), "Healthy")["reason"])
	assert.Equal(t, "c1", k.deployedRevision())

	// A third input set succeeds: downstream moves; retention (1 and 1) drops run1.
	k.setCommit("app", chain, "c3")
	runs = k.waitStepRuns("app", "lint", "c3", "c2", "c1")
	k.finish(runs[0].GetName(), "True", nil)
	k.waitDeployed("c3")
	k.waitStepRuns("app", "lint", "c3", "c2")
	waitOwner(t, workloadGVR, k.ns, "app", "Ready", "True", "Ready")

	// Restarts create nothing.
	k.restartController()
	k.poke(workloadGVR, "app")
	waitOwner(t, workloadGVR, k.ns, "app", "Ready", "True", "Ready")
	time.Sleep(1500 * time.Millisecond) // proving that nothing happens
	k.waitStepRuns("app", "lint", "c3", "c2")

	// The lint step leaves the chain: its runs go (they are listed by label,
	// not only the one status names).
	apply(t, k.ns, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %s}
spec:
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-other}
    data: {a: b}
`, uniq(k.ns, "other")))
	apply(t, k.ns, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: %s}
spec:
  selector: {app.example.com/chain: %s}
  resources:
  - name: other
    templateRef: {kind: ClusterTemplate, name: %s}
`, chain, chain, uniq(k.ns, "other")))
	k.waitStepRuns("app", "lint")
}

// lifecycle immutable without a rule: a run is healthy once its outputs can
// be read; downstream keeps the previous image until the new run has one.
func TestImmutableStepWithoutRule(t *testing.T) {
	k := newRunKit(t)
	chain, build, deploy := uniq(k.ns, "chain"), uniq(k.ns, "build"), uniq(k.ns, "deploy")
	apply(t, k.ns, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterImageTemplate
metadata: {name: %[2]s}
spec:
  lifecycle: immutable
  imagePath: status.image
  template:
    apiVersion: test.run/v1alpha1
    kind: Test
    metadata: {generateName: $(workload.metadata.name)$-build-}
    spec: {commit: $(workload.spec.source.git.ref.commit)$}
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[3]s}
spec:
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-deploy}
    data: {revision: $(image)$}
---
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: %[1]s}
spec:
  selector: {app.example.com/chain: %[1]s}
  resources:
  - name: build
    templateRef: {kind: ClusterImageTemplate, name: %[2]s}
  - name: deploy
    templateRef: {kind: ClusterTemplate, name: %[3]s}
    images: [{name: image, resource: build}]
`, chain, build, deploy))
	k.setCommit("app", chain, "c1")
	builds := func(n int) []unstructured.Unstructured {
		var items []unstructured.Unstructured
		eventually(t, 30*time.Second, func() string {
			items = k.listBy(testGVR, "carto.run/workload-name=app,carto.run/resource-name=build")
			if len(items) != n {
				kk := &kit{t: t, ns: k.ns}
				return fmt.Sprintf("%d builds, want %d; events %v", len(items), n, kk.events("app"))
			}
			return ""
		})
		return items
	}
	b := builds(1)
	assert.Equal(t, "immutable", b[0].GetLabels()["carto.run/template-lifecycle"])
	setStatus(t, testGVR, k.ns, b[0].GetName(), map[string]any{"image": "img-1"})
	k.waitDeployed("img-1")

	k.setCommit("app", chain, "c2")
	b = builds(2)
	assert.Equal(t, "c2", nested(b[0].Object, "spec", "commit"))
	time.Sleep(time.Second) // proving that downstream does not move
	assert.Equal(t, "img-1", k.deployedRevision())
	setStatus(t, testGVR, k.ns, b[0].GetName(), map[string]any{"image": "img-2"})
	k.waitDeployed("img-2")
	builds(2)
}

// runnableTrueChain is the seed 000 example: a ClusterSourceTemplate with
// runnable: true stamping a PipelineRun, then a deploy step reading it.
func (k *runKit) runnableTrueChain(chain, lint, deploy string) string {
	return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterSourceTemplate
metadata: {name: %[2]s}
spec:
  runnable: true
  healthRule: {singleConditionType: Succeeded}
  urlPath: spec.params[?(@.name=="repository")].value
  revisionPath: spec.params[?(@.name=="revision")].value
  template:
    apiVersion: tekton.dev/v1beta1
    kind: PipelineRun
    metadata:
      name: $(workload.metadata.name)$-linter
    spec:
      pipelineRef: {name: linter-pipeline}
      params:
      - name: repository
        value: $(workload.spec.source.git.url)$
      - name: revision
        value: $(workload.spec.source.git.ref.commit)$
      workspaces:
      - name: shared-workspace
        volumeClaimTemplate:
          spec:
            accessModes: [ReadWriteOnce]
            resources: {requests: {storage: 256Mi}}
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[3]s}
spec:
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-deploy}
    data: {url: $(source.url)$, revision: $(source.revision)$}
---
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: %[1]s}
spec:
  selector: {app.example.com/chain: %[1]s}
  resources:
  - name: lint
    templateRef: {kind: ClusterSourceTemplate, name: %[2]s}
  - name: deploy
    templateRef: {kind: ClusterTemplate, name: %[3]s}
    sources: [{name: source, resource: lint}]
`, chain, lint, deploy)
}

// generatedRunTemplates lists the ClusterRunTemplates generated for a
// workload of the kit's namespace.
func (k *runKit) generatedRunTemplates(workload string) []unstructured.Unstructured {
	k.t.Helper()
	l, err := env.dyn.Resource(immRunTemplateGVR).List(context.Background(),
		metav1.ListOptions{LabelSelector: "carto.run/workload-name=" + workload + ",carto.run/workload-namespace=" + k.ns})
	require.NoError(k.t, err)
	return l.Items
}

// runnable: true (seed 000): Kontinue generates a ClusterRunTemplate and a
// Runnable; the workload points at the Runnable; runs come per input set;
// downstream waits for success; both are removed when the step or the
// workload goes away.
func TestRunnableTrueGeneratesRunTemplateAndRunnable(t *testing.T) {
	k := newRunKit(t)
	chain, lint, deploy := uniq(k.ns, "chain"), uniq(k.ns, "lint"), uniq(k.ns, "deploy")
	apply(t, k.ns, k.runnableTrueChain(chain, lint, deploy))
	k.setCommit("app", chain, "c1")

	// The workload's step points at the Runnable.
	var w *unstructured.Unstructured
	eventually(t, 30*time.Second, func() string {
		w = get(t, workloadGVR, k.ns, "app")
		ref, _ := nested(stepStatus(w, "lint"), "stampedRef").(map[string]any)
		if ref["kind"] != "Runnable" {
			return fmt.Sprintf("lint stampedRef %v; status %v", ref, nested(w.Object, "status", "conditions"))
		}
		return ""
	})
	assert.Equal(t, map[string]any{"apiVersion": "carto.run/v1alpha1", "kind": "Runnable", "namespace": k.ns, "name": "app-linter", "resource": "runnables.carto.run"},
		nested(stepStatus(w, "lint"), "stampedRef"))

	// The Runnable: owned by the workload, inputs are the tags' values.
	rn := get(t, immRunnableGVR, k.ns, "app-linter")
	assert.Equal(t, "Workload", rn.GetOwnerReferences()[0].Kind)
	assert.Equal(t, "lint", rn.GetLabels()["carto.run/resource-name"])
	assert.Equal(t, map[string]any{
		"workload.metadata.name":              "app",
		"workload.spec.source.git.url":        "https://git.example.com/app.git",
		"workload.spec.source.git.ref.commit": "c1",
	}, nested(rn.Object, "spec", "inputs"))
	assert.Equal(t, "default", nested(rn.Object, "spec", "serviceAccountName"))
	crtName := fmt.Sprint(nested(rn.Object, "spec", "runTemplateRef", "name"))

	// The ClusterRunTemplate: hard-coded fields copied, tags read inputs,
	// the name became generateName, outputs named as the template kind's.
	crts := k.generatedRunTemplates("app")
	require.Len(t, crts, 1)
	crt := crts[0]
	assert.Equal(t, crtName, crt.GetName())
	assert.True(t, strings.HasPrefix(crtName, k.ns+"-app-lint-"), crtName)
	assert.Equal(t, "$(runnable.spec.inputs['workload.metadata.name'])$-linter-", nested(crt.Object, "spec", "template", "metadata", "generateName"))
	assert.Nil(t, nested(crt.Object, "spec", "template", "metadata", "name"))
	params := nested(crt.Object, "spec", "template", "spec", "params").([]any)
	assert.Equal(t, "$(runnable.spec.inputs['workload.spec.source.git.url'])$", params[0].(map[string]any)["value"])
	assert.Equal(t, "256Mi", nested(crt.Object, "spec", "template", "spec", "workspaces").([]any)[0].(map[string]any)["volumeClaimTemplate"].(map[string]any)["spec"].(map[string]any)["resources"].(map[string]any)["requests"].(map[string]any)["storage"])
	assert.Equal(t, map[string]any{"url": `spec.params[?(@.name=="repository")].value`, "revision": `spec.params[?(@.name=="revision")].value`}, nested(crt.Object, "spec", "outputs"))

	// The Runnable's runs: one per input set; downstream waits for success.
	runs := k.waitRevisions("app-linter", "c1")
	assert.True(t, strings.HasPrefix(runs[0].GetName(), "app-linter-"), runs[0].GetName())
	params, _, _ = unstructured.NestedSlice(runs[0].Object, "spec", "params")
	assert.Equal(t, "https://git.example.com/app.git", params[0].(map[string]any)["value"])
	time.Sleep(500 * time.Millisecond) // proving that downstream does not move
	assert.Equal(t, "<none>", k.deployedRevision())
	k.finish(runs[0].GetName(), "True", nil)
	k.waitDeployed("c1")
	w = waitOwner(t, workloadGVR, k.ns, "app", "Ready", "True", "Ready")
	// The rule's reason (healthRule: {singleConditionType: Succeeded}), as
	// for lifecycle: tekton, naming the run.
	assert.Equal(t, "SucceededCondition", condition(stepStatus(w, "lint"), "Healthy")["reason"])
	assert.Contains(t, fmt.Sprint(condition(stepStatus(w, "lint"), "Healthy")["message"]), runs[0].GetName())
	rn = get(t, immRunnableGVR, k.ns, "app-linter")
	assert.Equal(t, runs[0].GetName(), nested(rn.Object, "status", "latestSuccessfulRunRef", "name"))

	k.setCommit("app", chain, "c2")
	runs = k.waitRevisions("app-linter", "c2", "c1")
	time.Sleep(500 * time.Millisecond) // proving that downstream does not move
	assert.Equal(t, "c1", k.deployedRevision())
	k.finish(runs[0].GetName(), "True", nil)
	k.waitDeployed("c2")
	assert.Len(t, k.generatedRunTemplates("app"), 1, "one run template per step, whatever the inputs")

	// The step leaves the chain: Runnable, runs and ClusterRunTemplate go.
	apply(t, k.ns, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %s}
spec:
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-plain}
    data: {a: b}
`, uniq(k.ns, "plain")))
	apply(t, k.ns, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: %s}
spec:
  selector: {app.example.com/chain: %s}
  resources:
  - name: deploy
    templateRef: {kind: ClusterTemplate, name: %s}
`, chain, chain, uniq(k.ns, "plain")))
	eventually(t, 60*time.Second, func() string {
		if !gone(immRunnableGVR, k.ns, "app-linter") {
			return "Runnable app-linter still exists"
		}
		if n := len(k.generatedRunTemplates("app")); n != 0 {
			return fmt.Sprintf("%d generated ClusterRunTemplates remain", n)
		}
		return ""
	})

	// Back in the chain, then the workload is deleted: both go.
	apply(t, k.ns, k.runnableTrueChain(chain, lint, deploy))
	eventually(t, 30*time.Second, func() string {
		if gone(immRunnableGVR, k.ns, "app-linter") || len(k.generatedRunTemplates("app")) != 1 {
			return "Runnable or ClusterRunTemplate not generated again"
		}
		return ""
	})
	require.NoError(t, env.dyn.Resource(workloadGVR).Namespace(k.ns).Delete(context.Background(), "app", metav1.DeleteOptions{}))
	deleted := time.Now()
	eventually(t, 15*time.Second, func() string {
		if n := len(k.generatedRunTemplates("app")); n != 0 {
			return fmt.Sprintf("%d generated ClusterRunTemplates remain", n)
		}
		return ""
	})
	t.Logf("generated ClusterRunTemplate gone %s after the workload", time.Since(deleted).Round(100*time.Millisecond))
	// The Runnable goes by garbage collection, which sees a kind only after
	// its discovery cycle (~30 s) when the CRD is newer than the collector.
	eventually(t, 90*time.Second, func() string {
		if r, err := tryGet(immRunnableGVR, k.ns, "app-linter"); err == nil {
			return fmt.Sprintf("Runnable app-linter still exists: %v", r.Object["metadata"])
		}
		return ""
	})
	t.Logf("Runnable gone %s after the workload", time.Since(deleted).Round(100*time.Millisecond))
}

// runnable: true with an object the API server rejects (a kind the service
// account may not create): the Runnable says why, the workload's step says
// so in Healthy, and nothing is retried in a loop.
func TestRunnableTrueRejectedObject(t *testing.T) {
	k := newRunKit(t)
	chain, tmpl := uniq(k.ns, "chain"), uniq(k.ns, "pod")
	apply(t, k.ns, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[2]s}
spec:
  runnable: true
  healthRule: {alwaysHealthy: {}}
  template:
    apiVersion: v1
    kind: Pod
    metadata: {name: $(workload.metadata.name)$-pod}
    spec:
      containers: [{name: c, image: "busybox:$(workload.spec.source.git.ref.commit)$"}]
---
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: %[1]s}
spec:
  selector: {app.example.com/chain: %[1]s}
  resources:
  - name: run
    templateRef: {kind: ClusterTemplate, name: %[2]s}
`, chain, tmpl))
	k.setCommit("app", chain, "c1")
	r := k.waitRunnable("app-pod", "RunTemplateReady", "False", "StampedObjectRejectedByAPIServer")
	assert.Contains(t, condition(r.Object, "RunTemplateReady", "status")["message"], "is not allowed")
	w := waitOwner(t, workloadGVR, k.ns, "app", "Ready", "False", "HealthyConditionRule")
	assert.Equal(t, "ReadyCondition", condition(stepStatus(w, "run"), "Healthy")["reason"])
	msg := fmt.Sprint(condition(stepStatus(w, "run"), "Healthy")["message"])
	assert.Contains(t, msg, "Runnable ["+k.ns+"/app-pod]")
	assert.Contains(t, msg, "StampedObjectRejectedByAPIServer")
	rv := get(t, immRunnableGVR, k.ns, "app-pod").GetResourceVersion()
	time.Sleep(1500 * time.Millisecond) // proving that nothing is retried in a loop
	assert.Equal(t, rv, get(t, immRunnableGVR, k.ns, "app-pod").GetResourceVersion())
	l, err := env.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "pods"}).Namespace(k.ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, l.Items)
}

// Two Runnables sharing a run template and inputs each get their own run,
// and neither adopts the other's.
func TestRunnablesSharingARunTemplate(t *testing.T) {
	k := newRunKit(t)
	tmpl := uniq(k.ns, "shared")
	// The generated name does not depend on the Runnable: only the labels
	// and the owner reference tell the runs apart.
	apply(t, k.ns, k.runTemplate(tmpl, "{generateName: shared-run-}", `    revision: spec.params[0].value`))
	k.runnable("a", tmpl, "r1", "")
	k.runnable("b", tmpl, "r1", "")
	ra, rb := k.waitRevisions("a", "r1"), k.waitRevisions("b", "r1")
	assert.NotEqual(t, ra[0].GetName(), rb[0].GetName())
	assert.Equal(t, ra[0].GetLabels()["kontinue.dev/input-digest"], rb[0].GetLabels()["kontinue.dev/input-digest"], "same rendered object")
	k.poke(immRunnableGVR, "a")
	k.poke(immRunnableGVR, "b")
	time.Sleep(time.Second) // proving that nothing happens
	assert.Len(t, k.runs("a"), 1)
	assert.Len(t, k.runs("b"), 1)
	k.finish(ra[0].GetName(), "True", nil)
	k.waitRunnable("a", "Ready", "True", "Ready")
	r := get(t, immRunnableGVR, k.ns, "b")
	assert.Nil(t, nested(r.Object, "status", "outputs"), "b reads only its own runs")
}

// runnable: true with a rule other than Tekton's: the template's
// observedCompletion decides each run's success (status.phase Done, no
// Succeeded condition) and failure (status.phase Error); the generated
// ClusterRunTemplate carries the rule; a template without a rule is refused
// by the CRD.
func TestRunnableTrueSuccessCriterion(t *testing.T) {
	k := newRunKit(t)
	chain, lint, deploy := uniq(k.ns, "chain"), uniq(k.ns, "lint"), uniq(k.ns, "deploy")
	withRule := strings.Replace(k.runnableTrueChain(chain, lint, deploy), "  healthRule: {singleConditionType: Succeeded}\n",
		"  observedCompletion:\n    succeeded: {key: status.phase, value: Done}\n    failed: {key: status.phase, value: Error}\n", 1)
	require.Contains(t, withRule, "observedCompletion")
	apply(t, k.ns, withRule)
	k.setCommit("app", chain, "c1")

	runs := k.waitRevisions("app-linter", "c1")
	crts := k.generatedRunTemplates("app")
	require.Len(t, crts, 1)
	assert.Equal(t, map[string]any{
		"succeeded": []any{map[string]any{"key": "status.phase", "value": "Done"}},
		"failed":    []any{map[string]any{"key": "status.phase", "value": "Error"}},
	}, nested(crts[0].Object, "spec", "observedCompletion"))

	// Succeeded=True means nothing to this rule.
	k.finish(runs[0].GetName(), "True", nil)
	time.Sleep(500 * time.Millisecond) // proving that downstream does not move
	assert.Equal(t, "<none>", k.deployedRevision())
	setStatus(t, immPipelineRunGVR, k.ns, runs[0].GetName(), map[string]any{"phase": "Done"})
	k.waitDeployed("c1")
	rn := k.waitRunnable("app-linter", "StampedObjectCondition", "True", "SucceededConditionMet")
	assert.Equal(t, runs[0].GetName(), nested(rn.Object, "status", "latestSuccessfulRunRef", "name"))

	// The failure rule: the run failed, the step is unhealthy, downstream
	// keeps c1.
	k.setCommit("app", chain, "c2")
	runs = k.waitRevisions("app-linter", "c2", "c1")
	setStatus(t, immPipelineRunGVR, k.ns, runs[0].GetName(), map[string]any{"phase": "Error"})
	k.waitRunnable("app-linter", "StampedObjectCondition", "False", "FailedConditionMet")
	w := waitOwner(t, workloadGVR, k.ns, "app", "Ready", "False", "HealthyConditionRule")
	healthy := condition(stepStatus(w, "lint"), "Healthy")
	assert.Equal(t, "False", healthy["status"])
	assert.Equal(t, "FailedConditionMet", healthy["reason"], "the rule's reason, not the Runnable's Ready relayed")
	assert.Contains(t, fmt.Sprint(healthy["message"]), "PipelineRun ["+k.ns+"/"+runs[0].GetName()+"]", "the failed run is named")
	assert.Contains(t, fmt.Sprint(healthy["message"]), "status.phase")
	assert.Equal(t, "c1", k.deployedRevision())
	assert.Equal(t, runs[1].GetName(), nested(get(t, immRunnableGVR, k.ns, "app-linter").Object, "status", "latestSuccessfulRunRef", "name"))

	// No rule: refused by the API server, with the reason.
	noRule := strings.Replace(k.runnableTrueChain(chain, uniq(k.ns, "norule"), deploy), "  healthRule: {singleConditionType: Succeeded}\n", "", 1)
	err := applyErr(t, k.ns, strings.SplitN(noRule, "---", 2)[0])
	require.Error(t, err)
	assert.Contains(t, err.Error(), "runnable: true needs a rule that says when a run has succeeded")
}
