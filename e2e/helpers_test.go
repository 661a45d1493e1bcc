package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"
)

// Resources the tests use directly.
var (
	workloadGVR    = schema.GroupVersionResource{Group: "carto.run", Version: "v1alpha1", Resource: "workloads"}
	deliverableGVR = schema.GroupVersionResource{Group: "carto.run", Version: "v1alpha1", Resource: "deliverables"}
	chainGVR       = schema.GroupVersionResource{Group: "carto.run", Version: "v1alpha1", Resource: "clustersupplychains"}
	deliveryGVR    = schema.GroupVersionResource{Group: "carto.run", Version: "v1alpha1", Resource: "clusterdeliveries"}
	configMapGVR   = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	testGVR        = schema.GroupVersionResource{Group: "test.run", Version: "v1alpha1", Resource: "tests"}
	nsGVR          = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	saGVR          = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	crGVR          = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}
)

const stamperRole = "kontinue-e2e-stamper"

// setupRBAC creates the ClusterRole that test namespaces bind to their
// default service account: what a platform team grants a supply chain.
func setupRBAC(ctx context.Context) error {
	role := obj(`
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: ` + stamperRole + `}
rules:
- apiGroups: [""]
  resources: [configmaps, secrets, services]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [test.run, tekton.dev]
  resources: ["*"]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [carto.run]
  resources: [runnables, clusterruntemplates]
  verbs: [get, list, watch, create, update, patch, delete]
`)
	_, err := env.dyn.Resource(crGVR).Apply(ctx, role.GetName(), role, metav1.ApplyOptions{FieldManager: "e2e", Force: true})
	return err
}

// obj parses one YAML object.
func obj(y string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		panic(fmt.Sprintf("bad test YAML: %v\n%s", err, y))
	}
	return u
}

func parseObjects(data []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, doc := range bytes.Split(data, []byte("\n---")) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			return nil, err
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return out, nil
}

func readObjects(path string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseObjects(b)
}

var (
	mapperOnce sync.Once
	mapper     *restmapper.DeferredDiscoveryRESTMapper
)

func mapping(t testing.TB, gvk schema.GroupVersionKind) *meta.RESTMapping {
	t.Helper()
	mapperOnce.Do(func() {
		mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(env.cfg)))
	})
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		mapper.Reset()
		m, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	require.NoError(t, err, "mapping %s", gvk)
	return m
}

func resourceFor(t testing.TB, u *unstructured.Unstructured, ns string) dynamic.ResourceInterface {
	t.Helper()
	m := mapping(t, u.GroupVersionKind())
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if u.GetNamespace() == "" {
			u.SetNamespace(ns)
		}
		return env.dyn.Resource(m.Resource).Namespace(u.GetNamespace())
	}
	return env.dyn.Resource(m.Resource)
}

// apply server-side applies every object of a YAML stream (namespaced ones
// into ns) and deletes the cluster-scoped ones when the test ends.
func apply(t testing.TB, ns, y string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := parseObjects([]byte(y))
	require.NoError(t, err)
	var out []*unstructured.Unstructured
	for _, u := range objs {
		r := resourceFor(t, u, ns)
		got, err := r.Apply(context.Background(), u.GetName(), u, metav1.ApplyOptions{FieldManager: "e2e", Force: true})
		require.NoError(t, err, "apply %s %s", u.GetKind(), u.GetName())
		if u.GetNamespace() == "" {
			name := u.GetName()
			t.Cleanup(func() { _ = r.Delete(context.Background(), name, metav1.DeleteOptions{}) })
		}
		out = append(out, got)
	}
	return out
}

// applyErr applies and returns the error (schema rejections).
func applyErr(t testing.TB, ns, y string) error {
	t.Helper()
	u := obj(y)
	r := resourceFor(t, u, ns)
	_, err := r.Apply(context.Background(), u.GetName(), u, metav1.ApplyOptions{FieldManager: "e2e", Force: true, DryRun: []string{metav1.DryRunAll}})
	return err
}

// newNamespace creates a namespace whose default service account may stamp
// the test kinds, and deletes it when the test ends.
func newNamespace(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"generateName": "e2e-"}}}
	got, err := env.dyn.Resource(nsGVR).Create(ctx, ns, metav1.CreateOptions{})
	require.NoError(t, err)
	name := got.GetName()
	t.Cleanup(func() {
		if t.Failed() && os.Getenv("E2E_KEEP") != "" {
			return
		}
		_ = env.dyn.Resource(nsGVR).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	apply(t, name, `
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: stamper}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: `+stamperRole+`}
subjects: [{kind: ServiceAccount, name: default, namespace: `+name+`}]
`)
	// Kontinue writes nothing as an account that does not exist: tests that
	// stamp as `default` start once the service account controller made it.
	eventually(t, 30*time.Second, func() string {
		if _, err := tryGet(saGVR, name, "default"); err != nil {
			return "service account default: " + err.Error()
		}
		return ""
	})
	return name
}

// uniq makes a cluster-scoped name unique to the test's namespace.
func uniq(ns, name string) string { return name + "-" + strings.TrimPrefix(ns, "e2e-") }

func get(t testing.TB, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	var r dynamic.ResourceInterface = env.dyn.Resource(gvr)
	if ns != "" {
		r = env.dyn.Resource(gvr).Namespace(ns)
	}
	u, err := r.Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return u
}

func tryGet(gvr schema.GroupVersionResource, ns, name string) (*unstructured.Unstructured, error) {
	var r dynamic.ResourceInterface = env.dyn.Resource(gvr)
	if ns != "" {
		r = env.dyn.Resource(gvr).Namespace(ns)
	}
	return r.Get(context.Background(), name, metav1.GetOptions{})
}

func gone(gvr schema.GroupVersionResource, ns, name string) bool {
	_, err := tryGet(gvr, ns, name)
	return apierrors.IsNotFound(err)
}

// eventually polls f until it returns "" (success) or the timeout; the last
// message explains the failure.
func eventually(t testing.TB, timeout time.Duration, f func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	msg := ""
	for {
		if msg = f(); msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not true after %s: %s", timeout, msg)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// condition returns the condition of type typ from a conditions list at path.
func condition(u map[string]any, typ string, path ...string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(u, append(path, "conditions")...)
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
}

// ownerCondition reads a condition from an owner's status.
func ownerCondition(u *unstructured.Unstructured, typ string) map[string]any {
	return condition(u.Object, typ, "status")
}

// stepStatus returns status.resources[name].
func stepStatus(u *unstructured.Unstructured, name string) map[string]any {
	res, _, _ := unstructured.NestedSlice(u.Object, "status", "resources")
	for _, r := range res {
		if m, ok := r.(map[string]any); ok && m["name"] == name {
			return m
		}
	}
	return nil
}

// waitOwner waits until the owner's condition typ has status (and reason,
// if not empty) and returns the owner.
func waitOwner(t testing.TB, gvr schema.GroupVersionResource, ns, name, typ, status, reason string) *unstructured.Unstructured {
	t.Helper()
	var u *unstructured.Unstructured
	eventually(t, 30*time.Second, func() string {
		got, err := tryGet(gvr, ns, name)
		if err != nil {
			return err.Error()
		}
		u = got
		c := ownerCondition(got, typ)
		if c == nil {
			return fmt.Sprintf("%s has no %s condition; status: %v", name, typ, got.Object["status"])
		}
		if c["status"] != status || (reason != "" && c["reason"] != reason) {
			return fmt.Sprintf("%s condition %s is %v/%v (%v), want %s/%s", name, typ, c["status"], c["reason"], c["message"], status, reason)
		}
		return ""
	})
	return u
}

// setStatus writes the status of a test object, playing its controller.
func setStatus(t testing.TB, gvr schema.GroupVersionResource, ns, name string, status map[string]any) {
	t.Helper()
	eventually(t, 10*time.Second, func() string {
		u, err := tryGet(gvr, ns, name)
		if err != nil {
			return err.Error()
		}
		u.Object["status"] = status
		if _, err := env.dyn.Resource(gvr).Namespace(ns).UpdateStatus(context.Background(), u, metav1.UpdateOptions{}); err != nil {
			return err.Error()
		}
		return ""
	})
}

func nested(u map[string]any, path ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(u, path...)
	return v
}

func sha256hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func unstructuredSet(obj map[string]any, value any, path ...string) error {
	return unstructured.SetNestedField(obj, value, path...)
}

// waitFor waits until the object exists and check (if not nil) returns "".
func waitFor(t testing.TB, gvr schema.GroupVersionResource, ns, name string, check func(u *unstructured.Unstructured) string) *unstructured.Unstructured {
	t.Helper()
	var u *unstructured.Unstructured
	eventually(t, 30*time.Second, func() string {
		got, err := tryGet(gvr, ns, name)
		if err != nil {
			return err.Error()
		}
		u = got
		if check != nil {
			return check(got)
		}
		return ""
	})
	return u
}

// waitGone waits until the object no longer exists.
func waitGone(t testing.TB, gvr schema.GroupVersionResource, ns, name string) {
	t.Helper()
	eventually(t, 30*time.Second, func() string {
		if !gone(gvr, ns, name) {
			return fmt.Sprintf("%s %s/%s still exists", gvr.Resource, ns, name)
		}
		return ""
	})
}

// fieldIs is a waitFor check: the field at path equals want.
func fieldIs(want any, path ...string) func(*unstructured.Unstructured) string {
	return func(u *unstructured.Unstructured) string {
		if got := nested(u.Object, path...); fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Sprintf("%s %s: %s = %v, want %v", u.GetKind(), u.GetName(), strings.Join(path, "."), got, want)
		}
		return ""
	}
}
