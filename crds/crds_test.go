package crds

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/render"
	st "kontinue.dev/kontinue/reconciler/status"
)

// kindInfo is the contract of COMPATIBILITY.md for one kind.
type kindInfo struct {
	plural     string
	short      string
	namespaced bool
	status     bool
	categories []string
}

var contract = map[string]kindInfo{
	api.KindWorkload:                  {"workloads", "wld", true, true, []string{"all", "carto"}},
	api.KindDeliverable:               {"deliverables", "dlv", true, true, []string{"all", "carto"}},
	api.KindRunnable:                  {"runnables", "run", true, true, []string{"carto"}},
	api.KindClusterSupplyChain:        {"clustersupplychains", "csc", false, true, []string{"carto"}},
	api.KindClusterDelivery:           {"clusterdeliveries", "cd", false, true, []string{"carto"}},
	api.KindClusterSourceTemplate:     {"clustersourcetemplates", "cst", false, false, []string{"carto"}},
	api.KindClusterImageTemplate:      {"clusterimagetemplates", "cit", false, false, []string{"carto"}},
	api.KindClusterConfigTemplate:     {"clusterconfigtemplates", "cct", false, false, []string{"carto"}},
	api.KindClusterTemplate:           {"clustertemplates", "ct", false, false, []string{"carto"}},
	api.KindClusterDeploymentTemplate: {"clusterdeploymenttemplates", "cdt", false, false, []string{"carto"}},
	api.KindClusterRunTemplate:        {"clusterruntemplates", "crt", false, false, []string{"carto"}},
}

// loadFiles parses every embedded file into a plain map, keyed by kind.
func loadFiles(t *testing.T) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	names := fileNames()
	require.Len(t, names, len(contract), "one file per kind")
	for _, name := range names {
		b, err := files.ReadFile(name)
		require.NoError(t, err)
		var doc map[string]any
		require.NoError(t, yaml.Unmarshal(b, &doc), name)
		kind := str(t, doc, "spec", "names", "kind")
		_, dup := out[kind]
		require.False(t, dup, "kind %s defined twice", kind)
		assert.Equal(t, "carto.run_"+contract[kind].plural+".yaml", name, "file name of %s", kind)
		out[kind] = doc
	}
	return out
}

func get(t *testing.T, doc any, path ...string) any {
	t.Helper()
	cur := doc
	for i, p := range path {
		m, ok := cur.(map[string]any)
		require.True(t, ok, "%s is not an object", strings.Join(path[:i], "."))
		cur, ok = m[p]
		require.True(t, ok, "%s is missing", strings.Join(path[:i+1], "."))
	}
	return cur
}

func str(t *testing.T, doc any, path ...string) string {
	t.Helper()
	s, ok := get(t, doc, path...).(string)
	require.True(t, ok, "%s is not a string", strings.Join(path, "."))
	return s
}

func version(t *testing.T, doc map[string]any) map[string]any {
	t.Helper()
	versions, ok := get(t, doc, "spec", "versions").([]any)
	require.True(t, ok)
	require.Len(t, versions, 1)
	return versions[0].(map[string]any)
}

func rootSchema(t *testing.T, doc map[string]any) map[string]any {
	t.Helper()
	return get(t, version(t, doc), "schema", "openAPIV3Schema").(map[string]any)
}

// prop walks properties (and items, written "[]") of a schema.
func prop(t *testing.T, schema map[string]any, path string) map[string]any {
	t.Helper()
	cur := schema
	for _, p := range strings.Split(path, ".") {
		if p == "[]" {
			cur = get(t, cur, "items").(map[string]any)
			continue
		}
		cur = get(t, cur, "properties", p).(map[string]any)
	}
	return cur
}

func TestEveryFileIsACRDOfTheContract(t *testing.T) {
	docs := loadFiles(t)
	require.Len(t, docs, len(contract))
	for kind, want := range contract {
		t.Run(kind, func(t *testing.T) {
			doc, ok := docs[kind]
			require.True(t, ok, "no CRD for %s", kind)
			assert.Equal(t, "apiextensions.k8s.io/v1", str(t, doc, "apiVersion"))
			assert.Equal(t, "CustomResourceDefinition", str(t, doc, "kind"))
			assert.Equal(t, want.plural+".carto.run", str(t, doc, "metadata", "name"))
			assert.Equal(t, api.Group, str(t, doc, "spec", "group"))
			assert.Equal(t, want.plural, str(t, doc, "spec", "names", "plural"))
			assert.Equal(t, strings.ToLower(kind), str(t, doc, "spec", "names", "singular"))
			assert.Equal(t, kind+"List", str(t, doc, "spec", "names", "listKind"))
			assert.Equal(t, []any{want.short}, get(t, doc, "spec", "names", "shortNames"))
			var cats []string
			for _, c := range get(t, doc, "spec", "names", "categories").([]any) {
				cats = append(cats, c.(string))
			}
			assert.Equal(t, want.categories, cats)
			scope := "Cluster"
			if want.namespaced {
				scope = "Namespaced"
			}
			assert.Equal(t, scope, str(t, doc, "spec", "scope"))

			v := version(t, doc)
			assert.Equal(t, api.Version, v["name"])
			assert.Equal(t, true, v["served"])
			assert.Equal(t, true, v["storage"])

			sub, hasSub := v["subresources"].(map[string]any)
			_, hasStatus := sub["status"]
			assert.Equal(t, want.status, hasSub && hasStatus, "status subresource")
			_, statusSchema := rootSchema(t, doc)["properties"].(map[string]any)["status"]
			assert.Equal(t, want.status, statusSchema, "status schema only with the subresource")
			assert.Equal(t, []any{"spec"}, rootSchema(t, doc)["required"])
		})
	}
}

func TestPrinterColumns(t *testing.T) {
	ready := `.status.conditions[?(@.type=="Ready")].status`
	reason := `.status.conditions[?(@.type=="Ready")].reason`
	age := ".metadata.creationTimestamp"
	chain := [][2]string{{"Ready", ready}, {"Reason", reason}, {"Age", age}}
	// Workload and Deliverable: Cartographer v0.8.11's columns, string for
	// string (config/crd/bases of its module), then Message (-o wide).
	cartoReady := `.status.conditions[?(@.type=='Ready')].status`
	cartoReason := `.status.conditions[?(@.type=='Ready')].reason`
	cartoSource := `.spec.source['git.url','image']`
	message := [2]string{"Message", `.status.conditions[?(@.type=='Ready')].message`}
	want := map[string][][2]string{
		api.KindWorkload: {
			{"Source", cartoSource}, {"SupplyChain", ".status.supplyChainRef.name"}, {"Ready", cartoReady}, {"Reason", cartoReason}, {"Age", age}, message,
		},
		api.KindDeliverable: {
			{"Source", cartoSource}, {"Delivery", ".status.deliveryRef.name"}, {"Ready", cartoReady}, {"Reason", cartoReason}, {"Age", age}, message,
		},
		api.KindRunnable: {
			{"RunTemplate", ".spec.runTemplateRef.name"}, {"Ready", ready}, {"Reason", reason}, {"Age", age},
		},
		api.KindClusterSupplyChain: chain,
		api.KindClusterDelivery:    chain,
	}
	for kind, doc := range loadFiles(t) {
		var got [][2]string
		cols, _ := version(t, doc)["additionalPrinterColumns"].([]any)
		for _, c := range cols {
			col := c.(map[string]any)
			got = append(got, [2]string{col["name"].(string), col["jsonPath"].(string)})
			assert.NotEmpty(t, col["description"], "%s column %s", kind, col["name"])
			wantType := "string"
			if col["name"] == "Age" {
				wantType = "date"
			}
			assert.Equal(t, wantType, col["type"], "%s column %s", kind, col["name"])
			if col["name"] == "Message" {
				assert.EqualValues(t, 1, col["priority"], "Message only with -o wide: the default columns stay Cartographer's")
			}
		}
		assert.Equal(t, want[kind], got, kind)
	}
}

// node is one schema in a walk, with its path for messages.
type node struct {
	path   string
	schema map[string]any
}

// walk visits every schema reachable through properties, items and
// additionalProperties (not through anyOf/oneOf, which hold only constraints).
func walk(path string, s map[string]any, visit func(node)) {
	visit(node{path, s})
	if props, ok := s["properties"].(map[string]any); ok {
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			walk(path+"."+k, props[k].(map[string]any), visit)
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		walk(path+"[]", items, visit)
	}
	if ap, ok := s["additionalProperties"].(map[string]any); ok {
		walk(path+"{}", ap, visit)
	}
}

func TestEveryFieldHasADescription(t *testing.T) {
	for kind, doc := range loadFiles(t) {
		walk(kind, rootSchema(t, doc), func(n node) {
			// The API server owns metadata's schema; map values and the
			// scalar items of a list are described by their map or list.
			_, typed := n.schema["type"]
			_, props := n.schema["properties"]
			if n.path == kind+".metadata" || strings.HasSuffix(n.path, "{}") ||
				(strings.HasSuffix(n.path, "[]") && typed && !props && n.schema["type"] != "array") {
				return
			}
			d, _ := n.schema["description"].(string)
			assert.NotEmpty(t, strings.TrimSpace(d), "%s has no description", n.path)
			assert.NotContains(t, strings.ToLower(d), "seed ", "%s: descriptions are for users, not design notes", n.path)
		})
	}
}

func TestSchemasAreStructural(t *testing.T) {
	for kind, doc := range loadFiles(t) {
		walk(kind, rootSchema(t, doc), func(n node) {
			typ, _ := n.schema["type"].(string)
			preserve, _ := n.schema["x-kubernetes-preserve-unknown-fields"].(bool)
			if typ == "" {
				assert.True(t, preserve, "%s has no type and does not preserve unknown fields", n.path)
			}
			if typ == "array" {
				assert.Contains(t, n.schema, "items", "%s: an array needs items", n.path)
			}
			_, hasProps := n.schema["properties"]
			_, hasAP := n.schema["additionalProperties"]
			assert.False(t, hasProps && hasAP, "%s: properties and additionalProperties together", n.path)
			for _, j := range []string{"anyOf", "oneOf", "allOf", "not"} {
				junctors, ok := n.schema[j].([]any)
				if !ok {
					continue
				}
				for _, js := range junctors {
					for _, forbidden := range []string{"type", "description", "default", "nullable",
						"additionalProperties", "x-kubernetes-preserve-unknown-fields"} {
						assert.NotContains(t, js, forbidden, "%s.%s may hold only constraints", n.path, j)
					}
				}
			}
		})
	}
}

func TestEveryCELRuleHasAMessage(t *testing.T) {
	count := 0
	for kind, doc := range loadFiles(t) {
		walk(kind, rootSchema(t, doc), func(n node) {
			rules, ok := n.schema["x-kubernetes-validations"]
			if !ok {
				return
			}
			list, ok := rules.([]any)
			require.True(t, ok, "%s: x-kubernetes-validations is not a list", n.path)
			for i, r := range list {
				rule := r.(map[string]any)
				count++
				assert.NotEmpty(t, rule["rule"], "%s rule %d", n.path, i)
				msg, _ := rule["message"].(string)
				assert.NotEmpty(t, strings.TrimSpace(msg), "%s rule %d (%v) has no message", n.path, i, rule["rule"])
				for k := range rule {
					assert.Contains(t, []string{"rule", "message", "messageExpression", "reason", "fieldPath"}, k,
						"%s rule %d has an unknown key", n.path, i)
				}
			}
		})
	}
	assert.Greater(t, count, 30, "the webhook rules are expected as CEL")
}

// CEL cost is estimated from list sizes and string lengths; the lists that rules
// iterate over (and the strings they compare) must stay bounded or the API
// server rejects the CRD.
func TestBoundsForCEL(t *testing.T) {
	docs := loadFiles(t)
	for _, kind := range []string{api.KindClusterSupplyChain, api.KindClusterDelivery} {
		spec := prop(t, rootSchema(t, docs[kind]), "spec")
		for path, max := range map[string]float64{
			"resources":                        100,
			"params":                           50,
			"resources.[].params":              50,
			"resources.[].sources":             10,
			"resources.[].configs":             10,
			"resources.[].images":              10,
			"resources.[].templateRef.options": 20,
		} {
			assert.Equal(t, max, prop(t, spec, path)["maxItems"], "%s %s", kind, path)
		}
		for _, path := range []string{
			"resources.[].name", "resources.[].templateRef.name",
			"resources.[].templateRef.options.[].name", "resources.[].templateRef.options.[].passThrough",
			"resources.[].sources.[].resource", "resources.[].configs.[].resource",
		} {
			assert.Contains(t, prop(t, spec, path), "maxLength", "%s %s", kind, path)
		}
	}
}

// rules returns the CEL rules of a schema.
func rules(s map[string]any) []string {
	var out []string
	list, _ := s["x-kubernetes-validations"].([]any)
	for _, r := range list {
		out = append(out, r.(map[string]any)["rule"].(string))
	}
	return out
}

func TestWebhookRulesArePresent(t *testing.T) {
	docs := loadFiles(t)
	for _, kind := range []string{api.KindClusterSupplyChain, api.KindClusterDelivery} {
		spec := prop(t, rootSchema(t, docs[kind]), "spec")
		assert.Len(t, rules(spec), 1, "%s: a selector is required", kind)
		assert.Contains(t, rules(prop(t, spec, "resources")), "self.all(a, self.exists_one(b, b.name == a.name))", kind)
		ref := prop(t, spec, "resources.[].templateRef")
		assert.Equal(t, []string{"has(self.name) != has(self.options)"}, rules(ref), kind)
		options := prop(t, ref, "options")
		assert.Equal(t, float64(2), options["minItems"], kind)
		assert.Len(t, rules(options), 2, "%s: one passThrough, unique names", kind)
		assert.Equal(t, []string{"has(self.name) != has(self.passThrough)"}, rules(prop(t, options, "[]")), kind)
		for _, path := range []string{"params.[]", "resources.[].params.[]"} {
			// value and default hold any JSON, which CEL cannot see: oneOf says "exactly one".
			assert.Equal(t, []any{
				map[string]any{"required": []any{"value"}},
				map[string]any{"required": []any{"default"}},
			}, prop(t, spec, path)["oneOf"], "%s %s", kind, path)
		}
		for _, path := range []string{"selectorMatchFields.[]", "resources.[].templateRef.options.[].selector.matchFields.[]"} {
			assert.Len(t, prop(t, spec, path)["anyOf"], 2, "%s %s: values only with In/NotIn", kind, path)
		}
	}
	delivery := prop(t, rootSchema(t, docs[api.KindClusterDelivery]), "spec.resources.[]")
	assert.Contains(t, rules(delivery), "!has(self.deployment) || self.templateRef.kind == 'ClusterDeploymentTemplate'")
	assert.Contains(t, rules(delivery), "!has(self.images)")
	chain := prop(t, rootSchema(t, docs[api.KindClusterSupplyChain]), "spec.resources.[]")
	assert.Equal(t, []string{"!has(self.deployment)"}, rules(chain))

	// Exactly one of the engines reconciler/render knows: its one list.
	var engines []string
	for _, f := range render.EngineFields() {
		engines = append(engines, "has(self."+f+")")
	}
	oneEngine := "[" + strings.Join(engines, ", ") + "].filter(x, x).size() == 1"
	for _, kind := range api.TemplateKinds {
		spec := prop(t, rootSchema(t, docs[kind]), "spec")
		r := strings.Join(rules(spec), "\n")
		assert.Contains(t, r, oneEngine, kind)
		if kind == api.KindClusterDeploymentTemplate {
			// At most one: a template with only a healthRule (or nothing) is
			// valid in Cartographer's API and passes its input through at once.
			assert.Contains(t, r, "!(has(self.observedMatches) && size(self.observedMatches) > 0 && has(self.observedCompletion))")
		} else {
			assert.Contains(t, r, "[has(self.healthRule), has(self.observedCompletion)", kind)
			assert.Contains(t, r, "self.lifecycle == 'mutable'", kind)
		}
		assert.Len(t, rules(prop(t, spec, "healthRule")), 1, kind)
		assert.Len(t, rules(prop(t, spec, "helm")), 1, kind)
	}
}

func enum(t *testing.T, s map[string]any) []string {
	t.Helper()
	var out []string
	for _, v := range get(t, s, "enum").([]any) {
		out = append(out, v.(string))
	}
	return out
}

func TestEnumsMatchTheAPI(t *testing.T) {
	docs := loadFiles(t)
	ops := []string{api.OpIn, api.OpNotIn, api.OpExists, api.OpDoesNotExist}
	chain := prop(t, rootSchema(t, docs[api.KindClusterSupplyChain]), "spec")
	assert.Equal(t, ops, enum(t, prop(t, chain, "selectorMatchFields.[].operator")))
	// selectorMatchExpressions are metav1.LabelSelectorRequirements: a CEL
	// rule checks their operator (see the golden test's differences).
	assert.Contains(t, rules(prop(t, chain, "selectorMatchExpressions.[]")), "self.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist']")
	// Cartographer's enums: a supply chain has no deployment step, a delivery no image step.
	assert.ElementsMatch(t, []string{api.KindClusterSourceTemplate, api.KindClusterImageTemplate,
		api.KindClusterConfigTemplate, api.KindClusterTemplate},
		enum(t, prop(t, chain, "resources.[].templateRef.kind")))
	delivery := prop(t, rootSchema(t, docs[api.KindClusterDelivery]), "spec")
	assert.ElementsMatch(t, []string{api.KindClusterSourceTemplate, api.KindClusterDeploymentTemplate,
		api.KindClusterConfigTemplate, api.KindClusterTemplate},
		enum(t, prop(t, delivery, "resources.[].templateRef.kind")))
	for _, kind := range api.TemplateKinds {
		spec := prop(t, rootSchema(t, docs[kind]), "spec")
		assert.Equal(t, api.Lifecycles, enum(t, prop(t, spec, "lifecycle")), kind)
		assert.Equal(t, ops, enum(t, prop(t, spec, "healthRule.multiMatch.healthy.matchFields.[].operator")), kind)
	}
	runnable := prop(t, rootSchema(t, docs[api.KindRunnable]), "spec.runTemplateRef.kind")
	assert.Equal(t, []string{api.KindClusterRunTemplate}, enum(t, runnable))
	assert.Equal(t, api.KindClusterRunTemplate, runnable["default"])
}

// jsonFields are the names a struct's fields have in JSON.
func jsonFields(typ reflect.Type) []string {
	var out []string
	for f := range typ.Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

func propNames(s map[string]any) []string {
	var out []string
	for k := range s["properties"].(map[string]any) {
		out = append(out, k)
	}
	return out
}

// Fields that hold arbitrary values must keep them: the API server prunes
// anything a schema does not declare.
func TestArbitraryValuesArePreserved(t *testing.T) {
	docs := loadFiles(t)
	type want struct {
		kind, path string
		typed      bool // an object, rather than any JSON value
	}
	cases := []want{
		{api.KindWorkload, "spec.params.[].value", false},
		{api.KindDeliverable, "spec.params.[].value", false},
		{api.KindWorkload, "spec.resources", true},
		{api.KindWorkload, "status.resources.[]", true},
		{api.KindDeliverable, "status.resources.[]", true},
		{api.KindClusterSupplyChain, "spec.params.[].value", false},
		{api.KindClusterSupplyChain, "spec.params.[].default", false},
		{api.KindClusterDelivery, "spec.resources.[].params.[].value", false},
		{api.KindClusterDelivery, "spec.selectorMatchFields.[].values.[]", false},
		{api.KindClusterSupplyChain, "spec.resources.[].templateRef.options.[].selector.matchFields.[].values.[]", false},
		{api.KindRunnable, "spec.inputs", true},
		{api.KindRunnable, "status.outputs", true},
		{api.KindClusterRunTemplate, "spec.template", true},
	}
	for _, kind := range api.TemplateKinds {
		cases = append(cases,
			want{kind, "spec.template", true},
			want{kind, "spec.params.[].default", false},
			want{kind, "spec.helm.values", true},
			want{kind, "spec.observedCompletion.succeeded", false},
			want{kind, "spec.observedCompletion.failed", false},
			want{kind, "spec.healthRule.multiMatch.healthy.matchFields.[].values.[]", false},
		)
	}
	for _, c := range cases {
		s := prop(t, rootSchema(t, docs[c.kind]), c.path)
		assert.Equal(t, true, s["x-kubernetes-preserve-unknown-fields"], "%s %s", c.kind, c.path)
		if c.typed {
			assert.Equal(t, "object", s["type"], "%s %s", c.kind, c.path)
		} else {
			assert.NotContains(t, s, "type", "%s %s holds any JSON value", c.kind, c.path)
		}
	}
}

func TestOwnerStatus(t *testing.T) {
	docs := loadFiles(t)
	for kind, ref := range map[string]string{api.KindWorkload: "supplyChainRef", api.KindDeliverable: "deliveryRef"} {
		status := prop(t, rootSchema(t, docs[kind]), "status")
		assert.ElementsMatch(t, []string{"observedGeneration", "lastHandledReconcileAt", "conditions", ref, "resources", "orphans", "generatedRunTemplates", "chainRevision", "shard"}, propNames(status), kind)
		assert.ElementsMatch(t, []string{"step", "name", "uid", "claim"}, propNames(prop(t, status, "generatedRunTemplates.[]")), kind)
		assert.ElementsMatch(t, []string{"kind", "name"}, propNames(prop(t, status, ref)), kind)
		res := prop(t, status, "resources.[]")
		// Cartographer's fields and Kontinue's, each a field of the Go
		// type: the golden test records which are additions.
		assert.Subset(t, propNames(res), []string{"name", "stampedRef", "templateRef", "inputs", "outputs", "conditions"}, kind)
		assert.ElementsMatch(t, jsonFields(reflect.TypeFor[st.Resource]()), propNames(res), kind)
		assert.ElementsMatch(t, []string{"apiVersion", "kind", "namespace", "name", "resource"}, propNames(prop(t, status, "orphans.[]")), kind)
		refFields := []string{"apiVersion", "kind", "namespace", "name", "resource"}
		assert.ElementsMatch(t, refFields, propNames(prop(t, res, "stampedRef")), kind)
		assert.ElementsMatch(t, refFields, propNames(prop(t, res, "stampedObjects.[]")), kind)
		assert.ElementsMatch(t, []string{"apiVersion", "kind", "name"}, propNames(prop(t, res, "templateRef")), kind)
		assert.ElementsMatch(t, []string{"name"}, propNames(prop(t, res, "inputs.[]")), kind)
		assert.ElementsMatch(t, []string{"name", "preview", "digest", "lastTransitionTime"}, propNames(prop(t, res, "outputs.[]")), kind)
		assert.Equal(t, []string{"primary", "shadow"}, enum(t, prop(t, res, "servedBy")), kind)
		assert.Equal(t, []string{"Verified", "Refused", "Verifying"}, enum(t, prop(t, res, "verification.[].result")), kind)
		assertConditions(t, kind+" status", prop(t, status, "conditions"))
		assertConditions(t, kind+" step", prop(t, res, "conditions"))
	}
	runnable := prop(t, rootSchema(t, docs[api.KindRunnable]), "status")
	assert.ElementsMatch(t, []string{"observedGeneration", "conditions", "outputs", "latestRunRef",
		"latestSuccessfulRunRef", "lastHandledRetry"}, propNames(runnable))
	assertConditions(t, "Runnable", prop(t, runnable, "conditions"))
	for _, kind := range []string{api.KindClusterSupplyChain, api.KindClusterDelivery} {
		status := prop(t, rootSchema(t, docs[kind]), "status")
		assert.ElementsMatch(t, []string{"observedGeneration", "conditions", "rollout"}, propNames(status), kind)
		assertConditions(t, kind, prop(t, status, "conditions"))
		assert.Equal(t, true, prop(t, status, "rollout")["x-kubernetes-preserve-unknown-fields"], kind)
	}
}

func assertConditions(t *testing.T, what string, s map[string]any) {
	t.Helper()
	assert.Equal(t, "map", s["x-kubernetes-list-type"], what)
	assert.Equal(t, []any{"type"}, s["x-kubernetes-list-map-keys"], what)
	item := s["items"].(map[string]any)
	assert.ElementsMatch(t, []string{"type", "status", "reason", "message", "lastTransitionTime",
		"observedGeneration"}, propNames(item), what)
	assert.ElementsMatch(t, []any{"type", "status"}, item["required"], what)
}

func TestAll(t *testing.T) {
	objs, err := All()
	require.NoError(t, err)
	require.Len(t, objs, len(contract)+2, "carto.run's, and Provider and Alert")
	var names, kinds []string
	for _, o := range objs {
		names = append(names, o.GetName())
		kind, _, _ := unstructuredString(o.Object, "spec", "names", "kind")
		kinds = append(kinds, kind)
		assert.Equal(t, "CustomResourceDefinition", o.GetKind())
		assert.Equal(t, "apiextensions.k8s.io/v1", o.GetAPIVersion())
		assert.Equal(t, "kontinue", o.GetLabels()["app.kubernetes.io/part-of"])
	}
	assert.True(t, sort.StringsAreSorted(names), "sorted by name: %v", names)
	for kind := range contract {
		assert.Contains(t, kinds, kind)
	}
	// Integers stay int64 (like objects read from the API server), so that
	// unstructured helpers and deep copies work on them.
	for _, o := range objs {
		if o.GetName() != "clustersupplychains.carto.run" {
			continue
		}
		v := o.Object["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any)
		max := v["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)["properties"].(map[string]any)["spec"].(map[string]any)["properties"].(map[string]any)["resources"].(map[string]any)["maxItems"]
		assert.Equal(t, int64(100), max)
		assert.NotPanics(t, func() { o.DeepCopy() })
	}
}

func unstructuredString(obj map[string]any, path ...string) (string, bool, error) {
	cur := any(obj)
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false, fmt.Errorf("%s is not an object", p)
		}
		cur = m[p]
	}
	s, ok := cur.(string)
	return s, ok, nil
}

func TestYAMLIsAllCRDsInOrder(t *testing.T) {
	stream := string(YAML())
	require.True(t, strings.HasPrefix(stream, "---\n"))
	docs := strings.Split(strings.TrimPrefix(stream, "---\n"), "\n---\n")
	objs, err := All()
	require.NoError(t, err)
	require.Len(t, docs, len(objs))
	for i, doc := range docs {
		var got map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(doc), &got), "document %d", i)
		assert.Equal(t, objs[i].GetName(), get(t, got, "metadata", "name"), "document %d", i)
		want, err := objs[i].MarshalJSON()
		require.NoError(t, err)
		gotJSON, err := json.Marshal(got)
		require.NoError(t, err)
		assert.JSONEq(t, string(want), string(gotJSON), "document %d is the same object as All()[%d]", i, i)
	}
}
