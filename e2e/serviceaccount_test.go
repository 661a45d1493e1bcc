package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A workload whose service account may not create what the template
// stamps ends in a clear False condition naming the account, with no retry
// storm; a RoleBinding for the account heals it by itself (RBAC events
// re-trigger blocked workloads).
func TestServiceAccountWithoutPermission(t *testing.T) {
	k := newKit(t)
	tmpl, chain := k.name("sa"), k.name("sa-chain")
	k.apply(k.cmTemplate(tmpl, "app", `{greeting: hello}`))
	k.apply(k.chainYAML(chain, "", k.step("deploy", "ClusterTemplate", tmpl, "")))
	k.apply(`
apiVersion: v1
kind: ServiceAccount
metadata: {name: restricted}
`)
	k.workload("app", chain, "  serviceAccountName: restricted\n")

	w := k.waitStep("app", "deploy", "ResourceSubmitted", "False", "TemplateRejectedByAPIServer")
	parts := []string{"service account [" + k.ns + "/restricted]", "step [deploy]", "ClusterTemplate/" + tmpl, "forbidden"}
	k.assertCond(k.stepCond(w, "deploy", "ResourceSubmitted"), "False", "TemplateRejectedByAPIServer", parts...)
	k.assertCond(ownerCondition(w, "ResourcesSubmitted"), "False", "TemplateRejectedByAPIServer", parts...)
	k.assertCond(ownerCondition(w, "Ready"), "False", "TemplateRejectedByAPIServer", parts...)
	k.assertQuiet(k.wl("app"), k.csc(chain))
	assert.Empty(t, k.objects(k.ns), "nothing stamped with the controller's own rights")

	k.apply(`
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: restricted-stamper}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ` + stamperRole + `}
subjects: [{kind: ServiceAccount, name: restricted, namespace: ` + k.ns + `}]
`)
	k.waitOwner("app", "Ready", "True", "Ready")
	k.waitObj(configMapGVR, "app-app", k.dataIs("greeting", "hello"))
}

// The chain's serviceAccountRef stamps when the workload names none; the
// workload's serviceAccountName wins over it.
func TestChainServiceAccountAndOwnerOverride(t *testing.T) {
	k := newKit(t)
	tmpl, chain := k.name("chain-sa"), k.name("chain-sa-chain")
	k.apply(k.cmTemplate(tmpl, "app", `{greeting: hello}`))
	k.apply(`
apiVersion: v1
kind: ServiceAccount
metadata: {name: unbound}
`)
	k.apply(k.chainYAML(chain, "\n  serviceAccountRef: {name: unbound}", k.step("deploy", "ClusterTemplate", tmpl, "")))
	k.workload("app", chain, "")

	w := k.waitStep("app", "deploy", "ResourceSubmitted", "False", "TemplateRejectedByAPIServer")
	k.assertCond(ownerCondition(w, "Ready"), "False", "TemplateRejectedByAPIServer", "service account ["+k.ns+"/unbound]", "step [deploy]")
	k.assertQuiet(k.wl("app"))

	// The namespace's default account is bound to the stamper role.
	k.update(workloadGVR, k.ns, "app", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "default", "spec", "serviceAccountName")
	})
	k.waitOwner("app", "Ready", "True", "Ready")
	k.waitObj(configMapGVR, "app-app", k.dataIs("greeting", "hello"))
}

// A platform team revokes a Workload's rights by deleting its
// ServiceAccount, and leaves its RoleBinding behind. The API server would
// still let Kontinue impersonate the deleted account: Kontinue writes
// nothing as it. A change of the Workload is not applied, the Workload says
// ServiceAccountError naming the account, and so does another Workload of
// the account that did not change (the deletion alone wakes it); when the
// account is created again, the change lands (woken by the creation).
func TestDeletedServiceAccountWritesNothing(t *testing.T) {
	k := newKit(t)
	tmpl, chain := k.name("gone-sa"), k.name("gone-sa-chain")
	k.apply(k.cmTemplate(tmpl, "app", `{greeting: $(params.greeting)$}`))
	k.apply(k.chainYAML(chain, "", k.step("deploy", "ClusterTemplate", tmpl, "")))
	account := `
apiVersion: v1
kind: ServiceAccount
metadata: {name: builder}
`
	k.apply(account + `---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: builder-stamper}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ` + stamperRole + `}
subjects: [{kind: ServiceAccount, name: builder, namespace: ` + k.ns + `}]
`)
	greeting := func(v string) string {
		return fmt.Sprintf("  serviceAccountName: builder\n  params: [{name: greeting, value: %s}]\n", v)
	}
	k.workload("app", chain, greeting("hello"))
	k.workload("other", chain, greeting("hello"))
	k.waitOwner("app", "Ready", "True", "Ready")
	k.waitOwner("other", "Ready", "True", "Ready")
	cm := k.waitObj(configMapGVR, "app-app", k.dataIs("greeting", "hello"))

	require.NoError(t, env.dyn.Resource(saGVR).Namespace(k.ns).Delete(context.Background(), "builder", metav1.DeleteOptions{}))
	eventually(t, 10*time.Second, func() string {
		if !gone(saGVR, k.ns, "builder") {
			return "service account builder still there"
		}
		return ""
	})
	// A change is not applied as the deleted account, RoleBinding or not.
	k.workload("app", chain, greeting("changed"))
	eventually(t, 10*time.Second, func() string {
		u := get(t, workloadGVR, k.ns, "app")
		if og, _ := nested(u.Object, "status", "observedGeneration").(int64); og != u.GetGeneration() {
			return fmt.Sprintf("observedGeneration %d of %d", og, u.GetGeneration())
		}
		return ""
	})
	k.assertStable(2*time.Second, k.cm("app-app"), k.wl("app"))
	assert.Equal(t, cm.GetResourceVersion(), get(t, configMapGVR, k.ns, "app-app").GetResourceVersion(), "written as the deleted account")
	w := k.waitOwner("app", "Ready", "False", "ServiceAccountError")
	parts := []string{"[" + k.ns + "/builder]", `serviceaccounts "builder" not found`}
	k.assertCond(ownerCondition(w, "ResourcesSubmitted"), "False", "ServiceAccountError", parts...)
	k.assertCond(ownerCondition(w, "Ready"), "False", "ServiceAccountError", parts...)
	assert.Equal(t, "True", k.stepCond(w, "deploy", "Ready")["status"], "the step keeps what it had")
	k.waitEvent("app", "ServiceAccountError", "["+k.ns+"/builder]")
	// The Workload that did not change is told too.
	w = k.waitOwner("other", "ResourcesSubmitted", "False", "ServiceAccountError")
	k.assertCond(ownerCondition(w, "Ready"), "False", "ServiceAccountError", parts...)

	// The account is back: the change lands.
	k.apply(account)
	k.waitObj(configMapGVR, "app-app", k.dataIs("greeting", "changed"))
	k.waitOwner("app", "Ready", "True", "Ready")
	k.waitOwner("other", "Ready", "True", "Ready")
}

// The same for a Runnable: its account deleted (RoleBinding left), new
// inputs create no run and RunTemplateReady says ServiceAccountError, as
// does another Runnable of the account whose inputs did not change; when
// the account is created again, the run is created.
func TestDeletedServiceAccountRunnableCreatesNoRun(t *testing.T) {
	k := newRunKit(t)
	tmpl := uniq(k.ns, "gone-sa")
	apply(t, k.ns, k.runTemplate(tmpl, genName, "    revision: spec.params[0].value"))
	account := `
apiVersion: v1
kind: ServiceAccount
metadata: {name: runner}
`
	apply(t, k.ns, account+`---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: runner-stamper}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: `+stamperRole+`}
subjects: [{kind: ServiceAccount, name: runner, namespace: `+k.ns+`}]
`)
	for _, name := range []string{"lint", "idle"} {
		k.runnable(name, tmpl, "r1", "  serviceAccountName: runner\n")
		runs := k.waitRevisions(name, "r1")
		k.finish(runs[0].GetName(), "True", nil)
		k.waitRunnable(name, "Ready", "True", "Ready")
	}

	require.NoError(t, env.dyn.Resource(saGVR).Namespace(k.ns).Delete(context.Background(), "runner", metav1.DeleteOptions{}))
	eventually(t, 10*time.Second, func() string {
		if !gone(saGVR, k.ns, "runner") {
			return "service account runner still there"
		}
		return ""
	})
	k.runnable("lint", tmpl, "r2", "  serviceAccountName: runner\n")
	eventually(t, 10*time.Second, func() string {
		u := get(t, immRunnableGVR, k.ns, "lint")
		if og, _ := nested(u.Object, "status", "observedGeneration").(int64); og != u.GetGeneration() {
			return fmt.Sprintf("observedGeneration %d of %d", og, u.GetGeneration())
		}
		return ""
	})
	time.Sleep(time.Second) // proving that no run is created
	assert.Equal(t, []string{"r1"}, k.revisions("lint"), "a run created as the deleted account")
	r := k.waitRunnable("lint", "RunTemplateReady", "False", "ServiceAccountError")
	k.assertRunnableMessage(r, "["+k.ns+"/runner]", `serviceaccounts "runner" not found`)
	assert.Equal(t, map[string]any{"revision": "r1"}, k.outputs("lint"), "the outputs stay")
	// The Runnable whose inputs did not change is told too.
	k.waitRunnable("idle", "RunTemplateReady", "False", "ServiceAccountError")

	apply(t, k.ns, account)
	k.waitRevisions("lint", "r2", "r1")
	k.waitRunnable("idle", "Ready", "True", "Ready")
}
