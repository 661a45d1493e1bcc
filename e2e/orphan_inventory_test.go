package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// An object a step no longer stamps, that the service account may not
// delete, stays listed in status.orphans (not leaked) and is deleted once
// RBAC allows it, without a retry storm in between.
func TestOrphanKeptInStatusUntilItCanBeDeleted(t *testing.T) {
	ns := newNamespace(t)
	role := func(verbs string) string {
		return `
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: limited}
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [` + verbs + `]
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: limited}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: limited}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: limited}
subjects: [{kind: ServiceAccount, name: limited, namespace: ` + ns + `}]
`
	}
	apply(t, ns, role("get, list, watch, create, update, patch"))
	chain := func(steps string) string {
		return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[1]s}
spec:
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-$(params.suffix)$}
---
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: %[2]s}
spec:
  selector: {orphans: %[2]s}
  resources:
%[3]s`, uniq(ns, "cm"), uniq(ns, "orphans"), steps)
	}
	step := func(name string) string {
		return fmt.Sprintf("  - name: %[1]s\n    templateRef: {kind: ClusterTemplate, name: %[2]s}\n    params: [{name: suffix, value: %[1]s}]\n", name, uniq(ns, "cm"))
	}
	apply(t, ns, chain(step("one")+step("two")))
	apply(t, ns, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: Workload
metadata: {name: app, labels: {orphans: %s}}
spec: {serviceAccountName: limited}
`, uniq(ns, "orphans")))
	waitOwner(t, workloadGVR, ns, "app", "Ready", "True", "Ready")

	apply(t, ns, chain(step("one")))
	eventually(t, 30*time.Second, func() string {
		orphans := nested(get(t, workloadGVR, ns, "app").Object, "status", "orphans")
		list, _ := orphans.([]any)
		if len(list) != 1 || nested(list[0].(map[string]any), "name") != "app-two" {
			return fmt.Sprintf("status.orphans = %v", orphans)
		}
		return ""
	})
	assert.False(t, gone(configMapGVR, ns, "app-two"), "not deleted without permission")
	rv := get(t, workloadGVR, ns, "app").GetResourceVersion()
	time.Sleep(3 * time.Second)
	assert.Equal(t, rv, get(t, workloadGVR, ns, "app").GetResourceVersion(), "no status churn while blocked")

	apply(t, ns, role("get, list, watch, create, update, patch, delete"))
	eventually(t, 30*time.Second, func() string {
		if !gone(configMapGVR, ns, "app-two") {
			return "app-two still exists"
		}
		if o := nested(get(t, workloadGVR, ns, "app").Object, "status", "orphans"); o != nil {
			return fmt.Sprintf("status.orphans = %v", o)
		}
		return ""
	})
	assert.False(t, gone(configMapGVR, ns, "app-one"))
}
