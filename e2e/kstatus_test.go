package e2e

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"kontinue.dev/kontinue/reconciler"
)

// With --kstatus-conditions, kstatus's own Compute (what Flux, Argo CD and
// kubectl-style waits use) tells a failing Workload (Failed), a working one
// (InProgress) and a healthy one (Current) apart. Without them, kstatus reads
// a failing Workload's Ready=False as InProgress, never Failed: a wait on it
// hangs until its timeout. That is why the option exists.
func TestKstatusSeesFailures(t *testing.T) {
	if env.external {
		t.Skip("Kontinue runs outside the test process: cannot restart it with other flags")
	}
	k := newKit(t)
	good, bad, waiting := k.name("good"), k.name("bad"), k.name("waiting")
	k.apply(k.cmTemplate(good, "app", `{greeting: hello}`))
	k.apply(k.templateYAML("ClusterTemplate", bad, "\n  template: {apiVersion: v1, kind: ConfigMap, metadata: {name: x}, data: {a: \"$(workload.spec.nothing)$\"}}"))
	k.apply(k.templateYAML("ClusterSourceTemplate", waiting, `
  urlPath: .status.url
  revisionPath: .status.revision
  template: {apiVersion: test.run/v1alpha1, kind: Test, metadata: {name: $(workload.metadata.name)$-src}, spec: {value: {}}}`))
	for _, c := range []struct{ chain, kind, tmpl string }{
		{k.name("good-chain"), "ClusterTemplate", good},
		{k.name("bad-chain"), "ClusterTemplate", bad},
		{k.name("waiting-chain"), "ClusterSourceTemplate", waiting},
	} {
		k.apply(k.chainYAML(c.chain, "", k.step("s", c.kind, c.tmpl, "")))
	}

	// Cartographer's four conditions only, by default: kstatus is fooled.
	k.workload("before", k.name("bad-chain"), "")
	w := k.waitOwner("before", "Ready", "False", "TemplateStampFailure")
	assert.Len(t, nested(w.Object, "status", "conditions"), 4)
	assert.Equal(t, status.InProgressStatus, compute(t, w), "without the option kstatus never calls a failing Workload Failed")

	env.kontinue.stop()
	env.kontinue = startKontinueWith(env.cfg, func(o *reconciler.Options) { o.KstatusConditions = true })
	t.Cleanup(func() {
		env.kontinue.stop()
		env.kontinue = startKontinue(env.cfg)
	})

	k.workload("good", k.name("good-chain"), "")
	k.workload("bad", k.name("bad-chain"), "")
	k.workload("waiting", k.name("waiting-chain"), "")
	w = k.waitOwner("good", "Ready", "True", "Ready")
	assert.Equal(t, status.CurrentStatus, compute(t, w))
	assert.Nil(t, ownerCondition(w, "Stalled"))
	assert.Nil(t, ownerCondition(w, "Reconciling"))

	w = k.waitOwner("bad", "Stalled", "True", "TemplateStampFailure")
	assert.Equal(t, status.FailedStatus, compute(t, w))
	assert.Equal(t, ownerCondition(w, "Ready")["message"], ownerCondition(w, "Stalled")["message"])
	// The failure is also a Warning event with the step's reason.
	k.waitEvent("bad", "TemplateStampFailure", "step [s]", "$(workload.spec.nothing)$")
	assert.Equal(t, []string{"Warning"}, eventTypes(t, k.ns, "bad", "TemplateStampFailure"))

	w = k.waitOwner("waiting", "Reconciling", "True", "MissingValueAtPath")
	assert.Equal(t, status.InProgressStatus, compute(t, w))

	// The source reports its outputs: the workload goes Current, and the
	// kstatus conditions go away.
	setStatus(t, testGVR, k.ns, "waiting-src", map[string]any{"url": "https://src", "revision": "r1"})
	w = k.waitOwner("waiting", "Ready", "True", "Ready")
	assert.Nil(t, ownerCondition(w, "Reconciling"))
	assert.Equal(t, status.CurrentStatus, compute(t, w))

	// The earlier workload picks them up on its next reconcile.
	w = k.waitOwner("before", "Stalled", "True", "TemplateStampFailure")
	assert.Equal(t, status.FailedStatus, compute(t, w))
}

func compute(t *testing.T, u *unstructured.Unstructured) status.Status {
	t.Helper()
	res, err := status.Compute(u)
	require.NoError(t, err)
	return res.Status
}

// eventTypes lists the types of the events with reason on the named object.
func eventTypes(t *testing.T, ns, name, reason string) []string {
	t.Helper()
	l, err := env.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "events"}).Namespace(ns).
		List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",reason=" + reason})
	require.NoError(t, err)
	var out []string
	for _, e := range l.Items {
		out = append(out, fmt.Sprint(e.Object["type"]))
	}
	return out
}
