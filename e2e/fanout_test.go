package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A template edit updates every workload that uses it and no other; a chain
// edit likewise. Two chains with a template each, three workloads on the
// first and two on the second: the others' stamped objects and statuses are
// not written.
func TestTemplateAndChainEditsFanOutToTheirWorkloadsOnly(t *testing.T) {
	k := newKit(t)
	t1, t2 := k.name("fan-one"), k.name("fan-two")
	c1, c2 := k.name("fan-chain-one"), k.name("fan-chain-two")
	k.apply(k.cmTemplate(t1, "app", `{version: v1}`))
	k.apply(k.templateYAML("ClusterTemplate", t2, `
  params: [{name: greeting, default: hello}]
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-app}
    data: {greeting: $(params.greeting)$}`))
	k.apply(k.chainYAML(c1, "", k.step("deploy", "ClusterTemplate", t1, "")))
	k.apply(k.chainYAML(c2, "", k.step("deploy", "ClusterTemplate", t2, "")))
	one := []string{"a1", "a2", "a3"}
	two := []string{"b1", "b2"}
	for _, n := range one {
		k.workload(n, c1, "")
	}
	for _, n := range two {
		k.workload(n, c2, "")
	}
	refs := func(names []string) []objRef {
		var out []objRef
		for _, n := range names {
			out = append(out, k.wl(n), k.cm(n+"-app"))
		}
		return out
	}
	for _, n := range append(append([]string{}, one...), two...) {
		k.waitOwner(n, "Ready", "True", "Ready")
		k.waitObj(configMapGVR, n+"-app", nil)
	}
	time.Sleep(time.Second) // let the last events settle before the snapshot

	// Template edit: every workload of chain one, none of chain two.
	others := k.rvs(refs(two)...)
	k.setSpec(k.tmplGVR("clustertemplates"), t1, map[string]any{"version": "v2"}, "template", "data")
	for _, n := range one {
		k.waitObj(configMapGVR, n+"-app", k.dataIs("version", "v2"))
	}
	time.Sleep(1500 * time.Millisecond) // a wrong fan-out would write by now
	assert.Equal(t, others, k.rvs(refs(two)...), "workloads of the other chain untouched by a template edit")

	// Chain edit: every workload of chain two, none of chain one.
	others = k.rvs(refs(one)...)
	k.setSpec(chainGVR, c2, []any{map[string]any{"name": "greeting", "value": "bonjour"}}, "params")
	for _, n := range two {
		k.waitObj(configMapGVR, n+"-app", k.dataIs("greeting", "bonjour"))
	}
	time.Sleep(1500 * time.Millisecond)
	assert.Equal(t, others, k.rvs(refs(one)...), "workloads of the other chain untouched by a chain edit")
	for _, n := range append(append([]string{}, one...), two...) {
		w := k.waitOwner(n, "Ready", "True", "Ready")
		assert.EqualValues(t, w.GetGeneration(), nested(w.Object, "status", "observedGeneration"), fmt.Sprint(n))
	}
}
