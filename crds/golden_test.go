package crds

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// The CRDs were written by hand until they were generated from Go types
// (hack/crdgen). testdata/handwritten holds the last hand-written ones: the
// schemas served then, compatible with Cartographer v0.8.11 (its kuttl
// suite and examples passed against them). The generated CRDs must accept
// and reject what those did, field by field: every path with its type,
// format, enum, required fields, default, bounds, nullable,
// x-kubernetes-* extensions, CEL rules and oneOf/anyOf. Descriptions may
// differ (they are not compared).
//
// knownDifferences lists, by kind, path and fact, each difference kept
// and why; a difference not listed fails, and so does a listed one that
// has gone (then delete its entry).
var knownDifferences = map[string]string{
	// The label requirements of chain selectors are
	// metav1.LabelSelectorRequirement, the upstream type the controller
	// decodes; its schema comes from its own markers, which give operator
	// no enum and values x-kubernetes-list-type: atomic (the default for a
	// list anyway). A CEL rule on each requirement
	// (reconciler/api.ChainSpec) rejects the operators the enum rejected,
	// so the same objects are accepted; only the message differs.
	"chains|.spec.selectorMatchExpressions[].operator|enum":                                                    "label requirement: operator checked by a CEL rule",
	"chains|.spec.selectorMatchExpressions[]|x-kubernetes-validations":                                         "label requirement: the operator rule added",
	"chains|.spec.selectorMatchExpressions[].values|x-kubernetes-list-type":                                    "label requirement: upstream's atomic list",
	"chains|.spec.resources[].templateRef.options[].selector.matchExpressions[].operator|enum":                 "label requirement: operator checked by a CEL rule",
	"chains|.spec.resources[].templateRef.options[].selector.matchExpressions[]|x-kubernetes-validations":      "label requirement: the operator rule added",
	"chains|.spec.resources[].templateRef.options[].selector.matchExpressions[].values|x-kubernetes-list-type": "label requirement: upstream's atomic list",

	// Both chains' steps are one Go type (api.Step), so a ClusterSupplyChain
	// step's deployment has the ClusterDelivery's shape {resource} instead of
	// any object. The supply chain's rule !has(self.deployment) rejects
	// every deployment as before, with the same message.
	"ClusterSupplyChain|.spec.resources[].deployment|x-kubernetes-preserve-unknown-fields": "one step type: deployment is typed",
	"ClusterSupplyChain|.spec.resources[].deployment|required":                             "one step type: deployment is typed",
	"ClusterSupplyChain|.spec.resources[].deployment.resource|exists":                      "one step type: deployment is typed",
	"ClusterSupplyChain|.spec.resources[].deployment.resource|type":                        "one step type: deployment is typed",
	"ClusterSupplyChain|.spec.resources[].deployment.resource|maxLength":                   "one step type: deployment is typed",
}

// differenceKinds expands the kind part of a knownDifferences key.
var differenceKinds = map[string][]string{"chains": {"ClusterSupplyChain", "ClusterDelivery"}}

func TestGeneratedSchemasMatchTheHandWrittenOnes(t *testing.T) {
	old := loadHandwritten(t)
	gen := loadFiles(t)
	require.Len(t, old, len(contract))

	allowed := map[string]string{}
	for key, why := range knownDifferences {
		kind, rest, _ := strings.Cut(key, "|")
		kinds := differenceKinds[kind]
		if kinds == nil {
			kinds = []string{kind}
		}
		for _, k := range kinds {
			allowed[k+"|"+rest] = why
		}
	}
	seen := map[string]bool{}
	for kind := range contract {
		want, got := crdFacts(t, old[kind]), crdFacts(t, gen[kind])
		keys := map[string]bool{}
		for k := range want {
			keys[k] = true
		}
		for k := range got {
			keys[k] = true
		}
		for k := range keys {
			if want[k] == got[k] {
				continue
			}
			if _, ok := allowed[kind+"|"+k]; ok {
				seen[kind+"|"+k] = true
				continue
			}
			t.Errorf("%s %s: hand-written %s, generated %s", kind, k, orNone(want[k]), orNone(got[k]))
		}
	}
	for k := range allowed {
		assert.True(t, seen[k], "known difference %s is gone: delete it from knownDifferences", k)
	}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func loadHandwritten(t *testing.T) map[string]map[string]any {
	t.Helper()
	names, err := filepath.Glob(filepath.Join("testdata", "handwritten", "*.yaml"))
	require.NoError(t, err)
	out := map[string]map[string]any{}
	for _, name := range names {
		b, err := os.ReadFile(name)
		require.NoError(t, err)
		var doc map[string]any
		require.NoError(t, yaml.Unmarshal(b, &doc), name)
		out[str(t, doc, "spec", "names", "kind")] = doc
	}
	return out
}

// crdFacts lists what the API server enforces or serves of a CRD, as
// "path|fact" → canonical JSON: the CRD's names, scope, columns,
// subresources and labels, then every schema node.
func crdFacts(t *testing.T, doc map[string]any) map[string]string {
	t.Helper()
	facts := map[string]string{}
	put := func(k string, v any) {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		facts[k] = string(b)
	}
	spec := get(t, doc, "spec").(map[string]any)
	for _, k := range []string{"group", "names", "scope"} {
		put("crd|"+k, spec[k])
	}
	v := version(t, doc)
	for _, k := range []string{"name", "served", "storage", "subresources", "additionalPrinterColumns"} {
		put("crd|versions[0]."+k, v[k])
	}
	put("crd|metadata.labels", get(t, doc, "metadata", "labels"))
	var walkFacts func(path string, s map[string]any)
	walkFacts = func(path string, s map[string]any) {
		facts[path+"|exists"] = "true"
		for k, val := range s {
			switch k {
			case "description":
			case "properties":
				for name, p := range val.(map[string]any) {
					walkFacts(path+"."+name, p.(map[string]any))
				}
			case "items":
				walkFacts(path+"[]", val.(map[string]any))
			case "additionalProperties":
				if m, ok := val.(map[string]any); ok {
					walkFacts(path+"{}", m)
					continue
				}
				put(path+"|"+k, val)
			case "required", "enum", "x-kubernetes-validations", "x-kubernetes-list-map-keys":
				// Sets: their order means nothing to the API server.
				var items []string
				for _, it := range val.([]any) {
					b, err := json.Marshal(it)
					require.NoError(t, err)
					items = append(items, string(b))
				}
				sort.Strings(items)
				facts[path+"|"+k] = "[" + strings.Join(items, ",") + "]"
			default:
				put(path+"|"+k, val)
			}
		}
	}
	walkFacts("", rootSchema(t, doc))
	return facts
}

// The comparison sees what it should: a change to any fact of a
// generated schema is reported.
func TestCRDFactsSeeChanges(t *testing.T) {
	gen := loadFiles(t)
	doc := gen["ClusterSupplyChain"]
	before := crdFacts(t, doc)
	var changed map[string]any
	b, err := json.Marshal(doc)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &changed))
	name := prop(t, rootSchema(t, changed), "spec.resources.[].name")
	name["maxLength"] = 64
	rulesOf := prop(t, rootSchema(t, changed), "spec.resources")
	rulesOf["x-kubernetes-validations"] = rulesOf["x-kubernetes-validations"].([]any)[1:]
	after := crdFacts(t, changed)
	var diff []string
	for k := range before {
		if before[k] != after[k] {
			diff = append(diff, k)
		}
	}
	sort.Strings(diff)
	assert.Equal(t, []string{".spec.resources[].name|maxLength", ".spec.resources|x-kubernetes-validations"}, diff)
}
