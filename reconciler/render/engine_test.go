package render

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
)

type fakeEngine struct{ name string }

func (f fakeEngine) Name() string { return f.name }
func (f fakeEngine) Render(context.Context, *api.TemplateSpec, Context) ([]*unstructured.Unstructured, error) {
	return nil, nil
}

func TestEngineFor(t *testing.T) {
	tmpl := map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}
	tests := []struct {
		name    string
		spec    *api.TemplateSpec
		engine  string // the engine's Name() when no error
		errText string
	}{
		{"nil spec", nil, "", "template has no spec"},
		{"nothing set", &api.TemplateSpec{}, "", "template sets no render engine: exactly one of " + strings.Join(EngineFields(), ", ") + " is required"},
		{"template", &api.TemplateSpec{Template: tmpl}, SimpleName, ""},
		{"empty template still selects simple", &api.TemplateSpec{Template: map[string]any{}}, SimpleName, ""},
		{"goTemplate", &api.TemplateSpec{GoTemplate: "kind: x"}, GoTemplateName, ""},
		{"helm", &api.TemplateSpec{Helm: &api.HelmSource{}}, HelmName, ""},
		{"ytt", &api.TemplateSpec{Ytt: "#@ load"}, YttName, ""},
		{"two set", &api.TemplateSpec{Template: tmpl, Ytt: "x"}, "", "template sets several render engines (template, ytt): exactly one"},
		{"all set", &api.TemplateSpec{Template: tmpl, GoTemplate: "x", Helm: &api.HelmSource{}, Ytt: "x"}, "", "(template, goTemplate, helm, ytt)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := EngineFor(tt.spec)
			if tt.errText != "" {
				require.Error(t, err)
				var se *StampError
				require.ErrorAs(t, err, &se)
				assert.Contains(t, err.Error(), tt.errText)
				assert.Nil(t, e)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.engine, e.Name())
		})
	}
}

func TestRegister(t *testing.T) {
	enginesMu.RLock()
	prev := engines[FieldGoTemplate]
	enginesMu.RUnlock()
	defer func() {
		enginesMu.Lock()
		engines[FieldGoTemplate] = prev
		enginesMu.Unlock()
	}()
	Register(FieldGoTemplate, fakeEngine{name: "go"})
	e, err := EngineFor(&api.TemplateSpec{GoTemplate: "x"})
	require.NoError(t, err)
	assert.Equal(t, "go", e.Name())

	Register(FieldGoTemplate, fakeEngine{name: "go2"}) // replaces
	e, err = EngineFor(&api.TemplateSpec{GoTemplate: "x"})
	require.NoError(t, err)
	assert.Equal(t, "go2", e.Name())

	assert.Panics(t, func() { Register("cue", fakeEngine{}) })
	assert.Panics(t, func() { Register(FieldHelm, nil) })
}

func TestStampError(t *testing.T) {
	cause := errors.New("cause")
	e := &StampError{Engine: "simple", Message: "msg", Err: cause}
	assert.Equal(t, "msg: cause", e.Error())
	assert.ErrorIs(t, e, cause)
	assert.Equal(t, "msg", (&StampError{Message: "msg"}).Error())
}
