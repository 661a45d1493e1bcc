package e2e

// Issue 29, item 1: a generated ClusterRunTemplate (runnable: true) is
// cluster-scoped and carries no owner reference, and labels and
// annotations are anyone's to copy. Kontinue writes and deletes only the
// object whose UID the owner's status records.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// generatedName is the name Kontinue gives the ClusterRunTemplate of an
// owner's step (prepare.RunTemplateName, for simple names).
func generatedName(kind, ns, owner, step string) string {
	return ns + "-" + owner + "-" + step + "-" + sha256hex(kind + "/" + ns + "/" + owner + "/" + step)[:10]
}

// records are the workload's status.generatedRunTemplates.
func (k *runKit) records(workload string) []map[string]any {
	k.t.Helper()
	list, _ := nested(get(k.t, workloadGVR, k.ns, workload).Object, "status", "generatedRunTemplates").([]any)
	var out []map[string]any
	for _, e := range list {
		out = append(out, e.(map[string]any))
	}
	return out
}

// plainChain replaces the runnable: true chain by one without its lint step.
func (k *runKit) plainChain(chain string) {
	k.t.Helper()
	tmpl := uniq(k.ns, "plain")
	apply(k.t, k.ns, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[2]s}
spec:
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-plain}
    data: {a: b}
---
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: %[1]s}
spec:
  selector: {app.example.com/chain: %[1]s}
  resources:
  - name: deploy
    templateRef: {kind: ClusterTemplate, name: %[2]s}
`, chain, tmpl))
}

// A platform team pins a generated ClusterRunTemplate by copying it, labels
// and annotations included, for a hand-written Runnable. The copy is never
// written or deleted: not by the owner's reconciles, not after a restart,
// not when the step leaves the chain, not when the owner is deleted; the
// Runnable keeps running on it. Kontinue's own generated object is still
// removed when the step leaves the chain and when the owner is deleted.
func TestGeneratedRunTemplateCopyIsLeftAlone(t *testing.T) {
	k := newRunKit(t)
	ctx := context.Background()
	chain, lint, deploy := uniq(k.ns, "chain"), uniq(k.ns, "lint"), uniq(k.ns, "deploy")
	apply(t, k.ns, k.runnableTrueChain(chain, lint, deploy))
	k.setCommit("app", chain, "c1")
	k.waitRevisions("app-linter", "c1")
	crts := k.generatedRunTemplates("app")
	require.Len(t, crts, 1)
	gen := crts[0]
	require.Equal(t, generatedName("Workload", k.ns, "app", "lint"), gen.GetName())

	// The copy: everything a person can copy.
	pinned := uniq(k.ns, "pinned")
	cp := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gen.GetAPIVersion(), "kind": gen.GetKind(),
		"metadata": map[string]any{"name": pinned},
		"spec":     gen.Object["spec"],
	}}
	cp.SetLabels(gen.GetLabels())
	cp.SetAnnotations(gen.GetAnnotations())
	_, err := env.dyn.Resource(immRunTemplateGVR).Create(ctx, cp, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = env.dyn.Resource(immRunTemplateGVR).Delete(context.Background(), pinned, metav1.DeleteOptions{})
	})
	rv := get(t, immRunTemplateGVR, "", pinned).GetResourceVersion()
	pin := func(commit string) {
		apply(t, k.ns, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: Runnable
metadata: {name: pinned}
spec:
  runTemplateRef: {kind: ClusterRunTemplate, name: %s}
  inputs:
    workload.metadata.name: pinned
    workload.spec.source.git.url: https://git.example.com/pinned.git
    workload.spec.source.git.ref.commit: %s
`, pinned, commit))
	}
	pin("p1")
	k.waitRevisions("pinned", "p1")
	untouched := func(when string) {
		t.Helper()
		time.Sleep(time.Second) // proving that nothing happens
		u, err := tryGet(immRunTemplateGVR, "", pinned)
		require.NoError(t, err, "the copy was deleted %s", when)
		assert.Equal(t, rv, u.GetResourceVersion(), "the copy was written %s", when)
	}

	// The owner's reconciles: a new commit goes through the step.
	k.setCommit("app", chain, "c2")
	k.waitRevisions("app-linter", "c2", "c1")
	untouched("by the owner's reconcile")

	// What proves Kontinue's own is the workload's status: name, UID and
	// the claim it carries.
	var recs []map[string]any
	eventually(t, 10*time.Second, func() string {
		if recs = k.records("app"); len(recs) != 1 || recs[0]["uid"] != string(gen.GetUID()) {
			return fmt.Sprintf("records %v, want the UID of %s", recs, gen.GetName())
		}
		return ""
	})
	assert.Equal(t, "lint", recs[0]["step"])
	assert.Equal(t, gen.GetName(), recs[0]["name"])
	assert.NotEmpty(t, recs[0]["claim"])
	assert.Equal(t, recs[0]["claim"], gen.GetAnnotations()["kontinue.dev/claim"])

	// A restart: every ClusterRunTemplate is looked at again.
	k.restartController()
	k.setCommit("app", chain, "c3")
	k.waitRevisions("app-linter", "c3", "c2", "c1")
	untouched("after a restart")

	// A chain change: the step leaves the chain. Kontinue's own goes.
	k.plainChain(chain)
	eventually(t, 30*time.Second, func() string {
		if !gone(immRunTemplateGVR, "", gen.GetName()) {
			return "the generated ClusterRunTemplate is still there"
		}
		if n := len(k.records("app")); n != 0 {
			return fmt.Sprintf("%d records remain", n)
		}
		return ""
	})
	untouched("when the step left the chain")

	// Back in the chain, then the workload is deleted. Kontinue's own goes.
	apply(t, k.ns, k.runnableTrueChain(chain, lint, deploy))
	eventually(t, 30*time.Second, func() string {
		if gone(immRunTemplateGVR, "", gen.GetName()) {
			return "not generated again"
		}
		return ""
	})
	require.NoError(t, env.dyn.Resource(workloadGVR).Namespace(k.ns).Delete(ctx, "app", metav1.DeleteOptions{}))
	eventually(t, 15*time.Second, func() string {
		if !gone(immRunTemplateGVR, "", gen.GetName()) {
			return "the generated ClusterRunTemplate is still there after the workload was deleted"
		}
		return ""
	})
	untouched("when the owner its labels name was deleted")
	k.restartController()
	untouched("after a restart with the owner gone")

	// The hand-written Runnable keeps running on the copy.
	pin("p2")
	k.waitRevisions("pinned", "p2", "p1")
	k.waitRunnable("pinned", "RunTemplateReady", "True", "Ready")
}

// A ClusterRunTemplate someone made at the name Kontinue generates for a
// step, with Kontinue's labels for that workload and step, is not taken
// over: the step says StampedObjectNotOwned and nothing is written. Once
// it is deleted, Kontinue generates its own (woken by the deletion).
func TestGeneratedRunTemplateNameTakenIsRefused(t *testing.T) {
	k := newRunKit(t)
	ctx := context.Background()
	chain, lint, deploy := uniq(k.ns, "chain"), uniq(k.ns, "lint"), uniq(k.ns, "deploy")
	apply(t, k.ns, k.runnableTrueChain(chain, lint, deploy))
	name := generatedName("Workload", k.ns, "app", "lint")
	apply(t, "", fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterRunTemplate
metadata:
  name: %s
  labels: {kontinue.dev/stamped: "true", carto.run/workload-name: app, carto.run/workload-namespace: %s, carto.run/resource-name: lint}
  annotations: {kontinue.dev/generated-for: "Workload %s/app step lint", kontinue.dev/claim: guessed}
spec:
  template:
    apiVersion: tekton.dev/v1beta1
    kind: PipelineRun
    metadata: {generateName: theirs-}
    spec: {pipelineRef: {name: theirs}}
`, name, k.ns, k.ns))
	t.Cleanup(func() {
		_ = env.dyn.Resource(immRunTemplateGVR).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	theirs := get(t, immRunTemplateGVR, "", name)

	k.setCommit("app", chain, "c1")
	kk := &kit{t: t, ns: k.ns}
	w := kk.waitStep("app", "lint", "ResourceSubmitted", "False", "StampedObjectNotOwned")
	kk.assertCond(kk.stepCond(w, "lint", "ResourceSubmitted"), "False", "StampedObjectNotOwned",
		"ClusterRunTemplate ["+name+"]", "step [lint]", string(theirs.GetUID()), "did not generate")
	time.Sleep(time.Second) // proving that nothing is written
	assert.Equal(t, theirs.GetResourceVersion(), get(t, immRunTemplateGVR, "", name).GetResourceVersion())
	assert.True(t, gone(immRunnableGVR, k.ns, "app-linter"), "no Runnable is applied")
	assert.Empty(t, k.records("app"))

	require.NoError(t, env.dyn.Resource(immRunTemplateGVR).Delete(ctx, name, metav1.DeleteOptions{}))
	k.waitRevisions("app-linter", "c1")
	ours := get(t, immRunTemplateGVR, "", name)
	assert.NotEqual(t, theirs.GetUID(), ours.GetUID())
	recs := k.records("app")
	require.Len(t, recs, 1)
	assert.Equal(t, string(ours.GetUID()), recs[0]["uid"])
}

// A ClusterRunTemplate generated by a version that kept no record (the
// owner's status lists it in the step's stampedObjects, its labels name
// the owner and step) is taken as Kontinue's once: its UID is recorded,
// it is updated in place and removed when the step leaves the chain.
func TestGeneratedRunTemplateFromAnEarlierVersionIsAdopted(t *testing.T) {
	k := newRunKit(t)
	chain, lint, deploy := uniq(k.ns, "chain"), uniq(k.ns, "lint"), uniq(k.ns, "deploy")
	apply(t, k.ns, k.runnableTrueChain(chain, lint, deploy))
	name := generatedName("Workload", k.ns, "app", "lint")

	// What the earlier version left: the object, the workload's status.
	k.stopController()
	apply(t, "", fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterRunTemplate
metadata:
  name: %s
  labels: {kontinue.dev/stamped: "true", carto.run/workload-name: app, carto.run/workload-namespace: %s, carto.run/resource-name: lint}
  annotations: {kontinue.dev/generated-for: "Workload %s/app step lint"}
spec:
  template:
    apiVersion: tekton.dev/v1beta1
    kind: PipelineRun
    metadata: {generateName: old-}
    spec: {pipelineRef: {name: old}}
`, name, k.ns, k.ns))
	t.Cleanup(func() {
		_ = env.dyn.Resource(immRunTemplateGVR).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	old := get(t, immRunTemplateGVR, "", name)
	k.setCommit("app", chain, "c1")
	ref := func(kind, resource, ns, n string) map[string]any {
		return map[string]any{"apiVersion": "carto.run/v1alpha1", "kind": kind, "namespace": ns, "name": n, "resource": resource}
	}
	setStatus(t, workloadGVR, k.ns, "app", map[string]any{"resources": []any{map[string]any{
		"name":           "lint",
		"stampedRef":     ref("Runnable", "runnables.carto.run", k.ns, "app-linter"),
		"stampedObjects": []any{ref("ClusterRunTemplate", "clusterruntemplates.carto.run", "", name), ref("Runnable", "runnables.carto.run", k.ns, "app-linter")},
	}}})
	k.startController()

	k.waitRevisions("app-linter", "c1")
	eventually(t, 10*time.Second, func() string {
		if recs := k.records("app"); len(recs) != 1 || recs[0]["uid"] != string(old.GetUID()) {
			return fmt.Sprintf("records %v, want the UID of the earlier object %s", recs, old.GetUID())
		}
		return ""
	})
	now := get(t, immRunTemplateGVR, "", name)
	assert.Equal(t, old.GetUID(), now.GetUID(), "updated in place, not created again")
	assert.Equal(t, "$(runnable.spec.inputs['workload.metadata.name'])$-linter-", nested(now.Object, "spec", "template", "metadata", "generateName"))

	k.plainChain(chain)
	eventually(t, 30*time.Second, func() string {
		if !gone(immRunTemplateGVR, "", name) {
			return "the adopted ClusterRunTemplate is still there"
		}
		return ""
	})
}
