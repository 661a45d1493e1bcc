package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// selChain is a chain whose selector is given in full (spec fields
// indented by two spaces) and whose one step stamps ConfigMap
// <workload>-<suffix> through template tmpl.
func (k *kit) selChain(name, selector, tmpl string) string {
	return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: %s}
spec:%s
  resources:
  - name: deploy
    templateRef: {kind: ClusterTemplate, name: %s}
`, name, selector, tmpl)
}

// selWorkload is a workload with the given labels (a YAML flow map).
func (k *kit) selWorkload(name, labels string) string {
	return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: Workload
metadata:
  name: %s
  labels: %s
spec:
  source: {git: {url: "https://git.example.com/%s.git", ref: {branch: main}}}
`, name, labels, name)
}

func (k *kit) chainOf(u *unstructured.Unstructured) any {
	return nested(u.Object, "status", "supplyChainRef", "name")
}

// Selection failures: no labels, no match, a tie. Each is a False
// SupplyChainReady with the contract's reason, and nothing churns.
func TestChainSelectionFailures(t *testing.T) {
	k := newKit(t)
	team := k.ns // label values unique to this test: chains are cluster-wide
	tmpl := k.name("sel")
	k.apply(k.cmTemplate(tmpl, "app", `{greeting: hello}`))
	a, b := k.name("tie-a"), k.name("tie-b")
	k.apply(k.selChain(a, "\n  selector: {team: "+team+", tier: gold}", tmpl))
	k.apply(k.selChain(b, "\n  selector: {team: "+team+"}\n  selectorMatchExpressions: [{key: tier, operator: In, values: [gold, silver]}]", tmpl))

	k.apply(`
apiVersion: carto.run/v1alpha1
kind: Workload
metadata: {name: nolabels}
spec: {source: {image: registry.example.com/app}}
`)
	k.apply(k.selWorkload("nomatch", "{team: "+team+", tier: bronze}"))
	k.apply(k.selWorkload("tie", "{team: "+team+", tier: gold}"))

	w := k.waitOwner("nolabels", "SupplyChainReady", "False", "WorkloadLabelsMissing")
	k.assertCond(ownerCondition(w, "SupplyChainReady"), "False", "WorkloadLabelsMissing", "workload has no labels to match to supply chain")
	k.assertCond(ownerCondition(w, "Ready"), "False", "WorkloadLabelsMissing", "no labels")

	w = k.waitOwner("nomatch", "SupplyChainReady", "False", "SupplyChainNotFound")
	k.assertCond(ownerCondition(w, "SupplyChainReady"), "False", "SupplyChainNotFound", "no supply chain", "tier:bronze")
	k.assertCond(ownerCondition(w, "Ready"), "False", "SupplyChainNotFound")

	w = k.waitOwner("tie", "SupplyChainReady", "False", "MultipleSupplyChainMatches")
	// Cartographer's words on the owner; the Warning event names the chains.
	k.assertCond(ownerCondition(w, "SupplyChainReady"), "False", "MultipleSupplyChainMatches", "workload may only match a single supply chain's selector")
	k.assertCond(ownerCondition(w, "Ready"), "False", "MultipleSupplyChainMatches", "workload may only match a single supply chain's selector")
	k.waitEvent("tie", "MultipleSupplyChainMatches", a, b)

	for _, n := range []string{"nolabels", "nomatch", "tie"} {
		w := get(t, workloadGVR, k.ns, n)
		assert.Nil(t, nested(w.Object, "status", "supplyChainRef"), "%s has no chain", n)
		assert.Empty(t, nested(w.Object, "status", "resources"), "%s stamped nothing", n)
	}
	k.assertQuiet(k.wl("nolabels"), k.wl("nomatch"), k.wl("tie"))
	assert.Empty(t, k.objects(k.ns))
}

// The most specific chain wins: labels < labels + expressions < labels +
// expressions + fields; a label change moves the workload to another chain,
// whose objects replace the old chain's (removed), and a label change that
// matches no chain keeps what was stamped.
func TestMostSpecificChainWinsAndLabelChangeMoves(t *testing.T) {
	k := newKit(t)
	team := k.ns
	ta, tb, tc := k.name("spec-a"), k.name("spec-b"), k.name("spec-c")
	k.apply(k.cmTemplate(ta, "a", `{chain: a}`))
	k.apply(k.cmTemplate(tb, "b", `{chain: b}`))
	k.apply(k.cmTemplate(tc, "c", `{chain: c}`))
	ca, cb, cc := k.name("labels"), k.name("exprs"), k.name("fields")
	k.apply(k.selChain(ca, "\n  selector: {team: "+team+"}", ta))
	k.apply(k.selChain(cb, "\n  selector: {team: "+team+"}\n  selectorMatchExpressions: [{key: tier, operator: In, values: [gold]}]", tb))
	k.apply(k.selChain(cc, `
  selector: {team: `+team+`}
  selectorMatchExpressions: [{key: tier, operator: In, values: [gold]}]
  selectorMatchFields: [{key: spec.source.git.url, operator: In, values: ["https://git.example.com/fields.git"]}]`, tc))

	k.apply(k.selWorkload("plain", "{team: "+team+"}"))
	k.apply(k.selWorkload("gold", "{team: "+team+", tier: gold}"))
	k.apply(k.selWorkload("fields", "{team: "+team+", tier: gold}"))
	for n, want := range map[string]string{"plain": ca, "gold": cb, "fields": cc} {
		w := k.waitOwner(n, "Ready", "True", "Ready")
		assert.Equal(t, want, k.chainOf(w), "chain of %s", n)
		k.assertCond(ownerCondition(w, "SupplyChainReady"), "True", "Ready")
	}
	k.waitObj(configMapGVR, "plain-a", k.dataIs("chain", "a"))
	k.waitObj(configMapGVR, "gold-b", k.dataIs("chain", "b"))
	k.waitObj(configMapGVR, "fields-c", k.dataIs("chain", "c"))

	// gold loses its tier: it moves to the labels-only chain.
	k.update(workloadGVR, k.ns, "gold", func(u *unstructured.Unstructured) {
		u.SetLabels(map[string]string{"team": team})
	})
	k.waitObj(configMapGVR, "gold-a", k.dataIs("chain", "a"))
	k.waitAbsent(configMapGVR, "gold-b")
	// Objects change before the status is written: wait for the status.
	w := k.waitObjStatus("gold", func(u *unstructured.Unstructured) string {
		if got := nested(stepStatus(u, "deploy"), "stampedRef", "name"); got != "gold-a" || k.chainOf(u) != ca {
			return fmt.Sprintf("gold on chain %v stamped %v", k.chainOf(u), got)
		}
		return ""
	})
	k.assertCond(ownerCondition(w, "Ready"), "True", "Ready")
	k.waitEvent("gold", "StampedObjectRemoved", "gold-b", "step [deploy]")

	// A label change that matches no chain is SupplyChainNotFound and keeps
	// the stamped object: bad input never deletes.
	before := k.rvs(k.cm("gold-a"))
	k.update(workloadGVR, k.ns, "gold", func(u *unstructured.Unstructured) {
		u.SetLabels(map[string]string{"team": team + "-nobody"})
	})
	w = k.waitOwner("gold", "SupplyChainReady", "False", "SupplyChainNotFound")
	k.assertCond(ownerCondition(w, "Ready"), "False", "SupplyChainNotFound")
	k.assertQuiet(k.wl("gold"))
	assert.Equal(t, before, k.rvs(k.cm("gold-a")), "the stamped object stays untouched")
}

// A chain created after its owners, and a chain whose selector is edited,
// find the owners that waited for it (SupplyChainNotFound): the owner
// controller scans every cached owner against the chain's selector, labels
// and fields (reconciler/owner.go chainChanged, one owner's JSON at a time).
func TestChainCreatedOrEditedLaterFindsWaitingOwners(t *testing.T) {
	k := newKit(t)
	team := k.ns
	tmpl := k.name("later")
	k.apply(k.cmTemplate(tmpl, "app", `{greeting: hello}`))
	k.apply(k.selWorkload("first", "{team: "+team+", tier: gold}"))
	k.apply(k.selWorkload("second", "{team: "+team+", tier: gold}"))
	k.apply(k.selWorkload("stranger", "{team: "+team+"-other, tier: gold}"))
	for _, n := range []string{"first", "second", "stranger"} {
		k.waitOwner(n, "SupplyChainReady", "False", "SupplyChainNotFound")
	}

	chain := k.name("later")
	fields := func(urls ...string) string {
		return fmt.Sprintf(`
  selector: {team: %s}
  selectorMatchFields: [{key: spec.source.git.url, operator: In, values: ["%s"]}]`, team, strings.Join(urls, `", "`))
	}
	k.apply(k.selChain(chain, fields("https://git.example.com/first.git"), tmpl))
	w := k.waitOwner("first", "Ready", "True", "Ready")
	assert.Equal(t, chain, k.chainOf(w))
	k.waitObj(configMapGVR, "first-app", k.dataIs("greeting", "hello"))

	k.apply(k.selChain(chain, fields("https://git.example.com/first.git", "https://git.example.com/second.git"), tmpl))
	w = k.waitOwner("second", "Ready", "True", "Ready")
	assert.Equal(t, chain, k.chainOf(w))
	k.waitObj(configMapGVR, "second-app", k.dataIs("greeting", "hello"))

	// Labels that do not match keep an owner waiting, whatever its fields.
	w = get(t, workloadGVR, k.ns, "stranger")
	k.assertCond(ownerCondition(w, "SupplyChainReady"), "False", "SupplyChainNotFound")
	assert.Nil(t, nested(w.Object, "status", "supplyChainRef"))
}
