package render

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"kontinue.dev/kontinue/reconciler/api"
)

func TestNewContext(t *testing.T) {
	owner := map[string]any{"metadata": map[string]any{"name": "w"}}
	dep := &Source{URL: "du", Revision: "dr"}
	tests := []struct {
		name   string
		kind   string
		in     Inputs
		labels map[string]string
		want   Context
	}{
		{
			name: "workload with one input of each kind",
			kind: api.KindWorkload,
			in: Inputs{
				Sources: map[string]Source{"s": {URL: "u", Revision: "r"}},
				Images:  map[string]any{"i": "img"},
				Configs: map[string]any{"c": map[string]any{"k": "v"}},
			},
			labels: map[string]string{"carto.run/workload-name": "w"},
			want: Context{
				"workload": owner, "deliverable": owner, "params": map[string]any{"p": "v"},
				"sources": map[string]any{"s": map[string]any{"url": "u", "revision": "r"}},
				"source":  map[string]any{"url": "u", "revision": "r"},
				"images":  map[string]any{"i": map[string]any{"image": "img"}},
				"image":   "img",
				"configs": map[string]any{"c": map[string]any{"config": map[string]any{"k": "v"}}},
				"config":  map[string]any{"k": "v"},
				"labels":  map[string]any{"carto.run/workload-name": "w"},
			},
		},
		{
			name: "deliverable with deployment and two sources: no singular source",
			kind: api.KindDeliverable,
			in: Inputs{
				Sources:    map[string]Source{"a": {URL: "ua"}, "b": {URL: "ub"}},
				Deployment: dep,
			},
			want: Context{
				"workload": owner, "deliverable": owner, "params": map[string]any{"p": "v"},
				"sources": map[string]any{
					"a": map[string]any{"url": "ua", "revision": nil},
					"b": map[string]any{"url": "ub", "revision": nil},
				},
				"images":     map[string]any{},
				"configs":    map[string]any{},
				"deployment": map[string]any{"url": "du", "revision": "dr"},
				"labels":     map[string]any{},
			},
		},
		{
			name: "runnable owner",
			kind: api.KindRunnable,
			want: Context{
				"runnable": owner, "params": map[string]any{"p": "v"},
				"sources": map[string]any{}, "images": map[string]any{}, "configs": map[string]any{},
				"labels": map[string]any{},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NewContext(tt.kind, owner, map[string]any{"p": "v"}, tt.in, tt.labels)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestNewContextNilParams(t *testing.T) {
	got := NewContext(api.KindWorkload, nil, nil, Inputs{}, nil)
	assert.Equal(t, map[string]any{}, got["params"])
	_, hasDeployment := got["deployment"]
	assert.False(t, hasDeployment)
	for _, k := range []string{"source", "image", "config"} {
		_, ok := got[k]
		assert.False(t, ok, k)
	}
}
