package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fourStepChain is source → image → config → template, wired by outputs.
// The source and image steps stamp Test objects whose status the test
// writes, playing a git poller and an image builder.
func fourStepChain(ns string) string {
	return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterSourceTemplate
metadata: {name: %[1]s}
spec:
  urlPath: .status.artifact.url
  revisionPath: .status.artifact.revision
  template:
    apiVersion: test.run/v1alpha1
    kind: Test
    metadata: {name: $(workload.metadata.name)$-source}
    spec:
      git: $(workload.spec.source.git)$
---
apiVersion: carto.run/v1alpha1
kind: ClusterImageTemplate
metadata: {name: %[2]s}
spec:
  params: [{name: registry, default: registry.example.com}]
  imagePath: .status.latestImage
  template:
    apiVersion: test.run/v1alpha1
    kind: Test
    metadata: {name: $(workload.metadata.name)$-image}
    spec:
      source: $(source.url)$@$(source.revision)$
      tag: $(params.registry)$/$(workload.metadata.name)$
---
apiVersion: carto.run/v1alpha1
kind: ClusterConfigTemplate
metadata: {name: %[3]s}
spec:
  configPath: .data
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-config}
    data:
      image: $(images.built.image)$
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[4]s}
spec:
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-app}
    data:
      config: "config $(config)$"
      replicas: $(params.replicas)$
---
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: %[5]s}
spec:
  selector: {app.example.com/chain: %[5]s}
  params: [{name: replicas, default: "1"}]
  resources:
  - name: source-provider
    templateRef: {kind: ClusterSourceTemplate, name: %[1]s}
  - name: image-builder
    templateRef: {kind: ClusterImageTemplate, name: %[2]s}
    sources: [{name: source, resource: source-provider}]
  - name: config-provider
    templateRef: {kind: ClusterConfigTemplate, name: %[3]s}
    images: [{name: built, resource: image-builder}]
  - name: app-deploy
    templateRef: {kind: ClusterTemplate, name: %[4]s}
    configs: [{name: config, resource: config-provider}]
`, uniq(ns, "source"), uniq(ns, "image"), uniq(ns, "config"), uniq(ns, "app"), uniq(ns, "chain"))
}

func workloadYAML(ns, name, chain, extra string) string {
	return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: Workload
metadata:
  name: %s
  labels: {app.example.com/chain: %s}
spec:
  source:
    git: {url: "https://git.example.com/app.git", ref: {branch: main}}
%s`, name, chain, extra)
}

func TestFourStepChainWiredByOutputs(t *testing.T) {
	ns := newNamespace(t)
	chain := uniq(ns, "chain")
	apply(t, ns, fourStepChain(ns))
	apply(t, ns, workloadYAML(ns, "app", chain, ""))

	// The source step is stamped; downstream steps wait for its outputs.
	w := waitOwner(t, workloadGVR, ns, "app", "ResourcesSubmitted", "Unknown", "MissingValueAtPath")
	src := get(t, testGVR, ns, "app-source")
	assert.Equal(t, "https://git.example.com/app.git", nested(src.Object, "spec", "git", "url"))
	assert.Equal(t, "Workload", src.GetOwnerReferences()[0].Kind)
	assert.True(t, *src.GetOwnerReferences()[0].Controller)
	l := src.GetLabels()
	assert.Equal(t, "app", l["carto.run/workload-name"])
	assert.Equal(t, ns, l["carto.run/workload-namespace"])
	assert.Equal(t, chain, l["carto.run/supply-chain-name"])
	assert.Equal(t, "source-provider", l["carto.run/resource-name"])
	assert.Equal(t, "ClusterSourceTemplate", l["carto.run/template-kind"])
	assert.Equal(t, uniq(ns, "source"), l["carto.run/cluster-template-name"])
	assert.Equal(t, "mutable", l["carto.run/template-lifecycle"])
	require.NotNil(t, stepStatus(w, "source-provider"))
	assert.Nil(t, stepStatus(w, "image-builder")["stampedRef"], "image step not stamped before its input exists")

	setStatus(t, testGVR, ns, "app-source", map[string]any{"artifact": map[string]any{"url": "https://artifacts/app.tgz", "revision": "abc123"}})
	waitFor(t, testGVR, ns, "app-image", fieldIs("https://artifacts/app.tgz@abc123", "spec", "source"))
	img := get(t, testGVR, ns, "app-image")
	assert.Equal(t, "registry.example.com/app", nested(img.Object, "spec", "tag"), "template param default")

	setStatus(t, testGVR, ns, "app-image", map[string]any{"latestImage": "registry.example.com/app@sha256:1111"})
	waitOwner(t, workloadGVR, ns, "app", "Ready", "True", "Ready")
	cfg := get(t, configMapGVR, ns, "app-config")
	assert.Equal(t, "registry.example.com/app@sha256:1111", nested(cfg.Object, "data", "image"))
	appCM := get(t, configMapGVR, ns, "app-app")
	assert.Equal(t, `config {"image":"registry.example.com/app@sha256:1111"}`, nested(appCM.Object, "data", "config"), "an object interpolated into a string is JSON")
	assert.Equal(t, "1", nested(appCM.Object, "data", "replicas"))

	// A new image flows through to the last step.
	setStatus(t, testGVR, ns, "app-image", map[string]any{"latestImage": "registry.example.com/app@sha256:2222"})
	eventually(t, 30*time.Second, func() string {
		cm, err := tryGet(configMapGVR, ns, "app-app")
		if err != nil {
			return err.Error()
		}
		if !strings.Contains(fmt.Sprint(nested(cm.Object, "data", "config")), "2222") {
			return fmt.Sprintf("app config = %v", nested(cm.Object, "data", "config"))
		}
		return ""
	})
}

// The status matches the Cartographer contract field by field.
func TestWorkloadStatusContract(t *testing.T) {
	ns := newNamespace(t)
	chain := uniq(ns, "chain")
	apply(t, ns, fourStepChain(ns))
	apply(t, ns, workloadYAML(ns, "app", chain, ""))
	waitOwner(t, workloadGVR, ns, "app", "ResourcesSubmitted", "Unknown", "MissingValueAtPath")
	setStatus(t, testGVR, ns, "app-source", map[string]any{"artifact": map[string]any{"url": "u", "revision": "r"}})
	waitFor(t, testGVR, ns, "app-image", nil)
	setStatus(t, testGVR, ns, "app-image", map[string]any{"latestImage": "img"})
	w := waitOwner(t, workloadGVR, ns, "app", "Ready", "True", "Ready")

	st := w.Object["status"].(map[string]any)
	assert.EqualValues(t, w.GetGeneration(), st["observedGeneration"])
	assert.Equal(t, map[string]any{"kind": "ClusterSupplyChain", "name": chain}, st["supplyChainRef"])
	var types []string
	for _, c := range st["conditions"].([]any) {
		c := c.(map[string]any)
		types = append(types, c["type"].(string))
		assert.Equal(t, "True", c["status"], "condition %s", c["type"])
		assert.NotEmpty(t, c["lastTransitionTime"])
	}
	assert.Equal(t, []string{"SupplyChainReady", "ResourcesSubmitted", "ResourcesHealthy", "Ready"}, types)
	assert.Equal(t, "Ready", ownerCondition(w, "SupplyChainReady")["reason"])
	assert.Equal(t, "ResourceSubmissionComplete", ownerCondition(w, "ResourcesSubmitted")["reason"])
	assert.Equal(t, "HealthyConditionRule", ownerCondition(w, "ResourcesHealthy")["reason"])

	res := st["resources"].([]any)
	require.Len(t, res, 4)
	src := res[0].(map[string]any)
	assert.Equal(t, "source-provider", src["name"])
	assert.Equal(t, map[string]any{"apiVersion": "test.run/v1alpha1", "kind": "Test", "namespace": ns, "name": "app-source", "resource": "tests.test.run"}, src["stampedRef"])
	assert.Equal(t, map[string]any{"apiVersion": "carto.run/v1alpha1", "kind": "ClusterSourceTemplate", "name": uniq(ns, "source")}, src["templateRef"])
	outs := src["outputs"].([]any)
	require.Len(t, outs, 2)
	o := outs[0].(map[string]any) // Cartographer's order: url, revision
	assert.Equal(t, "url", o["name"])
	assert.Equal(t, "revision", outs[1].(map[string]any)["name"])
	assert.Equal(t, "u\n", o["preview"])
	assert.Equal(t, "sha256:"+sha256hex("u\n"), o["digest"])
	assert.NotEmpty(t, o["lastTransitionTime"])
	stepConds := map[string]string{}
	for _, c := range src["conditions"].([]any) {
		c := c.(map[string]any)
		stepConds[c["type"].(string)] = c["status"].(string) + "/" + c["reason"].(string)
	}
	assert.Equal(t, map[string]string{"ResourceSubmitted": "True/ResourceSubmissionComplete", "Healthy": "True/OutputsAvailable", "Ready": "True/Ready"}, stepConds)
	img := res[1].(map[string]any)
	assert.Equal(t, []any{map[string]any{"name": "source-provider"}}, img["inputs"])
	cm := res[2].(map[string]any)
	assert.Equal(t, "configmaps", nested(cm, "stampedRef", "resource"))
	last := res[3].(map[string]any)
	assert.Nil(t, last["outputs"], "a ClusterTemplate has no outputs")
	assert.Equal(t, "True", condition(last, "Healthy")["status"])
	assert.Equal(t, "AlwaysHealthy", condition(last, "Healthy")["reason"])
}

// A reconcile of an unchanged workload writes nothing: every stamped
// object's resourceVersion and the workload's own stay the same.
func TestNoOpReconcileWritesNothing(t *testing.T) {
	ns := newNamespace(t)
	chain := uniq(ns, "chain")
	apply(t, ns, fourStepChain(ns))
	apply(t, ns, workloadYAML(ns, "app", chain, ""))
	waitOwner(t, workloadGVR, ns, "app", "ResourcesSubmitted", "Unknown", "MissingValueAtPath")
	setStatus(t, testGVR, ns, "app-source", map[string]any{"artifact": map[string]any{"url": "u", "revision": "r"}})
	waitFor(t, testGVR, ns, "app-image", nil)
	setStatus(t, testGVR, ns, "app-image", map[string]any{"latestImage": "img"})
	waitOwner(t, workloadGVR, ns, "app", "Ready", "True", "Ready")
	time.Sleep(2 * time.Second) // let every event settle
	rvs := func() map[string]string {
		return map[string]string{
			"workload": get(t, workloadGVR, ns, "app").GetResourceVersion(),
			"source":   get(t, testGVR, ns, "app-source").GetResourceVersion(),
			"image":    get(t, testGVR, ns, "app-image").GetResourceVersion(),
			"config":   get(t, configMapGVR, ns, "app-config").GetResourceVersion(),
			"app":      get(t, configMapGVR, ns, "app-app").GetResourceVersion(),
		}
	}
	before := rvs()
	// Force reconciles: an annotation change enqueues the workload.
	for i := 0; i < 3; i++ {
		w := get(t, workloadGVR, ns, "app")
		ann := w.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann["poke"] = fmt.Sprint(i)
		w.SetAnnotations(ann)
		_, err := env.dyn.Resource(workloadGVR).Namespace(ns).Update(context.Background(), w, metav1.UpdateOptions{})
		require.NoError(t, err)
		time.Sleep(700 * time.Millisecond)
	}
	after := rvs()
	delete(before, "workload") // our own annotation pokes changed it
	delete(after, "workload")
	assert.Equal(t, before, after, "no stamped object was written")
	// And the workload status was not rewritten by the reconciles.
	w := get(t, workloadGVR, ns, "app")
	rv := w.GetResourceVersion()
	time.Sleep(1500 * time.Millisecond)
	assert.Equal(t, rv, get(t, workloadGVR, ns, "app").GetResourceVersion(), "no status write without a change")
}

// A Secret written with stringData (which the API server stores in data
// and never shows back) is up to date once stamped: a reconcile that
// changes another step leaves it alone, with no apply and no hand-over of
// its fields. A change of its stringData still reaches data, and a key
// the template drops is removed.
func TestSecretWithStringDataIsNotWrittenAgain(t *testing.T) {
	ns := newNamespace(t)
	chain, secret, cfg := uniq(ns, "chain"), uniq(ns, "secret"), uniq(ns, "cfg")
	secretTemplate := func(stringData string) string {
		return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %s}
spec:
  template:
    apiVersion: v1
    kind: Secret
    metadata: {name: $(workload.metadata.name)$-secret}
    stringData: %s
`, secret, stringData)
	}
	apply(t, ns, secretTemplate(`{token: abc, user: $(workload.metadata.name)$}`)+fmt.Sprintf(`
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[2]s}
spec:
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-cfg}
    data: {color: $(params.color)$}
---
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: %[1]s}
spec:
  selector: {app.example.com/chain: %[1]s}
  resources:
  - name: secret
    templateRef: {kind: ClusterTemplate, name: %[3]s}
  - name: cfg
    templateRef: {kind: ClusterTemplate, name: %[2]s}
`, chain, cfg, secret))
	workload := func(color string) string {
		return workloadYAML(ns, "app", chain, fmt.Sprintf("  params: [{name: color, value: %s}]\n", color))
	}
	apply(t, ns, workload("blue"))
	waitOwner(t, workloadGVR, ns, "app", "Ready", "True", "Ready")
	sec := get(t, secretGVR, ns, "app-secret")
	assert.Equal(t, map[string]any{"token": "YWJj", "user": "YXBw"}, sec.Object["data"])

	// The reconcile that applies the new color runs through the secret
	// step first.
	apply(t, ns, workload("green"))
	waitFor(t, configMapGVR, ns, "app-cfg", fieldIs("green", "data", "color"))
	waitOwner(t, workloadGVR, ns, "app", "Ready", "True", "Ready")
	after := get(t, secretGVR, ns, "app-secret")
	assert.Equal(t, sec.GetResourceVersion(), after.GetResourceVersion(), "an unchanged Secret is not written again")
	var managers []string
	for _, m := range after.GetManagedFields() {
		managers = append(managers, m.Manager+"/"+string(m.Operation))
	}
	assert.Equal(t, []string{"kontinue/Update"}, managers, "only Kontinue's create wrote it")

	// A change of the Secret reaches it; a dropped key goes.
	apply(t, ns, secretTemplate(`{token: xyz}`))
	sec = waitFor(t, secretGVR, ns, "app-secret", fieldIs("eHl6", "data", "token"))
	assert.Equal(t, map[string]any{"token": "eHl6"}, sec.Object["data"])
	waitOwner(t, workloadGVR, ns, "app", "Ready", "True", "Ready")
	rv := sec.GetResourceVersion()
	time.Sleep(1500 * time.Millisecond) // proving that nothing writes it again
	assert.Equal(t, rv, get(t, secretGVR, ns, "app-secret").GetResourceVersion())
}

// Deleting the workload cascades to what it stamped (garbage collector).
func TestDeletingWorkloadRemovesStampedObjects(t *testing.T) {
	ns := newNamespace(t)
	chain := uniq(ns, "chain")
	apply(t, ns, fourStepChain(ns))
	apply(t, ns, workloadYAML(ns, "app", chain, ""))
	waitFor(t, testGVR, ns, "app-source", nil)
	require.NoError(t, env.dyn.Resource(workloadGVR).Namespace(ns).Delete(context.Background(), "app", metav1.DeleteOptions{}))
	// Test is a CRD made before the garbage collector started: collected at once.
	eventually(t, 60*time.Second, func() string {
		if !gone(testGVR, ns, "app-source") {
			return "app-source still exists"
		}
		return ""
	})
}

// A stamped object is created (not applied) the first time; its fields are
// handed to Kontinue's apply entry before its first change, so that a field
// the template no longer sets is removed, as it is for an object applied
// from the start.
func TestFieldDroppedFromTemplateIsRemoved(t *testing.T) {
	ns := newNamespace(t)
	chain, tmpl := uniq(ns, "chain"), uniq(ns, "tmpl")
	template := func(data string) string {
		return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %s}
spec:
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-app}
    data: %s
`, tmpl, data)
	}
	apply(t, ns, template(`{keep: one, extra: gone-soon}`)+fmt.Sprintf(`
---
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: %[1]s}
spec:
  selector: {app.example.com/chain: %[1]s}
  resources:
  - name: app
    templateRef: {kind: ClusterTemplate, name: %[2]s}
`, chain, tmpl))
	apply(t, ns, workloadYAML(ns, "app", chain, ""))
	waitOwner(t, workloadGVR, ns, "app", "Ready", "True", "Ready")

	managers := func(u map[string]any) []string {
		var out []string
		for _, e := range nested(u, "metadata", "managedFields").([]any) {
			m := e.(map[string]any)
			out = append(out, fmt.Sprintf("%s/%s", m["manager"], m["operation"]))
		}
		return out
	}
	cm := get(t, configMapGVR, ns, "app-app")
	assert.Equal(t, []string{"kontinue/Update"}, managers(cm.Object), "the first write is a create")

	// A change that drops nothing is applied as it is: no hand-over.
	apply(t, ns, template(`{keep: two, extra: gone-soon}`))
	cm = waitFor(t, configMapGVR, ns, "app-app", fieldIs("two", "data", "keep"))
	assert.ElementsMatch(t, []string{"kontinue/Apply", "kontinue/Update"}, managers(cm.Object))

	apply(t, ns, template(`{keep: three}`))
	cm = waitFor(t, configMapGVR, ns, "app-app", fieldIs("three", "data", "keep"))
	assert.Equal(t, map[string]any{"keep": "three"}, cm.Object["data"], "the field the template dropped is gone")
	assert.Equal(t, []string{"kontinue/Apply"}, managers(cm.Object), "the create's fields were handed to the apply")
}
