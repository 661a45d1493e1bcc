package render

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/jsonvalue"
)

// numberSeeds are JSON numbers at the edges of int64 and float64.
var numberSeeds = []string{
	"0", "-0", "1", "1.0", "-0.0", "1.5", "0.1", "1e-7", "1e2", "1E+2",
	"9007199254740991", "9007199254740992", "9007199254740993", "-9007199254740993",
	"9223372036854775807", "-9223372036854775808", "9223372036854775808", "18446744073709551615",
	"1e21", "100000000000000000000", "123456789012345678901234567890",
	"1e308", "1.7976931348623157e308", "5e-324", "2.2250738585072014e-308",
}

// asAPIServer is what the API server holds of the JSON value lit (ok: it
// takes it), and what it holds once it sent that back and it was read
// again (stored): a whole float64 comes back as an int64.
func asAPIServer(lit string) (decoded, stored any, ok bool) {
	obj, err := runtime.Decode(unstructured.UnstructuredJSONScheme, []byte(`{"apiVersion":"v1","kind":"X","v":`+lit+`}`))
	if err != nil {
		return nil, nil, false
	}
	decoded = obj.(*unstructured.Unstructured).Object["v"]
	b, err := json.Marshal(decoded)
	if err != nil {
		return nil, nil, false
	}
	again, err := runtime.Decode(unstructured.UnstructuredJSONScheme, []byte(`{"apiVersion":"v1","kind":"X","v":`+string(b)+`}`))
	if err != nil {
		return nil, nil, false
	}
	return decoded, again.(*unstructured.Unstructured).Object["v"], true
}

// checkNumber renders lit, as the owner's param, with the simple engine,
// and decodes its JSON text as the engines' context and results are
// decoded: each gives what the API server holds.
func checkNumber(t *testing.T, lit string) {
	decoded, stored, ok := asAPIServer(lit)
	if _, isNumber := jsonvalue.NumberOf(decoded); !ok || !isNumber {
		return
	}
	text, _ := json.Marshal(stored)
	assert.Equal(t, stored, toValue(gjson.Parse(string(text))), "the context's value of %s", lit)
	if v, ok := scalar(decoded); ok {
		assert.Equal(t, stored, v, "a template's own %s", lit)
	}
	ctx, err := appendJSON(nil, map[string]any{"v": stored}, 0)
	require.NoError(t, err)
	var back map[string]any
	require.NoError(t, jsonvalue.Unmarshal(ctx, &back))
	assert.Equal(t, stored, back["v"], "the context JSON of %s, read by a child", lit)

	tc := NewContext(api.KindWorkload, map[string]any{"spec": map[string]any{"v": stored}}, map[string]any{"v": stored}, Inputs{}, nil)
	objs, err := Simple().Render(context.Background(), &api.TemplateSpec{Template: map[string]any{
		"apiVersion": "v1", "kind": "Test", "metadata": map[string]any{"name": "x"},
		"spec": map[string]any{"param": "$(params.v)$", "owner": "$(workload.spec.v)$", "literal": decoded, "text": "<$(params.v)$>"},
	}}, tc)
	require.NoError(t, err)
	spec := objs[0].Object["spec"].(map[string]any)
	for _, f := range []string{"param", "owner", "literal"} {
		assert.Equal(t, stored, spec[f], "%s of %s", f, lit)
	}
	assert.Equal(t, "<"+string(text)+">", spec["text"], "%s in a string", lit)
}

func TestNumbersAsTheAPIServerHoldsThem(t *testing.T) {
	for _, lit := range numberSeeds {
		t.Run(lit, func(t *testing.T) { checkNumber(t, lit) })
	}
}

func FuzzNumbersAsTheAPIServerHoldsThem(f *testing.F) {
	for _, lit := range numberSeeds {
		f.Add(lit)
	}
	f.Fuzz(func(t *testing.T, lit string) {
		if strings.ContainsAny(lit, "{[") {
			return // numbers only: values nest elsewhere
		}
		checkNumber(t, lit)
	})
}

// A chart sees integers as int64, exact, as Helm's own --set gives them:
// printed, compared and encoded alike.
func TestHelmValuesKeepNumbers(t *testing.T) {
	var stored []any
	for _, lit := range numberSeeds {
		_, v, ok := asAPIServer(lit)
		require.True(t, ok, lit)
		stored = append(stored, v)
	}
	chart := chartArchive(t, "nums", "1.0.0", map[string]string{
		"templates/cm.yaml": `
apiVersion: v1
kind: ConfigMap
metadata: {name: nums}
data:
  json: {{ toJson .Values.all | quote }}
  printed: "{{ range $i, $v := .Values.all }}{{ if $i }},{{ end }}{{ $v }}{{ end }}"
  big: {{ if eq .Values.big 9007199254740993 }}"exact"{{ else }}"altered"{{ end }}
`,
	})
	h := newHelmEngine(nil)
	tc := NewContext(api.KindWorkload, testOwner(), map[string]any{"all": stored, "big": int64(9007199254740993)}, Inputs{}, nil)
	objs, err := h.Render(helmCtx(map[string][]byte{"nums.tgz": chart}), cmSpec("nums.tgz", map[string]any{"all": "$(params.all)$", "big": "$(params.big)$"}), tc)
	require.NoError(t, err)
	require.Len(t, objs, 1)
	data := objs[0].Object["data"].(map[string]any)
	want, _ := json.Marshal(stored)
	assert.Equal(t, string(want), data["json"])
	assert.Equal(t, "exact", data["big"], "eq compares the int64 exactly")
	printed := strings.Split(data["printed"].(string), ",")
	require.Len(t, printed, len(stored))
	for i, p := range printed {
		var v any
		require.NoError(t, utiljson.Unmarshal([]byte(p), &v), p)
		assert.Equal(t, stored[i], v, fmt.Sprintf("%s printed as %s", numberSeeds[i], p))
	}
}
