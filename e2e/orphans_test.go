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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// orphanSteps is a chain's steps, each stamping ConfigMap app-<obj> through
// one template; obj is a step param.
func (k *kit) orphanSteps(tmpl string, steps ...[2]string) []any {
	var out []any
	for _, s := range steps {
		out = append(out, map[string]any{
			"name":        s[0],
			"templateRef": map[string]any{"kind": "ClusterTemplate", "name": tmpl},
			"params":      []any{map[string]any{"name": "obj", "value": s[1]}},
		})
	}
	return out
}

// When a step is removed, renamed onto another object, or its template now
// stamps a differently named object, the old object is deleted (and an
// event says so); a renamed step that still stamps the same object keeps
// it; nothing else is touched.
func TestOrphansAreRemoved(t *testing.T) {
	k := newKit(t)
	tmpl, chain := k.name("orphan"), k.name("orphan-chain")
	k.apply(k.templateYAML("ClusterTemplate", tmpl, `
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-$(params.obj)$}
    data: {obj: $(params.obj)$}`))
	k.apply(k.chainYAML(chain, "",
		k.step("one", "ClusterTemplate", tmpl, "params: [{name: obj, value: one}]")+
			k.step("two", "ClusterTemplate", tmpl, "params: [{name: obj, value: two}]")+
			k.step("three", "ClusterTemplate", tmpl, "params: [{name: obj, value: three}]")))
	k.workload("app", chain, "")
	k.waitOwner("app", "Ready", "True", "Ready")
	for _, o := range []string{"one", "two", "three"} {
		k.waitObj(configMapGVR, "app-"+o, nil)
	}
	k.waitEvent("app", "StampedObjectApplied", "ConfigMap", "app-three", "step [three]")

	// A step removed: its object goes, the others are not written.
	kept := k.rvs(k.cm("app-one"), k.cm("app-two"))
	k.setSpec(chainGVR, chain, k.orphanSteps(tmpl, [2]string{"one", "one"}, [2]string{"two", "two"}), "resources")
	k.waitAbsent(configMapGVR, "app-three")
	k.waitEvent("app", "StampedObjectRemoved", "ConfigMap", "app-three", "step [three]")
	// The object goes before the status is written: wait for the status.
	w := k.waitObjStatus("app", func(u *unstructured.Unstructured) string {
		if stepStatus(u, "three") != nil {
			return "step three still in the status"
		}
		return ""
	})
	k.assertCond(ownerCondition(w, "Ready"), "True", "Ready")
	assert.Equal(t, kept, k.rvs(k.cm("app-one"), k.cm("app-two")))

	// Step "two" renamed "deux", same object: kept (same UID), relabelled.
	uid := get(t, configMapGVR, k.ns, "app-two").GetUID()
	k.setSpec(chainGVR, chain, k.orphanSteps(tmpl, [2]string{"one", "one"}, [2]string{"deux", "two"}), "resources")
	k.waitObj(configMapGVR, "app-two", func(u *unstructured.Unstructured) string {
		if l := u.GetLabels()["carto.run/resource-name"]; l != "deux" {
			return "resource-name label is " + l
		}
		return ""
	})
	w = k.waitStep("app", "deux", "Ready", "True", "Ready")
	assert.Equal(t, "app-two", nested(stepStatus(w, "deux"), "stampedRef", "name"))
	assert.Nil(t, stepStatus(w, "two"))
	assert.Equal(t, uid, get(t, configMapGVR, k.ns, "app-two").GetUID(), "not deleted and recreated")

	// Step "one" renamed "uno" onto another object: the old one goes.
	k.setSpec(chainGVR, chain, k.orphanSteps(tmpl, [2]string{"uno", "uno"}, [2]string{"deux", "two"}), "resources")
	k.waitObj(configMapGVR, "app-uno", k.dataIs("obj", "uno"))
	k.waitAbsent(configMapGVR, "app-one")
	k.waitEvent("app", "StampedObjectRemoved", "app-one", "step [one]")

	// The template now stamps differently named objects: both old ones go.
	k.setSpec(k.tmplGVR("clustertemplates"), tmpl, "$(workload.metadata.name)$-v2-$(params.obj)$", "template", "metadata", "name")
	k.waitObj(configMapGVR, "app-v2-uno", nil)
	k.waitObj(configMapGVR, "app-v2-two", nil)
	k.waitAbsent(configMapGVR, "app-uno")
	k.waitAbsent(configMapGVR, "app-two")
	w = k.waitObjStatus("app", func(w *unstructured.Unstructured) string {
		if got := nested(stepStatus(w, "deux"), "stampedRef", "name"); got != "app-v2-two" {
			return fmt.Sprintf("step deux stamped %v", got)
		}
		return ""
	})
	k.assertCond(ownerCondition(w, "Ready"), "True", "Ready")
	assert.Equal(t, []string{"configmaps/app-v2-two", "configmaps/app-v2-uno"}, k.names(k.objects(k.ns)), "nothing else left or made")
}

// Kontinue deletes an object it no longer stamps only while the object
// still carries this workload's labels and its controller reference. The
// test records in the workload's status three objects a since-removed step
// once stamped (the state after, say, a restart): one still labelled for
// and controlled by the workload (deleted), one whose owner labels were
// changed by hand (kept), one without labels (kept). An object with the
// labels but no controller reference is TestForeignObjectWithOurLabels's.
func TestOrphanWithChangedOwnerLabelsIsKept(t *testing.T) {
	k := newKit(t)
	tmpl, chain := k.name("keep"), k.name("keep-chain")
	k.apply(k.cmTemplate(tmpl, "app", `{greeting: hello}`))
	k.apply(k.chainYAML(chain, "", k.step("deploy", "ClusterTemplate", tmpl, "")))
	k.workload("app", chain, "")
	k.waitOwner("app", "Ready", "True", "Ready")

	labels := func(owner string) string {
		return fmt.Sprintf(`{kontinue.dev/stamped: "true", carto.run/workload-name: %s, carto.run/workload-namespace: %s, carto.run/resource-name: old}`, owner, k.ns)
	}
	// The status first: the objects' events must find them recorded.
	w := get(t, workloadGVR, k.ns, "app")
	res, _, _ := unstructured.NestedSlice(w.Object, "status", "resources")
	for _, n := range []string{"mine", "relabelled", "unlabelled"} {
		res = append(res, map[string]any{"name": "old-" + n, "stampedRef": map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "namespace": k.ns, "name": n, "resource": "configmaps"}})
	}
	require.NoError(t, unstructured.SetNestedSlice(w.Object, res, "status", "resources"))
	_, err := env.dyn.Resource(workloadGVR).Namespace(k.ns).UpdateStatus(context.Background(), w, metav1.UpdateOptions{})
	require.NoError(t, err)
	uid := get(t, workloadGVR, k.ns, "app").GetUID()
	k.apply(`
apiVersion: v1
kind: ConfigMap
metadata:
  name: mine
  labels: ` + labels("app") + `
  ownerReferences: [{apiVersion: carto.run/v1alpha1, kind: Workload, name: app, uid: ` + string(uid) + `, controller: true}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: relabelled, labels: ` + labels("someone-else") + `}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: unlabelled}
`)
	keep := k.rvs(k.cm("relabelled"), k.cm("unlabelled"))
	k.poke("app") // a status write alone does not make Kontinue reconcile

	k.waitAbsent(configMapGVR, "mine")
	k.waitEvent("app", "StampedObjectRemoved", "mine", "step [old-mine]")
	k.waitOwner("app", "Ready", "True", "Ready")
	k.assertQuiet(k.wl("app"))
	w = get(t, workloadGVR, k.ns, "app")
	for _, n := range []string{"old-mine", "old-relabelled", "old-unlabelled"} {
		assert.Nil(t, stepStatus(w, n), "%s dropped from the status", n)
	}
	assert.Equal(t, keep, k.rvs(k.cm("relabelled"), k.cm("unlabelled")), "objects that are not the workload's are never touched")
	assert.Equal(t, "hello", nested(get(t, configMapGVR, k.ns, "app-app").Object, "data", "greeting"))
}

// A hand edit of a stamped object's owner labels is undone: the object is
// still stamped by its step, so Kontinue applies its labels again.
func TestHandEditedOwnerLabelsAreRestored(t *testing.T) {
	k := newKit(t)
	tmpl, chain := k.name("relabel"), k.name("relabel-chain")
	k.apply(k.cmTemplate(tmpl, "app", `{greeting: hello}`))
	k.apply(k.chainYAML(chain, "", k.step("deploy", "ClusterTemplate", tmpl, "")))
	k.workload("app", chain, "")
	k.waitOwner("app", "Ready", "True", "Ready")
	k.update(configMapGVR, k.ns, "app-app", func(u *unstructured.Unstructured) {
		l := u.GetLabels()
		l["carto.run/workload-name"] = "someone-else"
		u.SetLabels(l)
	})
	k.waitObj(configMapGVR, "app-app", func(u *unstructured.Unstructured) string {
		if got := u.GetLabels()["carto.run/workload-name"]; got != "app" {
			return "workload-name label is " + got
		}
		return ""
	})
}

// The four events of the contract are recorded on the workload: apply,
// output change, health change and removal.
func TestWorkloadEvents(t *testing.T) {
	k := newKit(t)
	src, app, chain := k.name("ev-source"), k.name("ev-app"), k.name("ev-chain")
	k.apply(k.templateYAML("ClusterSourceTemplate", src, `
  urlPath: .status.url
  revisionPath: .status.revision
  template:
    apiVersion: test.run/v1alpha1
    kind: Test
    metadata: {name: $(workload.metadata.name)$-source}
    spec: {git: $(workload.spec.source.git.url)$}`))
	k.apply(k.cmTemplate(app, "app", `{revision: $(source.revision)$}`))
	k.apply(k.chainYAML(chain, "", k.step("source", "ClusterSourceTemplate", src, "")+
		k.step("deploy", "ClusterTemplate", app, "sources: [{name: source, resource: source}]")))
	k.workload("app", chain, "")

	k.waitEvent("app", "StampedObjectApplied", "Test", k.ns+"/app-source", "step [source]")
	k.waitStep("app", "source", "Healthy", "Unknown", "OutputNotAvailable")
	setStatus(t, testGVR, k.ns, "app-source", map[string]any{"url": "https://a/app.tgz", "revision": "r1"})
	k.waitObj(configMapGVR, "app-app", k.dataIs("revision", "r1"))
	k.waitEvent("app", "ResourceHealthyStatusChanged", "step [source]", "True")
	k.waitEvent("app", "ResourceOutputChanged", "step [source]", "revision", "url")
	k.waitEvent("app", "StampedObjectApplied", "ConfigMap", k.ns+"/app-app", "step [deploy]")

	setStatus(t, testGVR, k.ns, "app-source", map[string]any{"url": "https://a/app.tgz", "revision": "r2"})
	k.waitObj(configMapGVR, "app-app", k.dataIs("revision", "r2"))
	eventually(t, 30*time.Second, func() string {
		n := 0
		for _, e := range k.events("app") {
			if strings.HasPrefix(e, "ResourceOutputChanged: ") && strings.Contains(e, "step [source]") {
				n++
			}
		}
		if n < 2 {
			return fmt.Sprintf("want an output event per new output set, got %d: %q", n, k.events("app"))
		}
		return ""
	})

	k.setSpec(chainGVR, chain, []any{map[string]any{"name": "source",
		"templateRef": map[string]any{"kind": "ClusterSourceTemplate", "name": src}}}, "resources")
	k.waitAbsent(configMapGVR, "app-app")
	k.waitEvent("app", "StampedObjectRemoved", "ConfigMap", k.ns+"/app-app", "step [deploy]")
}
