package render

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kontinue.dev/kontinue/reconciler/api"
)

func def(name string, v any) api.Param { return api.Param{Name: name, Default: v} }
func val(name string, v any) api.Param { return api.Param{Name: name, Value: v, HasValue: true} }

func TestMergeParams(t *testing.T) {
	tmpl := []api.TemplateParam{{Name: "p", Default: "template"}}
	owner := []api.OwnerParam{{Name: "p", Value: "owner"}}
	tests := []struct {
		name  string
		tmpl  []api.TemplateParam
		chain []api.Param
		step  []api.Param
		owner []api.OwnerParam
		want  map[string]any
	}{
		{"nothing", nil, nil, nil, nil, map[string]any{}},
		{"template default only", tmpl, nil, nil, nil, map[string]any{"p": "template"}},
		{"chain default over template", tmpl, []api.Param{def("p", "chain")}, nil, nil, map[string]any{"p": "chain"}},
		{"chain value over template", tmpl, []api.Param{val("p", "chain")}, nil, nil, map[string]any{"p": "chain"}},
		{"owner over chain default", tmpl, []api.Param{def("p", "chain")}, nil, owner, map[string]any{"p": "owner"}},
		{"chain value protected against owner", tmpl, []api.Param{val("p", "chain")}, nil, owner, map[string]any{"p": "chain"}},
		{"step default over chain default", tmpl, []api.Param{def("p", "chain")}, []api.Param{def("p", "step")}, nil, map[string]any{"p": "step"}},
		{"step default replaces chain value", tmpl, []api.Param{val("p", "chain")}, []api.Param{def("p", "step")}, nil, map[string]any{"p": "step"}},
		{"step default lifts chain protection", tmpl, []api.Param{val("p", "chain")}, []api.Param{def("p", "step")}, owner, map[string]any{"p": "owner"}},
		{"step value over chain default", tmpl, []api.Param{def("p", "chain")}, []api.Param{val("p", "step")}, nil, map[string]any{"p": "step"}},
		{"step value protected against owner", tmpl, []api.Param{def("p", "chain")}, []api.Param{val("p", "step")}, owner, map[string]any{"p": "step"}},
		{"step value alone protected", nil, nil, []api.Param{val("p", "step")}, owner, map[string]any{"p": "step"}},
		{"owner over template default", tmpl, nil, nil, owner, map[string]any{"p": "owner"}},
		{"owner over step default", tmpl, nil, []api.Param{def("p", "step")}, owner, map[string]any{"p": "owner"}},
		{"undeclared params passed", tmpl,
			[]api.Param{def("c", 1)}, []api.Param{val("s", true)}, []api.OwnerParam{{Name: "o", Value: []any{"x"}}},
			map[string]any{"p": "template", "c": 1, "s": true, "o": []any{"x"}}},
		{"other names untouched", tmpl, []api.Param{val("q", "chain")}, nil, owner, map[string]any{"p": "owner", "q": "chain"}},
		{"nil template default", []api.TemplateParam{{Name: "p"}}, nil, nil, nil, map[string]any{"p": nil}},
		{"nil value is protected", tmpl, []api.Param{val("p", nil)}, nil, owner, map[string]any{"p": nil}},
		{"nil owner value overrides", tmpl, nil, nil, []api.OwnerParam{{Name: "p", Value: nil}}, map[string]any{"p": nil}},
		{"nil chain default overrides template", tmpl, []api.Param{def("p", nil)}, nil, nil, map[string]any{"p": nil}},
		{"last owner entry wins", tmpl, nil, nil, []api.OwnerParam{{Name: "p", Value: 1}, {Name: "p", Value: 2}}, map[string]any{"p": 2}},
		{"object values", []api.TemplateParam{{Name: "p", Default: map[string]any{"a": 1}}}, nil, nil, nil, map[string]any{"p": map[string]any{"a": 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := MergeParams(tt.tmpl, tt.chain, tt.step, tt.owner)
			assert.Equal(t, tt.want, got)
		})
	}
}

// Params decoded from YAML/JSON: `value: null` is a protected value.
func TestMergeParamsDecoded(t *testing.T) {
	var chain []api.Param
	require.NoError(t, json.Unmarshal([]byte(`[{"name":"a","value":null},{"name":"b","default":"d"},{"name":"c","value":""}]`), &chain))
	got := MergeParams(nil, chain, nil, []api.OwnerParam{{Name: "a", Value: "o"}, {Name: "b", Value: "o"}, {Name: "c", Value: "o"}})
	assert.Equal(t, map[string]any{"a": nil, "b": "o", "c": ""}, got)
}
