package e2e

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A Workload's objects whose record in its status was lost (the status
// write after the apply that made them refused, or Kontinue killed in
// between: here the status is rolled back while Kontinue is stopped), then
// the Workload moves to another chain, one of whose steps fails. The old
// chain's objects go, though not every step was submitted: no step of the
// new chain can want them (robustness seed 210 left them, named by no
// status, for the Workload's lifetime). The new chain's failing step keeps
// what is its.
func TestUnrecordedObjectsOfAnOldChainGo(t *testing.T) {
	if env.external {
		t.Skip("stops the in-process Kontinue")
	}
	k := newKit(t)
	a1, a2, b1, b2 := k.name("a1"), k.name("a2"), k.name("b1"), k.name("b2")
	chainA, chainB := k.name("old"), k.name("new")
	k.apply(k.cmTemplate(a1, "a1", `{v: "1"}`))
	k.apply(k.cmTemplate(a2, "a2", `{v: "2"}`))
	k.apply(k.cmTemplate(b1, "b1", `{v: "1"}`))
	k.apply(k.cmTemplate(b2, "b2", `{v: $(workload.metadata.annotations.missing)$}`))
	k.apply(k.chainYAML(chainA, "", k.step("a1", "ClusterTemplate", a1, "")+k.step("a2", "ClusterTemplate", a2, "")))
	k.apply(k.chainYAML(chainB, "", k.step("b1", "ClusterTemplate", b1, "")+k.step("b2", "ClusterTemplate", b2, "")))
	k.workload("mv", chainA, "")
	k.waitOwner("mv", "Ready", "True", "Ready")
	k.waitObj(configMapGVR, "mv-a2", k.dataIs("v", "2"))

	// The record is lost: Kontinue stopped, the status rolled back.
	env.kontinue.stop()
	t.Cleanup(func() {
		if env.kontinue == nil {
			env.kontinue = startKontinue(env.cfg)
		}
	})
	k.update(workloadGVR, k.ns, "mv", func(u *unstructured.Unstructured) {
		u.SetLabels(map[string]string{"app.example.com/chain": chainB})
	})
	u := get(t, workloadGVR, k.ns, "mv")
	u.Object["status"] = map[string]any{}
	_, err := env.dyn.Resource(workloadGVR).Namespace(k.ns).UpdateStatus(context.Background(), u, metav1.UpdateOptions{})
	require.NoError(t, err)
	env.kontinue = startKontinue(env.cfg)

	k.waitStep("mv", "b2", "ResourceSubmitted", "False", "TemplateStampFailure")
	k.waitObj(configMapGVR, "mv-b1", k.dataIs("v", "1"))
	k.waitAbsent(configMapGVR, "mv-a1")
	k.waitAbsent(configMapGVR, "mv-a2")
}
