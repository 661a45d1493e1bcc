package e2e

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
