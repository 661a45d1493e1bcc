package prepare

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
)

// What a step stamps lands in its owner's shard, whatever the template
// rendered: the owner's shard replica watches it, no other does.
func TestStampedObjectsCarryTheOwnersShard(t *testing.T) {
	tests := []struct {
		name     string
		owner    map[string]any // metadata.labels
		rendered map[string]any
		want     string // "": no label
	}{
		{"the default shard", nil, nil, ""},
		{"a shard", map[string]any{api.ShardLabel: "a"}, nil, "a"},
		{"a template's own label is overridden", map[string]any{api.ShardLabel: "a"}, map[string]any{api.ShardLabel: "b"}, "a"},
		{"a template cannot move an object of the default shard", nil, map[string]any{api.ShardLabel: "b"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			owner := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "carto.run/v1alpha1", "kind": "Workload",
				"metadata": map[string]any{"name": "app", "namespace": "ns", "uid": "u-1"}}}
			if tt.owner != nil {
				_ = unstructured.SetNestedMap(owner.Object, tt.owner, "metadata", "labels")
			}
			obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x"}}}
			if tt.rendered != nil {
				_ = unstructured.SetNestedMap(obj.Object, tt.rendered, "metadata", "labels")
			}
			spec := &api.TemplateSpec{}
			l := Labels(api.WorkloadFlavor, owner, "chain", "step", api.KindClusterConfigTemplate, "tmpl", spec)
			got, ok := l[api.ShardLabel]
			assert.Equal(t, tt.want != "", ok)
			assert.Equal(t, tt.want, got)
			objs, err := Finish(api.WorkloadFlavor, owner, spec, l, []*unstructured.Unstructured{obj})
			require.NoError(t, err)
			got, ok = objs[0].GetLabels()[api.ShardLabel]
			assert.Equal(t, tt.want != "", ok, "labels %v", objs[0].GetLabels())
			assert.Equal(t, tt.want, got)
		})
	}
}

// The shard is not part of what an object is: an owner that moves shard
// keeps the digest of every object (no new input set, nothing re-run).
func TestDigestLeavesTheShardOut(t *testing.T) {
	digestIn := func(shard string) (string, string) {
		owner := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "carto.run/v1alpha1", "kind": "Workload",
			"metadata": map[string]any{"name": "app", "namespace": "ns", "uid": "u-1"}}}
		if shard != "" {
			owner.SetLabels(map[string]string{api.ShardLabel: shard})
		}
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x"}, "data": map[string]any{"a": "b"}}}
		spec := &api.TemplateSpec{}
		objs, err := Finish(api.WorkloadFlavor, owner, spec, Labels(api.WorkloadFlavor, owner, "chain", "step", api.KindClusterConfigTemplate, "tmpl", spec), []*unstructured.Unstructured{obj})
		require.NoError(t, err)
		return objs[0].GetAnnotations()[api.AnnotationDigest], objs[0].GetLabels()[api.ShardLabel]
	}
	d0, s0 := digestIn("")
	da, sa := digestIn("a")
	db, sb := digestIn("b")
	assert.Equal(t, d0, da)
	assert.Equal(t, d0, db)
	assert.Equal(t, []string{"", "a", "b"}, []string{s0, sa, sb}, "the label itself stays")
}
