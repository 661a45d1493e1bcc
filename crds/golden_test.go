package crds

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/render"
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
// Besides, a new render engine or lifecycle is an addition that needs no
// entry (grown): the rule and enum they change are derived from the one
// list of each, which may grow, not lose what Cartographer's schema had.
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

	// Fields the owner may leave unset that Cartographer's template context
	// (its typed Workload, Deliverable, Runnable) holds as pointers: a tag
	// naming one renders null there, and so here (render.Schema reads
	// nullable from the served CRD). nullable only keeps an explicit null.
	"owners|.spec.source|nullable":                nullable,
	"owners|.spec.source.git|nullable":            nullable,
	"owners|.spec.source.git.url|nullable":        nullable,
	"owners|.spec.source.git.ref|nullable":        nullable,
	"owners|.spec.source.git.ref.branch|nullable": nullable,
	"owners|.spec.source.git.ref.tag|nullable":    nullable,
	"owners|.spec.source.git.ref.commit|nullable": nullable,
	"owners|.spec.source.image|nullable":          nullable,
	"owners|.spec.source.subPath|nullable":        nullable,
	"Workload|.spec.image|nullable":               nullable,
	"Workload|.spec.serviceClaims[].ref|nullable": nullable,
	"Runnable|.spec.selector|nullable":            nullable,
}

// addedFields are the fields added since the hand-written CRDs, by kind (as
// knownDifferences) and path: every fact under them is new, and must be
// absent from the hand-written schema.
var addedFields = map[string]string{
	"chains|.spec.resources[].verify":             "issue 49: verify a step's inputs (docs/verification.md)",
	"owners|.status.resources[].verification":     "issue 49: how each input of a step was verified (docs/verification.md)",
	"chains|.spec.rollout.waves[].maxUnavailable": "issue 47.9: a wave's roll-out cap (docs/rollouts.md)",
	"chains|.spec.deploymentSteps":                "issue 50: which steps are deployments for the DORA metrics (docs/dora.md)",
	"owners|.status.shard":                        "issue 46: the shard that holds an owner's objects (docs/operations.md#sharding)",
}

// nullable is why a field is nullable.
const nullable = "a field Cartographer's typed owner holds as a pointer: null kept, a tag naming it unset renders null (issue 48.4)"

// differenceKinds expands the kind part of a knownDifferences key.
var differenceKinds = map[string][]string{"chains": {"ClusterSupplyChain", "ClusterDelivery"}, "owners": {"Workload", "Deliverable"}}

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
			if a := addedUnder(kind, k); a != "" && want[k] == "" {
				seen[a] = true
				continue
			}
			if grown(kind, k, want[k], got[k], render.EngineFields(), api.Lifecycles) {
				continue
			}
			t.Errorf("%s %s: hand-written %s, generated %s", kind, k, orNone(want[k]), orNone(got[k]))
		}
	}
	for k := range allowed {
		assert.True(t, seen[k], "known difference %s is gone: delete it from knownDifferences", k)
	}
	for key := range addedFields {
		kind, rest, _ := strings.Cut(key, "|")
		for _, k := range kindsOf(kind) {
			assert.True(t, seen[k+"|"+rest], "added field %s of %s is not in the generated CRD: delete it from addedFields", rest, k)
		}
	}
}

// grown reports whether a fact (path|fact) of a template kind differs from
// the hand-written one only because one of the lists Kontinue keeps in one
// place grew: the render engines (render.EngineFields: a TemplateSpec field
// each, and the rule that exactly one is set) or the lifecycles
// (api.Lifecycles: spec.lifecycle's enum). The generated fact must be the
// one derived from the list, and every engine or lifecycle of the
// hand-written schema must still be in it: a new engine or lifecycle needs
// no entry in knownDifferences or addedFields, one that goes still fails.
func grown(kind, fact, want, got string, engines, lifecycles []string) bool {
	if !slices.Contains(api.TemplateKinds, kind) {
		return false
	}
	path, what, _ := strings.Cut(fact, "|")
	switch {
	case path == ".spec.lifecycle" && what == "enum":
		var w, g []string
		return json.Unmarshal([]byte(want), &w) == nil && json.Unmarshal([]byte(got), &g) == nil &&
			sameSet(g, lifecycles) && isSubset(w, g)
	case path == ".spec" && what == "x-kubernetes-validations":
		var w, g []map[string]any
		if json.Unmarshal([]byte(want), &w) != nil || json.Unmarshal([]byte(got), &g) != nil {
			return false
		}
		var fields []string
		for _, f := range engines {
			fields = append(fields, "has(self."+f+")")
		}
		derived := "[" + strings.Join(fields, ", ") + "].filter(x, x).size() == 1"
		gi := slices.IndexFunc(g, func(r map[string]any) bool { return r["rule"] == derived })
		wi := slices.IndexFunc(w, func(r map[string]any) bool {
			rule, _ := r["rule"].(string)
			return strings.HasPrefix(rule, "[has(self.template)") && strings.HasSuffix(rule, "].filter(x, x).size() == 1")
		})
		if gi < 0 || wi < 0 {
			return false
		}
		var had []string
		for _, m := range engineField.FindAllStringSubmatch(w[wi]["rule"].(string), -1) {
			had = append(had, m[1])
		}
		if !isSubset(had, engines) {
			return false
		}
		// With the hand-written engines' rule in its place, nothing else
		// may differ.
		g[gi] = w[wi]
		return canonicalSet(g) == canonicalSet(w)
	}
	for _, f := range engines {
		p := ".spec." + f
		if want == "" && (path == p || strings.HasPrefix(path, p+".") || strings.HasPrefix(path, p+"[") || strings.HasPrefix(path, p+"{")) {
			return true
		}
	}
	return false
}

var engineField = regexp.MustCompile(`has\(self\.(\w+)\)`)

func isSubset(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

func sameSet(a, b []string) bool { return len(a) == len(b) && isSubset(a, b) && isSubset(b, a) }

// canonicalSet is a list of rules as crdFacts writes it.
func canonicalSet(rules []map[string]any) string {
	var items []string
	for _, r := range rules {
		b, _ := json.Marshal(r)
		items = append(items, string(b))
	}
	sort.Strings(items)
	return "[" + strings.Join(items, ",") + "]"
}

func TestGrown(t *testing.T) {
	engines4 := `[{"message":"one engine","rule":"[has(self.template), has(self.helm)].filter(x, x).size() == 1"},{"message":"o","rule":"other"}]`
	engines5 := `[{"message":"one engine!","rule":"[has(self.template), has(self.helm), has(self.cue)].filter(x, x).size() == 1"},{"message":"o","rule":"other"}]`
	changed := `[{"message":"one engine!","rule":"[has(self.template), has(self.helm), has(self.cue)].filter(x, x).size() == 1"},{"message":"o","rule":"another"}]`
	engines := []string{"template", "helm", "cue"}
	lifecycles := []string{"mutable", "tekton", "job"}
	for _, tt := range []struct {
		name, kind, fact, want, got string
		ok                          bool
	}{
		{"a lifecycle added", "ClusterTemplate", ".spec.lifecycle|enum", `["mutable","tekton"]`, `["job","mutable","tekton"]`, true},
		{"a lifecycle gone", "ClusterTemplate", ".spec.lifecycle|enum", `["immutable","mutable","tekton"]`, `["job","mutable","tekton"]`, false},
		{"an enum that is not the list", "ClusterTemplate", ".spec.lifecycle|enum", `["mutable"]`, `["mutable","other"]`, false},
		{"an engine added", "ClusterTemplate", ".spec|x-kubernetes-validations", engines4, engines5, true},
		{"an engine added and another rule changed", "ClusterTemplate", ".spec|x-kubernetes-validations", engines4, changed, false},
		{"an engine gone", "ClusterTemplate", ".spec|x-kubernetes-validations", engines5, engines4, false},
		{"a new engine's field", "ClusterTemplate", ".spec.cue|type", "", `"string"`, true},
		{"below it", "ClusterTemplate", ".spec.cue.package|exists", "", "true", true},
		{"an engine's field that changed", "ClusterTemplate", ".spec.helm|type", `"object"`, `"string"`, false},
		{"another new field", "ClusterTemplate", ".spec.soak|type", "", `"string"`, false},
		{"not a template", "Workload", ".spec.cue|type", "", `"string"`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.ok, grown(tt.kind, tt.fact, tt.want, tt.got, engines, lifecycles))
		})
	}
}

// addedUnder is the entry (kind|path) of addedFields that a fact (path|fact)
// of kind lies under, "" for none.
func addedUnder(kind, fact string) string {
	path, _, _ := strings.Cut(fact, "|")
	for key := range addedFields {
		k, prefix, _ := strings.Cut(key, "|")
		for _, kk := range kindsOf(k) {
			if kk == kind && (path == prefix || strings.HasPrefix(path, prefix+".") || strings.HasPrefix(path, prefix+"[")) {
				return kind + "|" + prefix
			}
		}
	}
	return ""
}

// kindsOf expands the kind part of a key.
func kindsOf(kind string) []string {
	if kinds := differenceKinds[kind]; kinds != nil {
		return kinds
	}
	return []string{kind}
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
