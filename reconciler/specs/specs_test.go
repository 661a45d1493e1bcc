package specs

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestChainReaches(t *testing.T) {
	chain := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "carto.run/v1alpha1", "kind": "ClusterSupplyChain",
		"metadata": map[string]any{"name": "c", "resourceVersion": "1"},
		"spec": map[string]any{
			"selector":            map[string]any{"app": "web"},
			"selectorMatchFields": []any{map[string]any{"key": "spec.env", "operator": "In", "values": []any{"prod"}}},
			"resources":           []any{},
		},
	}}
	c := NewChains().Chain(chain)
	require.NoError(t, c.Err)
	tests := []struct {
		name string
		doc  string
		want bool
	}{
		{"labels and fields", `{"metadata":{"name":"w","namespace":"ns","labels":{"app":"web"}},"spec":{"env":"prod"}}`, true},
		{"other label", `{"metadata":{"name":"w","namespace":"ns","labels":{"app":"api"}},"spec":{"env":"prod"}}`, false},
		{"other field", `{"metadata":{"name":"w","namespace":"ns","labels":{"app":"web"}},"spec":{"env":"dev"}}`, false},
		{"no labels", `{"metadata":{"name":"w","namespace":"ns"},"spec":{"env":"prod"}}`, false},
		{"not JSON", `{"metadata":`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns, name, ok := c.Reaches("Workload", []byte(tt.doc))
			assert.Equal(t, tt.want, ok)
			if ok {
				assert.Equal(t, []string{"ns", "w"}, []string{ns, name})
			}
		})
	}
}
