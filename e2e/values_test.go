package e2e

// Values as the API server keeps them: integers past 2^53 stay exact on
// their way through Kontinue (issue 45, item 7), and an object nested as
// deep as the API server takes stops nobody else's watch (item 8).

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// createExact creates the object doc (JSON) in ns, its numbers decoded as
// the API server decodes them (the YAML helpers make every number a
// float64), and deletes it when the test ends, before its namespace goes.
func createExact(t *testing.T, gvr schema.GroupVersionResource, ns, doc string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	require.NoError(t, utiljson.Unmarshal([]byte(doc), &u.Object))
	_, err := env.dyn.Resource(gvr).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{})
	require.NoError(t, err, "create %s %s", u.GetKind(), u.GetName())
	name := u.GetName()
	t.Cleanup(func() {
		// A deep object makes every LIST of its kind fail (the namespace's
		// deletion lists): it goes first, and is waited for.
		_ = env.dyn.Resource(gvr).Namespace(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
		eventually(t, 30*time.Second, func() string {
			if _, err := tryGet(gvr, ns, name); err == nil {
				return name + " still exists"
			}
			return ""
		})
	})
}

// nestedJSON is a JSON object levels deep ({"a":{"a":...1}}).
func nestedJSON(levels int) string {
	return strings.Repeat(`{"a":`, levels) + "1" + strings.Repeat("}", levels)
}

func TestBigIntegersAreStampedExactly(t *testing.T) {
	k := newKit(t)
	one, two, chain := k.name("big-one"), k.name("big-two"), k.name("big-chain")
	k.apply(k.templateYAML("ClusterConfigTemplate", one, `
  configPath: .spec
  template:
    apiVersion: test.run/v1alpha1
    kind: Test
    metadata: {name: $(workload.metadata.name)$-one}
    spec:
      big: $(params.big)$
      max: $(params.max)$
      min: $(params.min)$
      list: $(params.list)$
      text: "$(params.big)$/$(params.max)$"`))
	k.apply(k.templateYAML("ClusterTemplate", two, `
  goTemplate: |
    apiVersion: test.run/v1alpha1
    kind: Test
    metadata: {name: {{ .workload.metadata.name }}-two}
    spec:
      big: {{ .config.big }}
      max: {{ .config.max }}
      config: {{ toJson .config }}`))
	k.apply(k.chainYAML(chain, "", k.step("one", "ClusterConfigTemplate", one, "")+
		k.step("two", "ClusterTemplate", two, "configs: [{name: c, resource: one}]")))
	createExact(t, workloadGVR, k.ns, `{"apiVersion":"carto.run/v1alpha1","kind":"Workload",
		"metadata":{"name":"app","labels":{"app.example.com/chain":"`+chain+`"}},
		"spec":{"params":[{"name":"big","value":9007199254740993},{"name":"max","value":9223372036854775807},
		{"name":"min","value":-9223372036854775808},{"name":"list","value":[9007199254740993,-9007199254740993,1.5]}]}}`)
	w := k.waitOwner("app", "Ready", "True", "Ready")

	list := []any{int64(9007199254740993), int64(-9007199254740993), 1.5}
	first := get(t, testGVR, k.ns, "app-one")
	assert.Equal(t, int64(9007199254740993), nested(first.Object, "spec", "big"), "a param, whole")
	assert.Equal(t, int64(9223372036854775807), nested(first.Object, "spec", "max"))
	assert.Equal(t, int64(-9223372036854775808), nested(first.Object, "spec", "min"))
	assert.Equal(t, list, nested(first.Object, "spec", "list"))
	assert.Equal(t, "9007199254740993/9223372036854775807", nested(first.Object, "spec", "text"), "a param in a string")

	second := get(t, testGVR, k.ns, "app-two")
	assert.Equal(t, int64(9007199254740993), nested(second.Object, "spec", "big"), "an output, printed by a goTemplate")
	assert.Equal(t, int64(9223372036854775807), nested(second.Object, "spec", "max"))
	assert.Equal(t, list, nested(second.Object, "spec", "config", "list"), "an output, as JSON")

	outs, _, _ := unstructured.NestedSlice(stepStatus(w, "one"), "outputs")
	require.Len(t, outs, 1)
	assert.Contains(t, outs[0].(map[string]any)["preview"], "big: 9007199254740993\n", "the output's preview")
	assert.Contains(t, outs[0].(map[string]any)["preview"], "max: 9223372036854775807\n")
}

// nestCRD makes a kind of the test's own: an object nested near the API
// server's limit makes every LIST of its kind fail, which must not reach
// other tests' kinds.
func nestCRD(k *kit) (kind string, gvr schema.GroupVersionResource) {
	suffix := strings.TrimPrefix(k.ns, "e2e-")
	kind, plural := "Nest"+suffix, "nests"+suffix
	k.apply(fmt.Sprintf(`
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: %[2]s.test.run}
spec:
  group: test.run
  names: {kind: %[1]s, plural: %[2]s, singular: %[3]s, listKind: %[1]sList}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`, kind, plural, strings.ToLower(kind)))
	gvr = schema.GroupVersionResource{Group: "test.run", Version: "v1alpha1", Resource: plural}
	eventually(k.t, 30*time.Second, func() string {
		if _, err := env.dyn.Resource(gvr).List(context.Background(), metav1.ListOptions{}); err != nil {
			return err.Error()
		}
		return ""
	})
	return kind, gvr
}

// preview is the preview of a step's output, "" without one.
func preview(u *unstructured.Unstructured, step, output string) string {
	outs, _, _ := unstructured.NestedSlice(stepStatus(u, step), "outputs")
	for _, o := range outs {
		if m, ok := o.(map[string]any); ok && m["name"] == output {
			s, _ := m["preview"].(string)
			return s
		}
	}
	return ""
}

// The API server's depth limit, measured on kube-apiserver 1.32: an object
// 9,995 levels deep is stored with managedFields 10,000 deep; every LIST of
// its kind then fails (watch-lists still serve it), and it comes in watch
// events one level deeper than apimachinery's decoder reads.
const deepest = 9995

// A tenant's param that a template's fromYaml turns into an object nested
// near the API server's limit is refused before anything is written, and
// such an object created by hand in a stamped kind stops no other
// tenant's watch of that kind.
func TestDeepObjectBlindsNoOtherTenant(t *testing.T) {
	a, b := newKit(t), newKit(t)
	kind, widgetGVR := nestCRD(a)
	deepTmpl, watched, deepChain, watchChain := a.name("deep"), a.name("watched"), a.name("deep-chain"), a.name("watch-chain")
	a.apply(a.templateYAML("ClusterTemplate", deepTmpl, `
  goTemplate: |
    apiVersion: test.run/v1alpha1
    kind: `+kind+`
    metadata: {name: {{ .workload.metadata.name }}-widget}
    spec: {{ fromYaml (printf "v: %s" .params.shape) | toJson }}`))
	a.apply(a.templateYAML("ClusterConfigTemplate", watched, `
  configPath: .status.value
  template:
    apiVersion: test.run/v1alpha1
    kind: `+kind+`
    metadata: {name: $(workload.metadata.name)$-widget}
    spec: {size: 1}`))
	a.apply(a.chainYAML(deepChain, "", a.step("one", "ClusterTemplate", deepTmpl, "")))
	a.apply(a.chainYAML(watchChain, "", a.step("watched", "ClusterConfigTemplate", watched, "")))

	// Another tenant's Widget, watched for its status.
	b.workload("other", watchChain, "")
	b.waitStep("other", "watched", "ResourceSubmitted", "Unknown", "MissingValueAtPath")
	setStatus(t, widgetGVR, b.ns, "other-widget", map[string]any{"value": "v1"})
	eventually(t, 30*time.Second, func() string {
		u := get(t, workloadGVR, b.ns, "other")
		if p := preview(u, "watched", "config"); p != "v1\n" {
			return fmt.Sprintf("output %q, want v1", p)
		}
		return ""
	})

	// The deep object through a template: refused, nothing written.
	shape := strings.Repeat("{a: ", deepest-2) + "1" + strings.Repeat("}", deepest-2) // spec.v: 9,995 levels with the object
	createExact(t, workloadGVR, a.ns, `{"apiVersion":"carto.run/v1alpha1","kind":"Workload",
		"metadata":{"name":"deep","labels":{"app.example.com/chain":"`+deepChain+`"}},
		"spec":{"params":[{"name":"shape","value":"`+shape+`"}]}}`)
	// And one made by hand, in Kontinue's stamped watch of Widgets.
	createExact(t, widgetGVR, a.ns, `{"apiVersion":"test.run/v1alpha1","kind":"`+kind+`",
		"metadata":{"name":"by-hand","labels":{"kontinue.dev/stamped":"true"}},"spec":`+nestedJSON(deepest-1)+`}`)

	// The other tenant's Widget changes are still seen.
	setStatus(t, widgetGVR, b.ns, "other-widget", map[string]any{"value": "v2"})
	eventually(t, 30*time.Second, func() string {
		u := get(t, workloadGVR, b.ns, "other")
		if p := preview(u, "watched", "config"); p != "v2\n" {
			return fmt.Sprintf("output %q, want v2: the Widget watch does not see changes", p)
		}
		return ""
	})

	u := a.waitStep("deep", "one", "ResourceSubmitted", "False", "TemplateStampFailure")
	a.assertCond(a.stepCond(u, "one", "ResourceSubmitted"), "False", "TemplateStampFailure",
		"rendered "+kind+" [deep-widget] nested deeper than 1000 levels, more than Kontinue writes")
	_, err := tryGet(widgetGVR, a.ns, "deep-widget")
	assert.Error(t, err, "nothing written")
}

// A Workload nested as deep as the API server takes fails with a reason;
// every other Workload goes on being reconciled (its watch read no event
// past the deep one's).
func TestDeepWorkloadStallsNoOtherOwner(t *testing.T) {
	a, b := newKit(t), newKit(t)
	tmpl, chain := a.name("shallow"), a.name("shallow-chain")
	a.apply(a.cmTemplate(tmpl, "cm", `{x: "$(params.x)$"}`))
	a.apply(a.chainYAML(chain, `
  params: [{name: x, default: fine}]`, a.step("cm", "ClusterTemplate", tmpl, "")))

	// params[0].value holds the depth: the Workload is 10,000 levels deep,
	// all the API server takes (params is an atomic list: managedFields do
	// not mirror it), and comes in events one level deeper.
	createExact(t, workloadGVR, a.ns, `{"apiVersion":"carto.run/v1alpha1","kind":"Workload",
		"metadata":{"name":"deep","labels":{"app.example.com/chain":"`+chain+`"}},
		"spec":{"params":[{"name":"deep","value":`+nestedJSON(10000-4)+`}]}}`)

	b.workload("other", chain, "")
	b.waitOwner("other", "Ready", "True", "Ready")
	b.waitObj(configMapGVR, "other-cm", b.dataIs("x", "fine"))

	u := a.waitStep("deep", "cm", "ResourceSubmitted", "False", "TemplateStampFailure")
	a.assertCond(a.stepCond(u, "cm", "ResourceSubmitted"), "False", "TemplateStampFailure",
		"template context is nested deeper than 1000 levels (the owner, a param or an input)")
}
