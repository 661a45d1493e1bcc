package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"kontinue.dev/kontinue/crds"
	"kontinue.dev/kontinue/tracking"
)

func TestCRDsAreServedWithSchemas(t *testing.T) {
	all, err := crds.All()
	require.NoError(t, err)
	require.Len(t, all, 13, "carto.run's eleven, and Provider and Alert")
	for _, c := range all {
		got := get(t, crds.GVR, "", c.GetName())
		assert.True(t, crds.Established(got), "%s established", c.GetName())
	}
	// The OpenAPI v3 document is what `kubectl explain` reads.
	dc := discovery.NewDiscoveryClientForConfigOrDie(env.cfg)
	raw, err := dc.RESTClient().Get().AbsPath("/openapi/v3/apis/carto.run/v1alpha1").DoRaw(context.Background())
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(raw, &doc))
	schemas := nested(doc, "components", "schemas").(map[string]any)
	wl, ok := schemas["run.carto.v1alpha1.Workload"].(map[string]any)
	require.True(t, ok, "Workload schema published")
	spec := nested(wl, "properties", "spec", "properties").(map[string]any)
	for _, f := range []string{"params", "source", "serviceAccountName"} {
		assert.Contains(t, spec, f)
	}
	if _, err := exec.LookPath("kubectl"); err == nil {
		out, err := exec.Command("kubectl", "--kubeconfig", env.kubeconfig, "explain", "workload.spec").CombinedOutput()
		require.NoError(t, err, string(out))
		assert.Contains(t, string(out), "params")
		assert.Contains(t, string(out), "serviceAccountName")
	}
}

func TestSchemaRejectsInvalidObjects(t *testing.T) {
	ns := newNamespace(t)
	cases := map[string]struct{ yaml, want string }{
		"step with both name and options": {`
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: invalid-both}
spec:
  selector: {app: x}
  resources:
  - name: a
    templateRef:
      kind: ClusterTemplate
      name: t
      options:
      - {name: opt-a, selector: {matchLabels: {a: b}}}
      - {name: opt-b, selector: {matchLabels: {a: c}}}
`, "exactly one"},
		"param with value and default": {`
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: invalid-param}
spec:
  selector: {app: x}
  params: [{name: p, value: 1, default: 2}]
  resources:
  - {name: a, templateRef: {kind: ClusterTemplate, name: t}}
`, "value"},
		"matchFields In without values": {`
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: invalid-fields}
spec:
  selectorMatchFields: [{key: spec.x, operator: In}]
  resources:
  - {name: a, templateRef: {kind: ClusterTemplate, name: t}}
`, "values"},
		"template with two engines": {`
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: invalid-engines}
spec:
  template: {apiVersion: v1, kind: ConfigMap, metadata: {name: x}}
  ytt: "x"
`, "exactly one"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			err := applyErr(t, ns, c.yaml)
			require.Error(t, err)
			assert.Contains(t, strings.ToLower(err.Error()), strings.ToLower(c.want))
		})
	}
}

// The tracker starts a watch for a CRD created after it started, delivers
// its events, and stops the informer once nobody uses it.
func TestTrackerWatchesNewCRDOnDemand(t *testing.T) {
	ns := newNamespace(t)
	group := uniq(ns, "late") + ".example.com"
	crd := obj(`
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.` + group + `}
spec:
  group: ` + group + `
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`)
	require.NoError(t, crds.Install(context.Background(), env.dyn, "e2e", []*unstructured.Unstructured{crd}, time.Minute))
	t.Cleanup(func() {
		_ = env.dyn.Resource(crds.GVR).Delete(context.Background(), crd.GetName(), metav1.DeleteOptions{})
	})

	var mu sync.Mutex
	var seen []string
	tr := tracking.New(env.dyn, nil, time.Hour, func(ev tracking.Event) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, ev.Obj.GetName())
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr.Start(ctx)
	mapper := tracking.NewMapper(discovery.NewDiscoveryClientForConfigOrDie(env.cfg))
	m, err := mapper.Mapping(schema.GroupVersionKind{Group: group, Version: "v1", Kind: "Widget"})
	require.NoError(t, err, "the mapper learns a CRD created after it started")
	key := tracking.Key{GVR: m.Resource}
	tr.Ensure(key, "test-user")
	eventually(t, 10*time.Second, func() string {
		if !tr.Synced(key) {
			return "not synced"
		}
		return ""
	})
	apply(t, ns, `
apiVersion: `+group+`/v1
kind: Widget
metadata: {name: w1}
`)
	eventually(t, 10*time.Second, func() string {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range seen {
			if s == "w1" {
				return ""
			}
		}
		return "no event for w1"
	})
	got, synced := tr.Get(key, ns, "w1")
	require.True(t, synced)
	require.NotNil(t, got)
	assert.Nil(t, nested(got.Object, "metadata", "managedFields"), "managedFields are stripped from the cache")

	tr.Ensure(key, "second-user")
	tr.Release(key, "test-user")
	assert.Contains(t, tr.Active(), key, "another user still holds the watch")
	tr.Release(key, "test-user") // releasing twice must not stop someone else's watch
	assert.Contains(t, tr.Active(), key)
	tr.Commit("second-user", nil)
	assert.NotContains(t, tr.Active(), key, "the informer stops when its last user lets go")
}
