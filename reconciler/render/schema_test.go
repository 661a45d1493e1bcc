package render

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/crds"
	"kontinue.dev/kontinue/paths"
	"kontinue.dev/kontinue/reconciler/api"
)

// schemaOf compiles the schema of Kontinue's own CRD of kind.
func schemaOf(t *testing.T, kind string) *Schema {
	t.Helper()
	all, err := crds.All()
	require.NoError(t, err)
	for _, c := range all {
		if k, _, _ := unstructured.NestedString(c.Object, "spec", "names", "kind"); k == kind {
			s, err := SchemaOf(c, api.Version)
			require.NoError(t, err)
			return s
		}
	}
	t.Fatalf("no CRD of kind %s", kind)
	return nil
}

// What a tag naming an owner field the owner leaves unset renders, as
// Cartographer v0.8.11 renders it (its template context is the typed
// owner: checked against its own stamper, and its controller in
// e2e/real's TestRealUnsetOwnerFields) for the owner's spec and metadata:
// the zero value of the field's Go
// type, "" for a string, null for a pointer, a list or a map, a struct's
// zero for a struct; and still an error for what the type does not have
// (unknown fields, map keys: labels, annotations, inputs) or what lies
// below a null pointer. Against Kontinue's CRDs, whose schemas mark
// Cartographer's pointers nullable.
func TestUnsetOwnerFields(t *testing.T) {
	workload := map[string]any{
		"apiVersion": "carto.run/v1alpha1", "kind": "Workload",
		"metadata": map[string]any{"name": "app", "namespace": "dev", "generation": int64(1)},
		"spec": map[string]any{"source": map[string]any{"git": map[string]any{
			"url": "https://git.example.com/app.git", "ref": map[string]any{"tag": "v1"}}}},
	}
	imageWorkload := map[string]any{"apiVersion": "carto.run/v1alpha1", "kind": "Workload",
		"metadata": map[string]any{"name": "app"}, "spec": map[string]any{"image": "registry.example.com/app:v1"}}
	deliverable := map[string]any{"apiVersion": "carto.run/v1alpha1", "kind": "Deliverable",
		"metadata": map[string]any{"name": "app"}, "spec": map[string]any{"source": map[string]any{"git": map[string]any{"url": "https://git.example.com/app.git"}}}}
	runnable := map[string]any{"apiVersion": "carto.run/v1alpha1", "kind": "Runnable",
		"metadata": map[string]any{"name": "run"}, "spec": map[string]any{"runTemplateRef": map[string]any{"name": "rt", "kind": "ClusterRunTemplate"}}}
	tests := []struct {
		kind  string
		owner map[string]any
		tag   string
		want  any
		fails bool
	}{
		// tanzu apps workload create leaves these unset unless asked.
		{api.KindWorkload, workload, "workload.spec.build.env", nil, false},
		{api.KindWorkload, workload, "workload.spec.serviceAccountName", "", false},
		{api.KindWorkload, workload, "workload.spec.env", nil, false},
		{api.KindWorkload, workload, "workload.spec.image", nil, false},
		{api.KindWorkload, workload, "workload.spec.source.git.ref.branch", nil, false},
		{api.KindWorkload, workload, "deliverable.spec.source.git.ref.branch", nil, false},
		{api.KindWorkload, workload, "workload.spec.source.image", nil, false},
		{api.KindWorkload, workload, "workload.spec.source.subPath", nil, false},
		{api.KindWorkload, workload, "workload.spec.build", map[string]any{}, false},
		{api.KindWorkload, workload, "workload.spec.params", nil, false},
		{api.KindWorkload, workload, "workload.spec.serviceClaims", nil, false},
		{api.KindWorkload, workload, "workload.spec.resources", nil, false},
		{api.KindWorkload, workload, "workload.metadata.labels", nil, false},
		{api.KindWorkload, workload, "workload.metadata.annotations", nil, false},
		{api.KindWorkload, workload, "workload.metadata.generateName", "", false},
		{api.KindWorkload, workload, "workload.metadata.deletionTimestamp", nil, false},
		{api.KindWorkload, workload, "workload.metadata.generation", int64(1), false},
		// What the type does not have, or lies below a null.
		{api.KindWorkload, workload, "workload.spec.nope", nil, true},
		{api.KindWorkload, workload, "workload.spec.resources.limits", nil, true},
		{api.KindWorkload, workload, "workload.metadata.labels.app", nil, true},
		{api.KindWorkload, workload, "workload.metadata.annotations['x.io/y']", nil, true},
		{api.KindWorkload, workload, "workload.spec.build.env[0]", nil, true},
		{api.KindWorkload, workload, "params.anything", nil, true},
		{api.KindWorkload, workload, "workload.status.observedGeneration", nil, true},
		{api.KindRunnable, runnable, "runnable.status.outputs", nil, true},
		{api.KindWorkload, imageWorkload, "workload.spec.source", nil, false},
		{api.KindWorkload, imageWorkload, "workload.spec.source.git.url", nil, true},
		{api.KindWorkload, imageWorkload, "workload.spec.source.git.ref.branch", nil, true},
		// A Deliverable's.
		{api.KindDeliverable, deliverable, "deliverable.spec.source.git.ref", nil, false},
		{api.KindDeliverable, deliverable, "deliverable.spec.source.git.ref.branch", nil, true}, // below a null ref
		{api.KindDeliverable, deliverable, "deliverable.spec.source.image", nil, false},
		{api.KindDeliverable, deliverable, "deliverable.spec.source.subPath", nil, false},
		{api.KindDeliverable, deliverable, "deliverable.spec.serviceAccountName", "", false},
		{api.KindDeliverable, deliverable, "deliverable.spec.params", nil, false},
		{api.KindDeliverable, deliverable, "deliverable.spec.image", nil, true},
		// A Runnable's.
		{api.KindRunnable, runnable, "runnable.spec.serviceAccountName", "", false},
		{api.KindRunnable, runnable, "runnable.spec.selector", nil, false},
		{api.KindRunnable, runnable, "runnable.spec.inputs", nil, false},
		{api.KindRunnable, runnable, "runnable.spec.retentionPolicy", map[string]any{"maxFailedRuns": int64(0), "maxSuccessfulRuns": int64(0)}, false},
		{api.KindRunnable, runnable, "runnable.spec.inputs.revision", nil, true},
		{api.KindRunnable, runnable, "runnable.spec.selector.resource", nil, true},
		{api.KindRunnable, runnable, "workload.spec.image", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.kind+" "+tt.tag, func(t *testing.T) {
			tc := NewContext(tt.kind, tt.owner, nil, Inputs{}, nil)
			ctx := WithSchema(context.Background(), schemaOf(t, tt.kind))
			objs, err := Simple().Render(ctx, &api.TemplateSpec{Template: obj(map[string]any{"v": "$(" + tt.tag + ")$"})}, tc)
			if tt.fails {
				require.Error(t, err)
				assert.True(t, paths.IsNotFound(err), "%v", err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, map[string]any{"v": tt.want}, objs[0].Object["data"])
		})
	}
}

// Inside a longer string an unset field is its zero value's text; a null
// (a pointer, a list) has none and fails, as in Cartographer.
func TestUnsetOwnerFieldsInterpolated(t *testing.T) {
	owner := map[string]any{"apiVersion": "carto.run/v1alpha1", "kind": "Workload", "metadata": map[string]any{"name": "app"}, "spec": map[string]any{}}
	ctx := WithSchema(context.Background(), schemaOf(t, api.KindWorkload))
	tc := NewContext(api.KindWorkload, owner, nil, Inputs{}, nil)
	objs, err := Simple().Render(ctx, &api.TemplateSpec{Template: obj(map[string]any{
		"sa": "sa=$(workload.spec.serviceAccountName)$", "build": "b=$(workload.spec.build)$", "gen": "g=$(workload.metadata.generation)$"})}, tc)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"sa": "sa=", "build": "b={}", "gen": "g=0"}, objs[0].Object["data"])

	_, err = Simple().Render(ctx, &api.TemplateSpec{Template: obj(map[string]any{"v": "image=$(workload.spec.image)$"})}, tc)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "unable to resolve $(workload.spec.image)$ in data.v: the value is null")

	// Without a schema (a render outside any owner), nothing is assumed.
	_, err = Simple().Render(context.Background(), &api.TemplateSpec{Template: obj(map[string]any{"v": "$(workload.spec.serviceAccountName)$"})}, tc)
	assert.True(t, paths.IsNotFound(err), "%v", err)
}
