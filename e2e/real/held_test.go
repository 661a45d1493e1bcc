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
	"k8s.io/apimachinery/pkg/types"

	"kontinue.dev/kontinue/reconciler/history"
	st "kontinue.dev/kontinue/reconciler/status"
)

// Design document 002 on a real Deployment: a ClusterDeploymentTemplate
// holds c3 while its Deployment rolls c2 out; when the rollout completes,
// c2's success is recorded before c3 goes in: its outputs (its deployment
// input) reach the next step, and the history says c2 succeeded at every
// step, not that it was superseded. Then c3 goes in and rolls out.
//
// The rollout of c2 waits for the test, not for a clock: the test pauses
// the Deployment (spec.paused, a field Kontinue does not apply, under its
// own field manager) before c2 goes in, and resumes it once the step holds
// c3.
func TestRealDeploymentCompletesWhileNewerIsHeld(t *testing.T) {
	ns := newNamespace(t)
	delivery, manifest, deploy, after := uniq(ns, "delivery"), uniq(ns, "manifest"), uniq(ns, "deploy"), uniq(ns, "after")
	apply(t, ns, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterSourceTemplate
metadata: {name: %[2]s}
spec:
  urlPath: data.image
  revisionPath: data.image
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(deliverable.metadata.name)$-manifest}
    data:
      image: $(deliverable.spec.source.image)$
---
apiVersion: carto.run/v1alpha1
kind: ClusterDeploymentTemplate
metadata: {name: %[3]s}
spec:
  # Judged on counts (docs/testing.md); observedGeneration is checked first.
  observedCompletion:
    succeeded:
    - {key: status.updatedReplicas, value: 2}
    - {key: status.replicas, value: 2}
    - {key: status.availableReplicas, value: 2}
    failed:
      key: 'status.conditions[?(@.type=="Progressing")].reason'
      value: ProgressDeadlineExceeded
  goTemplate: |
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: {{ .deliverable.metadata.name }}}
    spec:
      replicas: 2
      strategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 0, maxSurge: 1}}
      selector: {matchLabels: {app: {{ .deliverable.metadata.name }}}}
      template:
        metadata: {labels: {app: {{ .deliverable.metadata.name }}}}
        spec:
          containers:
          - name: app
            image: {{ .deployment.url | quote }}
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[4]s}
spec:
  alwaysSuccessful: true
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(deliverable.metadata.name)$-deployed}
    data:
      image: $(source.url)$
---
apiVersion: carto.run/v1alpha1
kind: ClusterDelivery
metadata: {name: %[1]s}
spec:
  selector: {app.example.com/delivery: %[1]s}
  resources:
  - name: manifest
    templateRef: {kind: ClusterSourceTemplate, name: %[2]s}
  - name: deploy
    templateRef: {kind: ClusterDeploymentTemplate, name: %[3]s}
    deployment: {resource: manifest}
  - name: after
    templateRef: {kind: ClusterTemplate, name: %[4]s}
    sources: [{name: deployed, resource: deploy}]
`, delivery, manifest, deploy, after))
	deliverable := func(commit string) {
		apply(t, ns, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: Deliverable
metadata:
  name: app
  labels: {app.example.com/delivery: %s}
spec:
  source: {image: %s}
`, delivery, image(commit)))
	}
	const timeout = 60 * time.Second
	rolledOut := func(commit string) func(map[string]any) string {
		return func(m map[string]any) string {
			for _, key := range []string{"updatedReplicas", "replicas", "availableReplicas"} {
				if fmt.Sprint(nested(m, "status", key)) != "2" {
					return "not rolled out"
				}
			}
			if fmt.Sprint(nested(m, "status", "observedGeneration")) != fmt.Sprint(nested(m, "metadata", "generation")) {
				return "not rolled out"
			}
			if got := fmt.Sprint(nested(m, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)["image"]); got != image(commit) {
				return fmt.Sprintf("image %s, want %s", got, image(commit))
			}
			return ""
		}
	}
	pause := func(paused bool) {
		t.Helper()
		_, err := env.dyn.Resource(deploymentGVR).Namespace(ns).Patch(context.Background(), "app", types.MergePatchType,
			[]byte(fmt.Sprintf(`{"spec":{"paused":%v}}`, paused)), metav1.PatchOptions{FieldManager: "e2e-pauser"})
		require.NoError(t, err)
	}

	deliverable("c1")
	waitFor(t, deploymentGVR, ns, "app", timeout, rolledOut("c1"))
	waitOwner(t, deliverableGVR, ns, "app", "Ready", "True", "Ready", timeout)
	waitFor(t, configMapGVR, ns, "app-deployed", timeout, func(m map[string]any) string {
		if got := nested(m, "data", "image"); got != image("c1") {
			return fmt.Sprintf("image %v", got)
		}
		return ""
	})

	// c2 goes in and waits for the test; c3 is held meanwhile.
	pause(true)
	deliverable("c2")
	waitFor(t, deploymentGVR, ns, "app", timeout, func(m map[string]any) string {
		if got := nested(m, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)["image"]; got != image("c2") {
			return fmt.Sprintf("image %v", got)
		}
		return ""
	})
	deliverable("c3")
	w := waitStep(t, deliverableGVR, ns, "app", "deploy", "ResourceSubmitted", "Unknown", "InputsHeld", timeout)
	t.Logf("held: %v", stepCondition(w, "deploy", "ResourceSubmitted")["message"])
	assert.Equal(t, image("c2"), deploymentImage(get(t, deploymentGVR, ns, "app")), "c3 waits for c2's rollout")

	// c2 rolls out: recorded, then c3 goes in and rolls out.
	pause(false)
	waitFor(t, deploymentGVR, ns, "app", 2*timeout, rolledOut("c3"))
	waitOwner(t, deliverableGVR, ns, "app", "Ready", "True", "Ready", timeout)

	// The history (what left the status) says how c2 fared at each step.
	outcomes := func() (map[string]string, string) {
		cm, err := tryGet(configMapGVR, ns, history.Name("Deliverable", "app"))
		if err != nil {
			return nil, err.Error()
		}
		h, err := history.Decode(cm)
		if err != nil {
			return nil, err.Error()
		}
		var seen []string
		for _, r := range h.Revisions {
			seen = append(seen, r.Label())
			if !strings.Contains(r.Label(), image("c2")) {
				continue
			}
			out := map[string]string{}
			for _, c := range r.Steps {
				out[c.Step] = c.Outcome
			}
			return out, ""
		}
		return nil, fmt.Sprintf("no revision of c2 in the history yet: %v", seen)
	}
	var c2 map[string]string
	eventually(t, timeout, func() string {
		var msg string
		c2, msg = outcomes()
		// The history is written after the status write that ends a set
		// at a step, one step's cell at a time: c2's row can be read
		// while only some of its cells are in (seen under load).
		if msg == "" && (c2["deploy"] == "" || c2["after"] == "") {
			return fmt.Sprintf("c2's cells at deploy and after not in the history yet: %v", c2)
		}
		return msg
	})
	assert.Equal(t, st.OutcomeSucceeded, c2["deploy"], "c2 rolled out: it succeeded, it was not superseded (%v)", c2)
	assert.Equal(t, st.OutcomeSucceeded, c2["after"], "c2's outputs reached the next step (%v)", c2)
	w = get(t, deliverableGVR, ns, "app")
	assert.Equal(t, image("c3"), nested(get(t, configMapGVR, ns, "app-deployed").Object, "data", "image"))
	assert.Nil(t, step(w, "deploy")["heldInputDigest"])
}
