package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A run another controller created (Cartographer's, after a switch: the
// step's carto.run labels and controller reference, none of Kontinue's)
// is taken over by a patch as the step's service account. An account that
// may create runs but not patch them ends in a clear False condition and
// nothing is created (no second run for inputs that ran); a Role granting
// patch heals it by itself, and the run is the step's again, not re-run.
func TestForeignRunNeedsPatch(t *testing.T) {
	if env.external {
		t.Skip("restarts the in-process Kontinue")
	}
	k := newKit(t)
	build, chain := k.name("foreign-build"), k.name("foreign-chain")
	k.apply(k.templateYAML("ClusterImageTemplate", build, `
  lifecycle: immutable
  alwaysSuccessful: true
  imagePath: data.image
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {generateName: $(workload.metadata.name)$-build-}
    data: {image: $(workload.metadata.name)$-img}`))
	k.apply(k.chainYAML(chain, "", k.step("build", "ClusterImageTemplate", build, "")))
	k.apply(`
apiVersion: v1
kind: ServiceAccount
metadata: {name: runner}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: runner}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get, list, watch, create, delete]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: runner}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: runner}
subjects: [{kind: ServiceAccount, name: runner, namespace: ` + k.ns + `}]
`)
	k.workload("app", chain, "  serviceAccountName: runner\n")
	k.waitOwner("app", "Ready", "True", "Ready")
	runs := func() []unstructured.Unstructured {
		l, err := env.dyn.Resource(configMapGVR).Namespace(k.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "carto.run/resource-name=build"})
		require.NoError(t, err)
		return l.Items
	}
	l := runs()
	require.Len(t, l, 1, "one run")
	run := l[0].GetName()

	// As Cartographer leaves it when Kontinue starts after it: Kontinue's
	// labels and annotations gone.
	env.kontinue.stop()
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			env.kontinue = startKontinue(env.cfg)
		}
	})
	k.update(configMapGVR, k.ns, run, func(u *unstructured.Unstructured) {
		l, a := u.GetLabels(), u.GetAnnotations() // copies
		for _, m := range []map[string]string{l, a} {
			for key := range m {
				if strings.HasPrefix(key, "kontinue.dev/") {
					delete(m, key)
				}
			}
		}
		u.SetLabels(l)
		u.SetAnnotations(a)
	})
	env.kontinue, restarted = startKontinue(env.cfg), true
	w := k.waitStep("app", "build", "ResourceSubmitted", "False", "TemplateRejectedByAPIServer")
	k.assertCond(k.stepCond(w, "build", "ResourceSubmitted"), "False", "TemplateRejectedByAPIServer",
		"take over the runs another controller created", "service account ["+k.ns+"/runner]", "patch")
	k.assertQuiet(k.wl("app"))
	l = runs()
	if assert.Len(t, l, 1, "no run created while the run cannot be taken over") {
		assert.Empty(t, l[0].GetLabels()["kontinue.dev/input-digest"], "the run is not labelled")
	}

	k.apply(`
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: runner}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get, list, watch, create, delete, patch]}]
`)
	k.waitOwner("app", "Ready", "True", "Ready")
	l = runs()
	require.Len(t, l, 1, "the run taken over, none created")
	assert.Equal(t, run, l[0].GetName())
	assert.NotEmpty(t, l[0].GetLabels()["kontinue.dev/input-digest"], "the run is the step's again")
	assert.NotEqual(t, "foreign", l[0].GetLabels()["kontinue.dev/input-digest"], "as the run of the current inputs")
}
