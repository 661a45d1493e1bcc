package reconciler

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kontinue.dev/kontinue/paths"
)

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

func TestGeneratedRunTemplateName(t *testing.T) {
	a := generatedRunTemplateName("Workload", "a-b", "c", "lint")
	b := generatedRunTemplateName("Workload", "a", "b-c", "lint")
	assert.NotEqual(t, a, b, "the hash tells apart what the readable part does not")
	assert.True(t, strings.HasPrefix(a, "a-b-c-lint-"), a)
	assert.NotEqual(t, a, generatedRunTemplateName("Deliverable", "a-b", "c", "lint"))
	assert.Equal(t, a, generatedRunTemplateName("Workload", "a-b", "c", "lint"), "stable")
	long := generatedRunTemplateName("Workload", strings.Repeat("n", 63), strings.Repeat("w", 253), "Step_One")
	assert.LessOrEqual(t, len(long), 253)
	for _, c := range long {
		assert.True(t, c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.', "valid name %q", long)
	}
	assert.Contains(t, generatedRunTemplateName("Workload", "ns", "app", "Step_One"), "ns-app-step-one-")
}
