package e2ereal

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The played kubelet (hack/localcluster/kwok-stages.yaml) does what the
// other tests rely on, with the real controllers writing every status:
// Deployments roll out or, when their container crash-loops, time out
// (ProgressDeadlineExceeded); Jobs complete or fail with their exit code
// (KWOK_EXIT_CODE, or KWOK_FAIL_ON matching their command line); TaskRuns
// succeed with their results or fail with their step's exit code, also
// when written as tekton.dev/v1beta1 (converted by Tekton's webhook).
func TestPlayedKubelet(t *testing.T) {
	ns := newNamespace(t)
	apply(t, ns, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: up}
spec:
  replicas: 2
  selector: {matchLabels: {app: up}}
  template:
    metadata: {labels: {app: up}}
    spec:
      containers: [{name: app, image: registry.example.com/app:v1}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: crashing}
spec:
  replicas: 1
  progressDeadlineSeconds: 3
  selector: {matchLabels: {app: crashing}}
  template:
    metadata: {labels: {app: crashing}}
    spec:
      containers:
      - {name: app, image: registry.example.com/app:v1, env: [{name: KWOK_EXIT_CODE, value: "1"}]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: passes}
spec:
  backoffLimit: 0
  template:
    metadata: {annotations: {kwok.kontinue.dev/run-for: 2s}}
    spec:
      restartPolicy: Never
      containers: [{name: test, image: registry.example.com/test, command: [make, test]}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: fails}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: test, image: registry.example.com/test, command: [make, test], env: [{name: KWOK_EXIT_CODE, value: "2"}]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: fails-on-input}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: test, image: registry.example.com/test, command: [go, test], args: [-run, TestBad], env: [{name: KWOK_FAIL_ON, value: "-run TestB"}]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: passes-on-input}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: test, image: registry.example.com/test, command: [go, test], args: [-run, TestGood], env: [{name: KWOK_FAIL_ON, value: "-run TestB"}]}
---
apiVersion: tekton.dev/v1beta1
kind: TaskRun
metadata: {name: beta}
spec:
  taskSpec:
    results: [{name: report}]
    steps:
    - name: test
      image: registry.example.com/builder
      command: [make, test]
      env: [{name: KWOK_RESULTS, value: '{"report": "ok"}'}]
---
apiVersion: tekton.dev/v1
kind: TaskRun
metadata: {name: builds}
spec:
  params: [{name: revision, value: abc}]
  taskSpec:
    params: [{name: revision}]
    results: [{name: image}]
    steps:
    - name: build
      image: registry.example.com/builder
      script: make image
      env: [{name: KWOK_RESULTS, value: '{"image": "registry.example.com/app@$(params.revision)"}'}]
---
apiVersion: tekton.dev/v1
kind: TaskRun
metadata: {name: breaks}
spec:
  taskSpec:
    steps:
    - name: build
      image: registry.example.com/builder
      command: [make, image]
      env: [{name: KWOK_EXIT_CODE, value: "1"}]
`)
	const timeout = 30 * time.Second
	up := waitFor(t, deploymentGVR, ns, "up", timeout, func(m map[string]any) string {
		if condition(m, "Available")["status"] != "True" || condition(m, "Progressing")["reason"] != "NewReplicaSetAvailable" ||
			fmt.Sprint(nested(m, "status", "readyReplicas")) != "2" {
			return "not rolled out"
		}
		return ""
	})
	assert.Equal(t, up.GetGeneration(), nested(up.Object, "status", "observedGeneration"))
	crashing := waitFor(t, deploymentGVR, ns, "crashing", timeout, func(m map[string]any) string {
		if condition(m, "Progressing")["reason"] != "ProgressDeadlineExceeded" {
			return "not timed out"
		}
		return ""
	})
	assert.Equal(t, "False", condition(crashing.Object, "Progressing")["status"])
	assert.Equal(t, "False", condition(crashing.Object, "Available")["status"])
	pods := list(t, podGVR, ns, "app=crashing")
	if assert.Len(t, pods, 1) {
		assert.Equal(t, "CrashLoopBackOff", nested(pods[0].Object, "status", "containerStatuses").([]any)[0].(map[string]any)["state"].(map[string]any)["waiting"].(map[string]any)["reason"])
	}

	passes := waitFor(t, jobGVR, ns, "passes", timeout, func(m map[string]any) string {
		if condition(m, "Complete")["status"] != "True" {
			return "not complete"
		}
		return ""
	})
	start, _ := time.Parse(time.RFC3339, fmt.Sprint(nested(passes.Object, "status", "startTime")))
	done, _ := time.Parse(time.RFC3339, fmt.Sprint(nested(passes.Object, "status", "completionTime")))
	assert.GreaterOrEqual(t, done.Sub(start), time.Second, "kwok.kontinue.dev/run-for keeps the Pod running")
	fails := waitFor(t, jobGVR, ns, "fails", timeout, func(m map[string]any) string {
		if condition(m, "Failed")["status"] != "True" {
			return "not failed"
		}
		return ""
	})
	assert.Equal(t, "BackoffLimitExceeded", condition(fails.Object, "Failed")["reason"])
	// KWOK_FAIL_ON: the outcome follows the container's command line.
	waitFor(t, jobGVR, ns, "fails-on-input", timeout, func(m map[string]any) string {
		if condition(m, "Failed")["status"] != "True" {
			return "not failed"
		}
		return ""
	})
	waitFor(t, jobGVR, ns, "passes-on-input", timeout, func(m map[string]any) string {
		if condition(m, "Complete")["status"] != "True" {
			return "not complete"
		}
		return ""
	})
	// Written as tekton.dev/v1beta1: Tekton's webhook converts it to the
	// stored v1 and back (v1's status.results is v1beta1's
	// status.taskResults).
	beta := waitFor(t, taskRunV1beta1GVR, ns, "beta", timeout, func(m map[string]any) string {
		if condition(m, "Succeeded")["status"] != "True" {
			return "not succeeded"
		}
		return ""
	})
	assert.Equal(t, []any{map[string]any{"name": "report", "type": "string", "value": "ok"}}, nested(beta.Object, "status", "taskResults"))
	assert.Nil(t, nested(beta.Object, "status", "results"))
	assert.Equal(t, []any{map[string]any{"name": "report", "type": "string", "value": "ok"}},
		nested(get(t, taskRunGVR, ns, "beta").Object, "status", "results"))

	builds := waitFor(t, taskRunGVR, ns, "builds", timeout, func(m map[string]any) string {
		if condition(m, "Succeeded")["status"] != "True" {
			return "not succeeded"
		}
		return ""
	})
	assert.Equal(t, []any{map[string]any{"name": "image", "type": "string", "value": "registry.example.com/app@abc"}},
		nested(builds.Object, "status", "results"))
	breaks := waitFor(t, taskRunGVR, ns, "breaks", timeout, func(m map[string]any) string {
		if condition(m, "Succeeded")["status"] != "False" {
			return "not failed"
		}
		return ""
	})
	assert.Equal(t, "Failed", condition(breaks.Object, "Succeeded")["reason"])
	assert.Equal(t, `"step-build" exited with code 1`, condition(breaks.Object, "Succeeded")["message"])
}

// What the deployment controller reports while a Recreate rollout starts,
// the reason the suite's success rules count replicas rather than read the
// Progressing condition: its first status for the new generation has
// observedGeneration = generation, no updated replica yet, and still the
// previous rollout's Progressing reason (NewReplicaSetAvailable), because
// it estimates progress only once the new ReplicaSet exists. A rule
// "observedGeneration current, Available, NewReplicaSetAvailable" holds on
// that status: a false success.
func TestDeploymentStatusLagsOnRecreate(t *testing.T) {
	ns := newNamespace(t)
	deployment := func(img string) string {
		return `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  progressDeadlineSeconds: 30
  strategy: {type: Recreate}
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: app, image: ` + img + `}]
`
	}
	apply(t, ns, deployment("registry.example.com/web:v1"))
	v1 := waitFor(t, deploymentGVR, ns, "web", 30*time.Second, func(m map[string]any) string {
		if condition(m, "Progressing")["reason"] != "NewReplicaSetAvailable" || fmt.Sprint(nested(m, "status", "availableReplicas")) != "2" {
			return "not rolled out"
		}
		return ""
	})
	w, err := env.dyn.Resource(deploymentGVR).Namespace(ns).Watch(context.Background(), metav1.ListOptions{
		FieldSelector: "metadata.name=web", ResourceVersion: v1.GetResourceVersion()})
	require.NoError(t, err)
	defer w.Stop()
	apply(t, ns, deployment("registry.example.com/web:v2"))

	var seen []string
	stale := false
	deadline := time.After(30 * time.Second)
	for done := false; !done; {
		select {
		case ev, ok := <-w.ResultChan():
			require.True(t, ok, "watch closed")
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			m := u.Object
			gen, observed := u.GetGeneration(), nested(m, "status", "observedGeneration")
			reason := condition(m, "Progressing")["reason"]
			updated := nested(m, "status", "updatedReplicas")
			seen = append(seen, fmt.Sprintf("gen %d observed %v updated %v reason %v", gen, observed, updated, reason))
			if gen == 2 && fmt.Sprint(observed) == "2" && reason == "NewReplicaSetAvailable" && updated == nil {
				stale = true
			}
			done = gen == 2 && fmt.Sprint(observed) == "2" && fmt.Sprint(updated) == "2" && reason == "NewReplicaSetAvailable"
		case <-deadline:
			t.Fatalf("no rollout of v2 within 30s; statuses seen:\n%s", strings.Join(seen, "\n"))
		}
	}
	assert.True(t, stale, "a status for generation 2 with no updated replica and the previous NewReplicaSetAvailable; seen:\n%s", strings.Join(seen, "\n"))
	t.Logf("statuses seen:\n%s", strings.Join(seen, "\n"))
}
