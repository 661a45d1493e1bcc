package e2ereal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// examples/real-chain.yaml, the chain `make run-local` runs, does what
// docs/walkthrough.md says, with its own RBAC only (a namespace without the
// suite's stamper binding): the first commit is tested by a Job and rolled
// out; a "broken" commit fails its tests and is not deployed; a "crash"
// commit passes them, and its rollout fails while the old Pods serve; the
// next commit rolls out. One Job per commit.
func TestRunLocalExample(t *testing.T) {
	ctx := context.Background()
	created, err := env.dyn.Resource(nsGVR).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"generateName": "real-"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	ns := created.GetName()
	t.Cleanup(func() {
		if !keep(t) {
			_ = env.dyn.Resource(nsGVR).Delete(ctx, ns, metav1.DeleteOptions{})
		}
	})
	data, err := os.ReadFile(filepath.Join(env.root, "examples", "real-chain.yaml"))
	require.NoError(t, err)
	apply(t, ns, string(data))

	const timeout = time.Minute
	// serving is the commit the Deployment web runs once rolled out, ""
	// while it is not.
	serving := func() string {
		u, err := tryGet(deploymentGVR, ns, "web")
		if err != nil {
			return ""
		}
		m := u.Object
		for _, k := range []string{"updatedReplicas", "replicas", "availableReplicas", "readyReplicas"} {
			if fmt.Sprint(nested(m, "status", k)) != "2" {
				return ""
			}
		}
		if fmt.Sprint(nested(m, "status", "observedGeneration")) != fmt.Sprint(u.GetGeneration()) {
			return ""
		}
		return deploymentRevision(u)
	}
	commit := func(c string) {
		mergePatch(t, workloadGVR, ns, "web", `{spec: {source: {git: {ref: {commit: `+c+`}}}}}`)
	}
	// jobs is each Job's commit and outcome, oldest first.
	jobs := func() []string {
		var out []string
		for _, j := range list(t, jobGVR, ns, "") {
			outcome := "running"
			if condition(j.Object, "Complete")["status"] == "True" {
				outcome = "complete"
			} else if condition(j.Object, "Failed")["status"] == "True" {
				outcome = "failed"
			}
			out = append(out, j.GetAnnotations()["example.kontinue.dev/revision"]+" "+outcome)
		}
		return out
	}
	waitJobs := func(want ...string) {
		t.Helper()
		eventually(t, timeout, func() string {
			if got := jobs(); fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Sprintf("jobs %v, want %v", got, want)
			}
			return ""
		})
	}

	waitReady(t, workloadGVR, ns, "web", "source", "tests", "deploy")
	waitJobs("first complete")
	assert.Equal(t, "first", serving())
	pods := list(t, podGVR, ns, "app=web")
	require.Len(t, pods, 2)
	for _, p := range pods {
		assert.Equal(t, "Running", nested(p.Object, "status", "phase"))
		assert.NotEmpty(t, nested(p.Object, "spec", "nodeName"), "scheduled onto a fake node")
	}

	// A commit whose tests fail: its Job fails, the step says so, the
	// Deployment stays on the last good commit.
	commit("broken-tests")
	waitJobs("first complete", "broken-tests failed")
	wl := waitStep(t, workloadGVR, ns, "web", "tests", "Ready", "False", "", timeout)
	assert.Equal(t, "False", condition(wl.Object, "Ready")["status"])
	assert.Contains(t, fmt.Sprint(stepCondition(wl, "tests", "Ready")["message"]), "backoff limit", "the job controller's message")
	assert.Equal(t, "first", serving())

	// A commit that passes its tests and crash-loops: the rollout fails
	// with the deployment controller's reason, the old Pods serve.
	commit("crash-on-start")
	waitJobs("first complete", "broken-tests failed", "crash-on-start complete")
	wl = waitStep(t, workloadGVR, ns, "web", "deploy", "Ready", "False", "FailedConditionMet", timeout)
	assert.Contains(t, fmt.Sprint(stepCondition(wl, "deploy", "Ready")["message"]), "ProgressDeadlineExceeded")
	d := get(t, deploymentGVR, ns, "web")
	assert.Equal(t, "crash-on-start", deploymentRevision(d))
	assert.Equal(t, "2", fmt.Sprint(nested(d.Object, "status", "availableReplicas")), "the old Pods keep serving")

	// The next commit rolls out; the workload is Ready again.
	commit("second")
	waitJobs("first complete", "broken-tests failed", "crash-on-start complete", "second complete")
	waitReady(t, workloadGVR, ns, "web", "source", "tests", "deploy")
	eventually(t, timeout, func() string {
		if got := serving(); got != "second" {
			return "serving " + got
		}
		return ""
	})
}

// deploymentRevision is the REVISION env of a Deployment's container.
func deploymentRevision(u *unstructured.Unstructured) string {
	cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	for _, c := range cs {
		env, _ := c.(map[string]any)["env"].([]any)
		for _, e := range env {
			if m := e.(map[string]any); m["name"] == "REVISION" {
				return fmt.Sprint(m["value"])
			}
		}
	}
	return ""
}
