package e2e

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The parameter precedence matrix, one param per row, through one template
// that stamps the whole params map into a free-form Test object (so that
// value types survive): template default < chain param < step param <
// owner param; chain and step `value`s are protected from the owner; a step
// param replaces the chain param of the same name, protection included;
// params the template does not declare are still passed.
func TestParamPrecedenceMatrix(t *testing.T) {
	k := newKit(t)
	tmpl, chain := k.name("params"), k.name("params-chain")
	k.apply(k.templateYAML("ClusterTemplate", tmpl, `
  params:
  - {name: tmplOnly, default: t}
  - {name: chainDefault, default: t}
  - {name: stepDefault, default: t}
  - {name: ownerWins, default: t}
  - {name: chainValue, default: t}
  - {name: stepValue, default: t}
  - {name: stepReplaces, default: t}
  - {name: stepLoosens, default: t}
  - {name: typed, default: 3}
  - {name: ownerTyped, default: t}
  template:
    apiVersion: test.run/v1alpha1
    kind: Test
    metadata: {name: $(workload.metadata.name)$-params}
    spec:
      params: $(params)$
      summary: "$(params.ownerWins)$/$(params.chainValue)$/$(params.typed)$"`))
	k.apply(k.chainYAML(chain, `
  params:
  - {name: chainDefault, default: c}
  - {name: stepDefault, default: c}
  - {name: ownerWins, default: c}
  - {name: chainValue, value: cv}
  - {name: stepReplaces, value: cv}
  - {name: stepLoosens, value: cv}
  - {name: chainUndeclared, default: cu}`,
		k.step("stamp", "ClusterTemplate", tmpl, `params:
    - {name: stepDefault, default: s}
    - {name: ownerWins, default: s}
    - {name: stepValue, value: sv}
    - {name: stepReplaces, default: s}
    - {name: stepLoosens, default: s}
    - {name: stepUndeclared, value: su}`)))
	k.workload("app", chain, `  params:
  - {name: ownerWins, value: o}
  - {name: chainValue, value: o}
  - {name: stepValue, value: o}
  - {name: stepLoosens, value: o}
  - {name: ownerUndeclared, value: ou}
  - {name: ownerTyped, value: {replicas: 2, tags: [a, b]}}
`)
	k.waitOwner("app", "Ready", "True", "Ready")
	stamped := get(t, testGVR, k.ns, "app-params")
	got, _, _ := unstructured.NestedMap(stamped.Object, "spec", "params")

	for _, row := range []struct {
		name, why string
		want      any
	}{
		{"tmplOnly", "template default when nobody else sets it", "t"},
		{"chainDefault", "chain default over template default", "c"},
		{"stepDefault", "step default over chain default", "s"},
		{"ownerWins", "owner over step and chain defaults", "o"},
		{"chainValue", "chain value protected from the owner", "cv"},
		{"stepValue", "step value protected from the owner", "sv"},
		{"stepReplaces", "step default replaces the chain value", "s"},
		{"stepLoosens", "a step default lifts the chain's protection", "o"},
		{"typed", "a number default keeps its type", int64(3)},
		{"ownerTyped", "an owner object keeps its type", map[string]any{"replicas": int64(2), "tags": []any{"a", "b"}}},
		{"chainUndeclared", "a chain param the template does not declare", "cu"},
		{"stepUndeclared", "a step param the template does not declare", "su"},
		{"ownerUndeclared", "an owner param the template does not declare", "ou"},
	} {
		t.Run(row.name, func(t *testing.T) {
			assert.Equal(t, row.want, got[row.name], row.why)
		})
	}
	assert.Len(t, got, 13, "no param beyond the matrix: %v", got)
	assert.Equal(t, "o/cv/3", nested(stamped.Object, "spec", "summary"), "interpolated params")

	// An owner param edit restamps; protected params stay protected.
	k.update(workloadGVR, k.ns, "app", func(u *unstructured.Unstructured) {
		params, _, _ := unstructured.NestedSlice(u.Object, "spec", "params")
		for _, p := range params {
			p := p.(map[string]any)
			if p["name"] == "ownerWins" || p["name"] == "chainValue" {
				p["value"] = "o2"
			}
		}
		_ = unstructured.SetNestedSlice(u.Object, params, "spec", "params")
	})
	k.waitObj(testGVR, "app-params", func(u *unstructured.Unstructured) string {
		if got := nested(u.Object, "spec", "summary"); got != "o2/cv/3" {
			return fmt.Sprintf("summary = %v, want o2/cv/3", got)
		}
		return ""
	})
}
