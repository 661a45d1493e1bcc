package e2e

// ytt templates (issue 16) through chains: what Cartographer's ytt kuttl
// tests (templates-ytt, templates-ytt-bad-params, labels-in-context for
// supply chains and deliveries) check, written with this suite's helpers.

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Outputs of ytt templates feed later ytt templates through sources,
// images and configs, and params resolve by precedence.
func TestYttTemplatesThroughAChain(t *testing.T) {
	k := newKit(t)
	n := func(s string) string { return k.name(s) }
	first, second, image, config, bare, params, labels, chain := n("first"), n("second"), n("image"), n("config"), n("bare"), n("params"), n("labels"), n("chain")
	k.apply(fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterSourceTemplate
metadata: {name: %[1]s}
spec:
  ytt: |
    #@ load("@ytt:data", "data")
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: #@ data.values.workload.metadata.name + "-first"
    data:
      player_initial_lives: "three"
      player_loves: "gaming"
  urlPath: data.player_initial_lives
  revisionPath: data.player_loves
---
apiVersion: carto.run/v1alpha1
kind: ClusterSourceTemplate
metadata: {name: %[2]s}
spec:
  ytt: |
    #@ load("@ytt:data", "data")
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: #@ data.values.workload.metadata.name + "-second"
    data:
      player_initial_lives: "5"
      player_loves: "knitting"
  urlPath: data.player_initial_lives
  revisionPath: data.player_loves
---
apiVersion: carto.run/v1alpha1
kind: ClusterImageTemplate
metadata: {name: %[3]s}
spec:
  ytt: |
    #@ load("@ytt:data", "data")

    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: #@ data.values.workload.metadata.name + "-image"
    data:
      player_current_lives: #@ data.values.source.url
      some_other_info: #@ data.values.sources['solo-source-provider'].revision
  imagePath: data.some_other_info
---
apiVersion: carto.run/v1alpha1
kind: ClusterConfigTemplate
metadata: {name: %[4]s}
spec:
  ytt: |
    #@ load("@ytt:data", "data")
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: #@ data.values.workload.metadata.name + "-config"
    data:
      favorite_color: #@ data.values.image
  configPath: data.favorite_color
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[5]s}
spec:
  ytt: |
    #@ load("@ytt:data", "data")
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: #@ data.values.workload.metadata.name + "-bare"
    data:
      best_name: #@ data.values.config
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[6]s}
spec:
  params:
  - {name: waciuma-com/quality, default: ""}
  - {name: supply-chain-param, default: not-me}
  - {name: resource-param, default: not-me}
  ytt: |
    #@ load("@ytt:data", "data")
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: #@ data.values.workload.metadata.name + "-params"
    data:
      spooky_letter: #@ data.values.params["waciuma-com/quality"]
      who: #@ data.values.params["supply-chain-param"]
      what: #@ data.values.params["resource-param"]
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[7]s}
spec:
  ytt: |
    #@ load("@ytt:data", "data")
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: #@ data.values.workload.metadata.name + "-labels"
    data:
      extractedLabel: #@ data.values.labels['carto.run/workload-name']
`, first, second, image, config, bare, params, labels))
	k.apply(k.chainYAML(chain, `
  params:
  - {name: supply-chain-param, value: me}
  - {name: resource-param, value: not-me}
  - {name: waciuma-com/quality, default: alpha}`,
		k.step("source-provider-first", "ClusterSourceTemplate", first, "")+
			k.step("source-provider-second", "ClusterSourceTemplate", second, "")+
			k.step("built-image-provider", "ClusterImageTemplate", image, "sources: [{resource: source-provider-second, name: solo-source-provider}]")+
			k.step("config", "ClusterConfigTemplate", config, "images: [{resource: built-image-provider, name: solo-image-provider}]")+
			k.step("bare-template", "ClusterTemplate", bare, "configs: [{resource: config, name: solo-config-provider}]")+
			k.step("params", "ClusterTemplate", params, "params: [{name: resource-param, value: me}]")+
			k.step("labels", "ClusterTemplate", labels, "")))
	k.workload("app", chain, "  params: [{name: waciuma-com/quality, value: omicron}]\n")

	k.waitOwner("app", "Ready", "True", "")
	cases := map[string]map[string]any{
		"app-first":  {"player_initial_lives": "three", "player_loves": "gaming"},
		"app-second": {"player_initial_lives": "5", "player_loves": "knitting"},
		"app-image":  {"player_current_lives": "5", "some_other_info": "knitting"},
		"app-config": {"favorite_color": "knitting"},
		"app-bare":   {"best_name": "knitting"},
		"app-params": {"spooky_letter": "omicron", "who": "me", "what": "me"},
		"app-labels": {"extractedLabel": "app"},
	}
	for name, data := range cases {
		cm := k.waitObj(configMapGVR, name, nil)
		assert.Equal(t, data, cm.Object["data"], name)
		assert.Equal(t, "app", cm.GetOwnerReferences()[0].Name, name)
	}
	k.assertQuiet(k.wl("app"), k.cm("app-params"))
}

// A param the workload does not give fails the step with ytt's message,
// which names the template line.
func TestYttMissingParam(t *testing.T) {
	k := newKit(t)
	tmpl, chain := k.name("bad-params"), k.name("chain")
	k.apply(k.templateYAML("ClusterTemplate", tmpl, `
  ytt: |
    #@ load("@ytt:data", "data")

    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: example-config-ytt-params
    data:
      best_name: #@ data.values.params["waciuma-com/quality"]`))
	k.apply(k.chainYAML(chain, "", k.step("params", "ClusterTemplate", tmpl, "")))
	k.workload("app", chain, "")
	w := k.waitStep("app", "params", "ResourceSubmitted", "False", "TemplateStampFailure")
	parts := []string{"resource [params]", "ClusterTemplate/" + tmpl, "unable to apply ytt template: ytt: Error: \n- key \"waciuma-com/quality\" not in struct",
		`stdin.yml:8 |   best_name: #@ data.values.params["waciuma-com/quality"]`}
	k.assertCond(k.stepCond(w, "params", "ResourceSubmitted"), "False", "TemplateStampFailure", parts...)
	k.assertCond(ownerCondition(w, "Ready"), "False", "TemplateStampFailure", parts...)
	assert.Empty(t, k.objects(k.ns), "nothing stamped")
}

// A delivery's ytt template reads the deliverable's labels.
func TestYttLabelsInDeliveryContext(t *testing.T) {
	ns := newNamespace(t)
	tmpl, delivery := uniq(ns, "labels"), uniq(ns, "delivery")
	apply(t, ns, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[1]s}
spec:
  ytt: |
    #@ load("@ytt:data", "data")
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: #@ data.values.deliverable.metadata.name + "-labels"
    data:
      extractedLabel: #@ data.values.labels['carto.run/deliverable-name']
---
apiVersion: carto.run/v1alpha1
kind: ClusterDelivery
metadata: {name: %[2]s}
spec:
  selector: {app.example.com/delivery: %[2]s}
  resources:
  - name: config
    templateRef: {kind: ClusterTemplate, name: %[1]s}
`, tmpl, delivery))
	apply(t, ns, deliverableYAML("app", delivery))
	cm := waitFor(t, configMapGVR, ns, "app-labels", nil)
	assert.Equal(t, map[string]any{"extractedLabel": "app"}, cm.Object["data"])
}
