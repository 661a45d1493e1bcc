package e2e

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestChainDeletedAndRecreated (Cartographer #54, #56, #58, #59): a chain
// deleted under its Workloads leaves every stamped object where it is (the
// owners say SupplyChainNotFound and keep their status.resources); the
// chain re-created under the same name takes the same objects back: no
// object lost, none duplicated, no new run of an immutable step. A
// template in use deleted and re-created: the same.
func TestChainDeletedAndRecreated(t *testing.T) {
	k := newKit(t)
	chain, cfg, build := k.name("chain"), k.name("cfg"), k.name("build")
	k.apply(k.cmTemplate(cfg, "cfg", `{greeting: hello}`))
	k.apply(k.templateYAML("ClusterImageTemplate", build, `
  lifecycle: immutable
  alwaysSuccessful: true
  imagePath: data.image
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {generateName: $(workload.metadata.name)$-build-}
    data: {image: $(workload.metadata.name)$-img}`))
	chainYAML := k.chainYAML(chain, "", k.step("cfg", "ClusterTemplate", cfg, "")+k.step("build", "ClusterImageTemplate", build, ""))
	k.apply(chainYAML)
	for _, w := range []string{"a", "b"} {
		k.workload(w, chain, "")
	}
	for _, w := range []string{"a", "b"} {
		k.waitOwner(w, "Ready", "True", "Ready")
	}
	uids := func() map[string]string {
		l, err := env.dyn.Resource(configMapGVR).Namespace(k.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "kontinue.dev/stamped=true"})
		require.NoError(t, err)
		out := map[string]string{}
		for _, u := range l.Items {
			out[u.GetName()] = string(u.GetUID())
		}
		return out
	}
	before := uids()
	require.Len(t, before, 4, "a ConfigMap and a run per workload: %v", before)
	statusBefore := nested(get(t, workloadGVR, k.ns, "a").Object, "status", "resources")

	// Deleted: the owners report it, keep their objects and their record of them.
	require.NoError(t, env.dyn.Resource(chainGVR).Delete(context.Background(), chain, metav1.DeleteOptions{}))
	for _, w := range []string{"a", "b"} {
		u := k.waitOwner(w, "SupplyChainReady", "False", "SupplyChainNotFound")
		k.assertCond(ownerCondition(u, "Ready"), "False", "SupplyChainNotFound")
	}
	k.assertQuiet(k.wl("a"), k.wl("b"))
	assert.Equal(t, before, uids(), "nothing deleted, nothing created")
	assert.Equal(t, statusBefore, nested(get(t, workloadGVR, k.ns, "a").Object, "status", "resources"), "the owner keeps its record of what it stamped")

	// Re-created: the same objects, taken back in place.
	k.apply(chainYAML)
	for _, w := range []string{"a", "b"} {
		k.waitOwner(w, "Ready", "True", "Ready")
	}
	k.assertQuiet(k.wl("a"), k.wl("b"))
	assert.Equal(t, before, uids(), "no object lost or duplicated, no new run")
	u := get(t, workloadGVR, k.ns, "a")
	assert.Equal(t, nested(statusBefore.([]any)[1].(map[string]any), "stampedRef", "name"), nested(stepStatus(u, "build"), "stampedRef", "name"))
	cm := get(t, configMapGVR, k.ns, "a-cfg")
	assert.Equal(t, "hello", nested(cm.Object, "data", "greeting"))

	// A template in use deleted and re-created: the same.
	require.NoError(t, env.dyn.Resource(k.tmplGVR("clusterimagetemplates")).Delete(context.Background(), build, metav1.DeleteOptions{}))
	for _, w := range []string{"a", "b"} {
		k.waitOwner(w, "SupplyChainReady", "False", "TemplatesNotFound")
	}
	k.assertQuiet(k.wl("a"), k.wl("b"))
	assert.Equal(t, before, uids(), "nothing deleted, nothing created")
	k.apply(k.templateYAML("ClusterImageTemplate", build, `
  lifecycle: immutable
  alwaysSuccessful: true
  imagePath: data.image
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {generateName: $(workload.metadata.name)$-build-}
    data: {image: $(workload.metadata.name)$-img}`))
	for _, w := range []string{"a", "b"} {
		k.waitOwner(w, "Ready", "True", "Ready")
	}
	k.assertQuiet(k.wl("a"), k.wl("b"))
	assert.Equal(t, before, uids(), "no object lost or duplicated, no new run")
}
