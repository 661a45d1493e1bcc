package prepare

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/paths"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/render"
	"kontinue.dev/kontinue/reconciler/step"
)

// The step a runnable: true template makes: a source template whose
// object reads the source's url and a param.
func runnableStep(name string, rp *api.RetentionPolicy, rendered *unstructured.Unstructured) Prepared {
	meta := map[string]any{}
	if name != "" {
		meta["name"] = name
	}
	return Prepared{Kind: api.KindClusterSourceTemplate, Template: "test-tmpl",
		Spec: &api.TemplateSpec{Runnable: true, URLPath: "status.url", RevisionPath: "status.rev", HealthRule: &api.HealthRule{AlwaysHealthy: &struct{}{}}, RetentionPolicy: rp,
			Template: map[string]any{"apiVersion": "tekton.dev/v1", "kind": "TaskRun", "metadata": meta,
				"spec": map[string]any{"params": []any{map[string]any{"name": "url", "value": "$(source.url)$"}}, "who": "$( params.who )$"}}},
		Inputs:  render.Inputs{Sources: map[string]render.Source{"src": {URL: "https://git/x", Revision: "r1"}}},
		Params:  map[string]any{"who": "me"},
		Labels:  map[string]string{api.StampedLabel: "true", api.LabelWorkloadName: "app"},
		Objects: []*unstructured.Unstructured{rendered}}
}

var testsStep = api.Step{Name: "tests"}

func runnableOwner() *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "carto.run/v1alpha1", "kind": "Workload",
		"metadata": map[string]any{"name": "app", "namespace": "dev", "generation": int64(3), "uid": "uid-1"},
		"spec":     map[string]any{},
	}}
	return o
}

func TestGenerateRunnable(t *testing.T) {
	own := runnableOwner()
	sa := api.ServiceAccountRef{Namespace: "dev", Name: "builder"}
	rendered := &unstructured.Unstructured{Object: map[string]any{"kind": "TaskRun", "metadata": map[string]any{"name": "unit"}}}
	sc := runnableStep("unit", &api.RetentionPolicy{MaxFailedRuns: 2, MaxSuccessfulRuns: 3}, rendered)
	crt, rn, refused := Runnable(context.Background(), api.WorkloadFlavor, own, sa, testsStep, sc)
	require.Nil(t, refused)

	// The ClusterRunTemplate: its generated name, the template reading the
	// Runnable's inputs (metadata.name turned into generateName), the
	// outputs and rule of the template.
	crtName := RunTemplateName(api.KindWorkload, "dev", "app", "tests")
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
	assert.Equal(t, sc.Labels, crt.GetLabels())

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
	assert.Equal(t, sc.Labels, rn.GetLabels())
}

func TestGenerateRunnableNamesAndRefusals(t *testing.T) {
	own := runnableOwner()
	here := api.ServiceAccountRef{Namespace: "dev", Name: "default"}
	nameless := &unstructured.Unstructured{Object: map[string]any{"kind": "TaskRun"}}

	_, rn, refused := Runnable(context.Background(), api.WorkloadFlavor, own, here, testsStep, runnableStep("", nil, nameless))
	require.Nil(t, refused)
	assert.Equal(t, "app-tests", rn.GetName(), "no name rendered: the owner's and the step's")
	_, has := rn.Object["spec"].(map[string]any)["retentionPolicy"]
	assert.False(t, has, "no retention policy: the Runnable's default")

	_, _, refused = Runnable(context.Background(), api.WorkloadFlavor, own, api.ServiceAccountRef{Namespace: "other", Name: "x"}, testsStep, runnableStep("", nil, nameless))
	require.NotNil(t, refused)
	assert.Equal(t, step.ReasonServiceAccountError, refused.Reason)
	assert.Contains(t, refused.Message, "a Runnable can only use an account of its own namespace")

	bad := runnableStep("", nil, nameless)
	bad.Spec.Template["spec"] = map[string]any{"x": "$(nope.missing)$"}
	_, _, refused = Runnable(context.Background(), api.WorkloadFlavor, own, here, testsStep, bad)
	require.NotNil(t, refused)
	assert.Equal(t, step.ReasonStampFailure, refused.Reason)
	assert.Contains(t, refused.Message, "unable to compute the Runnable inputs of step [tests] from template [ClusterSourceTemplate/test-tmpl]")
}

func TestTranslateTemplate(t *testing.T) {
	in := map[string]any{
		"apiVersion": "tekton.dev/v1beta1",
		"kind":       "PipelineRun",
		"metadata":   map[string]any{"name": "$(workload.metadata.name)$-linter", "labels": map[string]any{"fixed": "yes"}},
		"spec": map[string]any{
			"params": []any{
				map[string]any{"name": "repository", "value": "$(workload.spec.source.git.url)$"},
				map[string]any{"name": "both", "value": "$( params.a )$/$(workload.metadata.labels['app.kubernetes.io/name'])$@$(params.it's)$"},
			},
			"count": int64(3),
		},
	}
	out, exprs := translateTemplate(in)
	assert.Equal(t, []string{"params.a", "params.it's", "workload.metadata.labels['app.kubernetes.io/name']", "workload.metadata.name", "workload.spec.source.git.url"}, exprs)
	md := out["metadata"].(map[string]any)
	assert.Equal(t, "$(runnable.spec.inputs['workload.metadata.name'])$-linter-", md["generateName"], "a name becomes a generateName")
	assert.NotContains(t, md, "name")
	assert.Equal(t, map[string]any{"fixed": "yes"}, md["labels"], "hard-coded fields copied")
	params := out["spec"].(map[string]any)["params"].([]any)
	assert.Equal(t, "$(runnable.spec.inputs['workload.spec.source.git.url'])$", params[0].(map[string]any)["value"])
	both := params[1].(map[string]any)["value"].(string)
	assert.Equal(t, `$(runnable.spec.inputs['params.a'])$/$(runnable.spec.inputs['workload.metadata.labels[\'app.kubernetes.io/name\']'])$@$(runnable.spec.inputs['params.it\'s'])$`, both)
	assert.Equal(t, int64(3), out["spec"].(map[string]any)["count"])
	assert.Equal(t, "$(workload.metadata.name)$-linter", in["metadata"].(map[string]any)["name"], "the template is not modified")

	// Every translated tag is a valid path that reads the input by its name.
	doc := []byte(`{"runnable":{"spec":{"inputs":{"params.a":"A","params.it's":"I","workload.metadata.labels['app.kubernetes.io/name']":"N"}}}}`)
	for _, part := range strings.Split(both, ")$") {
		i := strings.Index(part, "$(")
		if i < 0 {
			continue
		}
		p, err := paths.Compile(part[i+2:])
		require.NoError(t, err, part)
		v, err := p.Value(doc)
		require.NoError(t, err, part)
		assert.Contains(t, []any{"A", "I", "N"}, v)
	}

	// generateName is kept; a template without tags has no inputs.
	out, exprs = translateTemplate(map[string]any{"metadata": map[string]any{"generateName": "x-"}})
	assert.Empty(t, exprs)
	assert.Equal(t, map[string]any{"generateName": "x-"}, out["metadata"])
}

func TestRunTemplateName(t *testing.T) {
	a := RunTemplateName("Workload", "a-b", "c", "lint")
	b := RunTemplateName("Workload", "a", "b-c", "lint")
	assert.NotEqual(t, a, b, "the hash tells apart what the readable part does not")
	assert.True(t, strings.HasPrefix(a, "a-b-c-lint-"), a)
	assert.NotEqual(t, a, RunTemplateName("Deliverable", "a-b", "c", "lint"))
	assert.Equal(t, a, RunTemplateName("Workload", "a-b", "c", "lint"), "stable")
	long := RunTemplateName("Workload", strings.Repeat("n", 63), strings.Repeat("w", 253), "Step_One")
	assert.LessOrEqual(t, len(long), 253)
	for _, c := range long {
		assert.True(t, c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.', "valid name %q", long)
	}
	assert.Contains(t, RunTemplateName("Workload", "ns", "app", "Step_One"), "ns-app-step-one-")
}
