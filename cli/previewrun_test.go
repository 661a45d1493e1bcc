package cli

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/cli/objdiff"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/prepare"
	"kontinue.dev/kontinue/reconciler/step"
)

// TestPreviewRunnable: a runnable: true step previews as the
// ClusterRunTemplate and Runnable the controller generates, compared with
// the live ones, with a note that the runs are not previewed.
func TestPreviewRunnable(t *testing.T) {
	owner := u(t, `{apiVersion: carto.run/v1alpha1, kind: Workload, metadata: {name: app, namespace: dev, uid: uid-1},
spec: {source: {git: {url: "https://git/app", ref: {commit: c1}}}}}`)
	tmpl := func(pipeline, url string) *unstructured.Unstructured {
		return u(t, `{apiVersion: carto.run/v1alpha1, kind: ClusterSourceTemplate, metadata: {name: lint},
spec: {runnable: true, healthRule: {singleConditionType: Succeeded}, urlPath: .spec.url, revisionPath: .spec.rev,
  template: {apiVersion: tekton.dev/v1beta1, kind: PipelineRun, metadata: {name: $(workload.metadata.name)$-linter},
    spec: {pipelineRef: {name: `+pipeline+`}, url: "`+url+`", rev: $(workload.spec.source.git.ref.commit)$}}}}`)
	}
	def := api.Step{Name: "lint", TemplateRef: api.StepTemplateRef{Kind: api.KindClusterSourceTemplate, Name: "lint"}}
	chain := &api.ChainSpec{Resources: []api.Step{def}}
	env := func(tm *unstructured.Unstructured, c *api.ChainSpec) prepare.Env {
		d := defs{}
		d.put(tm)
		var spec api.OwnerSpec
		require.NoError(t, api.Decode(owner.Object["spec"], &spec))
		return prepare.Env{Flavor: api.WorkloadFlavor, Owner: owner, OwnerSpec: spec, ChainName: "chain", Chain: c, Template: d.template}
	}
	prep := func(e prepare.Env) prepare.Prepared {
		p := prepare.Step(context.Background(), e, def, map[string]step.Outputs{})
		require.Nil(t, p.Refusal)
		return p
	}
	// The live objects: what the controller applied from the old template,
	// plus what the API server and the controller add.
	oldEnv := env(tmpl("lint-v1", "$(workload.spec.source.git.url)$"), chain)
	old := prep(oldEnv)
	require.Len(t, old.Generated, 2, "prepare generates what the controller stamps")
	crt, rn := old.Generated[0].DeepCopy(), old.Generated[1].DeepCopy()
	crt.SetUID("crt-uid")
	crt.SetAnnotations(map[string]string{"kontinue.dev/claim": "c", prepare.AnnotationGeneratedFor: "Workload dev/app step lint"})
	rn.SetResourceVersion("7")
	_ = unstructured.SetNestedField(rn.Object, map[string]any{"url": "https://git/app"}, "status", "outputs")
	live := []*unstructured.Unstructured{rn, crt} // the status names the Runnable first

	preview := func(e prepare.Env) ([]objdiff.Object, *prepare.Refusal) {
		return previewRunnable(def, prep(e), &old, live)
	}
	// The same definitions: nothing.
	got, r := preview(oldEnv)
	require.Nil(t, r)
	assert.Empty(t, got)

	// A hard-coded field: the ClusterRunTemplate only.
	got, r = preview(env(tmpl("lint-v2", "$(workload.spec.source.git.url)$"), chain))
	require.Nil(t, r)
	require.Len(t, got, 1, "%+v", got)
	assert.Equal(t, api.KindClusterRunTemplate, got[0].Kind)
	assert.Equal(t, crt.GetName(), got[0].Name)
	assert.Equal(t, []objdiff.Change{{Path: "spec.template.spec.pipelineRef.name", Op: objdiff.OpChanged, Old: "lint-v1", New: "lint-v2"}}, got[0].Changes)
	assert.Equal(t, RunsNotPreviewed, got[0].Note)

	// Another tag: the template reads another input, and the Runnable has it.
	got, r = preview(env(tmpl("lint-v1", "$(workload.metadata.namespace)$"), chain))
	require.Nil(t, r)
	require.Len(t, got, 2, "%+v", got)
	assert.Equal(t, api.KindClusterRunTemplate, got[0].Kind)
	assert.Equal(t, api.KindRunnable, got[1].Kind)
	assert.Equal(t, []objdiff.Change{
		{Path: `spec.inputs["workload.metadata.namespace"]`, Op: objdiff.OpAdded, New: "dev"},
		{Path: `spec.inputs["workload.spec.source.git.url"]`, Op: objdiff.OpRemoved, Old: "https://git/app"}}, got[1].Changes)
	assert.Contains(t, got[1].Diff, "+    workload.metadata.namespace: dev\n")
	assert.NotContains(t, got[1].Diff, "resourceVersion", "only what Kontinue applies")
	assert.Equal(t, RunsNotPreviewed, got[0].Note)
	assert.Empty(t, got[1].Note, "said once per step")

	// No live objects yet: both new.
	e := env(tmpl("lint-v1", "$(workload.spec.source.git.url)$"), chain)
	got, r = previewRunnable(def, prep(e), nil, nil)
	require.Nil(t, r)
	require.Len(t, got, 2)
	assert.Equal(t, []string{objdiff.OpAdded, objdiff.OpAdded}, []string{got[0].Op, got[1].Op})

	// The chain's account in another namespace: the controller's refusal,
	// from prepare, which `kontinue render` shares.
	other := *chain
	other.ServiceAccountRef = &api.ServiceAccountRef{Namespace: "ci", Name: "builder"}
	p := prepare.Step(context.Background(), env(tmpl("lint-v1", "$(workload.spec.source.git.url)$"), &other), def, map[string]step.Outputs{})
	require.NotNil(t, p.Refusal)
	assert.Equal(t, step.ReasonServiceAccountError, p.Refusal.Reason)
	assert.Empty(t, p.Objects)
}
