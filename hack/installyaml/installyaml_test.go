package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"kontinue.dev/kontinue/hack/installyaml/render"
	"kontinue.dev/kontinue/hack/localcluster"
)

func repo(t *testing.T) string {
	t.Helper()
	root, err := localcluster.RepoRoot(".")
	require.NoError(t, err)
	return root
}

func TestInstallYAMLUpToDate(t *testing.T) {
	root := repo(t)
	image, err := DefaultImage(root)
	require.NoError(t, err)
	want, err := Generate(root, image)
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(root, "deploy", "install.yaml"))
	require.NoError(t, err)
	if !bytes.Equal(got, want) {
		t.Fatal("deploy/install.yaml is stale: run `make install-yaml` and commit the result")
	}
	for _, p := range []string{"deploy/crds.yaml", "deploy/chart/crds/crds.yaml"} {
		got, err := os.ReadFile(filepath.Join(root, p))
		require.NoError(t, err)
		if !bytes.Equal(got, CRDs()) {
			t.Fatalf("%s is stale: run `make install-yaml` and commit the result", p)
		}
	}
}

// TestCRDsApart: deleting install.yaml never deletes the CRDs (and every
// Workload with them); helm uninstall neither (crds/ of the chart).
func TestCRDsApart(t *testing.T) {
	require.Empty(t, byKind(installObjects(t), "CustomResourceDefinition"))
	docs, err := RenderChart(repo(t), nil)
	require.NoError(t, err)
	for _, d := range docs {
		require.NotContains(t, d, "kind: CustomResourceDefinition", "CRDs live in the chart's crds/ folder, which helm never deletes")
	}
	objs := parse(t, CRDs())
	require.Len(t, byKind(objs, "CustomResourceDefinition"), 11)
	require.Len(t, objs, 11)
}

func TestChartValues(t *testing.T) {
	render := func(values map[string]any) []*unstructured.Unstructured {
		docs, err := RenderChart(repo(t), values)
		require.NoError(t, err)
		return parse(t, []byte(strings.Join(docs, "\n---\n")))
	}
	objs := render(map[string]any{
		"replicas":       3,
		"metrics":        map[string]any{"serviceMonitor": map[string]any{"enabled": true}},
		"rbac":           map[string]any{"impersonation": []any{"team-a", "team-b"}},
		"leaderElection": map[string]any{"enabled": false},
	})
	require.Len(t, byKind(objs, "ServiceMonitor"), 1)
	rbs := byKind(objs, "RoleBinding")
	require.Len(t, rbs, 2, "impersonation only in the listed namespaces, no leader election Role")
	require.Equal(t, "team-a", rbs[0].GetNamespace())
	for _, b := range byKind(objs, "ClusterRoleBinding") {
		require.NotEqual(t, "kontinue-impersonator", b.GetName())
	}
	require.Empty(t, byKind(objs, "Role"))
	d := byKind(objs, "Deployment")[0]
	replicas, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
	require.EqualValues(t, 3, replicas)
	require.NotContains(t, fmt.Sprint(nested(d.Object, "spec", "template", "spec", "containers")), "--leader-elect")

	objs = render(map[string]any{"metrics": map[string]any{"enabled": false}, "rbac": map[string]any{"create": false}})
	require.Empty(t, byKind(objs, "Service"))
	require.Empty(t, byKind(objs, "ClusterRole"))
	require.Contains(t, fmt.Sprint(nested(byKind(objs, "Deployment")[0].Object, "spec", "template", "spec", "containers")), "--metrics-bind-address=0")
}

// TestChartDashboard: the controller's dashboard is off by default; on, the
// Deployment passes the flags and names the port, a Service fronts it, and
// Kontinue may impersonate that one ServiceAccount (to read as it), which
// the chart creates when it is in the release namespace but gives no rights.
func TestChartDashboard(t *testing.T) {
	render := func(values map[string]any) []*unstructured.Unstructured {
		docs, err := RenderChart(repo(t), values)
		require.NoError(t, err)
		return parse(t, []byte(strings.Join(docs, "\n---\n")))
	}
	container := func(objs []*unstructured.Unstructured) map[string]any {
		cs := nested(byKind(objs, "Deployment")[0].Object, "spec", "template", "spec", "containers").([]any)
		return cs[0].(map[string]any)
	}
	named := func(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
		for _, o := range byKind(objs, kind) {
			if o.GetName() == name {
				return o
			}
		}
		return nil
	}

	objs := render(nil)
	require.NotContains(t, fmt.Sprint(container(objs)["args"]), "--dashboard")
	require.NotContains(t, fmt.Sprint(container(objs)["ports"]), "dashboard")
	require.Nil(t, named(objs, "Service", "kontinue-dashboard"))
	require.Nil(t, named(objs, "Role", "kontinue-dashboard-impersonator"))

	objs = render(map[string]any{"dashboard": map[string]any{"enabled": true}, "rbac": map[string]any{"impersonation": []any{"team-a"}}})
	args := container(objs)["args"].([]any)
	require.Contains(t, args, "--dashboard-bind-address=:8082")
	require.Contains(t, args, "--dashboard-service-account="+Namespace+"/dashboard-viewer")
	require.Contains(t, container(objs)["ports"], map[string]any{"name": "dashboard", "containerPort": int64(8082), "protocol": "TCP"})
	svc := named(objs, "Service", "kontinue-dashboard")
	require.NotNil(t, svc)
	require.Equal(t, []any{map[string]any{"name": "dashboard", "port": int64(8082), "targetPort": "dashboard", "protocol": "TCP"}}, nested(svc.Object, "spec", "ports"))
	sa := named(objs, "ServiceAccount", "dashboard-viewer")
	require.NotNil(t, sa)
	require.Equal(t, Namespace, sa.GetNamespace())
	role := named(objs, "Role", "kontinue-dashboard-impersonator")
	require.NotNil(t, role)
	require.Equal(t, Namespace, role.GetNamespace())
	require.Equal(t, []rule{{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, ResourceNames: []string{"dashboard-viewer"}, Verbs: []string{"impersonate"}}},
		rules(t, role), "that one account, even when rbac.impersonation lists other namespaces")
	binding := named(objs, "RoleBinding", "kontinue-dashboard-impersonator")
	require.NotNil(t, binding)
	require.Equal(t, []any{map[string]any{"kind": "ServiceAccount", "name": "kontinue", "namespace": Namespace}}, nested(binding.Object, "subjects"))
	for _, b := range append(byKind(objs, "RoleBinding"), byKind(objs, "ClusterRoleBinding")...) {
		for _, s := range nested(b.Object, "subjects").([]any) {
			require.NotEqual(t, "dashboard-viewer", s.(map[string]any)["name"], "the chart gives the dashboard's account no rights (%s)", b.GetName())
		}
	}

	// An account elsewhere, another port, no Service, RBAC brought by the user.
	objs = render(map[string]any{"dashboard": map[string]any{"enabled": true, "port": 9000, "serviceAccount": "team-a/viewer", "service": false},
		"rbac": map[string]any{"create": false}})
	args = container(objs)["args"].([]any)
	require.Contains(t, args, "--dashboard-bind-address=:9000")
	require.Contains(t, args, "--dashboard-service-account=team-a/viewer")
	require.Nil(t, named(objs, "Service", "kontinue-dashboard"))
	require.Nil(t, named(objs, "ServiceAccount", "viewer"), "an account in another namespace is the user's")
	require.Nil(t, named(objs, "Role", "kontinue-dashboard-impersonator"))

	objs = render(map[string]any{"dashboard": map[string]any{"enabled": true, "serviceAccount": "team-a/viewer"}})
	role = named(objs, "Role", "kontinue-dashboard-impersonator")
	require.NotNil(t, role)
	require.Equal(t, "team-a", role.GetNamespace())
	require.Equal(t, []string{"viewer"}, rules(t, role)[0].ResourceNames)

	_, err := RenderChart(repo(t), map[string]any{"dashboard": map[string]any{"enabled": true, "serviceAccount": ""}})
	require.ErrorContains(t, err, "dashboard.serviceAccount")
}

func TestGenerateSetsImage(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	def, err := DefaultImage(repo(t))
	require.NoError(t, err)
	for image, want := range map[string]string{
		"registry.example/kontinue:v1":                 "registry.example/kontinue:v1",
		"localhost:5000/kontinue:v0.1.0":               "localhost:5000/kontinue:v0.1.0",
		"localhost:5000/kontinue":                      "localhost:5000/kontinue:latest",
		"localhost:5000/kontinue:v0.1.0@" + digest:     "localhost:5000/kontinue:v0.1.0@" + digest,
		"registry.example:443/team/kontinue@" + digest: "registry.example:443/team/kontinue@" + digest,
	} {
		b, err := Generate(repo(t), image)
		require.NoError(t, err)
		require.Contains(t, string(b), "image: "+want+"\n", image)
		require.NotContains(t, string(b), "image: "+def)
	}
}

func TestSplitImage(t *testing.T) {
	for _, tc := range []struct{ in, repo, tag, digest string }{
		{"kontinue", "kontinue", "latest", ""},
		{"kontinue:v1", "kontinue", "v1", ""},
		{"localhost:5000/kontinue", "localhost:5000/kontinue", "latest", ""},
		{"localhost:5000/kontinue:v0.1.0", "localhost:5000/kontinue", "v0.1.0", ""},
		{"r.io/a/b:v1@sha256:00", "r.io/a/b", "v1", "sha256:00"},
		{"r.io:5000/a/b@sha256:00", "r.io:5000/a/b", "", "sha256:00"},
	} {
		repo, tag, digest := render.SplitImage(tc.in)
		require.Equal(t, []string{tc.repo, tc.tag, tc.digest}, []string{repo, tag, digest}, tc.in)
	}
}

// installObjects parses the committed install.yaml.
func installObjects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo(t), "deploy", "install.yaml"))
	require.NoError(t, err)
	return parse(t, b)
}

func parse(t *testing.T, b []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range bytes.Split(b, []byte("\n---")) {
		j, err := yaml.YAMLToJSON(doc)
		require.NoError(t, err)
		if string(j) == "null" {
			continue // the header comment
		}
		u := &unstructured.Unstructured{}
		require.NoError(t, u.UnmarshalJSON(j), "%s", doc) // integers stay int64
		require.NotEmpty(t, u.GetAPIVersion(), "document without apiVersion: %s", doc)
		require.NotEmpty(t, u.GetKind())
		require.NotEmpty(t, u.GetName())
		out = append(out, u)
	}
	return out
}

func byKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func TestInstallYAMLContents(t *testing.T) {
	objs := installObjects(t)
	require.Equal(t, "Namespace", objs[0].GetKind(), "the namespace comes first")
	for _, o := range objs {
		switch o.GetKind() {
		case "CustomResourceDefinition", "Namespace", "ClusterRole", "ClusterRoleBinding":
			require.Empty(t, o.GetNamespace(), "%s %s is cluster-scoped", o.GetKind(), o.GetName())
		default:
			require.Equal(t, "kontinue-system", o.GetNamespace(), "%s %s", o.GetKind(), o.GetName())
		}
	}
}

type rule struct {
	APIGroups     []string `json:"apiGroups"`
	Resources     []string `json:"resources"`
	ResourceNames []string `json:"resourceNames"`
	Verbs         []string `json:"verbs"`
}

func rules(t *testing.T, o *unstructured.Unstructured) []rule {
	t.Helper()
	b, err := yaml.Marshal(o.Object["rules"])
	require.NoError(t, err)
	var rs []rule
	require.NoError(t, yaml.Unmarshal(b, &rs))
	return rs
}

// TestRBACLeastPrivilege pins the shape of Kontinue's permissions: what
// would be a privilege escalation fails here, not in a security review.
func TestRBACLeastPrivilege(t *testing.T) {
	objs := installObjects(t)
	var roles []*unstructured.Unstructured
	for _, r := range append(byKind(objs, "ClusterRole"), byKind(objs, "Role")...) {
		if !aggregated(r) { // people's roles: TestAggregatedRoles
			roles = append(roles, r)
		}
	}
	require.Len(t, roles, 4)
	readOnly := []string{"get", "list", "watch"}
	impersonated := 0
	for _, role := range roles {
		for _, r := range rules(t, role) {
			where := role.GetName() + ": " + strings.Join(r.Resources, ",") + " " + strings.Join(r.Verbs, ",")
			require.NotContains(t, r.Verbs, "*", where)
			for _, v := range []string{"escalate", "bind", "deletecollection"} {
				require.NotContains(t, r.Verbs, v, where)
			}
			if slices.Contains(r.Resources, "*") || slices.Contains(r.APIGroups, "*") {
				for _, v := range r.Verbs {
					require.Contains(t, readOnly, v, "wildcard resources are read-only: %s", where)
				}
			}
			if slices.Contains(r.Verbs, "impersonate") {
				impersonated++
				require.Equal(t, []string{""}, r.APIGroups, where)
				require.Equal(t, []string{"serviceaccounts"}, r.Resources, "impersonating users or groups could reach system:masters: %s", where)
				require.Equal(t, []string{"impersonate"}, r.Verbs, where)
			}
			for _, res := range r.Resources {
				// Generated ClusterRunTemplates (runnable: true) are the one
				// kind of its own that Kontinue writes.
				if slices.Contains(r.APIGroups, "carto.run") && !strings.HasSuffix(res, "/status") && res != "clusterruntemplates" {
					for _, v := range r.Verbs {
						require.Contains(t, readOnly, v, "Kontinue writes only the status of its own kinds: %s", where)
					}
				}
				if res == "secrets" || res == "configmaps" {
					t.Fatalf("Kontinue stamps with the owner's service account, never its own: %s", where)
				}
			}
			if slices.Contains(r.Resources, "leases") {
				require.Equal(t, "Role", role.GetKind(), "leases only in Kontinue's namespace: %s", where)
				if !slices.Equal(r.Verbs, []string{"create"}) && !slices.Equal(r.Verbs, []string{"list", "watch"}) {
					require.Equal(t, []string{"kontinue-leader"}, r.ResourceNames, "only its own Lease is written: %s", where)
				}
			}
		}
	}
	require.Equal(t, 1, impersonated, "one impersonation rule")

	// Every role is bound to the ServiceAccount the Deployment uses.
	bound := map[string]bool{}
	for _, b := range append(byKind(objs, "ClusterRoleBinding"), byKind(objs, "RoleBinding")...) {
		subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
		require.Len(t, subjects, 1)
		s := subjects[0].(map[string]any)
		require.Equal(t, map[string]any{"kind": "ServiceAccount", "name": "kontinue", "namespace": "kontinue-system"}, s)
		name, _, _ := unstructured.NestedString(b.Object, "roleRef", "name")
		bound[name] = true
	}
	for _, role := range roles {
		require.True(t, bound[role.GetName()], "%s is bound", role.GetName())
	}
}

// aggregated is true for the roles the chart adds to Kubernetes' built-in
// view, edit and admin roles.
func aggregated(o *unstructured.Unstructured) bool {
	for k := range o.GetLabels() {
		if strings.HasPrefix(k, "rbac.authorization.k8s.io/aggregate-to-") {
			return true
		}
	}
	return false
}

// TestAggregatedRoles: view reads Kontinue's kinds, edit writes only what
// developers submit; neither is bound by the chart, nor grants anything
// beyond carto.run.
func TestAggregatedRoles(t *testing.T) {
	objs := installObjects(t)
	byName := map[string]*unstructured.Unstructured{}
	for _, r := range byKind(objs, "ClusterRole") {
		if aggregated(r) {
			byName[r.GetName()] = r
		}
	}
	require.Len(t, byName, 2)
	view, edit := byName["kontinue-view"], byName["kontinue-edit"]
	require.NotNil(t, view)
	require.NotNil(t, edit)
	require.Equal(t, "true", view.GetLabels()["rbac.authorization.k8s.io/aggregate-to-view"])
	require.Equal(t, "true", edit.GetLabels()["rbac.authorization.k8s.io/aggregate-to-edit"])
	require.Empty(t, edit.GetLabels()["rbac.authorization.k8s.io/aggregate-to-view"], "view may not write")
	for _, r := range rules(t, view) {
		require.Equal(t, []string{"carto.run"}, r.APIGroups)
		require.Equal(t, []string{"get", "list", "watch"}, r.Verbs)
		for _, kind := range []string{"workloads", "deliverables", "runnables", "clustersupplychains", "clusterdeliveries", "clustertemplates", "clusterruntemplates"} {
			require.Contains(t, r.Resources, kind)
		}
	}
	require.Equal(t, []rule{{APIGroups: []string{"carto.run"}, Resources: []string{"workloads", "deliverables", "runnables"},
		Verbs: []string{"create", "update", "patch", "delete"}}}, rules(t, edit))
	for _, b := range append(byKind(objs, "ClusterRoleBinding"), byKind(objs, "RoleBinding")...) {
		name, _, _ := unstructured.NestedString(b.Object, "roleRef", "name")
		require.NotContains(t, []string{"kontinue-view", "kontinue-edit"}, name, "the chart binds no one to them")
	}
	render := func(values map[string]any) []*unstructured.Unstructured {
		docs, err := RenderChart(repo(t), values)
		require.NoError(t, err)
		return parse(t, []byte(strings.Join(docs, "\n---\n")))
	}
	for _, r := range byKind(render(map[string]any{"rbac": map[string]any{"aggregateToDefaultRoles": false}}), "ClusterRole") {
		require.False(t, aggregated(r), r.GetName())
	}
}

// TestStandardLabels: every object carries the recommended labels, with
// the managed-by of the tool that applies it.
func TestStandardLabels(t *testing.T) {
	docs, err := RenderChart(repo(t), nil)
	require.NoError(t, err)
	for _, tc := range []struct {
		objs    []*unstructured.Unstructured
		manager string
	}{{installObjects(t)[1:], "kubectl"}, {parse(t, []byte(strings.Join(docs, "\n---\n"))), "Helm"}} {
		require.NotEmpty(t, tc.objs)
		for _, o := range tc.objs {
			l := o.GetLabels()
			where := o.GetKind() + " " + o.GetName()
			require.Equal(t, "kontinue", l["app.kubernetes.io/name"], where)
			require.Equal(t, Release, l["app.kubernetes.io/instance"], where)
			require.Equal(t, tc.manager, l["app.kubernetes.io/managed-by"], where)
			require.Regexp(t, `^kontinue-[0-9]+\.[0-9]+\.[0-9]+`, l["helm.sh/chart"], where)
			require.NotEmpty(t, l["app.kubernetes.io/version"], where)
		}
	}
}

// TestValuesSchema: values.schema.json refuses a mistyped value before
// anything renders.
func TestValuesSchema(t *testing.T) {
	for _, bad := range []map[string]any{
		{"replica": 3}, // a typo of replicas
		{"workers": "16"},
		{"image": map[string]any{"digest": "latest"}},
		{"rbac": map[string]any{"impersonation": "everywhere"}},
		{"logFormat": "xml"},
	} {
		_, err := RenderChart(repo(t), bad)
		require.Error(t, err, "%v", bad)
		require.Contains(t, err.Error(), "schema", "%v", bad)
	}
	_, err := RenderChart(repo(t), map[string]any{"rbac": map[string]any{"impersonation": []any{"team-a"}}, "logLevel": 4})
	require.NoError(t, err)
}

func TestDeploymentHardened(t *testing.T) {
	deps := byKind(installObjects(t), "Deployment")
	require.Len(t, deps, 1)
	d := deps[0].Object
	replicas, _, _ := unstructured.NestedInt64(d, "spec", "replicas")
	require.EqualValues(t, 2, replicas)
	sa, _, _ := unstructured.NestedString(d, "spec", "template", "spec", "serviceAccountName")
	require.Equal(t, "kontinue", sa)
	pod, _, _ := unstructured.NestedMap(d, "spec", "template", "spec", "securityContext")
	require.Equal(t, true, pod["runAsNonRoot"])
	require.Equal(t, "RuntimeDefault", nested(pod, "seccompProfile", "type"))

	containers, _, _ := unstructured.NestedSlice(d, "spec", "template", "spec", "containers")
	require.Len(t, containers, 1)
	c := containers[0].(map[string]any)
	sc := c["securityContext"].(map[string]any)
	require.Equal(t, false, sc["allowPrivilegeEscalation"])
	require.Equal(t, true, sc["readOnlyRootFilesystem"])
	require.Equal(t, true, sc["runAsNonRoot"])
	require.Equal(t, []any{"ALL"}, nested(sc, "capabilities", "drop"))
	require.Equal(t, "RuntimeDefault", nested(sc, "seccompProfile", "type"))
	mounts, _ := c["volumeMounts"].([]any)
	require.Len(t, mounts, 1)
	require.Equal(t, "/tmp", nested(mounts[0].(map[string]any), "mountPath"), "a writable /tmp next to the read-only root")
	for _, k := range []string{"requests", "limits"} {
		for _, r := range []string{"cpu", "memory"} {
			require.NotNil(t, nested(c, "resources", k, r), "resources.%s.%s", k, r)
		}
	}

	args := []string{}
	for _, a := range c["args"].([]any) {
		args = append(args, a.(string))
	}
	require.Contains(t, args, "--leader-elect")
	require.Contains(t, args, "--leader-election-id=kontinue-leader", "the Lease the Role allows")
	require.Contains(t, args, "--health-probe-bind-address=:8081")
	require.NotContains(t, args, "--install-crds", "CRDs ship in install.yaml; the binary has no right to write them")
	var probePort any
	for _, p := range c["ports"].([]any) {
		if p.(map[string]any)["name"] == "probes" {
			probePort = p.(map[string]any)["containerPort"]
		}
	}
	require.EqualValues(t, 8081, probePort)
	require.Equal(t, "/healthz", nested(c, "livenessProbe", "httpGet", "path"))
	require.Equal(t, "probes", nested(c, "livenessProbe", "httpGet", "port"))
	require.Equal(t, "/readyz", nested(c, "readinessProbe", "httpGet", "path"))
	require.Equal(t, "probes", nested(c, "readinessProbe", "httpGet", "port"))
}

func nested(m map[string]any, path ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(m, path...)
	return v
}

// TestChartShards: sharding.shards renders one Deployment per shard (and the
// default one unless sharding.defaultShard is off), each running --shard on
// its own Lease, which the leader-election Role allows; no selector picks Pods
// of two Deployments (a Pod two budgets select cannot be evicted); the
// metrics Service reaches every replica; the admission policy is there only
// with shards.
func TestChartShards(t *testing.T) {
	render := func(values map[string]any) []*unstructured.Unstructured {
		docs, err := RenderChart(repo(t), values)
		require.NoError(t, err)
		return parse(t, []byte(strings.Join(docs, "\n---\n")))
	}
	args := func(d *unstructured.Unstructured) []string {
		var out []string
		for _, a := range nested(d.Object, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)["args"].([]any) {
			out = append(out, a.(string))
		}
		return out
	}
	selects := func(o *unstructured.Unstructured, path ...string) labels.Selector {
		m, _, err := unstructured.NestedStringMap(o.Object, path...)
		require.NoError(t, err)
		require.NotEmpty(t, m, "%s %s: selector %v", o.GetKind(), o.GetName(), path)
		return labels.SelectorFromSet(m)
	}
	podLabels := func(d *unstructured.Unstructured) labels.Set {
		m, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "labels")
		return m
	}
	// leases are the Leases the Deployments elect on, as the controller
	// names them (leader.go: <id>, or <id>-shard-<shard> with --shard).
	leases := func(deps []*unstructured.Unstructured) []string {
		var out []string
		for _, d := range deps {
			id, shard := "", ""
			for _, a := range args(d) {
				if v, ok := strings.CutPrefix(a, "--leader-election-id="); ok {
					id = v
				}
				if v, ok := strings.CutPrefix(a, "--shard="); ok {
					shard = v
				}
			}
			require.NotEmpty(t, id, d.GetName())
			if shard != "" {
				id += "-shard-" + shard
			}
			out = append(out, id)
		}
		return out
	}
	roleLeases := func(objs []*unstructured.Unstructured) []string {
		for _, r := range rules(t, byKind(objs, "Role")[0]) {
			if slices.Contains(r.Resources, "leases") && slices.Contains(r.Verbs, "update") {
				return r.ResourceNames
			}
		}
		return nil
	}

	objs := render(nil)
	require.Len(t, byKind(objs, "Deployment"), 1)
	require.Empty(t, byKind(objs, "ValidatingAdmissionPolicy"), "no policy without shards")
	require.Equal(t, []string{"kontinue-leader"}, roleLeases(objs))

	objs = render(map[string]any{"sharding": map[string]any{"shards": []any{"a", "on"}},
		"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true}}})
	deps := byKind(objs, "Deployment")
	require.Len(t, deps, 3)
	require.Equal(t, []string{"kontinue", "kontinue-shard-a", "kontinue-shard-on"}, []string{deps[0].GetName(), deps[1].GetName(), deps[2].GetName()})
	require.NotContains(t, strings.Join(args(deps[0]), " "), "--shard")
	require.Contains(t, args(deps[1]), "--shard=a")
	require.Contains(t, args(deps[2]), "--shard=on")
	for _, d := range deps {
		require.Contains(t, args(d), "--leader-elect", d.GetName())
		require.Equal(t, "kontinue", nested(d.Object, "spec", "template", "spec", "serviceAccountName"), "RBAC is shared")
	}
	require.Equal(t, []string{"kontinue-leader", "kontinue-leader-shard-a", "kontinue-leader-shard-on"}, leases(deps))
	require.Equal(t, leases(deps), roleLeases(objs), "the Role allows each Deployment's Lease, and no other")
	require.Equal(t, "on", podLabels(deps[2])["kontinue.dev/controller-shard"], "a label value stays a string")

	pdbs := byKind(objs, "PodDisruptionBudget")
	require.Len(t, pdbs, 3)
	for i, d := range deps {
		sel := selects(d, "spec", "selector", "matchLabels")
		term := nested(d.Object, "spec", "template", "spec", "affinity", "podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution").([]any)[0]
		require.Equal(t, sel.String(), selects(&unstructured.Unstructured{Object: term.(map[string]any)}, "podAffinityTerm", "labelSelector", "matchLabels").String(),
			"%s: replicas of a shard spread over nodes", d.GetName())
		for j, other := range deps {
			require.Equal(t, i == j, sel.Matches(podLabels(other)), "the selector of %s and the Pods of %s", d.GetName(), other.GetName())
			require.Equal(t, i == j, selects(pdbs[i], "spec", "selector", "matchLabels").Matches(podLabels(other)),
				"budget %s and the Pods of %s", pdbs[i].GetName(), other.GetName())
		}
	}
	svc := byKind(objs, "Service")
	require.Len(t, svc, 1)
	for _, d := range deps {
		require.True(t, selects(svc[0], "spec", "selector").Matches(podLabels(d)), "kontinue-metrics reaches the replicas of %s", d.GetName())
	}
	require.True(t, selects(byKind(objs, "ServiceMonitor")[0], "spec", "selector", "matchLabels").Matches(labels.Set(svc[0].GetLabels())))

	vap := byKind(objs, "ValidatingAdmissionPolicy")
	require.Len(t, vap, 1)
	binding := byKind(objs, "ValidatingAdmissionPolicyBinding")
	require.Len(t, binding, 1)
	require.Equal(t, vap[0].GetName(), nested(binding[0].Object, "spec", "policyName"))
	require.Equal(t, []any{"Deny"}, nested(binding[0].Object, "spec", "validationActions"))
	require.Contains(t, fmt.Sprint(nested(vap[0].Object, "spec", "variables")), "['a', 'on']")
	require.Len(t, nested(vap[0].Object, "spec", "validations"), 2, "empty, or a shard not in the list")

	// Without the default shard: no Deployment kontinue, no budget nor
	// Lease for it, and the policy refuses owners without the label too.
	objs = render(map[string]any{"sharding": map[string]any{"shards": []any{"a"}, "defaultShard": false}})
	deps = byKind(objs, "Deployment")
	require.Len(t, deps, 1)
	require.Equal(t, "kontinue-shard-a", deps[0].GetName())
	require.Len(t, byKind(objs, "PodDisruptionBudget"), 1)
	require.Equal(t, []string{"kontinue-leader-shard-a"}, roleLeases(objs))
	validations := nested(byKind(objs, "ValidatingAdmissionPolicy")[0].Object, "spec", "validations").([]any)
	require.Len(t, validations, 3)
	require.Contains(t, validations[2].(map[string]any)["message"], "without the label")

	// The dashboard is the default shard's (its informers read every owner;
	// a shard's replicas keep to their shard).
	objs = render(map[string]any{"sharding": map[string]any{"shards": []any{"a"}}, "dashboard": map[string]any{"enabled": true}})
	deps = byKind(objs, "Deployment")
	require.Contains(t, args(deps[0]), "--dashboard-bind-address=:8082")
	require.NotContains(t, strings.Join(args(deps[1]), " "), "--dashboard")
	for _, s := range byKind(objs, "Service") {
		if s.GetName() == "kontinue-dashboard" {
			require.True(t, selects(s, "spec", "selector").Matches(podLabels(deps[0])))
			require.False(t, selects(s, "spec", "selector").Matches(podLabels(deps[1])))
		}
	}

	objs = render(map[string]any{"sharding": map[string]any{"shards": []any{"a"}, "admissionPolicy": false}})
	require.Empty(t, byKind(objs, "ValidatingAdmissionPolicy"))
	require.Empty(t, byKind(objs, "ValidatingAdmissionPolicyBinding"))

	for msg, values := range map[string]map[string]any{
		"sharding.defaultShard: false needs sharding.shards": {"sharding": map[string]any{"defaultShard": false}},
		"dashboard.enabled needs sharding.defaultShard":      {"sharding": map[string]any{"shards": []any{"a"}, "defaultShard": false}, "dashboard": map[string]any{"enabled": true}},
		"schema": {"sharding": map[string]any{"shards": []any{"A_b"}}},
	} {
		_, err := RenderChart(repo(t), values)
		require.ErrorContains(t, err, msg)
	}
	for _, bad := range []map[string]any{
		{"sharding": map[string]any{"shards": []any{"a", "a"}}},
		{"sharding": map[string]any{"shards": []any{""}}},
		{"sharding": map[string]any{"shards": "a"}},
		{"sharding": map[string]any{"shards": []any{strings.Repeat("a", 64)}}},
		{"shards": []any{"a"}},
	} {
		_, err := RenderChart(repo(t), bad)
		require.ErrorContains(t, err, "schema", "%v", bad)
	}
}

// TestChartGracePeriod: the Pod's termination grace period follows
// shutdownGracePeriod (plus 15 s to release the Lease), whatever form the
// duration takes; a fixed 45 s cut a 60 s shutdown short.
func TestChartGracePeriod(t *testing.T) {
	for in, want := range map[string]int64{"": 45, "60s": 75, "1m30s": 105, "1.5h": 5415, "500ms": 16, "2m0.5s": 136} {
		var values map[string]any
		if in != "" {
			values = map[string]any{"shutdownGracePeriod": in}
		}
		docs, err := RenderChart(repo(t), values)
		require.NoError(t, err, in)
		d := byKind(parse(t, []byte(strings.Join(docs, "\n---\n"))), "Deployment")[0]
		got, _, _ := unstructured.NestedInt64(d.Object, "spec", "template", "spec", "terminationGracePeriodSeconds")
		require.Equal(t, want, got, "shutdownGracePeriod %q", in)
		require.Contains(t, fmt.Sprint(nested(d.Object, "spec", "template", "spec", "containers")), "--shutdown-grace-period="+map[bool]string{true: "30s", false: in}[in == ""])
	}
}
