package render

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/jsonvalue"
)

// nested is a value nested levels deep ({"a": ...}).
func nested(levels int) any {
	var v any = "leaf"
	for range levels {
		v = map[string]any{"a": v}
	}
	return v
}

// Whatever the engine, an object nested deeper than jsonvalue.MaxDepth
// is refused before anything is written, even when built from a shallow
// context (fromYaml of a string param, a ytt loop).
func TestRenderedObjectsDeeperThanTheBoundAreRefused(t *testing.T) {
	deepYAML := strings.Repeat("{a: ", jsonvalue.MaxDepth+5) + "1" + strings.Repeat("}", jsonvalue.MaxDepth+5)
	okYAML := strings.Repeat("{a: ", jsonvalue.MaxDepth-10) + "1" + strings.Repeat("}", jsonvalue.MaxDepth-10)
	yttLoop := func(n int) string {
		return `#@ def deep(n):
#@   v = 1
#@   for i in range(n):
#@     v = {"a": v}
#@   end
#@   return v
#@ end
apiVersion: test.run/v1alpha1
kind: Test
metadata: {name: deep}
spec: #@ deep(` + strconv.Itoa(n) + `)
`
	}
	// Four levels around the tag, the param within the context's bound.
	simple := &api.TemplateSpec{Template: map[string]any{"apiVersion": "test.run/v1alpha1", "kind": "Test",
		"metadata": map[string]any{"name": "deep"}, "spec": map[string]any{"a": map[string]any{"b": map[string]any{"c": map[string]any{"v": "$(params.v)$"}}}}}}
	goTmpl := "apiVersion: test.run/v1alpha1\nkind: Test\nmetadata: {name: deep}\nspec: {{ fromYaml (printf \"v: %s\" .params.yaml) | toJson }}\n"
	for _, tt := range []struct {
		name   string
		spec   *api.TemplateSpec
		params map[string]any
		deep   bool
	}{
		{"simple, a param", simple, map[string]any{"v": nested(jsonvalue.MaxDepth - 4)}, true},
		{"simple, within the bound", simple, map[string]any{"v": nested(jsonvalue.MaxDepth - 5)}, false},
		{"goTemplate, fromYaml of a string", &api.TemplateSpec{GoTemplate: goTmpl}, map[string]any{"yaml": deepYAML}, true},
		{"goTemplate, within the bound", &api.TemplateSpec{GoTemplate: goTmpl}, map[string]any{"yaml": okYAML}, false},
		{"ytt, a loop", &api.TemplateSpec{Ytt: yttLoop(jsonvalue.MaxDepth + 5)}, nil, true},
		{"ytt, within the bound", &api.TemplateSpec{Ytt: yttLoop(jsonvalue.MaxDepth - 10)}, nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, err := EngineFor(tt.spec)
			require.NoError(t, err)
			objs, err := e.Render(context.Background(), tt.spec, NewContext(api.KindWorkload, testOwner(), tt.params, Inputs{}, nil))
			if !tt.deep {
				require.NoError(t, err)
				require.Len(t, objs, 1)
				return
			}
			var se *StampError
			require.ErrorAs(t, err, &se)
			assert.Contains(t, err.Error(), "rendered Test [deep] nested deeper than 1000 levels, more than Kontinue writes")
			assert.Nil(t, objs)
		})
	}
}

// The context is bounded alike: an owner, a param or an input deeper than
// anything Kontinue writes is refused, saying so.
func TestContextDeeperThanTheBoundIsRefused(t *testing.T) {
	spec := &api.TemplateSpec{Template: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "$(params.n)$"}}}
	e, err := EngineFor(spec)
	require.NoError(t, err)
	owner := testOwner()
	owner["spec"] = nested(jsonvalue.MaxDepth + 1)
	_, err = e.Render(context.Background(), spec, NewContext(api.KindWorkload, owner, map[string]any{"n": "x"}, Inputs{}, nil))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "template context is nested deeper than 1000 levels (the owner, a param or an input)")
}
