package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"kontinue.dev/kontinue/cli/objdiff"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/prepare"
	st "kontinue.dev/kontinue/reconciler/status"
)

func u(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(y), &m))
	return &unstructured.Unstructured{Object: m}
}

func TestCompareStep(t *testing.T) {
	const mutable, immutable = false, true
	cm := func(name, value string) string {
		return `{apiVersion: v1, kind: ConfigMap, metadata: {name: ` + name + `, namespace: dev, annotations: {kontinue.dev/applied-digest: x}}, data: {v: "` + value + `"}}`
	}
	live := func(name, value string) string {
		return `{apiVersion: v1, kind: ConfigMap, metadata: {name: ` + name + `, namespace: dev, uid: u1, resourceVersion: "9", annotations: {kontinue.dev/applied-digest: y}}, data: {v: "` + value + `", other: z}}`
	}
	type obj = *unstructured.Unstructured
	tests := []struct {
		name      string
		spec      bool // immutable
		objs, old []string
		live      []string
		want      []objdiff.Object // Diff checked apart
	}{
		{name: "unchanged: nothing, whatever the server added and the digest",
			spec: mutable, objs: []string{cm("a", "1")}, live: []string{live("a", "1")}},
		{name: "a value changes",
			spec: mutable, objs: []string{cm("a", "2")}, live: []string{live("a", "1")},
			want: []objdiff.Object{{Step: "s", APIVersion: "v1", Kind: "ConfigMap", Namespace: "dev", Name: "a", Op: objdiff.OpChanged,
				Changes: []objdiff.Change{{Path: "data.v", Op: objdiff.OpChanged, Old: "1", New: "2"}}}}},
		{name: "a field the old render set and the new one drops shows as removed",
			spec: mutable, objs: []string{cm("a", "1")}, old: []string{`{apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: dev}, data: {v: "1", other: z}}`},
			live: []string{live("a", "1")},
			want: []objdiff.Object{{Step: "s", APIVersion: "v1", Kind: "ConfigMap", Namespace: "dev", Name: "a", Op: objdiff.OpChanged,
				Changes: []objdiff.Change{{Path: "data.other", Op: objdiff.OpRemoved, Old: "z"}}}}},
		{name: "another name: a new object, the old one no longer stamped",
			spec: mutable, objs: []string{cm("b", "1")}, live: []string{live("a", "1")},
			want: []objdiff.Object{
				{Step: "s", APIVersion: "v1", Kind: "ConfigMap", Namespace: "dev", Name: "b", Op: objdiff.OpAdded},
				{Step: "s", APIVersion: "v1", Kind: "ConfigMap", Namespace: "dev", Name: "a", Op: objdiff.OpRemoved}}},
		{name: "a run compares with the newest run whatever its name",
			spec: immutable, objs: []string{`{apiVersion: v1, kind: ConfigMap, metadata: {generateName: a-, namespace: dev}, data: {v: "2"}}`},
			live: []string{`{apiVersion: v1, kind: ConfigMap, metadata: {name: a-xyz, generateName: a-, namespace: dev}, data: {v: "1"}}`},
			want: []objdiff.Object{{Step: "s", APIVersion: "v1", Kind: "ConfigMap", Namespace: "dev", Name: "a-xyz", Op: objdiff.OpChanged,
				Changes: []objdiff.Change{{Path: "data.v", Op: objdiff.OpChanged, Old: "1", New: "2"}}}}},
		{name: "no live object yet: a new object",
			spec: mutable, objs: []string{cm("a", "1")},
			want: []objdiff.Object{{Step: "s", APIVersion: "v1", Kind: "ConfigMap", Namespace: "dev", Name: "a", Op: objdiff.OpAdded}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objs, old, lv []obj
			for _, y := range tt.objs {
				objs = append(objs, u(t, y))
			}
			for _, y := range tt.old {
				old = append(old, u(t, y))
			}
			for _, y := range tt.live {
				lv = append(lv, u(t, y))
			}
			got, err := compareStep("s", tt.spec, objs, old, lv)
			require.NoError(t, err)
			require.Len(t, got, len(tt.want))
			for i := range got {
				assert.NotEmpty(t, got[i].Diff)
				assert.NotContains(t, got[i].Diff, "resourceVersion")
				assert.NotContains(t, got[i].Diff, "applied-digest")
				if tt.want[i].Op == objdiff.OpAdded {
					assert.NotEmpty(t, got[i].Changes)
					got[i].Changes = nil
				}
				got[i].Diff = ""
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestOutputsOf(t *testing.T) {
	spec := &api.TemplateSpec{ImagePath: ".status.image"}
	cfg := &api.TemplateSpec{ConfigPath: ".data"}
	liveImg := u(t, `{kind: Image, metadata: {name: a}, status: {image: live-img}}`)
	// The new object holds no status: the live object's outputs.
	p := prepare.Prepared{Kind: api.KindClusterImageTemplate, Spec: spec, Objects: []*unstructured.Unstructured{u(t, `{kind: Image, metadata: {name: a}, spec: {x: 1}}`)}}
	assert.Equal(t, map[string]any{"image": "live-img"}, map[string]any(outputsOf(p, []*unstructured.Unstructured{liveImg}, nil)))
	// The new object holds the outputs (a ConfigMap's data): the new ones.
	p = prepare.Prepared{Kind: api.KindClusterConfigTemplate, Spec: cfg, Objects: []*unstructured.Unstructured{u(t, `{kind: ConfigMap, metadata: {name: a}, data: {k: new}}`)}}
	assert.Equal(t, map[string]any{"config": map[string]any{"k": "new"}},
		map[string]any(outputsOf(p, []*unstructured.Unstructured{u(t, `{kind: ConfigMap, metadata: {name: a}, data: {k: old}}`)}, nil)))
	// Neither: the last good outputs of the status.
	p = prepare.Prepared{Kind: api.KindClusterImageTemplate, Spec: spec}
	assert.Equal(t, map[string]any{"image": "kept"}, map[string]any(outputsOf(p, nil, &st.Resource{OutputValues: map[string]any{"image": "kept"}})))
	assert.Nil(t, outputsOf(p, nil, nil), "nothing: downstream waits")
	// A runnable step: what its live Runnable reports (its runs'), as the
	// controller reads it; without them, the status's last good outputs.
	src := &api.TemplateSpec{Runnable: true, URLPath: ".spec.url", RevisionPath: ".spec.rev"}
	p = prepare.Prepared{Kind: api.KindClusterSourceTemplate, Spec: src, Objects: []*unstructured.Unstructured{u(t, `{kind: PipelineRun, spec: {url: new, rev: r2}}`)}}
	rn := u(t, `{apiVersion: carto.run/v1alpha1, kind: Runnable, metadata: {name: a}, status: {outputs: {url: live, revision: r1}}}`)
	crt := u(t, `{apiVersion: carto.run/v1alpha1, kind: ClusterRunTemplate, metadata: {name: g}}`)
	assert.Equal(t, map[string]any{"url": "live", "revision": "r1"}, map[string]any(outputsOf(p, []*unstructured.Unstructured{rn, crt}, nil)))
	assert.Equal(t, map[string]any{"url": "kept"}, map[string]any(outputsOf(p, []*unstructured.Unstructured{crt}, &st.Resource{OutputValues: map[string]any{"url": "kept"}})))
	// A pass-through forwards.
	p = prepare.Prepared{PassThrough: "img", Outputs: map[string]any{"image": "fwd"}}
	assert.Equal(t, map[string]any{"image": "fwd"}, map[string]any(outputsOf(p, nil, nil)))
}
