package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"kontinue.dev/kontinue/annotations"
)

// setAnnotation sets one annotation of an object with a merge patch.
func setAnnotation(t *testing.T, gvr schema.GroupVersionResource, ns, name, key, value string) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	_, err := env.dyn.Resource(gvr).Namespace(ns).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
}

// TestRetryFailedRunOfImmutableStep (Cartographer #975): `kontinue reconcile
// --retry` makes a tekton step whose run failed create one more run for
// the same inputs, once per token, recorded on the run, in the step's
// status and in an event; the same token again does nothing; a new token
// retries again.
func TestRetryFailedRunOfImmutableStep(t *testing.T) {
	k := newRunKit(t)
	chain, lint, deploy := uniq(k.ns, "chain"), uniq(k.ns, "lint"), uniq(k.ns, "deploy")
	apply(t, k.ns, k.tektonChain(chain, lint, deploy))
	k.setCommit("app", chain, "c1")
	run1 := k.waitStepRuns("app", "lint", "c1")[0]
	k.finish(run1.GetName(), "False", nil)
	waitOwner(t, workloadGVR, k.ns, "app", "Ready", "False", "HealthyConditionRule")

	// Nothing retries by itself.
	k.poke(workloadGVR, "app")
	time.Sleep(1500 * time.Millisecond) // proving that nothing happens
	k.waitStepRuns("app", "lint", "c1")

	code, out, errOut := kontinueCLI(t, "reconcile", "workload", "app", "-n", k.ns, "--retry", "--wait")
	t.Logf("kontinue reconcile --retry --wait: %d\n%s%s", code, out, errOut)
	require.Contains(t, out, "retry of failed runs requested ("+annotations.Retry+"=")
	require.Contains(t, out, "reconciled; Ready: ")
	w := get(t, workloadGVR, k.ns, "app")
	token := w.GetAnnotations()[annotations.Retry]
	require.NotEmpty(t, token)
	runs := k.waitStepRuns("app", "lint", "c1", "c1")
	run2 := runs[0]
	assert.Equal(t, token, run2.GetAnnotations()["kontinue.dev/retry"])
	assert.Equal(t, run1.GetName(), run2.GetAnnotations()["kontinue.dev/retry-of"])
	assert.Equal(t, "2", run2.GetAnnotations()["kontinue.dev/attempt"])
	assert.Equal(t, run1.GetLabels()["kontinue.dev/input-digest"], run2.GetLabels()["kontinue.dev/input-digest"], "the same inputs")
	w = waitFor(t, workloadGVR, k.ns, "app", func(u *unstructured.Unstructured) string {
		if got := stepStatus(u, "lint")["lastHandledRetry"]; got != token {
			return fmt.Sprintf("step lint: lastHandledRetry %v, want %s", got, token)
		}
		return ""
	})
	assert.Equal(t, run2.GetName(), nested(stepStatus(w, "lint"), "stampedRef", "name"))
	waitEventIn(t, k.ns, "app", "RunRetried", run1.GetName(), run2.GetName(), token)

	// The retried run fails too: the same token does nothing, also after a
	// restart (the token is in the step's status and on the run).
	k.finish(run2.GetName(), "False", nil)
	waitOwner(t, workloadGVR, k.ns, "app", "Ready", "False", "HealthyConditionRule")
	setAnnotation(t, workloadGVR, k.ns, "app", annotations.Retry, token)
	k.poke(workloadGVR, "app")
	k.restartController()
	k.poke(workloadGVR, "app")
	waitOwner(t, workloadGVR, k.ns, "app", "Ready", "False", "HealthyConditionRule")
	time.Sleep(1500 * time.Millisecond) // proving that nothing happens
	// Retention (maxFailedRuns: 1) let the first run go; no new run came.
	left := k.waitStepRuns("app", "lint", "c1")
	assert.Equal(t, run2.GetName(), left[0].GetName())

	// A new token: one more run, which succeeds; downstream moves.
	code, _, errOut = kontinueCLI(t, "reconcile", "workload", "app", "-n", k.ns, "--retry")
	require.Equal(t, 0, code, errOut)
	run3 := k.waitStepRuns("app", "lint", "c1", "c1")[0]
	assert.Equal(t, "3", run3.GetAnnotations()["kontinue.dev/attempt"])
	assert.Equal(t, run2.GetName(), run3.GetAnnotations()["kontinue.dev/retry-of"])
	k.finish(run3.GetName(), "True", nil)
	k.waitDeployed("c1")
	waitOwner(t, workloadGVR, k.ns, "app", "Ready", "True", "Ready")
}

// TestRetryFailedRunOfRunnable: the same on a Runnable: `kontinue reconcile
// runnable NAME --retry --wait` creates one more run of its inputs after a
// failure, once per token, recorded in status.lastHandledRetry; a Runnable
// whose newest run succeeded is not retried.
func TestRetryFailedRunOfRunnable(t *testing.T) {
	k := newRunKit(t)
	tmpl := uniq(k.ns, "lint")
	apply(t, k.ns, k.runTemplate(tmpl, genName, `    revision: spec.params[?(@.name=="revision")].value`))
	k.runnable("lint", tmpl, "r1", "")
	run1 := k.waitRevisions("lint", "r1")[0]
	k.finish(run1.GetName(), "False", nil)
	k.waitRunnable("lint", "Ready", "False", "Failed")

	code, _, errOut := kontinueCLI(t, "reconcile", "runnable", "lint", "-n", k.ns)
	require.Equal(t, 2, code, "a Runnable takes --retry: %s", errOut)

	code, out, errOut := kontinueCLI(t, "reconcile", "runnable", "lint", "-n", k.ns, "--retry", "--wait")
	require.Equal(t, 0, code, errOut)
	runs := k.waitRevisions("lint", "r1", "r1")
	run2 := runs[0]
	require.Contains(t, out, "handled; newest run: "+run2.GetName())
	token := get(t, immRunnableGVR, k.ns, "lint").GetAnnotations()[annotations.Retry]
	assert.Equal(t, token, run2.GetAnnotations()["kontinue.dev/retry"])
	assert.Equal(t, run1.GetName(), run2.GetAnnotations()["kontinue.dev/retry-of"])
	waitFor(t, immRunnableGVR, k.ns, "lint", fieldIs(token, "status", "lastHandledRetry"))
	waitEventIn(t, k.ns, "lint", "RunRetried", run1.GetName(), run2.GetName())

	// The same token: nothing.
	k.finish(run2.GetName(), "False", nil)
	k.poke(immRunnableGVR, "lint")
	time.Sleep(1500 * time.Millisecond) // proving that nothing happens
	k.waitRevisions("lint", "r1", "r1")

	// A success is not retried: the token is handled, no run.
	k.finish(run2.GetName(), "True", nil)
	k.waitRunnable("lint", "Ready", "True", "Ready")
	code, _, errOut = kontinueCLI(t, "reconcile", "runnable", "lint", "-n", k.ns, "--retry", "--wait")
	require.Equal(t, 0, code, errOut)
	time.Sleep(1500 * time.Millisecond) // proving that nothing happens
	k.waitRevisions("lint", "r1", "r1")
}
