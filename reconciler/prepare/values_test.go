package prepare

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/rollout"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/step"
)

// edgeNumbers are JSON numbers at the edges of int64 and float64, as a
// person may write them.
var edgeNumbers = []string{
	"0", "-0", "1", "-1", "1.0", "-0.0", "1.5", "0.1", "1e-7",
	"9007199254740991", "9007199254740992", "9007199254740993", "-9007199254740993",
	"9223372036854775807", "-9223372036854775808", "9223372036854775808", "18446744073709551615",
	"1e21", "1E21", "1e+21", "100000000000000000000", "123456789012345678901234567890",
	"1e308", "1.7976931348623157e308", "-1.7976931348623157e308", "5e-324", "2.2250738585072014e-308",
}

// apimachinery decodes doc, one object, as the API server and every
// client of it do: the oracle of every test here.
func apimachinery(t testing.TB, doc string) map[string]any {
	t.Helper()
	obj, err := runtime.Decode(unstructured.UnstructuredJSONScheme, []byte(doc))
	require.NoError(t, err, doc)
	return obj.(*unstructured.Unstructured).Object
}

// served is the list of edgeNumbers as the API server sends it back once
// stored (it encodes what it decoded: 1.0 comes back as 1), and want what
// apimachinery decodes from that.
func served(t testing.TB) (text string, want []any) {
	doc := apimachinery(t, `{"apiVersion":"v1","kind":"X","v":[`+strings.Join(edgeNumbers, ",")+`]}`)
	b, err := json.Marshal(doc["v"])
	require.NoError(t, err)
	text = string(b)
	return text, apimachinery(t, `{"apiVersion":"v1","kind":"X","v":`+text+`}`)["v"].([]any)
}

// assertExact compares got with want element by element, types included
// (int64 is not float64), naming the number at fault.
func assertExact(t *testing.T, where string, want []any, got any) {
	t.Helper()
	list, ok := got.([]any)
	if !assert.True(t, ok, "%s: %T, not a list", where, got) || !assert.Len(t, list, len(want), where) {
		return
	}
	for i := range want {
		assert.Equal(t, want[i], list[i], "%s: %s", where, edgeNumbers[i])
	}
}

// Integers past 2^53 and every other number keep their value from the
// owner, a template, a chain and a step param, through the simple
// engine, an output, a goTemplate and a ytt step, to the stamped object,
// as apimachinery reads the same text.
func TestNumbersKeepTheirValueThroughAChain(t *testing.T) {
	text, want := served(t)
	each := make([]string, len(edgeNumbers))
	for i := range edgeNumbers {
		each[i] = fmt.Sprintf(`"$(params.all[%d])$"`, i)
	}
	owner := &unstructured.Unstructured{Object: apimachinery(t, `{"apiVersion":"carto.run/v1alpha1","kind":"Workload",
		"metadata":{"name":"app","namespace":"dev","uid":"u1"},
		"spec":{"params":[{"name":"all","value":`+text+`},{"name":"obj","value":{"in":{"list":`+text+`}}}]}}`)}
	var ownerSpec api.OwnerSpec
	require.NoError(t, api.Decode(owner.Object["spec"], &ownerSpec))
	chainObj := &unstructured.Unstructured{Object: apimachinery(t, `{"apiVersion":"carto.run/v1alpha1","kind":"ClusterSupplyChain",
		"metadata":{"name":"web"},"spec":{"params":[{"name":"chain","default":`+text+`}],"resources":[
		{"name":"one","templateRef":{"kind":"ClusterConfigTemplate","name":"one"},"params":[{"name":"step","value":`+text+`}]},
		{"name":"two","templateRef":{"kind":"ClusterTemplate","name":"two"},"configs":[{"name":"c","resource":"one"}]},
		{"name":"three","templateRef":{"kind":"ClusterTemplate","name":"three"},"configs":[{"name":"c","resource":"one"}]}]}}`)}
	chain, _, err := DecodeChain(chainObj)
	require.NoError(t, err)

	templates := map[string]string{
		"one": `{"apiVersion":"carto.run/v1alpha1","kind":"ClusterConfigTemplate","metadata":{"name":"one"},"spec":{
			"configPath":".spec","params":[{"name":"dflt","default":` + text + `}],
			"template":{"apiVersion":"test.run/v1alpha1","kind":"Test","metadata":{"name":"one"},"spec":{
				"all":"$(params.all)$","each":[` + strings.Join(each, ",") + `],"obj":"$(params.obj.in.list)$",
				"dflt":"$(params.dflt)$","chain":"$(params.chain)$","step":"$(params.step)$","literal":` + text + `,
				"text":"x$(params.all)$"}}}}`,
		"two": `{"apiVersion":"carto.run/v1alpha1","kind":"ClusterTemplate","metadata":{"name":"two"},"spec":{"goTemplate":` + strconvQuote(`apiVersion: test.run/v1alpha1
kind: Test
metadata: {name: two}
spec:
  config: {{ toJson .config }}
  printed: [{{ range $i, $v := .config.all }}{{ if $i }}, {{ end }}{{ $v }}{{ end }}]
  fromJson: {{ toJson .config.all | fromJson | toJson }}
  fromYaml: {{ (printf "l: %s" (toJson .config.all)) | fromYaml | toJson }}
`) + `}}`,
		"three": `{"apiVersion":"carto.run/v1alpha1","kind":"ClusterTemplate","metadata":{"name":"three"},"spec":{"ytt":` + strconvQuote(`#@ load("@ytt:data", "data")
apiVersion: test.run/v1alpha1
kind: Test
metadata: {name: three}
spec:
  config: #@ data.values.config
`) + `}}`,
	}
	doc, _ := json.Marshal(owner.Object)
	env := Env{Flavor: api.WorkloadFlavor, Owner: owner, OwnerDoc: doc, OwnerSpec: ownerSpec, ChainName: "web", Chain: &chain,
		Template: func(kind, name string) (*api.TemplateSpec, error) {
			return DecodeTemplate(&unstructured.Unstructured{Object: apimachinery(t, templates[name])})
		}}
	ctx := context.Background()

	one := Step(ctx, env, chain.Resources[0], nil)
	require.Nil(t, one.Refusal)
	require.Len(t, one.Objects, 1)
	spec := one.Objects[0].Object["spec"].(map[string]any)
	for _, f := range []string{"all", "each", "obj", "dflt", "chain", "step", "literal"} {
		assertExact(t, "step one: "+f, want, spec[f])
	}
	wantText, _ := json.Marshal(want)
	assert.Equal(t, "x"+string(wantText), spec["text"], "a number in a string is its JSON text")

	// Written, stored and read back by the API server; the output is read
	// from what it sends.
	written, err := json.Marshal(one.Objects[0].Object)
	require.NoError(t, err)
	live := apimachinery(t, string(written))
	assertExact(t, "stored", want, live["spec"].(map[string]any)["all"])
	liveDoc, _ := json.Marshal(live)
	oneSpec, _ := env.Template(api.KindClusterConfigTemplate, "one")
	outs, err := step.ReadOutputs(api.KindClusterConfigTemplate, oneSpec, liveDoc, nil)
	require.NoError(t, err)
	assertExact(t, "output", want, outs["config"].(map[string]any)["all"])

	for _, s := range chain.Resources[1:] {
		p := Step(ctx, env, s, map[string]step.Outputs{"one": outs})
		require.Nil(t, p.Refusal, s.Name)
		require.Len(t, p.Objects, 1, s.Name)
		spec := p.Objects[0].Object["spec"].(map[string]any)
		assertExact(t, "step "+s.Name+": config", want, spec["config"].(map[string]any)["all"])
		if s.Name == "two" {
			assertExact(t, "goTemplate: printed", want, spec["printed"])
			assertExact(t, "goTemplate: fromJson", want, spec["fromJson"])
			assertExact(t, "goTemplate: fromYaml", want, spec["fromYaml"].(map[string]any)["l"])
		}
	}
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// Values Kontinue reads back from statuses and specs it decodes: a
// Runnable's inputs, a step's kept outputs and last good object (a shadow
// is stamped from it), a roll-out's revisions (owners render with them).
func TestNumbersKeepTheirValueThroughStatusesAndSpecs(t *testing.T) {
	text, want := served(t)

	var rn api.RunnableSpec
	require.NoError(t, api.Decode(apimachinery(t, `{"apiVersion":"carto.run/v1alpha1","kind":"Runnable",
		"spec":{"runTemplateRef":{"name":"r"},"inputs":{"all":`+text+`}}}`)["spec"], &rn))
	assertExact(t, "Runnable inputs", want, rn.Inputs["all"])

	var status st.OwnerStatus
	require.NoError(t, api.Decode(apimachinery(t, `{"apiVersion":"carto.run/v1alpha1","kind":"Workload",
		"status":{"resources":[{"name":"one","outputValues":{"config":{"all":`+text+`}},
		"lastGoodObject":{"apiVersion":"test.run/v1alpha1","kind":"Test","spec":{"all":`+text+`}}}]}}`)["status"], &status))
	require.Len(t, status.Resources, 1)
	assertExact(t, "outputValues", want, status.Resources[0].OutputValues["config"].(map[string]any)["all"])
	assertExact(t, "lastGoodObject", want, status.Resources[0].LastGoodObject["spec"].(map[string]any)["all"])

	chain := apimachinery(t, `{"apiVersion":"carto.run/v1alpha1","kind":"ClusterSupplyChain",
		"spec":{"rollout":{"waves":[{"percent":50}]}},
		"status":{"rollout":{"stable":"r1","revisions":[{"name":"r1","chain":{"params":[{"name":"p","default":`+text+`}]},
		"templates":[{"kind":"ClusterTemplate","name":"t","spec":{"template":{"all":`+text+`}}}]}]}}}`)
	_, rs, err := rollout.Read(chain)
	require.NoError(t, err)
	r := rs.Find("r1")
	require.NotNil(t, r)
	assertExact(t, "revision's template", want, r.Templates[0].Spec["template"].(map[string]any)["all"])
	assertExact(t, "revision's chain", want, r.Chain["params"].([]any)[0].(map[string]any)["default"])
}

// ordinaryNumbers are what objects hold in practice: what every stamped
// object's digest was computed over before numbers were kept exact.
var ordinaryNumbers = []string{
	"0", "1", "-1", "3", "42", "80", "8080", "65535", "123456", "1000000", "1048576", "2147483647", "4294967296",
	"9007199254740991", "1.5", "0.25", "3.14", "-2.5", "0.001", "1e-3", "2.0", "1e3", "1e6", "1e20",
}

// An upgrade must not rewrite every stamped object: for ordinary numbers,
// what a step renders now, and its digest, are what it rendered when the
// owner's spec and the template were decoded through float64.
func TestOrdinaryValuesKeepTheirDigest(t *testing.T) {
	list := "[" + strings.Join(ordinaryNumbers, ",") + "]"
	doc := apimachinery(t, `{"apiVersion":"v1","kind":"X","v":`+list+`}`)
	b, _ := json.Marshal(doc["v"])
	text := string(b) // as the API server sends it
	owner := &unstructured.Unstructured{Object: apimachinery(t, `{"apiVersion":"carto.run/v1alpha1","kind":"Workload",
		"metadata":{"name":"app","namespace":"dev","uid":"u1"},"spec":{"params":[{"name":"all","value":`+text+`},{"name":"one","value":1000000}]}}`)}
	tmpl := apimachinery(t, `{"apiVersion":"carto.run/v1alpha1","kind":"ClusterTemplate","metadata":{"name":"t"},"spec":{
		"params":[{"name":"dflt","default":`+text+`}],
		"template":{"apiVersion":"test.run/v1alpha1","kind":"Test","metadata":{"name":"x"},"spec":{
			"all":"$(params.all)$","dflt":"$(params.dflt)$","literal":`+text+`,"text":"$(params.one)$/$(params.all)$"}}}}`)
	def := api.Step{Name: "s", TemplateRef: api.StepTemplateRef{Kind: api.KindClusterTemplate, Name: "t"}}
	prepare := func(decode func(in, out any) error) *unstructured.Unstructured {
		var spec api.OwnerSpec
		require.NoError(t, decode(owner.Object["spec"], &spec))
		ts := &api.TemplateSpec{}
		require.NoError(t, decode(tmpl["spec"], ts))
		doc, _ := json.Marshal(owner.Object)
		p := Step(context.Background(), Env{Flavor: api.WorkloadFlavor, Owner: owner, OwnerDoc: doc, OwnerSpec: spec, ChainName: "web",
			Chain:    &api.ChainSpec{Resources: []api.Step{def}},
			Template: func(string, string) (*api.TemplateSpec, error) { return ts, nil }}, def, nil)
		require.Nil(t, p.Refusal)
		return p.Objects[0]
	}
	float64s := func(in, out any) error { // the decoding before: encoding/json into any
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		return json.Unmarshal(b, out)
	}
	before, now := prepare(float64s), prepare(api.Decode)
	assert.Equal(t, before.GetAnnotations()[api.AnnotationDigest], now.GetAnnotations()[api.AnnotationDigest])
	wb, _ := json.Marshal(before.Object)
	wn, _ := json.Marshal(now.Object)
	assert.Equal(t, string(wb), string(wn), "the same object is written")

	// An output kept in status and served from there previews (and so
	// digests) as the same output read from the object.
	var status st.OwnerStatus
	require.NoError(t, api.Decode(apimachinery(t, `{"apiVersion":"v1","kind":"X","status":{"resources":[{"name":"s","outputValues":{"config":`+text+`}}]}}`)["status"], &status))
	fromObject := doc["v"]
	_, wantDigest := st.Preview(apimachinery(t, `{"apiVersion":"v1","kind":"X","v":`+text+`}`)["v"])
	_, gotDigest := st.Preview(status.Resources[0].OutputValues["config"])
	assert.Equal(t, wantDigest, gotDigest, "an output served from status digests as read from the object: %v", fromObject)
}
