package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A template that stamps an object someone else made (a name from a
// param): Kontinue never writes to it, says so on the step, and the object
// survives the owner's deletion. An annotation on the object, which only
// someone who may write it can set, hands it over explicitly.
func TestNeverAdoptsAnObjectItDidNotStamp(t *testing.T) {
	k := newKit(t)
	tmpl, chain := k.name("named"), k.name("named-chain")
	k.apply(k.templateYAML("ClusterTemplate", tmpl, `
  params: [{name: cm, default: x}]
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(params.cm)$}
    data: {owner: $(workload.metadata.name)$}`))
	k.apply(k.chainYAML(chain, "", k.step("config", "ClusterTemplate", tmpl, "")))
	k.apply(`
apiVersion: v1
kind: ConfigMap
metadata: {name: app-settings}
data: {mine: "yes"}
`)
	before := get(t, configMapGVR, k.ns, "app-settings")

	k.workload("app", chain, "\n  params: [{name: cm, value: app-settings}]")
	w := k.waitStep("app", "config", "ResourceSubmitted", "False", "StampedObjectNotOwned")
	k.assertCond(k.stepCond(w, "config", "ResourceSubmitted"), "False", "StampedObjectNotOwned",
		"ConfigMap ["+k.ns+"/app-settings]", "was not stamped by this Workload", "kontinue.dev/adopt-by=Workload/app")
	assert.Equal(t, "False", ownerCondition(w, "Ready")["status"])
	assert.Nil(t, stepStatus(w, "config")["stampedRef"], "the person's object is not recorded as stamped")
	k.assertQuiet(k.cm("app-settings"), k.wl("app"))
	after := get(t, configMapGVR, k.ns, "app-settings")
	assert.Equal(t, before.GetResourceVersion(), after.GetResourceVersion(), "not written")
	assert.Empty(t, after.GetOwnerReferences())

	// The owner goes: the person's object stays, exactly as it was.
	require.NoError(t, env.dyn.Resource(workloadGVR).Namespace(k.ns).Delete(context.Background(), "app", metav1.DeleteOptions{}))
	waitGone(t, workloadGVR, k.ns, "app")
	time.Sleep(2 * time.Second) // the garbage collector acts within ~0.2 s on ConfigMaps
	assert.Equal(t, before.GetResourceVersion(), get(t, configMapGVR, k.ns, "app-settings").GetResourceVersion())

	// Explicit adoption: the object's writer hands it to a new owner.
	k.apply(`
apiVersion: v1
kind: ConfigMap
metadata: {name: app-settings, annotations: {kontinue.dev/adopt-by: Workload/adopter}}
data: {mine: "yes"}
`)
	k.workload("adopter", chain, "\n  params: [{name: cm, value: app-settings}]")
	k.waitOwner("adopter", "Ready", "True", "Ready")
	k.waitObj(configMapGVR, "app-settings", k.dataIs("owner", "adopter"))
}

// Two owners whose templates stamp the same object: the first keeps it, the
// second reports a conflict naming the first, nobody flips it back and
// forth, and deleting the second never deletes the first one's object.
func TestTwoOwnersOneName(t *testing.T) {
	k := newKit(t)
	tmpl, chain := k.name("shared"), k.name("shared-chain")
	k.apply(k.templateYAML("ClusterTemplate", tmpl, `
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: shared}
    data: {owner: $(workload.metadata.name)$}`))
	k.apply(k.chainYAML(chain, "", k.step("config", "ClusterTemplate", tmpl, "")))
	k.workload("first", chain, "")
	k.waitOwner("first", "Ready", "True", "Ready")
	k.waitObj(configMapGVR, "shared", k.dataIs("owner", "first"))

	k.workload("second", chain, "")
	w := k.waitStep("second", "config", "ResourceSubmitted", "False", "StampedObjectNotOwned")
	k.assertCond(k.stepCond(w, "config", "ResourceSubmitted"), "False", "StampedObjectNotOwned",
		"ConfigMap ["+k.ns+"/shared]", "controlled by Workload [first]")
	k.assertQuiet(k.cm("shared"), k.wl("first"), k.wl("second"))
	assert.Equal(t, "first", nested(get(t, configMapGVR, k.ns, "shared").Object, "data", "owner"))

	require.NoError(t, env.dyn.Resource(workloadGVR).Namespace(k.ns).Delete(context.Background(), "second", metav1.DeleteOptions{}))
	waitGone(t, workloadGVR, k.ns, "second")
	time.Sleep(2 * time.Second)
	assert.Equal(t, "first", nested(get(t, configMapGVR, k.ns, "shared").Object, "data", "owner"), "the first owner's object survives the second's deletion")

	require.NoError(t, env.dyn.Resource(workloadGVR).Namespace(k.ns).Delete(context.Background(), "first", metav1.DeleteOptions{}))
	eventually(t, 60*time.Second, func() string {
		if u, err := tryGet(configMapGVR, k.ns, "shared"); err == nil {
			return fmt.Sprintf("shared still exists, owners %v", u.GetOwnerReferences())
		}
		return ""
	})
}
