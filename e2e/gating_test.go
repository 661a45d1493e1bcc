package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// gatedChain: an image step whose template says what success and failure
// are (seed 002), feeding a ConfigMap. The test plays the image builder.
func gatedChain(ns, rule string) string {
	return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterImageTemplate
metadata: {name: %[1]s}
spec:
  imagePath: .status.latestImage
%[4]s
  template:
    apiVersion: test.run/v1alpha1
    kind: Test
    metadata: {name: $(workload.metadata.name)$-build}
    spec:
      commit: $(params.commit)$
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[2]s}
spec:
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-deploy}
    data: {image: $(image)$}
---
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: %[3]s}
spec:
  selector: {gated: %[3]s}
  resources:
  - name: build
    templateRef: {kind: ClusterImageTemplate, name: %[1]s}
  - name: deploy
    templateRef: {kind: ClusterTemplate, name: %[2]s}
    images: [{name: image, resource: build}]
`, uniq(ns, "build"), uniq(ns, "deploy"), uniq(ns, "gated"), rule)
}

const readyRule = `
  observedCompletion:
    succeeded: [{key: 'status.conditions[?(@.type=="Ready")].status', value: "True"}]
    failed: [{key: 'status.conditions[?(@.type=="Ready")].status', value: "False"}]`

func gatedWorkload(ns, commit string) string {
	return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: Workload
metadata: {name: app, labels: {gated: %s}}
spec:
  params: [{name: commit, value: %s}]
`, uniq(ns, "gated"), commit)
}

// build reports on the Test object's current generation, as a controller
// that honours observedGeneration does.
func build(t *testing.T, ns, ready, image string) {
	t.Helper()
	b := get(t, testGVR, ns, "app-build")
	setStatus(t, testGVR, ns, "app-build", map[string]any{
		"observedGeneration": b.GetGeneration(),
		"latestImage":        image,
		"conditions":         []any{map[string]any{"type": "Ready", "status": ready}},
	})
}

func specCommit(t *testing.T, ns string) any {
	return nested(get(t, testGVR, ns, "app-build").Object, "spec", "commit")
}

func waitDeployed(t *testing.T, ns, image string) {
	t.Helper()
	eventually(t, 30*time.Second, func() string {
		cm, err := tryGet(configMapGVR, ns, "app-deploy")
		if err != nil {
			return err.Error()
		}
		if got := nested(cm.Object, "data", "image"); got != image {
			return fmt.Sprintf("deployed image %v, want %s", got, image)
		}
		return ""
	})
}

func TestGatingHoldsInputsUntilSuccessOrFailure(t *testing.T) {
	ns := newNamespace(t)
	apply(t, ns, gatedChain(ns, readyRule))
	apply(t, ns, gatedWorkload(ns, "c1"))
	waitFor(t, testGVR, ns, "app-build", nil)
	// Not done yet: no output, downstream waits.
	w := waitOwner(t, workloadGVR, ns, "app", "ResourcesHealthy", "Unknown", "")
	assert.Nil(t, stepStatus(w, "deploy")["stampedRef"])

	build(t, ns, "True", "img-c1")
	waitDeployed(t, ns, "img-c1")
	w = waitOwner(t, workloadGVR, ns, "app", "Ready", "True", "Ready")
	c1Digest := stepStatus(w, "build")["inputDigest"]
	require.NotEmpty(t, c1Digest, "the step records the input set its outputs came from")
	assert.Equal(t, c1Digest, get(t, testGVR, ns, "app-build").GetAnnotations()["kontinue.dev/applied-digest"], "the stamped object carries the same digest")

	// c2 goes in; while the object works on it, c3 and c4 are held.
	apply(t, ns, gatedWorkload(ns, "c2"))
	waitFor(t, testGVR, ns, "app-build", fieldIs("c2", "spec", "commit"))
	apply(t, ns, gatedWorkload(ns, "c3"))
	apply(t, ns, gatedWorkload(ns, "c4"))
	w = waitOwner(t, workloadGVR, ns, "app", "ResourcesSubmitted", "Unknown", "InputsHeld")
	assert.Contains(t, ownerCondition(w, "ResourcesSubmitted")["message"], "holds new inputs")
	time.Sleep(2 * time.Second)
	assert.Equal(t, "c2", specCommit(t, ns), "inputs are held while the object processes c2")
	assert.Equal(t, "img-c1", nested(get(t, configMapGVR, ns, "app-deploy").Object, "data", "image"), "downstream keeps the last good output")

	// c2 succeeds: its output flows, and only the newest set (c4) goes in.
	build(t, ns, "True", "img-c2")
	waitDeployed(t, ns, "img-c2")
	waitFor(t, testGVR, ns, "app-build", fieldIs("c4", "spec", "commit"))

	// c4 fails: downstream keeps img-c2 and the step reports the failure.
	build(t, ns, "False", "img-broken")
	w = waitStep(t, workloadGVR, ns, "app", "build", "Healthy", "False", "FailedConditionMet")
	assert.Equal(t, "HealthyConditionRule", ownerCondition(w, "ResourcesHealthy")["reason"])
	msg := fmt.Sprint(ownerCondition(w, "ResourcesHealthy")["message"])
	assert.Contains(t, msg, `status.conditions[?(@.type=="Ready")].status`)
	assert.Contains(t, msg, "False")
	assert.Equal(t, "False", ownerCondition(w, "Ready")["status"])
	time.Sleep(time.Second)
	assert.Equal(t, "img-c2", nested(get(t, configMapGVR, ns, "app-deploy").Object, "data", "image"), "a failure never releases its outputs")

	// After a failure new inputs go in at once, and success releases them.
	apply(t, ns, gatedWorkload(ns, "c5"))
	waitFor(t, testGVR, ns, "app-build", fieldIs("c5", "spec", "commit"))
	build(t, ns, "True", "img-c5")
	waitDeployed(t, ns, "img-c5")
	waitOwner(t, workloadGVR, ns, "app", "Ready", "True", "Ready")
}

// A hand edit to a stamped object is reverted, and what the object reports
// about the edited spec is never passed downstream.
func TestHandEditIsRevertedAndItsOutputsIgnored(t *testing.T) {
	ns := newNamespace(t)
	apply(t, ns, gatedChain(ns, readyRule))
	apply(t, ns, gatedWorkload(ns, "c1"))
	waitFor(t, testGVR, ns, "app-build", nil)
	build(t, ns, "True", "img-c1")
	waitDeployed(t, ns, "img-c1")

	b := get(t, testGVR, ns, "app-build")
	require.NoError(t, unstructuredSet(b.Object, "evil", "spec", "commit"))
	edited, err := env.dyn.Resource(testGVR).Namespace(ns).Update(context.Background(), b, metav1.UpdateOptions{})
	require.NoError(t, err)
	// The attacker's controller reports success on the edited generation.
	setStatus(t, testGVR, ns, "app-build", map[string]any{
		"observedGeneration": edited.GetGeneration(), "latestImage": "img-evil",
		"conditions": []any{map[string]any{"type": "Ready", "status": "True"}},
	})
	waitFor(t, testGVR, ns, "app-build", fieldIs("c1", "spec", "commit"))
	time.Sleep(2 * time.Second)
	assert.Equal(t, "img-c1", nested(get(t, configMapGVR, ns, "app-deploy").Object, "data", "image"), "outputs of a tampered object are not trusted")
	build(t, ns, "True", "img-c1-rebuilt")
	waitDeployed(t, ns, "img-c1-rebuilt")
}

// and/or/not rules and observedMatches.
func TestSuccessRuleCombinations(t *testing.T) {
	rules := map[string]struct {
		rule         string
		status       map[string]any
		wantDeployed bool
		wantHealthy  string
	}{
		"or: either condition": {`
  observedCompletion:
    succeeded: [{or: [{key: status.phase, value: Done}, {key: status.phase, value: Skipped}]}]`,
			map[string]any{"phase": "Skipped", "latestImage": "img"}, true, "True"},
		"and with not": {`
  observedCompletion:
    succeeded: [{and: [{key: status.phase, value: Done}, {not: {key: status.degraded, value: true}}]}]`,
			map[string]any{"phase": "Done", "degraded": true, "latestImage": "img"}, false, "Unknown"},
		"not of a missing path holds": {`
  observedCompletion:
    succeeded: [{key: status.phase, value: Done}, {not: {key: status.degraded, value: true}}]`,
			map[string]any{"phase": "Done", "latestImage": "img"}, true, "True"},
		"observedMatches": {`
  observedMatches: [{input: spec.commit, output: status.builtCommit}]`,
			map[string]any{"builtCommit": "c1", "latestImage": "img"}, true, "True"},
		"observedMatches not yet": {`
  observedMatches: [{input: spec.commit, output: status.builtCommit}]`,
			map[string]any{"builtCommit": "c0", "latestImage": "img"}, false, "Unknown"},
	}
	for name, c := range rules {
		t.Run(name, func(t *testing.T) {
			ns := newNamespace(t)
			apply(t, ns, gatedChain(ns, c.rule))
			apply(t, ns, gatedWorkload(ns, "c1"))
			waitFor(t, testGVR, ns, "app-build", nil)
			setStatus(t, testGVR, ns, "app-build", c.status)
			if c.wantDeployed {
				waitDeployed(t, ns, "img")
			} else {
				time.Sleep(2 * time.Second)
				_, err := tryGet(configMapGVR, ns, "app-deploy")
				assert.Error(t, err, "nothing is released before success")
			}
			eventually(t, 30*time.Second, func() string {
				w := get(t, workloadGVR, ns, "app")
				if got := condition(stepStatus(w, "build"), "Healthy"); got == nil || got["status"] != c.wantHealthy {
					return fmt.Sprintf("build Healthy = %v", got)
				}
				return ""
			})
		})
	}
}
