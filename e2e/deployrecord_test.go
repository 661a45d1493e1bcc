package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A deployment's input set x that completes while a newer set y is held is
// recorded before y goes in, also when the status write of the reconcile
// that applied x was lost (refused as decided on a stale copy, a kill -9
// or a failover between the apply and the status write): the robustness
// suite's default seed 3 (invariant 3a). The lost write is made
// deterministic: Kontinue is killed once x is on the object, and the
// Deliverable's status is put back as it was before x's apply, which is
// what a lost write leaves. Then y comes while Kontinue is down, Kontinue
// starts again and holds y, and x completes.
func TestFaultDeploymentRecordSurvivesLostStatusWrite(t *testing.T) {
	k := newFaultKit(t)
	ns := k.ns
	n := newDeliveryNames(ns)
	apply(t, ns, deliveryChain(n, ""))
	proc := k.start()
	apply(t, ns, deliverableYAML("app", n.delivery))
	setStatus(t, testGVR, ns, "app-source", map[string]any{"url": "https://a/1", "revision": "r1"})
	obj := waitFor(t, testGVR, ns, "app-deploy", fieldIs("r1", "spec", "revision"))
	setStatus(t, testGVR, ns, "app-deploy", readyCondition("True", obj.GetGeneration()))
	waitOwner(t, deliverableGVR, ns, "app", "Ready", "True", "")
	proc.kill()
	before := get(t, deliverableGVR, ns, "app").Object["status"]

	// x (r2) is applied; the status write after it is lost.
	proc = k.start()
	setStatus(t, testGVR, ns, "app-source", map[string]any{"url": "https://a/2", "revision": "r2"})
	obj = waitFor(t, testGVR, ns, "app-deploy", fieldIs("r2", "spec", "revision"))
	proc.kill()
	x := obj.GetAnnotations()["kontinue.dev/applied-digest"]
	require.NotEmpty(t, x)
	eventually(t, 10*time.Second, func() string {
		d := get(t, deliverableGVR, ns, "app")
		d.Object["status"] = before
		if _, err := env.dyn.Resource(deliverableGVR).Namespace(ns).UpdateStatus(context.Background(), d, metav1.UpdateOptions{}); err != nil {
			return err.Error()
		}
		return ""
	})

	// y (r3) comes while Kontinue is down; once it is back (stopped when
	// the test ends), y is held while x works.
	setStatus(t, testGVR, ns, "app-source", map[string]any{"url": "https://a/3", "revision": "r3"})
	k.start()
	waitStep(t, deliverableGVR, ns, "app", "deployer", "ResourceSubmitted", "Unknown", "InputsHeld")

	// x completes: its success is in the status before y is on the object.
	setStatus(t, testGVR, ns, "app-deploy", readyCondition("True", obj.GetGeneration()))
	waitFor(t, testGVR, ns, "app-deploy", fieldIs("r3", "spec", "revision"))
	d := get(t, deliverableGVR, ns, "app")
	s := stepStatus(d, "deployer")
	cur, _, _ := unstructured.NestedMap(s, "provenance", "current")
	require.Equal(t, x, s["inputDigest"], "the last good set once y is on the object: x (r2), not the one before it; status: %v", s)
	require.Equal(t, "r2", strings.TrimSpace(fmt.Sprint(nested(s, "outputValues", "revision"))), "x's outputs are its own inputs")
	require.Equal(t, "Succeeded", cur["outcome"], "provenance.current: %v", cur)
	require.Equal(t, obj.GetAnnotations()["kontinue.dev/input-set"], cur["digest"], "provenance.current: %v", cur)
	waitFor(t, configMapGVR, ns, "app-notify", fieldIs("r2", "data", "revision"))
}
