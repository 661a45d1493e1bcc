package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// An admission policy (nothing Kontinue watches) rejects the stamped object:
// the step is TemplateRejectedByAPIServer and Kontinue does not retry on its
// own (a retry would only repeat the rejection). Once the policy is gone,
// `kontinue reconcile` makes Kontinue look again at once, instead of at its
// 5-minute second look.
func TestReconcileRequestWakesARejectedOwner(t *testing.T) {
	k := newKit(t)
	tmpl, chain := k.name("greet"), k.name("greet-chain")
	policy := k.name("no-blocked-greetings")
	vap := schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"}
	binding := schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"}
	k.apply(fmt.Sprintf(`
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: %[1]s}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [configmaps]}
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %[2]s}}
  validations:
  - expression: "!has(object.data) || !('greeting' in object.data) || object.data.greeting != 'blocked'"
    message: greetings may not be blocked
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: %[1]s}
spec:
  policyName: %[1]s
  validationActions: [Deny]
`, policy, k.ns))
	t.Cleanup(func() {
		_ = env.dyn.Resource(binding).Delete(context.Background(), policy, metav1.DeleteOptions{})
		_ = env.dyn.Resource(vap).Delete(context.Background(), policy, metav1.DeleteOptions{})
	})
	// The API server enforces a new policy a moment after it is created.
	k.waitAdmission(true)

	k.apply(k.cmTemplate(tmpl, "app", `{greeting: blocked}`))
	k.apply(k.chainYAML(chain, "", k.step("deploy", "ClusterTemplate", tmpl, "")))
	k.workload("app", chain, "")
	w := k.waitStep("app", "deploy", "ResourceSubmitted", "False", "TemplateRejectedByAPIServer")
	k.assertCond(k.stepCond(w, "deploy", "ResourceSubmitted"), "False", "TemplateRejectedByAPIServer", "greetings may not be blocked")

	// Any change of RBAC wakes owners whose writes were refused (news that
	// may help them): the namespaces earlier tests left are deleted, their
	// RoleBindings with them, first (seen in CI: the owner woke within the
	// window below as an earlier test's namespace went).
	// (At most a minute: a namespace kept by a finalizer is no reason to
	// fail this test; it only leaves the window less quiet.)
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		l, err := env.dyn.Resource(nsGVR).List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		terminating := false
		for _, n := range l.Items {
			terminating = terminating || n.GetDeletionTimestamp() != nil
		}
		if !terminating {
			break
		}
	}
	require.NoError(t, env.dyn.Resource(binding).Delete(context.Background(), policy, metav1.DeleteOptions{}))
	require.NoError(t, env.dyn.Resource(vap).Delete(context.Background(), policy, metav1.DeleteOptions{}))
	k.waitAdmission(false)
	// Nothing Kontinue watches changed: it keeps the rejection.
	time.Sleep(2 * time.Second)
	require.Equal(t, "False", k.stepCond(get(t, workloadGVR, k.ns, "app"), "deploy", "ResourceSubmitted")["status"])

	code, _, errOut := kontinueCLI(t, "reconcile", "workload", "app", "-n", k.ns)
	require.Equal(t, 0, code, errOut)
	k.waitOwner("app", "Ready", "True", "Ready")
	k.waitObj(configMapGVR, "app-app", k.dataIs("greeting", "blocked"))
}

// waitAdmission waits until a ConfigMap greeting "blocked" is (rejected
// true) or is not (false) refused, by server-side dry runs.
func (k *kit) waitAdmission(rejected bool) {
	k.t.Helper()
	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "probe", "namespace": k.ns},
		"data":     map[string]any{"greeting": "blocked"},
	}}
	eventually(k.t, 30*time.Second, func() string {
		_, err := env.dyn.Resource(configMapGVR).Namespace(k.ns).Create(context.Background(), cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if (err != nil) != rejected {
			return fmt.Sprintf("dry run: %v, want rejected=%v", err, rejected)
		}
		return ""
	})
}
