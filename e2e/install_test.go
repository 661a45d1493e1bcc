package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"kontinue.dev/kontinue/crds"
	"kontinue.dev/kontinue/hack/installyaml/render"
	"kontinue.dev/kontinue/reconciler/stamp"
)

const (
	installNS = "kontinue-system"
	installSA = "kontinue"
)

var installSAGVR = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}

func installObjects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	// CRDs first (deploy/crds.yaml), then Kontinue (deploy/install.yaml).
	crds, err := readObjects(filepath.Join(env.root, "deploy", "crds.yaml"))
	require.NoError(t, err)
	objs, err := readObjects(filepath.Join(env.root, "deploy", "install.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, objs)
	return append(crds, objs...)
}

// warnings collects the API server's warnings (Pod Security among them).
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

// ensureInstallNamespace creates kontinue-system from install.yaml when it
// does not exist (deleted when the test ends): server-side dry-run cannot
// create objects inside a namespace that is itself only dry-run.
func ensureInstallNamespace(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	// A namespace an earlier test created may still be terminating.
	installed := false
	eventually(t, 60*time.Second, func() string {
		u, err := tryGet(nsGVR, "", installNS)
		switch {
		case apierrors.IsNotFound(err):
			return ""
		case err != nil:
			return err.Error()
		case u.GetDeletionTimestamp() != nil:
			return installNS + " is terminating"
		}
		installed = true
		return ""
	})
	if installed {
		return // installed for real (kind, e2e-rbac): leave it
	}
	for _, o := range objs {
		if o.GetKind() == "Namespace" && o.GetName() == installNS {
			apply(t, "", toYAML(t, o))
			return
		}
	}
	t.Fatalf("install.yaml has no Namespace %s", installNS)
}

func toYAML(t *testing.T, u *unstructured.Unstructured) string {
	t.Helper()
	b, err := u.MarshalJSON()
	require.NoError(t, err)
	return string(b) // JSON is YAML
}

// TestInstallYAMLServerDryRun is `kubectl apply --server-side
// --dry-run=server -f deploy/install.yaml`: every object is valid for the
// API server, and the Deployment meets the namespace's Pod Security level
// ("restricted"), which the server reports as a warning otherwise.
func TestInstallYAMLServerDryRun(t *testing.T) {
	objs := installObjects(t)
	ensureInstallNamespace(t, objs)
	w := &warnings{}
	cfg := rest.CopyConfig(env.cfg)
	cfg.WarningHandler = w
	dyn := dynamic.NewForConfigOrDie(cfg)
	ctx := context.Background()
	kinds := dryRunApply(t, dyn, w, objs)
	served, err := crds.All()
	require.NoError(t, err)
	require.Equal(t, len(served), kinds["CustomResourceDefinition"], "every CRD Kontinue serves: carto.run's eleven and its own")
	require.Equal(t, 1, kinds["Deployment"])
	require.Equal(t, 6, kinds["ClusterRole"]+kinds["Role"], "Kontinue's four and the aggregated view and edit roles")

	// The check above can fail: a Deployment without the restricted
	// security context draws a Pod Security warning in this namespace.
	bare := obj(`
apiVersion: apps/v1
kind: Deployment
metadata: {name: kontinue-insecure, namespace: ` + installNS + `}
spec:
  selector: {matchLabels: {app: x}}
  template:
    metadata: {labels: {app: x}}
    spec:
      containers: [{name: x, image: kontinue:latest}]
`)
	_, err = dyn.Resource(mapping(t, bare.GroupVersionKind()).Resource).Namespace(installNS).Apply(ctx, bare.GetName(), bare,
		metav1.ApplyOptions{FieldManager: "kontinue-install", DryRun: []string{metav1.DryRunAll}})
	require.NoError(t, err)
	require.NotEmpty(t, w.take(), "a Deployment that is not restricted draws a Pod Security warning")
}

// dryRunApply applies objs with a server-side dry run, each without error
// nor warning, and counts them by kind.
func dryRunApply(t *testing.T, dyn dynamic.Interface, w *warnings, objs []*unstructured.Unstructured) map[string]int {
	t.Helper()
	kinds := map[string]int{}
	for _, o := range objs {
		m := mapping(t, o.GroupVersionKind())
		var r dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if o.GetNamespace() != "" {
			r = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		}
		_, err := r.Apply(context.Background(), o.GetName(), o, metav1.ApplyOptions{FieldManager: "kontinue-install", Force: true, DryRun: []string{metav1.DryRunAll}})
		require.NoError(t, err, "dry-run apply %s %s", o.GetKind(), o.GetName())
		kinds[o.GetKind()]++
		require.Empty(t, w.take(), "warnings for %s %s", o.GetKind(), o.GetName())
	}
	return kinds
}

// TestInstallShardedChartServerDryRun: the chart rendered with shards is
// valid for the API server too: a Deployment and a budget per shard, which
// meet Pod Security's restricted level, and the admission policy (its CEL
// compiles) with its binding.
func TestInstallShardedChartServerDryRun(t *testing.T) {
	ensureInstallNamespace(t, installObjects(t))
	docs, err := render.RenderChart(env.root, map[string]any{"sharding": map[string]any{"shards": []any{"a", "b"}}})
	require.NoError(t, err)
	var objs []*unstructured.Unstructured
	for _, d := range docs {
		objs = append(objs, obj(d))
	}
	w := &warnings{}
	cfg := rest.CopyConfig(env.cfg)
	cfg.WarningHandler = w
	kinds := dryRunApply(t, dynamic.NewForConfigOrDie(cfg), w, objs)
	require.Equal(t, 3, kinds["Deployment"])
	require.Equal(t, 3, kinds["PodDisruptionBudget"])
	require.Equal(t, 1, kinds["ValidatingAdmissionPolicy"])
	require.Equal(t, 1, kinds["ValidatingAdmissionPolicyBinding"])
}

// TestInstallRBACImpersonation acts as the Deployment's service account (a
// real token, so that its own `impersonate` rights are what the server
// checks) and checks the impersonation design: it stamps as the owner's
// service account with that account's rights, never with its own, and
// cannot add groups (such as system:masters) to whom it impersonates.
func TestInstallRBACImpersonation(t *testing.T) {
	objs := installObjects(t)
	ensureInstallNamespace(t, objs)
	if _, err := tryGet(installSAGVR, installNS, installSA); apierrors.IsNotFound(err) {
		// Not installed: apply the service account and its RBAC (removed
		// at the end; cluster-scoped ones by apply, namespaced ones with
		// the namespace ensureInstallNamespace created).
		for _, o := range objs {
			switch o.GetKind() {
			case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
				apply(t, "", toYAML(t, o))
			}
		}
	}
	sa := kontinueSAConfig(t)

	ns := newNamespace(t) // its default service account may stamp ConfigMaps
	other := newNamespace(t)
	apply(t, other, `{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "builder"}}`) // no rights
	ctx := context.Background()
	cm := func(name string) *unstructured.Unstructured {
		return obj(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "` + name + `"}, "data": {"k": "v"}}`)
	}

	// Kontinue's own identity may not write what it stamps.
	own := dynamic.NewForConfigOrDie(sa)
	_, err := stamp.ServerSideApply(ctx, own, configMapGVR, withNS(cm("own"), ns), "kontinue")
	require.True(t, apierrors.IsForbidden(err), "Kontinue itself created a ConfigMap: %v", err)

	clients := stamp.NewClients(sa, 0)
	cl, err := clients.For(ns, "default")
	require.NoError(t, err)
	_, err = stamp.ServerSideApply(ctx, cl, configMapGVR, withNS(cm("stamped"), ns), "kontinue")
	require.NoError(t, err, "stamping as %s/default", ns)

	cl, err = clients.For(other, "builder")
	require.NoError(t, err)
	_, err = stamp.ServerSideApply(ctx, cl, configMapGVR, withNS(cm("stamped"), other), "kontinue")
	require.True(t, apierrors.IsForbidden(err), "the impersonated account has no rights in %s: %v", other, err)
	require.Contains(t, err.Error(), "system:serviceaccount:"+other+":builder")

	masters := rest.CopyConfig(sa)
	masters.Impersonate = rest.ImpersonationConfig{UserName: stamp.ServiceAccountUser(ns, "default"), Groups: []string{"system:masters"}}
	_, err = dynamic.NewForConfigOrDie(masters).Resource(nsGVR).List(ctx, metav1.ListOptions{Limit: 1})
	require.True(t, apierrors.IsForbidden(err), "impersonating a group must be refused: %v", err)
	require.True(t, strings.Contains(err.Error(), "groups") || strings.Contains(err.Error(), "impersonate"), err.Error())
}

func withNS(u *unstructured.Unstructured, ns string) *unstructured.Unstructured {
	u.SetNamespace(ns)
	return u
}

// kontinueSAConfig is a client config with a token of the Deployment's
// service account (TokenRequest), as the pod would have.
func kontinueSAConfig(t *testing.T) *rest.Config {
	t.Helper()
	req := obj(`{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "metadata": {"name": "` + installSA + `"},
		"spec": {"expirationSeconds": 3600}}`)
	got, err := env.dyn.Resource(installSAGVR).Namespace(installNS).Create(context.Background(), req, metav1.CreateOptions{}, "token")
	require.NoError(t, err, "TokenRequest for %s/%s", installNS, installSA)
	token, _ := nested(got.Object, "status", "token").(string)
	require.NotEmpty(t, token)
	cfg := rest.AnonymousClientConfig(env.cfg)
	cfg.BearerToken = token
	return cfg
}

// TestInstallDashboardImpersonation renders the chart with the dashboard
// on and applies its dashboard objects: Kontinue's account may act as the
// dashboard's ServiceAccount, and as no other account of that namespace,
// even when rbac.impersonation binds kontinue-impersonator nowhere.
func TestInstallDashboardImpersonation(t *testing.T) {
	ensureInstallNamespace(t, installObjects(t))
	controller := "kontinue-dash-e2e" // not the installed account, whose impersonation may be cluster-wide
	ch, err := loader.LoadDir(filepath.Join(env.root, "deploy", "chart"))
	require.NoError(t, err)
	vals, err := chartutil.ToRenderValues(ch, map[string]any{
		"dashboard":      map[string]any{"enabled": true},
		"rbac":           map[string]any{"impersonation": []any{}},
		"serviceAccount": map[string]any{"name": controller},
	}, chartutil.ReleaseOptions{Name: "kontinue", Namespace: installNS, IsInstall: true}, chartutil.DefaultCapabilities)
	require.NoError(t, err)
	out, err := engine.Render(ch, vals)
	require.NoError(t, err)
	var applied int
	for name, doc := range out {
		if !strings.HasSuffix(name, "/templates/dashboard.yaml") && !strings.HasSuffix(name, "/templates/serviceaccount.yaml") {
			continue
		}
		for _, d := range strings.Split(doc, "\n---\n") {
			if o := obj(d); o.GetKind() != "Service" && o.GetKind() != "" {
				r := resourceFor(t, o, o.GetNamespace())
				apply(t, "", d)
				t.Cleanup(func() { _ = r.Delete(context.Background(), o.GetName(), metav1.DeleteOptions{}) })
				applied++
			}
		}
	}
	require.Equal(t, 4, applied, "Kontinue's and the dashboard's ServiceAccounts, the Role and its binding")

	req := obj(`{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "metadata": {"name": "` + controller + `"}, "spec": {"expirationSeconds": 600}}`)
	got, err := env.dyn.Resource(installSAGVR).Namespace(installNS).Create(context.Background(), req, metav1.CreateOptions{}, "token")
	require.NoError(t, err)
	as := func(sa string) (string, error) {
		cfg := rest.AnonymousClientConfig(env.cfg)
		cfg.BearerToken, _ = nested(got.Object, "status", "token").(string)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: stamp.ServiceAccountUser(installNS, sa)}
		review := obj(`{"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}`)
		r, err := dynamic.NewForConfigOrDie(cfg).Resource(schema.GroupVersionResource{Group: "authentication.k8s.io", Version: "v1", Resource: "selfsubjectreviews"}).
			Create(context.Background(), review, metav1.CreateOptions{})
		if err != nil {
			return "", err
		}
		user, _ := nested(r.Object, "status", "userInfo", "username").(string)
		return user, nil
	}
	eventually(t, 20*time.Second, func() string { // RBAC reaches the authorizer through its informers
		if user, err := as("dashboard-viewer"); err != nil || user != stamp.ServiceAccountUser(installNS, "dashboard-viewer") {
			return fmt.Sprintf("as dashboard-viewer: %q %v", user, err)
		}
		return ""
	})
	_, err = as("default")
	require.True(t, apierrors.IsForbidden(err), "impersonating another account of %s: %v", installNS, err)
}

// TestInstallAggregatedRoles applies install.yaml's kontinue-view and
// kontinue-edit and lets the API server's role aggregation (the controller
// manager) fold them into the built-in roles: whoever is bound to edit in a
// namespace may then create Workloads there, whoever is bound to view may
// read them and not create them, and neither gets chains (cluster-scoped).
func TestInstallAggregatedRoles(t *testing.T) {
	ctx := context.Background()
	crGVR := schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}
	for _, o := range installObjects(t) {
		if o.GetKind() != "ClusterRole" || (o.GetName() != "kontinue-view" && o.GetName() != "kontinue-edit") {
			continue
		}
		if _, err := tryGet(crGVR, "", o.GetName()); apierrors.IsNotFound(err) {
			name := o.GetName()
			t.Cleanup(func() { _ = env.dyn.Resource(crGVR).Delete(context.Background(), name, metav1.DeleteOptions{}) })
		}
		apply(t, "", toYAML(t, o))
	}
	ns := newNamespace(t)
	for user, role := range map[string]string{"dev-editor": "edit", "dev-viewer": "view"} {
		apply(t, ns, `{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "`+user+`"},
			"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "`+role+`"},
			"subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "`+user+`"}]}`)
	}
	allowed := func(user, verb, resource, namespace string) bool {
		review := obj(`{"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {"user": "` + user + `",
			"resourceAttributes": {"namespace": "` + namespace + `", "verb": "` + verb + `", "group": "carto.run", "resource": "` + resource + `"}}}`)
		got, err := env.dyn.Resource(schema.GroupVersionResource{Group: "authorization.k8s.io", Version: "v1", Resource: "subjectaccessreviews"}).
			Create(ctx, review, metav1.CreateOptions{})
		require.NoError(t, err)
		ok, _, _ := unstructured.NestedBool(got.Object, "status", "allowed")
		return ok
	}
	eventually(t, 60*time.Second, func() string {
		if !allowed("dev-editor", "create", "workloads", ns) || !allowed("dev-viewer", "list", "deliverables", ns) {
			return "the built-in edit and view roles do not cover Kontinue's kinds yet"
		}
		return ""
	})
	require.True(t, allowed("dev-editor", "delete", "runnables", ns))
	require.True(t, allowed("dev-viewer", "get", "workloads", ns))
	require.False(t, allowed("dev-viewer", "create", "workloads", ns), "view never writes")
	require.False(t, allowed("dev-editor", "update", "workloads/status", ns), "the status is Kontinue's")
	require.False(t, allowed("dev-editor", "create", "clustersupplychains", ""), "chains are the platform team's")
	require.False(t, allowed("dev-editor", "create", "workloads", "default"), "only where bound")
}
