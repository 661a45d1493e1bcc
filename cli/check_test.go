package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kontinue.dev/kontinue/crds"
	"kontinue.dev/kontinue/reconciler/api"
)

func TestLeaseState(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	lease := func(holder, renew string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"holderIdentity": holder, "renewTime": renew, "leaseDurationSeconds": int64(15)}}}
	}
	h, d, fresh := leaseState(lease("a_1", "2026-03-01T11:59:50.123456Z"), now)
	require.Equal(t, "a_1", h)
	require.True(t, fresh)
	require.Equal(t, 9876544*time.Microsecond, d)
	_, _, fresh = leaseState(lease("a_1", "2026-03-01T11:59:41.000000Z"), now)
	require.True(t, fresh, "within the duration and a margin for skew")
	_, _, fresh = leaseState(lease("a_1", "2026-03-01T11:50:00.000000Z"), now)
	require.False(t, fresh)
	_, _, fresh = leaseState(lease("", "2026-03-01T11:59:59.000000Z"), now)
	require.False(t, fresh, "released")
	_, _, fresh = leaseState(lease("a_1", ""), now)
	require.False(t, fresh)
}

func TestCRDProblem(t *testing.T) {
	all, err := crds.All()
	require.NoError(t, err)
	want := all[0]
	installed := func(mod func(u *unstructured.Unstructured)) *unstructured.Unstructured {
		u := want.DeepCopy()
		u.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Established", "status": "True"}}}
		mod(u)
		return u
	}
	require.Equal(t, "", crdProblem(installed(func(*unstructured.Unstructured) {}), want))
	require.Equal(t, "not installed", crdProblem(nil, want))
	require.Equal(t, "not established", crdProblem(installed(func(u *unstructured.Unstructured) { delete(u.Object, "status") }), want))
	require.Equal(t, "v1alpha1 is not served", crdProblem(installed(func(u *unstructured.Unstructured) {
		v, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
		v[0].(map[string]any)["served"] = false
		require.NoError(t, unstructured.SetNestedSlice(u.Object, v, "spec", "versions"))
	}), want))
	require.Contains(t, crdProblem(installed(func(u *unstructured.Unstructured) {
		v, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
		require.NoError(t, unstructured.SetNestedField(v[0].(map[string]any), "an older description", "schema", "openAPIV3Schema", "description"))
		require.NoError(t, unstructured.SetNestedSlice(u.Object, v, "spec", "versions"))
	}), want), "schema differs")
}

func TestChainKinds(t *testing.T) {
	objs, err := LoadObjects([]string{"-"}, stringsReader(chainFiles+`
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: computed}
spec:
  template: {apiVersion: $(params.v)$, kind: Thing}
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: helm-app}
spec:
  helm: {chart: {name: app, repository: https://charts.example}}
`))
	require.NoError(t, err)
	templates := map[string]*unstructured.Unstructured{}
	var chain *unstructured.Unstructured
	for _, o := range objs {
		templates[o.GetKind()+"/"+o.GetName()] = o
		if o.GetName() == "web" {
			chain = o
		}
	}
	var spec api.ChainSpec
	require.NoError(t, api.Decode(chain.Object["spec"], &spec))
	spec.Resources = append(spec.Resources,
		api.Step{Name: "computed", TemplateRef: api.StepTemplateRef{Kind: "ClusterTemplate", Name: "computed"}},
		api.Step{Name: "chart", TemplateRef: api.StepTemplateRef{Kind: "ClusterTemplate", Name: "helm-app"}})
	kinds, notes := chainKinds(spec, func(kind, name string) *unstructured.Unstructured { return templates[kind+"/"+name] })
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	require.Equal(t, map[schema.GroupVersionKind][]string{
		cm:                              {"source", "image"},
		{Version: "v1", Kind: "Secret"}: {"chart"},
	}, kinds)
	require.Len(t, notes, 4)
	require.Contains(t, notes[0], "step [app]: template ClusterTemplate/go-app renders with an engine whose kinds are known only once rendered")
	require.Contains(t, notes[1], "step [app]: template ClusterTemplate/missing-template not found")
	require.Contains(t, notes[2], "step [computed]: template ClusterTemplate/computed computes its apiVersion or kind")
	require.Contains(t, notes[3], "step [chart]: template ClusterTemplate/helm-app renders with an engine whose kinds are known only once rendered")
}

func TestParseServiceAccount(t *testing.T) {
	ns, n, err := parseServiceAccount("builder", "dev")
	require.NoError(t, err)
	require.Equal(t, []string{"dev", "builder"}, []string{ns, n})
	ns, n, err = parseServiceAccount("ci/builder", "dev")
	require.NoError(t, err)
	require.Equal(t, []string{"ci", "builder"}, []string{ns, n})
	for _, bad := range []string{"/x", "x/", "a/b/c"} {
		_, _, err := parseServiceAccount(bad, "dev")
		require.Error(t, err, bad)
	}
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }

func TestDeploymentLeaseID(t *testing.T) {
	deployment := func(args ...string) *unstructured.Unstructured {
		a := make([]any, len(args))
		for i, s := range args {
			a[i] = s
		}
		return &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "kontinue", "args": a}}}}}}}
	}
	for _, tc := range []struct {
		name   string
		d      *unstructured.Unstructured
		wantID string
		wantOn bool
	}{
		{"install.yaml's", deployment("controller", "--leader-elect", "--leader-election-id=kontinue-leader", "--workers=16"), "kontinue-leader", true},
		{"default id", deployment("controller", "--leader-elect=true"), DefaultLeaseID, true},
		{"id as two args", deployment("controller", "--leader-elect", "--leader-election-id", "other"), "other", true},
		{"off", deployment("controller"), "", false},
		{"turned off later", deployment("controller", "--leader-elect", "--leader-elect=false"), "", false},
		{"no containers", &unstructured.Unstructured{Object: map[string]any{}}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, on := deploymentLeaseID(tc.d)
			require.Equal(t, tc.wantOn, on)
			require.Equal(t, tc.wantID, id)
		})
	}
}
