package paths

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKeys(t *testing.T) {
	tests := []struct {
		expr string
		keys []string
		ok   bool
	}{
		{"workload.spec.source.git.ref.branch", []string{"workload", "spec", "source", "git", "ref", "branch"}, true},
		{".workload.spec.image", []string{"workload", "spec", "image"}, true},
		{"{.workload.spec.image}", []string{"workload", "spec", "image"}, true},
		{"workload.metadata.labels['app.kubernetes.io/name']", []string{"workload", "metadata", "labels", "app.kubernetes.io/name"}, true},
		{`workload.metadata.labels["a b"].x`, []string{"workload", "metadata", "labels", "a b", "x"}, true},
		{"workload.spec.params[0].value", nil, false},
		{"workload.spec.params[*].value", nil, false},
		{`workload.spec.params[?(@.name=="a")].value`, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			p, err := Compile(tt.expr)
			require.NoError(t, err)
			keys, ok := p.Keys()
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.keys, keys)
		})
	}
}
