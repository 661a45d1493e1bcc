package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Templates that cannot be stamped end in TemplateStampFailure on the step,
// ResourcesSubmitted and Ready, with a message naming the step, the
// template, the chain and the field; nothing is written anywhere and the
// workload's status stays still.
func TestBadTemplatesEndInStampFailure(t *testing.T) {
	for _, c := range []struct {
		name     string
		template func(other string) string // the template's `template:` value
		parts    []string
	}{
		{"unparseable tag", func(string) string {
			return `{apiVersion: v1, kind: ConfigMap, metadata: {name: x}, data: {greeting: "hello $(workload.metadata.name"}}`
		}, []string{"unterminated tag", "data.greeting"}},
		{"tag resolving to nothing", func(string) string {
			return `{apiVersion: v1, kind: ConfigMap, metadata: {name: x}, data: {greeting: "$(workload.spec.nothing.here)$"}}`
		}, []string{"unable to resolve $(workload.spec.nothing.here)$", "data.greeting"}},
		{"no apiVersion and kind", func(string) string {
			return `{metadata: {name: x}, data: {greeting: hello}}`
		}, []string{"apiVersion/kind"}},
		{"another namespace", func(other string) string {
			return `{apiVersion: v1, kind: ConfigMap, metadata: {name: x, namespace: ` + other + `}, data: {greeting: hello}}`
		}, []string{"names namespace [", "only in the Workload's namespace"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			k := newKit(t)
			other := newNamespace(t)
			tmpl, chain := k.name("bad"), k.name("bad-chain")
			k.apply(k.templateYAML("ClusterTemplate", tmpl, "\n  template: "+c.template(other)))
			k.apply(k.chainYAML(chain, "", k.step("deploy", "ClusterTemplate", tmpl, "")))
			k.workload("app", chain, "")

			w := k.waitStep("app", "deploy", "ResourceSubmitted", "False", "TemplateStampFailure")
			parts := append([]string{"resource [deploy]", "ClusterTemplate/" + tmpl, "supply chain [" + chain + "]"}, c.parts...)
			k.assertCond(k.stepCond(w, "deploy", "ResourceSubmitted"), "False", "TemplateStampFailure", parts...)
			k.assertCond(ownerCondition(w, "ResourcesSubmitted"), "False", "TemplateStampFailure", parts...)
			k.assertCond(ownerCondition(w, "Ready"), "False", "TemplateStampFailure", parts...)
			k.assertCond(ownerCondition(w, "SupplyChainReady"), "True", "Ready")
			assert.Nil(t, stepStatus(w, "deploy")["stampedRef"], "nothing stamped")

			k.assertQuiet(k.wl("app"), k.csc(chain), k.cluster(k.tmplGVR("clustertemplates"), tmpl))
			assert.Empty(t, k.objects(k.ns), "no object written in the workload's namespace")
			assert.Empty(t, k.objects(other), "no object written in another namespace")
		})
	}
}

// A template for a kind the API server does not serve is
// TemplateRejectedByAPIServer; once the CRD is created the workload
// recovers by itself (CRD events re-trigger blocked owners).
func TestUnknownKindRecoversWhenCRDAppears(t *testing.T) {
	k := newKit(t)
	suffix := strings.TrimPrefix(k.ns, "e2e-")
	kind, plural := "Widget"+suffix, "widgets"+suffix
	tmpl, chain := k.name("widget"), k.name("widget-chain")
	k.apply(k.templateYAML("ClusterTemplate", tmpl, `
  template:
    apiVersion: test.run/v1alpha1
    kind: `+kind+`
    metadata: {name: $(workload.metadata.name)$-widget}
    spec: {size: 3}`))
	k.apply(k.chainYAML(chain, "", k.step("deploy", "ClusterTemplate", tmpl, "")))
	k.workload("app", chain, "")

	w := k.waitStep("app", "deploy", "ResourceSubmitted", "False", "TemplateRejectedByAPIServer")
	parts := []string{"step [deploy]", "ClusterTemplate/" + tmpl, "[" + kind + "]", "test.run/v1alpha1"}
	k.assertCond(k.stepCond(w, "deploy", "ResourceSubmitted"), "False", "TemplateRejectedByAPIServer", parts...)
	k.assertCond(ownerCondition(w, "Ready"), "False", "TemplateRejectedByAPIServer", parts...)
	k.assertQuiet(k.wl("app"), k.csc(chain))

	k.apply(fmt.Sprintf(`
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: %[2]s.test.run}
spec:
  group: test.run
  scope: Namespaced
  names: {plural: %[2]s, singular: %[3]s, kind: %[1]s, listKind: %[1]sList}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
`, kind, plural, strings.ToLower(kind)))
	w = k.waitOwner("app", "Ready", "True", "Ready")
	widget := get(t, schema.GroupVersionResource{Group: "test.run", Version: "v1alpha1", Resource: plural}, k.ns, "app-widget")
	assert.EqualValues(t, 3, nested(widget.Object, "spec", "size"))
	assert.Equal(t, plural+".test.run", nested(stepStatus(w, "deploy"), "stampedRef", "resource"))
}

// An output path that is not there yet waits (MissingValueAtPath, Unknown)
// without churn, and the workload recovers by itself once the template's
// path is fixed.
func TestMissingOutputPathRecoversWhenTemplateFixed(t *testing.T) {
	k := newKit(t)
	cfg, app, chain := k.name("cfg"), k.name("app"), k.name("path-chain")
	k.apply(k.templateYAML("ClusterConfigTemplate", cfg, `
  configPath: .data.wanted
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-config}
    data: {present: "hello"}`))
	k.apply(k.cmTemplate(app, "app", `{config: "$(config)$"}`))
	k.apply(k.chainYAML(chain, "", k.step("config", "ClusterConfigTemplate", cfg, "")+
		k.step("app", "ClusterTemplate", app, "configs: [{name: config, resource: config}]")))
	k.workload("app", chain, "")

	w := k.waitStep("app", "config", "ResourceSubmitted", "Unknown", "MissingValueAtPath")
	// Cartographer's words: the path as the template writes it, the object.
	parts := []string{"waiting to read value [.data.wanted] from object [configmaps/app-config] in namespace [" + k.ns + "]"}
	k.assertCond(k.stepCond(w, "config", "ResourceSubmitted"), "Unknown", "MissingValueAtPath", parts...)
	k.assertCond(ownerCondition(w, "ResourcesSubmitted"), "Unknown", "MissingValueAtPath", parts...)
	k.assertCond(ownerCondition(w, "Ready"), "Unknown", "MissingValueAtPath", parts...)
	k.assertCond(k.stepCond(w, "app", "ResourceSubmitted"), "Unknown", "MissingValueAtPath", "step [app]", "step [config]")
	assert.Equal(t, []string{"configmaps/app-config"}, k.names(k.objects(k.ns)), "only the config step stamped")
	k.assertQuiet(k.wl("app"), k.cm("app-config"), k.csc(chain))

	k.setSpec(k.tmplGVR("clusterconfigtemplates"), cfg, ".data.present", "configPath")
	w = k.waitOwner("app", "Ready", "True", "Ready")
	k.waitObj(configMapGVR, "app-app", k.dataIs("config", "hello"))
	outs, _ := stepStatus(w, "config")["outputs"].([]any)
	require.Len(t, outs, 1)
	assert.Equal(t, "hello\n", outs[0].(map[string]any)["preview"])
}

// A chain whose template does not exist: the workload's SupplyChainReady
// and the chain's TemplatesReady are False TemplatesNotFound, naming the
// step in Cartographer's words; a Warning event on the chain names the
// template; creating the template heals both.
func TestMissingTemplateRecoversWhenCreated(t *testing.T) {
	k := newKit(t)
	tmpl, chain := k.name("later"), k.name("later-chain")
	k.apply(k.chainYAML(chain, "", k.step("deploy", "ClusterTemplate", tmpl, "")))
	k.workload("app", chain, "")

	w := k.waitOwner("app", "SupplyChainReady", "False", "TemplatesNotFound")
	msg := "did not find the template of the resource(s) [deploy]"
	k.assertCond(ownerCondition(w, "SupplyChainReady"), "False", "TemplatesNotFound", msg)
	k.assertCond(ownerCondition(w, "Ready"), "False", "TemplatesNotFound", msg)
	assert.Equal(t, chain, nested(w.Object, "status", "supplyChainRef", "name"), "the chosen chain is named although it is not ready")
	c := k.waitChain(chain, "TemplatesReady", "False", "TemplatesNotFound")
	k.assertCond(c, "False", "TemplatesNotFound", msg)
	k.assertCond(ownerCondition(get(t, chainGVR, "", chain), "Ready"), "False", "TemplatesNotFound", msg)
	k.waitEventIn("default", chain, "TemplatesNotFound", "step [deploy]: ClusterTemplate ["+tmpl+"]")
	k.assertQuiet(k.wl("app"), k.csc(chain))
	assert.Empty(t, k.objects(k.ns))

	k.apply(k.cmTemplate(tmpl, "app", `{greeting: hello}`))
	k.waitChain(chain, "TemplatesReady", "True", "Ready")
	k.waitChain(chain, "Ready", "True", "Ready")
	k.waitOwner("app", "Ready", "True", "Ready")
	k.waitObj(configMapGVR, "app-app", k.dataIs("greeting", "hello"))

	// The template deleted again: TemplatesNotFound, and what was stamped
	// stays (a bad input never deletes).
	stamped := k.rvs(k.cm("app-app"))
	require.NoError(t, env.dyn.Resource(k.tmplGVR("clustertemplates")).Delete(context.Background(), tmpl, metav1.DeleteOptions{}))
	w = k.waitOwner("app", "SupplyChainReady", "False", "TemplatesNotFound")
	k.assertCond(ownerCondition(w, "Ready"), "False", "TemplatesNotFound", "did not find the template of the resource(s) [deploy]")
	k.waitChain(chain, "TemplatesReady", "False", "TemplatesNotFound")
	k.assertQuiet(k.wl("app"))
	assert.Equal(t, stamped, k.rvs(k.cm("app-app")))
	assert.Equal(t, "app-app", nested(stepStatus(w, "deploy"), "stampedRef", "name"), "the step keeps its stamped object")
}
