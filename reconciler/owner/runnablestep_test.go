package owner

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/render"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/step"
)

// The step a runnable: true template makes: a source template whose
// object reads the source's url and a param.
func runnableStep(name string, rp *api.RetentionPolicy) *stepCtx {
	meta := map[string]any{}
	if name != "" {
		meta["name"] = name
	}
	return &stepCtx{step: api.Step{Name: "tests"}, kind: api.KindClusterSourceTemplate, tmplName: "test-tmpl",
		spec: &api.TemplateSpec{Runnable: true, URLPath: "status.url", RevisionPath: "status.rev", HealthRule: healthy, RetentionPolicy: rp,
			Template: map[string]any{"apiVersion": "tekton.dev/v1", "kind": "TaskRun", "metadata": meta,
				"spec": map[string]any{"params": []any{map[string]any{"name": "url", "value": "$(source.url)$"}}, "who": "$( params.who )$"}}},
		in:     render.Inputs{Sources: map[string]render.Source{"src": {URL: "https://git/x", Revision: "r1"}}},
		params: map[string]any{"who": "me"},
		labels: map[string]string{api.StampedLabel: "true", api.LabelWorkloadName: "app"}}
}

func TestGenerateRunnable(t *testing.T) {
	own := walkOwner()
	sa := api.ServiceAccountRef{Namespace: "dev", Name: "builder"}
	sc := runnableStep("unit", &api.RetentionPolicy{MaxFailedRuns: 2, MaxSuccessfulRuns: 3})
	rendered := &unstructured.Unstructured{Object: map[string]any{"kind": "TaskRun", "metadata": map[string]any{"name": "unit"}}}
	crt, rn, refused := generateRunnable(context.Background(), api.WorkloadFlavor, own, sa, sc, rendered)
	require.Nil(t, refused)

	// The ClusterRunTemplate: its generated name, the template reading the
	// Runnable's inputs (metadata.name turned into generateName), the
	// outputs and rule of the template.
	crtName := generatedRunTemplateName(api.KindWorkload, "dev", "app", "tests")
	assert.Equal(t, crtName, crt.GetName())
	assert.Equal(t, api.KindClusterRunTemplate, crt.GetKind())
	assert.Equal(t, "", crt.GetNamespace(), "cluster-scoped")
	tmpl, _, _ := unstructured.NestedMap(crt.Object, "spec", "template")
	assert.Equal(t, "unit-", tmpl["metadata"].(map[string]any)["generateName"])
	assert.Equal(t, "$(runnable.spec.inputs['params.who'])$", tmpl["spec"].(map[string]any)["who"])
	outs, _, _ := unstructured.NestedStringMap(crt.Object, "spec", "outputs")
	assert.Equal(t, map[string]string{"url": "status.url", "revision": "status.rev"}, outs)
	_, hasRule, _ := unstructured.NestedMap(crt.Object, "spec", "healthRule")
	assert.True(t, hasRule, "the template's rule judges every run")
	assert.Equal(t, "Workload dev/app step tests", crt.GetAnnotations()[AnnotationGeneratedFor])
	assert.Equal(t, sc.labels, crt.GetLabels())

	// The Runnable: in the owner's namespace, controlled by it, as sa, the
	// tags' values now, the template's retention.
	assert.Equal(t, "unit", rn.GetName())
	assert.Equal(t, "dev", rn.GetNamespace())
	require.Len(t, rn.GetOwnerReferences(), 1)
	assert.Equal(t, own.GetUID(), rn.GetOwnerReferences()[0].UID)
	assert.True(t, *rn.GetOwnerReferences()[0].Controller)
	spec := rn.Object["spec"].(map[string]any)
	assert.Equal(t, "builder", spec["serviceAccountName"])
	assert.Equal(t, map[string]any{"kind": api.KindClusterRunTemplate, "name": crtName}, spec["runTemplateRef"])
	assert.Equal(t, map[string]any{"source.url": "https://git/x", "params.who": "me"}, spec["inputs"])
	assert.Equal(t, map[string]any{"maxFailedRuns": int64(2), "maxSuccessfulRuns": int64(3)}, spec["retentionPolicy"])
	assert.Equal(t, sc.labels, rn.GetLabels())
}

func TestGenerateRunnableNamesAndRefusals(t *testing.T) {
	own := walkOwner()
	here := api.ServiceAccountRef{Namespace: "dev", Name: "default"}
	nameless := &unstructured.Unstructured{Object: map[string]any{"kind": "TaskRun"}}

	_, rn, refused := generateRunnable(context.Background(), api.WorkloadFlavor, own, here, runnableStep("", nil), nameless)
	require.Nil(t, refused)
	assert.Equal(t, "app-tests", rn.GetName(), "no name rendered: the owner's and the step's")
	_, has := rn.Object["spec"].(map[string]any)["retentionPolicy"]
	assert.False(t, has, "no retention policy: the Runnable's default")

	_, _, refused = generateRunnable(context.Background(), api.WorkloadFlavor, own, api.ServiceAccountRef{Namespace: "other", Name: "x"}, runnableStep("", nil), nameless)
	require.NotNil(t, refused)
	assert.Equal(t, st.False, refused.Status)
	assert.Equal(t, step.ReasonServiceAccountError, refused.Reason)
	assert.Contains(t, refused.Message, "a Runnable can only use an account of its own namespace")

	bad := runnableStep("", nil)
	bad.spec.Template["spec"] = map[string]any{"x": "$(nope.missing)$"}
	_, _, refused = generateRunnable(context.Background(), api.WorkloadFlavor, own, here, bad, nameless)
	require.NotNil(t, refused)
	assert.Equal(t, step.ReasonStampFailure, refused.Reason)
	assert.Contains(t, refused.Message, "unable to compute the Runnable inputs of step [tests] from template [ClusterSourceTemplate/test-tmpl]")
}
