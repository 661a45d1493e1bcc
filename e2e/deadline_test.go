package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A gated step whose object never finishes an input set: past the
// template's progressDeadline the set counts as failed, the newest held set
// goes in, and the step reports ProgressDeadlineExceeded when nothing newer
// waits. Both kinds of gated rule, observedCompletion (with and without a
// failed rule) and observedMatches (which cannot fail otherwise), and a
// healthRule with shadow: true: the deadline's failure stamps a shadow from the last good inputs, as a
// failure rule's would.
func TestProgressDeadline(t *testing.T) {
	for _, bad := range []string{"soon", "0s", "-1m"} {
		err := applyErr(t, "", fmt.Sprintf("apiVersion: carto.run/v1alpha1\nkind: ClusterTemplate\nmetadata: {name: deadline-%d}\nspec:\n  alwaysSuccessful: true\n  progressDeadline: %q\n  template: {apiVersion: v1, kind: ConfigMap, metadata: {name: x}}\n", len(bad), bad))
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), "progressDeadline", bad)
	}
	for name, tc := range map[string]struct {
		rule   string
		report func(t *testing.T, ns, image string) // the object succeeds on its current spec
	}{
		"observedCompletion": {
			rule:   readyRule + "\n  progressDeadline: 4s",
			report: func(t *testing.T, ns, image string) { build(t, ns, "True", image) },
		},
		"observedCompletion without failed": {
			rule: `
  observedCompletion:
    succeeded: [{key: 'status.conditions[?(@.type=="Ready")].status', value: "True"}]
  progressDeadline: 4s`,
			report: func(t *testing.T, ns, image string) { build(t, ns, "True", image) },
		},
		"healthRule with shadow: true": {
			rule:   "\n  healthRule: {singleConditionType: Ready}\n  shadow: true\n  progressDeadline: 4s",
			report: func(t *testing.T, ns, image string) { build(t, ns, "True", image) },
		},
		"observedMatches": {
			rule: "\n  observedMatches: [{input: spec.commit, output: status.commit}]\n  progressDeadline: 4s",
			report: func(t *testing.T, ns, image string) {
				setStatus(t, testGVR, ns, "app-build", map[string]any{"commit": specCommit(t, ns), "latestImage": image})
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // each waits out its deadlines in its own namespace
			ns := newNamespace(t)
			apply(t, ns, gatedChain(ns, tc.rule))
			apply(t, ns, gatedWorkload(ns, "c1"))
			waitFor(t, testGVR, ns, "app-build", nil)
			tc.report(t, ns, "img-c1")
			waitDeployed(t, ns, "img-c1")
			waitOwner(t, workloadGVR, ns, "app", "Ready", "True", "Ready")

			// c2 goes in and never finishes; c3 is held until the deadline.
			apply(t, ns, gatedWorkload(ns, "c2"))
			waitFor(t, testGVR, ns, "app-build", fieldIs("c2", "spec", "commit"))
			apply(t, ns, gatedWorkload(ns, "c3"))
			waitOwner(t, workloadGVR, ns, "app", "ResourcesSubmitted", "Unknown", "InputsHeld")
			held := time.Now()
			waitFor(t, testGVR, ns, "app-build", fieldIs("c3", "spec", "commit"))
			t.Logf("c3 applied %s after it was held", time.Since(held).Round(100*time.Millisecond))
			assert.Equal(t, "img-c1", nested(get(t, configMapGVR, ns, "app-deploy").Object, "data", "image"), "downstream keeps the last good output")

			// c3 never finishes either, and nothing newer waits: the step fails.
			w := waitStep(t, workloadGVR, ns, "app", "build", "Healthy", "False", "ProgressDeadlineExceeded")
			msg := fmt.Sprint(condition(stepStatus(w, "build"), "Healthy")["message"])
			assert.Contains(t, msg, "within the progress deadline 4s")
			assert.Equal(t, "False", ownerCondition(w, "Ready")["status"])
			require.NotEmpty(t, stepStatus(w, "build")["processingInputDigest"])
			assert.Equal(t, "img-c1", nested(get(t, configMapGVR, ns, "app-deploy").Object, "data", "image"))
			// A failure like any other: a shadow from the last good inputs,
			// which serves the outputs once it is in success.
			waitFor(t, testGVR, ns, shadowOfBuild, fieldIs("c1", "spec", "commit"))
			sh := get(t, testGVR, ns, shadowOfBuild)
			setStatus(t, testGVR, ns, shadowOfBuild, map[string]any{"observedGeneration": sh.GetGeneration(), "commit": "c1",
				"latestImage": "img-c1-rebased", "conditions": []any{map[string]any{"type": "Ready", "status": "True"}}})
			waitDeployed(t, ns, "img-c1-rebased")

			// The object finishes after all: success counts, the clock stops.
			tc.report(t, ns, "img-c3")
			waitDeployed(t, ns, "img-c3")
			w = waitOwner(t, workloadGVR, ns, "app", "Ready", "True", "Ready")
			assert.Nil(t, stepStatus(w, "build")["processingInputDigest"])
			eventually(t, 30*time.Second, func() string {
				if !gone(testGVR, ns, shadowOfBuild) {
					return "shadow still exists"
				}
				return ""
			})
		})
	}
}

// A ClusterDeploymentTemplate in a ClusterDelivery: a deployment that never
// completes its revision holds newer revisions only until the deadline;
// then the newest held revision is deployed, and a revision that never
// completes either fails the step with ProgressDeadlineExceeded while the
// next step keeps the last deployed revision.
func TestProgressDeadlineDeployment(t *testing.T) {
	ns := newNamespace(t)
	n := newDeliveryNames(ns)
	apply(t, ns, deliveryChain(n, `
  observedCompletion:
    succeeded: {key: 'status.conditions[?(@.type=="Ready")].status', value: "True"}
    failed: {key: 'status.conditions[?(@.type=="Ready")].status', value: "False"}
  progressDeadline: 4s`))
	apply(t, ns, deliverableYAML("app", n.delivery))
	source := func(rev string) {
		setStatus(t, testGVR, ns, "app-source", map[string]any{"url": "https://artifacts/config-" + rev + ".tgz", "revision": rev})
	}
	deployed := func(rev string) *unstructured.Unstructured {
		return waitFor(t, testGVR, ns, "app-deploy", fieldIs(rev, "spec", "revision"))
	}
	notified := func() any { return nested(get(t, configMapGVR, ns, "app-notify").Object, "data", "revision") }

	source("rev1")
	dep := deployed("rev1")
	setStatus(t, testGVR, ns, "app-deploy", readyCondition("True", dep.GetGeneration()))
	waitFor(t, configMapGVR, ns, "app-notify", fieldIs("rev1", "data", "revision"))
	waitOwner(t, deliverableGVR, ns, "app", "Ready", "True", "Ready")

	// rev2 is deployed and never completes; rev3 is held until the deadline.
	source("rev2")
	deployed("rev2")
	source("rev3")
	d := waitStep(t, deliverableGVR, ns, "app", "deployer", "ResourceSubmitted", "Unknown", "InputsHeld")
	assert.Contains(t, fmt.Sprint(stepCondition(d, "deployer", "ResourceSubmitted")["message"]), "holds new inputs")
	assert.Equal(t, "rev2", nested(get(t, testGVR, ns, "app-deploy").Object, "spec", "revision"), "rev3 held while rev2 deploys")
	held := time.Now()
	deployed("rev3")
	t.Logf("rev3 deployed %s after it was held", time.Since(held).Round(100*time.Millisecond))
	assert.Equal(t, "rev1", notified(), "the next step keeps the last deployed revision")

	// rev3 never completes either, and nothing newer waits: the step fails.
	d = waitStep(t, deliverableGVR, ns, "app", "deployer", "ResourceSubmitted", "False", "ProgressDeadlineExceeded")
	assert.Contains(t, fmt.Sprint(stepCondition(d, "deployer", "ResourceSubmitted")["message"]), "within the progress deadline 4s")
	assert.Equal(t, "ProgressDeadlineExceeded", stepCondition(d, "deployer", "Healthy")["reason"])
	assert.Equal(t, "False", ownerCondition(d, "Ready")["status"])
	assert.Equal(t, "rev1", notified())
	assert.True(t, gone(testGVR, ns, "app-deploy-last-good"), "a deployment passes its input through: no shadow")

	// The deployment completes rev3 after all: it counts.
	dep = get(t, testGVR, ns, "app-deploy")
	setStatus(t, testGVR, ns, "app-deploy", readyCondition("True", dep.GetGeneration()))
	waitFor(t, configMapGVR, ns, "app-notify", fieldIs("rev3", "data", "revision"))
	d = waitOwner(t, deliverableGVR, ns, "app", "Ready", "True", "Ready")
	assert.Nil(t, stepStatus(d, "deployer")["processingInputDigest"])
}
