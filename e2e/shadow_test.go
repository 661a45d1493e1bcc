package e2e

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

// The tests below reuse gatedChain: a Test object plays a kpack Image whose
// Ready condition says whether the build of the current commit succeeded.

// commitTo sets the gated Workload's commit and waits for the build
// object to carry it.
func commitTo(t *testing.T, ns, commit string) {
	t.Helper()
	apply(t, ns, gatedWorkload(ns, commit))
	waitFor(t, testGVR, ns, "app-build", fieldIs(commit, "spec", "commit"))
}

// shadowOfBuild is the shadow of the gated chain's "app-build" object.
const shadowOfBuild = "app-build-last-good"

// buildObj reports on a named build object (primary or shadow).
func buildObj(t *testing.T, ns, name, ready, image string) {
	t.Helper()
	b := get(t, testGVR, ns, name)
	setStatus(t, testGVR, ns, name, map[string]any{
		"observedGeneration": b.GetGeneration(),
		"latestImage":        image,
		"conditions":         []any{map[string]any{"type": "Ready", "status": ready}},
	})
}

func TestShadowKeepsExternalUpdatesFlowingWhileThePrimaryFails(t *testing.T) {
	ns := newNamespace(t)
	apply(t, ns, gatedChain(ns, readyRule))
	commitTo(t, ns, "good-1")
	buildObj(t, ns, "app-build", "True", "img-good-1")
	waitDeployed(t, ns, "img-good-1")
	// The ConfigMap is applied before the owner's status is written: wait for both.
	var goodDigest any
	eventually(t, 30*time.Second, func() string {
		goodDigest = stepStatus(get(t, workloadGVR, ns, "app"), "build")["inputDigest"]
		if goodDigest == nil || goodDigest == "" {
			return "no inputDigest yet"
		}
		return ""
	})

	// A bad commit: the primary fails; a shadow appears with the good inputs.
	commitTo(t, ns, "bad-2")
	buildObj(t, ns, "app-build", "False", "img-good-1")
	sh := shadowOfBuild
	waitFor(t, testGVR, ns, sh, nil)
	shadow := get(t, testGVR, ns, sh)
	assert.Equal(t, "good-1", nested(shadow.Object, "spec", "commit"), "the shadow is stamped from the last good inputs")
	assert.Equal(t, "true", shadow.GetLabels()["kontinue.dev/shadow"])
	assert.Equal(t, "build", shadow.GetLabels()["carto.run/resource-name"])
	assert.Equal(t, "app", shadow.GetOwnerReferences()[0].Name)
	assert.Equal(t, goodDigest, shadow.GetAnnotations()["kontinue.dev/applied-digest"], "the shadow carries the input set it came from")
	assert.Equal(t, "img-good-1", nested(get(t, configMapGVR, ns, "app-deploy").Object, "data", "image"), "downstream still fed")

	// A base-image update reaches the shadow: it flows downstream while the primary still fails.
	buildObj(t, ns, sh, "True", "img-good-1-rebased")
	waitDeployed(t, ns, "img-good-1-rebased")
	var step map[string]any
	eventually(t, 30*time.Second, func() string {
		step = stepStatus(get(t, workloadGVR, ns, "app"), "build")
		if step["servedBy"] != "shadow" {
			return fmt.Sprintf("servedBy = %v", step["servedBy"])
		}
		return ""
	})
	assert.Equal(t, sh, nested(step, "shadowRef", "name"))
	healthy := condition(step, "Healthy")
	assert.Equal(t, "False", healthy["status"], "the step still reports the primary's failure")
	assert.Contains(t, healthy["message"], "served by shadow")

	// A good commit: the primary succeeds, the shadow goes, downstream follows the primary.
	commitTo(t, ns, "good-3")
	buildObj(t, ns, "app-build", "True", "img-good-3")
	waitDeployed(t, ns, "img-good-3")
	eventually(t, 30*time.Second, func() string {
		if !gone(testGVR, ns, sh) {
			return "shadow still exists"
		}
		return ""
	})
	w := waitOwner(t, workloadGVR, ns, "app", "Ready", "True", "Ready")
	assert.Equal(t, "primary", stepStatus(w, "build")["servedBy"])
	assert.Nil(t, stepStatus(w, "build")["shadowRef"])
}

func TestNoShadowForExternalFailureOptOutOrNoGoodInputs(t *testing.T) {
	t.Run("failure on the inputs that last succeeded", func(t *testing.T) {
		ns := newNamespace(t)
		apply(t, ns, gatedChain(ns, readyRule))
		commitTo(t, ns, "good-1")
		buildObj(t, ns, "app-build", "True", "img-1")
		waitDeployed(t, ns, "img-1")
		buildObj(t, ns, "app-build", "False", "img-1") // external state broke it
		waitOwner(t, workloadGVR, ns, "app", "ResourcesHealthy", "False", "")
		time.Sleep(2 * time.Second)
		assert.True(t, gone(testGVR, ns, shadowOfBuild), "a copy with the same inputs would fail the same way")
	})
	t.Run("shadow: false", func(t *testing.T) {
		ns := newNamespace(t)
		apply(t, ns, gatedChain(ns, readyRule+"\n  shadow: false"))
		commitTo(t, ns, "good-1")
		buildObj(t, ns, "app-build", "True", "img-1")
		waitDeployed(t, ns, "img-1")
		commitTo(t, ns, "bad-2")
		buildObj(t, ns, "app-build", "False", "img-1")
		waitOwner(t, workloadGVR, ns, "app", "ResourcesHealthy", "False", "")
		time.Sleep(2 * time.Second)
		assert.True(t, gone(testGVR, ns, shadowOfBuild))
	})
	t.Run("no input set ever succeeded", func(t *testing.T) {
		ns := newNamespace(t)
		apply(t, ns, gatedChain(ns, readyRule))
		commitTo(t, ns, "bad-1")
		buildObj(t, ns, "app-build", "False", "")
		waitOwner(t, workloadGVR, ns, "app", "ResourcesHealthy", "False", "")
		time.Sleep(2 * time.Second)
		assert.True(t, gone(testGVR, ns, shadowOfBuild))
	})
}

func TestDeletingWorkloadRemovesShadow(t *testing.T) {
	ns := newNamespace(t)
	apply(t, ns, gatedChain(ns, readyRule))
	commitTo(t, ns, "good-1")
	buildObj(t, ns, "app-build", "True", "img-1")
	waitDeployed(t, ns, "img-1")
	commitTo(t, ns, "bad-2")
	buildObj(t, ns, "app-build", "False", "img-1")
	waitFor(t, testGVR, ns, shadowOfBuild, nil)
	require.NoError(t, env.dyn.Resource(workloadGVR).Namespace(ns).Delete(context.Background(), "app", metav1.DeleteOptions{}))
	eventually(t, 60*time.Second, func() string {
		var left []string
		for _, n := range []string{"app-build", shadowOfBuild} {
			if !gone(testGVR, ns, n) {
				left = append(left, n)
			}
		}
		if !gone(configMapGVR, ns, "app-deploy") {
			left = append(left, "app-deploy")
		}
		if len(left) > 0 {
			return "left behind: " + strings.Join(left, ", ")
		}
		return ""
	})
}

// reportCond reports on a named build object (primary or shadow) with a
// condition of type typ, on its current generation.
func reportCond(t *testing.T, ns, name, typ, status, image string) {
	t.Helper()
	b := get(t, testGVR, ns, name)
	setStatus(t, testGVR, ns, name, map[string]any{
		"observedGeneration": b.GetGeneration(),
		"latestImage":        image,
		"conditions":         []any{map[string]any{"type": typ, "status": status}},
	})
}

// A healthRule template that opts in with shadow: true gets shadows like
// observedCompletion: unhealthy on new inputs (Ready=False, or a
// Tekton-style Succeeded=False) stamps a shadow from the last healthy
// inputs, which serves the outputs while the primary fails; the primary's
// recovery removes it. Without the opt-in, Cartographer's behaviour stays:
// no shadow, outputs read from the unhealthy primary.
func TestShadowForHealthRuleFailure(t *testing.T) {
	for _, typ := range []string{"Ready", "Succeeded"} {
		t.Run(typ, func(t *testing.T) {
			ns := newNamespace(t)
			apply(t, ns, gatedChain(ns, fmt.Sprintf("\n  healthRule: {singleConditionType: %s}\n  shadow: true", typ)))
			commitTo(t, ns, "good-1")
			reportCond(t, ns, "app-build", typ, "True", "img-good-1")
			waitDeployed(t, ns, "img-good-1")
			waitOwner(t, workloadGVR, ns, "app", "Ready", "True", "Ready")

			commitTo(t, ns, "bad-2")
			reportCond(t, ns, "app-build", typ, "False", "img-bad-2")
			w := waitStep(t, workloadGVR, ns, "app", "build", "Healthy", "False", typ+"Condition")
			assert.Contains(t, fmt.Sprint(condition(stepStatus(w, "build"), "Healthy")["message"]), "condition ["+typ+"] is [False]")
			waitFor(t, testGVR, ns, shadowOfBuild, fieldIs("good-1", "spec", "commit"))
			assert.Equal(t, "true", get(t, testGVR, ns, shadowOfBuild).GetLabels()["kontinue.dev/shadow"])
			time.Sleep(time.Second) // proving that the unhealthy primary's output does not flow
			assert.Equal(t, "img-good-1", nested(get(t, configMapGVR, ns, "app-deploy").Object, "data", "image"), "downstream keeps the last healthy output")

			// The shadow takes the external update and serves it.
			reportCond(t, ns, shadowOfBuild, typ, "True", "img-good-1-rebased")
			waitDeployed(t, ns, "img-good-1-rebased")
			eventually(t, 30*time.Second, func() string {
				if s := stepStatus(get(t, workloadGVR, ns, "app"), "build"); s["servedBy"] != "shadow" {
					return fmt.Sprintf("servedBy = %v", s["servedBy"])
				}
				return ""
			})

			// The primary recovers (a fixed commit): its outputs again, the shadow goes.
			commitTo(t, ns, "good-3")
			reportCond(t, ns, "app-build", typ, "True", "img-good-3")
			waitDeployed(t, ns, "img-good-3")
			waitGone(t, testGVR, ns, shadowOfBuild)
			w = waitOwner(t, workloadGVR, ns, "app", "Ready", "True", "Ready")
			assert.Equal(t, "primary", stepStatus(w, "build")["servedBy"])
		})
	}
	t.Run("shadow: true where no shadow can be", func(t *testing.T) {
		for name, tc := range map[string]struct{ kind, spec, msg string }{
			"no rule":    {"ClusterImageTemplate", "imagePath: .status.image", "shadow: true needs a rule that says when the object has failed"},
			"tekton":     {"ClusterImageTemplate", "imagePath: .status.image\n  lifecycle: tekton", "shadow: true is for objects updated in place"},
			"runnable":   {"ClusterTemplate", "runnable: true\n  healthRule: {singleConditionType: Succeeded}", "shadow: true is for objects updated in place"},
			"deployment": {"ClusterDeploymentTemplate", "observedMatches: [{input: spec.a, output: status.a}]", "shadow: true is not used on a ClusterDeploymentTemplate"},
		} {
			err := applyErr(t, "", fmt.Sprintf("apiVersion: carto.run/v1alpha1\nkind: %s\nmetadata: {name: shadow-%s}\nspec:\n  shadow: true\n  %s\n  template: {apiVersion: v1, kind: ConfigMap, metadata: {name: x}}\n",
				tc.kind, strings.ReplaceAll(name, " ", "-"), tc.spec))
			require.Error(t, err, name)
			assert.Contains(t, err.Error(), tc.msg, name)
		}
	})
	t.Run("without shadow: true, Cartographer's behaviour", func(t *testing.T) {
		ns := newNamespace(t)
		apply(t, ns, gatedChain(ns, "\n  healthRule: {singleConditionType: Ready}"))
		commitTo(t, ns, "good-1")
		reportCond(t, ns, "app-build", "Ready", "True", "img-good-1")
		waitDeployed(t, ns, "img-good-1")
		commitTo(t, ns, "bad-2")
		reportCond(t, ns, "app-build", "Ready", "False", "img-bad-2")
		waitDeployed(t, ns, "img-bad-2") // outputs read whenever present, healthy or not
		waitStep(t, workloadGVR, ns, "app", "build", "Healthy", "False", "ReadyCondition")
		time.Sleep(time.Second)
		assert.True(t, gone(testGVR, ns, shadowOfBuild), "no shadow without the opt-in")
	})
}

// Shadows and held inputs (design document 004 with 002's gating): the
// shadow goes as soon as the primary succeeds, also on an input set that
// was held and with the next held set going in at once; and a failure of
// the running set (its failure rule, or the progress deadline) stamps the
// shadow at once, although the newest held set goes in in the same
// reconcile.
func TestShadowWhenHeldInputsGoIn(t *testing.T) {
	t.Run("the primary succeeds on a held set: the shadow goes", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t)
		apply(t, ns, gatedChain(ns, readyRule))
		commitTo(t, ns, "good-1")
		build(t, ns, "True", "img-good-1")
		waitDeployed(t, ns, "img-good-1")

		commitTo(t, ns, "bad-2")
		build(t, ns, "False", "img-good-1")
		waitFor(t, testGVR, ns, shadowOfBuild, fieldIs("good-1", "spec", "commit"))

		// good-3 goes in at once after the failure; good-4 is held while
		// the primary works on good-3.
		commitTo(t, ns, "good-3")
		apply(t, ns, gatedWorkload(ns, "good-4"))
		waitStep(t, workloadGVR, ns, "app", "build", "ResourceSubmitted", "Unknown", "InputsHeld")
		require.False(t, gone(testGVR, ns, shadowOfBuild), "the shadow serves while the primary has not succeeded")

		// Success on good-3: its outputs flow, good-4 goes in, and the
		// shadow has no reason left to exist.
		build(t, ns, "True", "img-good-3")
		waitDeployed(t, ns, "img-good-3")
		waitFor(t, testGVR, ns, "app-build", fieldIs("good-4", "spec", "commit"))
		waitGone(t, testGVR, ns, shadowOfBuild)
		w := get(t, workloadGVR, ns, "app")
		assert.Nil(t, stepStatus(w, "build")["shadowRef"])
		assert.Equal(t, "primary", stepStatus(w, "build")["servedBy"])

		// good-4 succeeds as well; no shadow comes back.
		build(t, ns, "True", "img-good-4")
		waitDeployed(t, ns, "img-good-4")
		waitOwner(t, workloadGVR, ns, "app", "Ready", "True", "Ready")
		assert.True(t, gone(testGVR, ns, shadowOfBuild))
	})
	t.Run("the running set fails while a newer one is held: the shadow at once", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t)
		apply(t, ns, gatedChain(ns, readyRule))
		commitTo(t, ns, "good-1")
		build(t, ns, "True", "img-good-1")
		waitDeployed(t, ns, "img-good-1")

		commitTo(t, ns, "bad-2")
		apply(t, ns, gatedWorkload(ns, "bad-3"))
		waitStep(t, workloadGVR, ns, "app", "build", "ResourceSubmitted", "Unknown", "InputsHeld")

		// bad-2 fails: bad-3 goes in, and the shadow from good-1 is
		// stamped now, not once bad-3 has failed too.
		build(t, ns, "False", "img-good-1")
		waitFor(t, testGVR, ns, "app-build", fieldIs("bad-3", "spec", "commit"))
		waitFor(t, testGVR, ns, shadowOfBuild, fieldIs("good-1", "spec", "commit"))
		w := get(t, workloadGVR, ns, "app")
		assert.Equal(t, "Unknown", condition(stepStatus(w, "build"), "Healthy")["status"], "bad-3 has not failed")
		buildObj(t, ns, shadowOfBuild, "True", "img-good-1-rebased")
		waitDeployed(t, ns, "img-good-1-rebased")
	})
	t.Run("the shadow's name is taken: the newer set goes in all the same", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t)
		apply(t, ns, gatedChain(ns, readyRule))
		commitTo(t, ns, "good-1")
		build(t, ns, "True", "img-good-1")
		waitDeployed(t, ns, "img-good-1")
		// Someone's own object where the shadow would go.
		apply(t, ns, fmt.Sprintf("apiVersion: test.run/v1alpha1\nkind: Test\nmetadata: {name: %s}\nspec: {commit: mine}\n", shadowOfBuild))

		commitTo(t, ns, "bad-2")
		apply(t, ns, gatedWorkload(ns, "bad-3"))
		waitStep(t, workloadGVR, ns, "app", "build", "ResourceSubmitted", "Unknown", "InputsHeld")

		// bad-2 fails; the shadow cannot be stamped, and waiting for it
		// would hold bad-3 (perhaps the fix) for good.
		build(t, ns, "False", "img-good-1")
		waitFor(t, testGVR, ns, "app-build", fieldIs("bad-3", "spec", "commit"))
		mine := get(t, testGVR, ns, shadowOfBuild)
		assert.Equal(t, "mine", nested(mine.Object, "spec", "commit"), "someone's object is left alone")
		assert.Empty(t, mine.GetOwnerReferences())
	})
	t.Run("the progress deadline passes while a newer set is held: the shadow at once", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t)
		apply(t, ns, gatedChain(ns, readyRule+"\n  progressDeadline: 4s"))
		commitTo(t, ns, "c1")
		build(t, ns, "True", "img-c1")
		waitDeployed(t, ns, "img-c1")

		// c2 never finishes; c3 is held until c2's deadline.
		commitTo(t, ns, "c2")
		apply(t, ns, gatedWorkload(ns, "c3"))
		waitStep(t, workloadGVR, ns, "app", "build", "ResourceSubmitted", "Unknown", "InputsHeld")
		waitFor(t, testGVR, ns, "app-build", fieldIs("c3", "spec", "commit"))
		// c3's own deadline is now far away: only c2's can stamp the shadow.
		apply(t, ns, gatedChain(ns, readyRule+"\n  progressDeadline: 1h"))
		waitFor(t, testGVR, ns, shadowOfBuild, fieldIs("c1", "spec", "commit"))
		w := get(t, workloadGVR, ns, "app")
		assert.NotEqual(t, "ProgressDeadlineExceeded", condition(stepStatus(w, "build"), "Healthy")["reason"], "c3 is still processing")
		buildObj(t, ns, shadowOfBuild, "True", "img-c1-rebased")
		waitDeployed(t, ns, "img-c1-rebased")
	})
}

// A shadow stamped in a reconcile whose status write was lost is named by
// its step's status while the step cannot render (robustness seed 1035: an
// API server outage lost the write; the step then waited for an earlier
// step's outputs, and its carried entry named the primary, not the shadow,
// until the owner was deleted). The shadow's label and name tie it to the
// primary the entry names. Here the write is lost by rolling the status
// back while Kontinue is stopped, and the step cannot render because the
// Workload lost the param its template reads.
func TestUnrecordedShadowIsNamedWhileTheStepCannotRender(t *testing.T) {
	if env.external {
		t.Skip("stops the in-process Kontinue")
	}
	ns := newNamespace(t)
	apply(t, ns, gatedChain(ns, readyRule))
	commitTo(t, ns, "good-1")
	buildObj(t, ns, "app-build", "True", "img-good-1")
	waitDeployed(t, ns, "img-good-1")
	var good map[string]any // the status before the shadow
	eventually(t, 30*time.Second, func() string {
		w := get(t, workloadGVR, ns, "app")
		if b := stepStatus(w, "build"); b["inputDigest"] == nil || b["inputDigest"] == "" || b["lastGoodObject"] == nil {
			return "the good input set is not recorded yet"
		}
		good = w.Object["status"].(map[string]any)
		return ""
	})

	commitTo(t, ns, "bad-2")
	buildObj(t, ns, "app-build", "False", "img-good-1")
	eventually(t, 30*time.Second, func() string {
		if n := nested(stepStatus(get(t, workloadGVR, ns, "app"), "build"), "shadowRef", "name"); n != shadowOfBuild {
			return fmt.Sprintf("shadowRef %v", n)
		}
		return ""
	})
	shadow := get(t, testGVR, ns, shadowOfBuild)

	env.kontinue.stop()
	t.Cleanup(func() {
		if env.kontinue == nil {
			env.kontinue = startKontinue(env.cfg)
		}
	})
	w := get(t, workloadGVR, ns, "app")
	w.Object["status"] = good
	_, err := env.dyn.Resource(workloadGVR).Namespace(ns).UpdateStatus(context.Background(), w, metav1.UpdateOptions{})
	require.NoError(t, err)
	w = get(t, workloadGVR, ns, "app")
	require.Nil(t, stepStatus(w, "build")["shadowRef"], "the write that named the shadow is lost")
	unstructured.RemoveNestedField(w.Object, "spec", "params")
	_, err = env.dyn.Resource(workloadGVR).Namespace(ns).Update(context.Background(), w, metav1.UpdateOptions{})
	require.NoError(t, err)
	env.kontinue = startKontinue(env.cfg)

	w = waitStep(t, workloadGVR, ns, "app", "build", "ResourceSubmitted", "False", "TemplateStampFailure")
	eventually(t, 30*time.Second, func() string {
		w = get(t, workloadGVR, ns, "app")
		if n := nested(stepStatus(w, "build"), "shadowRef", "name"); n != shadowOfBuild {
			return fmt.Sprintf("the step cannot render, and its entry names shadow %v, not %s", n, shadowOfBuild)
		}
		return ""
	})
	assert.Equal(t, "app-build", nested(stepStatus(w, "build"), "stampedRef", "name"))
	assert.Equal(t, shadow.GetUID(), get(t, testGVR, ns, shadowOfBuild).GetUID(), "the shadow is named, not stamped again")

	// The step renders again and its primary succeeds: the named shadow goes.
	commitTo(t, ns, "good-3")
	buildObj(t, ns, "app-build", "True", "img-good-3")
	waitDeployed(t, ns, "img-good-3")
	eventually(t, 30*time.Second, func() string {
		if !gone(testGVR, ns, shadowOfBuild) {
			return "the shadow is still there"
		}
		if s := stepStatus(get(t, workloadGVR, ns, "app"), "build")["shadowRef"]; s != nil {
			return fmt.Sprintf("shadowRef %v", s)
		}
		return ""
	})
}

// The other side of the lost write: a step that renders again and no
// longer wants the shadow (its primary succeeded) removes it although its
// status never named it, while another step of the chain is refused. Only
// the objects of steps that did not render are kept for them to take back
// (robustness seed 210); before, every unrecorded object stayed while any
// step failed or waited, and the shadow outlived its primary's failure.
func TestUnrecordedShadowGoesWhenItsStepNoLongerWantsIt(t *testing.T) {
	if env.external {
		t.Skip("stops the in-process Kontinue")
	}
	ns := newNamespace(t)
	// The gated chain with a third step, extra, which renders the
	// Workload's param extra.
	apply(t, ns, gatedChain(ns, readyRule)+fmt.Sprintf(`  - name: extra
    templateRef: {kind: ClusterTemplate, name: %[1]s}
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[1]s}
spec:
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-extra}
    data: {v: $(params.extra)$}
`, uniq(ns, "extra")))
	workload := func(commit string) string {
		return strings.Replace(gatedWorkload(ns, commit), "}]", "}, {name: extra, value: x}]", 1)
	}
	apply(t, ns, workload("good-1"))
	waitFor(t, testGVR, ns, "app-build", nil)
	buildObj(t, ns, "app-build", "True", "img-good-1")
	waitDeployed(t, ns, "img-good-1")
	var good map[string]any
	eventually(t, 30*time.Second, func() string {
		w := get(t, workloadGVR, ns, "app")
		if b := stepStatus(w, "build"); b["lastGoodObject"] == nil || stepStatus(w, "extra") == nil {
			return "the good input set is not recorded yet"
		}
		good = w.Object["status"].(map[string]any)
		return ""
	})
	apply(t, ns, workload("bad-2"))
	waitFor(t, testGVR, ns, "app-build", fieldIs("bad-2", "spec", "commit"))
	buildObj(t, ns, "app-build", "False", "img-good-1")
	eventually(t, 30*time.Second, func() string {
		if n := nested(stepStatus(get(t, workloadGVR, ns, "app"), "build"), "shadowRef", "name"); n != shadowOfBuild {
			return fmt.Sprintf("shadowRef %v", n)
		}
		return ""
	})

	env.kontinue.stop()
	t.Cleanup(func() {
		if env.kontinue == nil {
			env.kontinue = startKontinue(env.cfg)
		}
	})
	w := get(t, workloadGVR, ns, "app")
	w.Object["status"] = good
	_, err := env.dyn.Resource(workloadGVR).Namespace(ns).UpdateStatus(context.Background(), w, metav1.UpdateOptions{})
	require.NoError(t, err)
	w = get(t, workloadGVR, ns, "app")
	require.NoError(t, unstructured.SetNestedSlice(w.Object, []any{map[string]any{"name": "commit", "value": "bad-2"}}, "spec", "params"))
	_, err = env.dyn.Resource(workloadGVR).Namespace(ns).Update(context.Background(), w, metav1.UpdateOptions{})
	require.NoError(t, err)
	buildObj(t, ns, "app-build", "True", "img-bad-2") // bad-2 built after all
	env.kontinue = startKontinue(env.cfg)

	waitStep(t, workloadGVR, ns, "app", "extra", "ResourceSubmitted", "False", "TemplateStampFailure")
	waitStep(t, workloadGVR, ns, "app", "build", "Ready", "True", "Ready")
	eventually(t, 30*time.Second, func() string {
		if !gone(testGVR, ns, shadowOfBuild) {
			return "the shadow of a primary that succeeded is still there, while step extra is refused"
		}
		return ""
	})
	assert.Nil(t, stepStatus(get(t, workloadGVR, ns, "app"), "build")["shadowRef"])
	assert.False(t, gone(configMapGVR, ns, "app-extra"), "the refused step keeps what it stamped")
}
