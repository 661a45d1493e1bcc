package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"kontinue.dev/kontinue/annotations"
	"kontinue.dev/kontinue/cli"
	"kontinue.dev/kontinue/cli/view"
)

// syncBuffer is a bytes.Buffer safe for a writer goroutine and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// kontinueCLI runs the CLI against the suite's cluster and returns its exit
// status, stdout and stderr.
func kontinueCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	args = append(args, "--kubeconfig", env.kubeconfig)
	code := cli.MainContext(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestCLIGetTreeAndJSON(t *testing.T) {
	ns := newNamespace(t)
	chain := uniq(ns, "chain")
	apply(t, ns, fourStepChain(ns))
	apply(t, ns, workloadYAML(ns, "app", chain, ""))
	waitOwner(t, workloadGVR, ns, "app", "ResourcesSubmitted", "Unknown", "MissingValueAtPath")
	setStatus(t, testGVR, ns, "app-source", map[string]any{"artifact": map[string]any{"url": "https://artifacts/app.tgz", "revision": "abc123"}})
	waitFor(t, testGVR, ns, "app-image", fieldIs("https://artifacts/app.tgz@abc123", "spec", "source"))
	waitFor(t, workloadGVR, ns, "app", func(u *unstructured.Unstructured) string {
		if outs, _ := stepStatus(u, "source-provider")["outputs"].([]any); len(outs) == 0 {
			return "no outputs yet"
		}
		return ""
	})

	code, out, errOut := kontinueCLI(t, "get", "workload", "app", "-n", ns)
	require.Equal(t, 0, code, errOut)
	for _, want := range []string{
		"Workload " + ns + "/app", "ClusterSupplyChain " + chain,
		"source-provider", "image-builder", "config-provider", "app-deploy",
		"ClusterSourceTemplate " + uniq(ns, "source"), "Test " + ns + "/app-source",
		"url: https://artifacts/app.tgz", "revision: abc123",
		"MissingValueAtPath", "Conditions", "SupplyChainReady",
	} {
		require.Contains(t, out, want)
	}
	require.NotContains(t, out, "\x1b[", "no colour when stdout is not a terminal")
	t.Logf("kontinue get:\n%s", out)

	code, out, errOut = kontinueCLI(t, "get", "workload", "app", "-n", ns, "-o", "json")
	require.Equal(t, 0, code, errOut)
	var v view.Owner
	require.NoError(t, json.Unmarshal([]byte(out), &v))
	require.Equal(t, view.APIVersion, v.APIVersion)
	require.Equal(t, "Workload", v.OwnerKind)
	require.Equal(t, chain, v.Chain.Name)
	require.Len(t, v.Steps, 4)
	require.Equal(t, "source-provider", v.Steps[0].Name)
	require.Equal(t, "app-source", v.Steps[0].Stamped.Name)
	require.Equal(t, view.HealthHealthy, v.Steps[0].Health)
	require.Equal(t, "url", v.Steps[0].Outputs[0].Name)
	require.Equal(t, []string{"source-provider"}, v.Steps[1].Inputs)
	require.NotEqual(t, "True", v.Ready.Status)

	code, out, errOut = kontinueCLI(t, "get", "workload", "app", "-n", ns, "-o", "yaml")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "kind: OwnerView\n")

	code, out, errOut = kontinueCLI(t, "get", "workloads", "-n", ns)
	require.Equal(t, 0, code, errOut)
	require.True(t, strings.HasPrefix(out, "NAME   CHAIN"), "no NAMESPACE column for one namespace, as kubectl:\n%s", out)
	require.Contains(t, out, "\napp    "+chain)

	code, out, errOut = kontinueCLI(t, "get", "workloads", "-A")
	require.Equal(t, 0, code, errOut)
	require.True(t, strings.HasPrefix(out, "NAMESPACE"), out)
	require.Contains(t, out, ns+"   app")

	code, out, errOut = kontinueCLI(t, "get", "workloads", "-A", "-o", "json")
	require.Equal(t, 0, code, errOut)
	var l view.List
	require.NoError(t, json.Unmarshal([]byte(out), &l))
	found := false
	for _, it := range l.Items {
		found = found || (it.Namespace == ns && it.Name == "app")
	}
	require.True(t, found, "-A lists every namespace")

	code, _, errOut = kontinueCLI(t, "get", "workload", "nope", "-n", ns)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "not found")
	code, _, _ = kontinueCLI(t, "get", "gadget", "x")
	require.Equal(t, 2, code)

	// Cartographer's short names, a label selector, a status filter.
	code, out, errOut = kontinueCLI(t, "get", "wld", "-n", ns, "-l", "app.example.com/chain="+chain, "--status-selector", "ready=unknown", "-o", "name")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "workload.carto.run/app\n", out)
	code, out, errOut = kontinueCLI(t, "get", "wld", "-n", ns, "-l", "app.example.com/chain=other", "-o", "name")
	require.Equal(t, 0, code, errOut)
	require.Empty(t, out)

	// The chain as a tree, and the templates.
	code, out, errOut = kontinueCLI(t, "get", "csc", chain)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "ClusterSupplyChain "+chain+"   Ready: True (Ready)   owners: 1 (0 ready)")
	require.Contains(t, out, "config-provider   ClusterConfigTemplate "+uniq(ns, "config")+"   ← image built: image-builder")
	code, out, errOut = kontinueCLI(t, "get", "templates")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, "\nClusterImageTemplate +"+uniq(ns, "image")+" +template +mutable +", out)
}

func TestCLIGetWatch(t *testing.T) {
	ns := newNamespace(t)
	chain := uniq(ns, "chain")
	apply(t, ns, fourStepChain(ns))
	apply(t, ns, workloadYAML(ns, "app", chain, ""))
	waitOwner(t, workloadGVR, ns, "app", "ResourcesSubmitted", "Unknown", "MissingValueAtPath")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.MainContext(ctx, []string{"get", "workload", "app", "-n", ns, "--watch", "--kubeconfig", env.kubeconfig}, nil, &out, &errb)
	}()
	eventually(t, 20*time.Second, func() string {
		if !strings.Contains(out.String(), "Workload "+ns+"/app") {
			return "first print missing: " + out.String() + errb.String()
		}
		return ""
	})
	setStatus(t, testGVR, ns, "app-source", map[string]any{"artifact": map[string]any{"url": "https://artifacts/watched.tgz", "revision": "w1"}})
	eventually(t, 30*time.Second, func() string {
		s := out.String()
		if !strings.Contains(s, "\n--- ") || !strings.Contains(s, "url: https://artifacts/watched.tgz") {
			return "no new print with the new output yet:\n" + s
		}
		return ""
	})
	cancel()
	select {
	case code := <-done:
		require.Equal(t, 0, code, errb.String())
	case <-time.After(10 * time.Second):
		t.Fatal("--watch did not stop when its context ended")
	}
}

func TestCLIReconcile(t *testing.T) {
	ns := newNamespace(t)
	chain := uniq(ns, "chain")
	apply(t, ns, fourStepChain(ns))
	apply(t, ns, workloadYAML(ns, "app", chain, ""))
	before := time.Now().Add(-time.Second)

	code, out, errOut := kontinueCLI(t, "reconcile", "workload", "app", "-n", ns)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "reconcile requested")
	w := get(t, workloadGVR, ns, "app")
	v := w.GetAnnotations()[annotations.ReconcileRequest]
	at, err := time.Parse(time.RFC3339Nano, v)
	require.NoError(t, err, v)
	require.True(t, at.After(before), "the current time")
	require.Equal(t, "https://git.example.com/app.git", nested(w.Object, "spec", "source", "git", "url"), "the patch changes nothing else")

	code, out, _ = kontinueCLI(t, "get", "workload", "app", "-n", ns)
	require.Equal(t, 0, code)
	require.Contains(t, out, "reconcile requested at "+v)

	code, _, errOut = kontinueCLI(t, "reconcile", "deliverable", "app", "-n", ns)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "not found")
}

// TestCLIKubeconfigLoading: $KUBECONFIG with several files, --context and
// the context's namespace, as kubectl.
func TestCLIKubeconfigLoading(t *testing.T) {
	ns := newNamespace(t)
	chain := uniq(ns, "chain")
	apply(t, ns, fourStepChain(ns))
	apply(t, ns, workloadYAML(ns, "app", chain, ""))

	real, err := clientcmd.LoadFromFile(env.kubeconfig)
	require.NoError(t, err)
	cur := real.Contexts[real.CurrentContext]
	require.NotNil(t, cur)
	// A second file holding only a context that names the first file's
	// cluster and user, with the test's namespace.
	other := *real.DeepCopy()
	other.Clusters, other.AuthInfos = nil, nil
	ctx := cur.DeepCopy()
	ctx.Namespace = ns
	other.Contexts = map[string]*clientcmdapi.Context{"e2e-cli": ctx}
	other.CurrentContext = ""
	dir := t.TempDir()
	otherPath := filepath.Join(dir, "other")
	require.NoError(t, clientcmd.WriteToFile(other, otherPath))
	t.Setenv("KUBECONFIG", otherPath+string(os.PathListSeparator)+env.kubeconfig)

	var out, errb bytes.Buffer
	code := cli.MainContext(context.Background(), []string{"get", "workloads", "--context", "e2e-cli", "-o", "jsonpath={.items[*].namespace}/{.items[*].name}"}, nil, &out, &errb)
	require.Equal(t, 0, code, errb.String())
	require.Equal(t, ns+"/app", out.String(), "the context's namespace")

	out.Reset()
	code = cli.MainContext(context.Background(), []string{"get", "workloads", "--context", "no-such-context"}, nil, &out, &errb)
	require.NotEqual(t, 0, code)
}

// counting counts the requests a CLI run makes, by method and path.
type counting struct {
	mu sync.Mutex
	n  map[string]int
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (c *counting) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		c.mu.Lock()
		if c.n == nil {
			c.n = map[string]int{}
		}
		key := r.Method + " " + r.URL.Path
		if r.URL.Query().Get("watch") == "true" {
			key = "WATCH " + r.URL.Path
		}
		c.n[key]++
		c.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

// kontinueCLICounting runs the CLI and returns what it printed and the
// requests it made.
func kontinueCLICounting(t *testing.T, args ...string) (int, string, string, map[string]int) {
	t.Helper()
	var out, errb bytes.Buffer
	c := &counting{}
	args = append(args, "--kubeconfig", env.kubeconfig)
	code := cli.New(cli.Env{Stdout: &out, Stderr: &errb, WrapTransport: c.wrap}).Execute(context.Background(), args)
	return code, out.String(), errb.String(), c.n
}

// TestCLIGetListReadsOnce: a list of owners whose steps stamped Runnables
// reads them with one LIST, and the table (which never shows them) not at
// all: never one GET per owner.
func TestCLIGetListReadsOnce(t *testing.T) {
	k := newRunKit(t)
	chain, lint, deploy := uniq(k.ns, "chain"), uniq(k.ns, "lint"), uniq(k.ns, "deploy")
	apply(t, k.ns, k.runnableTrueChain(chain, lint, deploy))
	const owners = 5
	for i := 0; i < owners; i++ {
		k.setCommit(fmt.Sprintf("app%d", i), chain, "c1")
	}
	for i := 0; i < owners; i++ {
		waitFor(t, workloadGVR, k.ns, fmt.Sprintf("app%d", i), func(u *unstructured.Unstructured) string {
			if ref, _ := nested(stepStatus(u, "lint"), "stampedRef").(map[string]any); ref["kind"] != "Runnable" {
				return "no Runnable yet"
			}
			return ""
		})
	}
	wl := "/apis/carto.run/v1alpha1/namespaces/" + k.ns + "/workloads"
	rn := "/apis/carto.run/v1alpha1/namespaces/" + k.ns + "/runnables"

	code, out, errOut, reqs := kontinueCLICounting(t, "get", "workloads", "-n", k.ns)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, owners+1, strings.Count(out, "\n"), out)
	require.Equal(t, map[string]int{"GET " + wl: 1}, reqs, "the table: one LIST")

	code, out, errOut, reqs = kontinueCLICounting(t, "get", "workloads", "-n", k.ns, "-o", "json")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, map[string]int{"GET " + wl: 1, "GET " + rn: 1}, reqs, "the documents: one LIST of owners, one of Runnables")
	var l view.List
	require.NoError(t, json.Unmarshal([]byte(out), &l))
	require.Len(t, l.Items, owners)
	for _, it := range l.Items {
		require.NotNil(t, it.Steps[0].Runnable, "%s: the step's Runnable, from the one LIST", it.Name)
		require.Equal(t, it.Name+"-linter", it.Steps[0].Runnable.Ref.Name)
	}

	code, out, errOut, reqs = kontinueCLICounting(t, "get", "workloads", "-A", "-o", "custom-columns=NAME:.name,RUNNABLE:.steps[0].runnable.ref.name")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, map[string]int{"GET /apis/carto.run/v1alpha1/workloads": 1, "GET /apis/carto.run/v1alpha1/runnables": 1}, reqs)
	// -A: other tests' owners (longer names) may widen the column.
	require.Regexp(t, `\napp3 +app3-linter\n`, out)

	// The Runnables themselves.
	code, out, errOut = kontinueCLI(t, "get", "runnables", "-n", k.ns)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "NAME          READY")
	require.Contains(t, out, "\napp0-linter   ")
}

// TestCLIReconcileWait: the controller records the request it handled
// (status.lastHandledReconcileAt) and `reconcile --wait` waits for it.
func TestCLIReconcileWait(t *testing.T) {
	ns := newNamespace(t)
	chain := uniq(ns, "chain")
	apply(t, ns, fourStepChain(ns))
	apply(t, ns, workloadYAML(ns, "app", chain, ""))
	waitOwner(t, workloadGVR, ns, "app", "ResourcesSubmitted", "Unknown", "MissingValueAtPath")

	code, out, errOut := kontinueCLI(t, "reconcile", "workload", "app", "-n", ns, "--wait", "--timeout", "60s")
	require.Equal(t, 0, code, errOut+out)
	w := get(t, workloadGVR, ns, "app")
	requested := w.GetAnnotations()[annotations.ReconcileRequest]
	require.NotEmpty(t, requested)
	require.Equal(t, requested, nested(w.Object, "status", "lastHandledReconcileAt"), "the controller acknowledged the request")
	require.Contains(t, out, "Workload "+ns+"/app: reconciled; Ready: Unknown (MissingValueAtPath): ")
	code, out, _ = kontinueCLI(t, "get", "workload", "app", "-n", ns)
	require.Equal(t, 0, code)
	require.Contains(t, out, "reconcile requested at "+requested+" (handled)")

	// Ready False: the exit status says so.
	apply(t, ns, workloadYAML(ns, "broken", "no-such-chain", ""))
	waitOwner(t, workloadGVR, ns, "broken", "Ready", "False", "SupplyChainNotFound")
	code, out, errOut = kontinueCLI(t, "reconcile", "workload", "broken", "-n", ns, "--wait", "--timeout", "60s")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "reconciled; Ready: False (SupplyChainNotFound)")
	require.Contains(t, errOut, "not Ready")

	// A wait that ends before the controller answers.
	code, _, errOut = kontinueCLI(t, "reconcile", "workload", "app", "-n", ns, "--wait", "--timeout", "1ms")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "did not handle the request within 1ms")
}

// TestCLIEvents: the owner's events and its stamped objects', merged and
// sorted; nobody else's.
func TestCLIEvents(t *testing.T) {
	ns := newNamespace(t)
	chain := uniq(ns, "chain")
	apply(t, ns, fourStepChain(ns))
	apply(t, ns, workloadYAML(ns, "app", chain, ""))
	waitOwner(t, workloadGVR, ns, "app", "ResourcesSubmitted", "Unknown", "MissingValueAtPath")
	setStatus(t, testGVR, ns, "app-source", map[string]any{"artifact": map[string]any{"url": "https://artifacts/app.tgz", "revision": "abc123"}})
	waitFor(t, testGVR, ns, "app-image", fieldIs("https://artifacts/app.tgz@abc123", "spec", "source"))

	// What another controller says about a stamped object, and about
	// something the workload did not stamp.
	event := func(name, kind, obj, typ, reason, msg string, at time.Time) {
		apply(t, ns, fmt.Sprintf(`
apiVersion: v1
kind: Event
metadata: {name: %s}
involvedObject: {apiVersion: test.run/v1alpha1, kind: %s, namespace: %s, name: %s}
type: %s
reason: %s
message: %q
firstTimestamp: %q
lastTimestamp: %q
count: 1
source: {component: test-controller}
`, name, kind, ns, obj, typ, reason, msg, at.UTC().Format(time.RFC3339), at.UTC().Format(time.RFC3339)))
	}
	event("image-failed", "Test", "app-image", "Warning", "BuildFailed", "the build of app-image failed", time.Now().Add(time.Hour))
	event("unrelated", "Test", "someone-else", "Warning", "BuildFailed", "not ours", time.Now())

	var out string
	eventually(t, 30*time.Second, func() string {
		code, o, errOut := kontinueCLI(t, "events", "workload", "app", "-n", ns)
		if code != 0 {
			return errOut
		}
		out = o
		if !strings.Contains(out, "Workload/app") || !strings.Contains(out, "ResourceOutputChanged") {
			return "no event of the workload's yet:\n" + out
		}
		// The stamped objects are those the workload's status lists, which
		// is written after the events of the same reconcile.
		if !strings.Contains(out, "Test/app-image") {
			return "app-image is not in the workload's status yet:\n" + out
		}
		return ""
	})
	require.True(t, strings.HasPrefix(out, "LAST SEEN   TYPE"), out)
	require.Contains(t, out, "Warning   BuildFailed")
	require.Contains(t, out, "Test/app-image")
	require.Contains(t, out, "the build of app-image failed")
	require.NotContains(t, out, "not ours")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Contains(t, lines[len(lines)-1], "the build of app-image failed", "sorted by time: the newest last")

	code, out, errOut, reqs := kontinueCLICounting(t, "events", "workload", "app", "-n", ns, "--types", "Warning")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, 2, strings.Count(out, "\n"), "the header and the one warning:\n%s", out)
	require.Equal(t, 1, reqs["GET /api/v1/namespaces/"+ns+"/events"], "one LIST of the namespace's events: %v", reqs)

	code, _, errOut = kontinueCLI(t, "events", "workload", "nope", "-n", ns)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "not found")
}

// TestCLICheck: CRDs, the controller's Lease, and what a service account
// may not stamp for a chain.
func TestCLICheck(t *testing.T) {
	ns := newNamespace(t)
	chain := uniq(ns, "chain")
	apply(t, ns, fourStepChain(ns))
	lease := func(renewed time.Time) {
		apply(t, ns, fmt.Sprintf(`
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: check-leader}
spec: {holderIdentity: kontinue-abc_123, leaseDurationSeconds: 15, renewTime: %q}
`, renewed.UTC().Format("2006-01-02T15:04:05.000000Z")))
	}
	check := func(args ...string) (int, string, string) {
		return kontinueCLI(t, append([]string{"check", "--controller-namespace", ns, "--leader-election-id", "check-leader"}, args...)...)
	}

	code, out, _ := check()
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "✔ 13 CustomResourceDefinitions (carto.run/v1alpha1 and Kontinue's own) installed, established, served, and the same as this binary's")
	require.Contains(t, out, "✗ no Lease check-leader and no Deployment kontinue in namespace "+ns)

	// install.yaml's Deployment, its Pods available (as kwok's fake nodes
	// report them, or an image that is not Kontinue), but no Lease: its
	// replicas run with --leader-elect, so no controller leads.
	apply(t, ns, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: kontinue}
spec:
  replicas: 2
  selector: {matchLabels: {app: kontinue}}
  template:
    metadata: {labels: {app: kontinue}}
    spec:
      containers:
      - {name: kontinue, image: kontinue:latest, args: [controller, --leader-elect, --leader-election-id=check-leader]}
`)
	setStatus(t, schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, ns, "kontinue", map[string]any{"replicas": int64(2), "availableReplicas": int64(2), "readyReplicas": int64(2)})
	code, out, _ = check()
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "✗ Deployment "+ns+"/kontinue: 2/2 available, but no replica holds the Lease "+ns+"/check-leader that its --leader-elect needs")

	lease(time.Now())
	code, out, errOut := check()
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "✔ Lease "+ns+"/check-leader held by kontinue-abc_123, renewed ")

	lease(time.Now().Add(-10 * time.Minute))
	code, out, _ = check()
	require.Equal(t, 1, code)
	require.Contains(t, out, "✗ Lease "+ns+"/check-leader held by kontinue-abc_123 but last renewed 10m")

	// An account that may only write ConfigMaps.
	lease(time.Now())
	apply(t, ns, `
apiVersion: v1
kind: ServiceAccount
metadata: {name: limited}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: limited}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [create, patch, delete]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: limited}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: limited}
subjects: [{kind: ServiceAccount, name: limited}]
`)
	code, out, _ = check("--chain", chain, "-n", ns, "--service-account", "limited")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "► service account "+ns+"/limited stamping for ClusterSupplyChain "+chain+" in namespace "+ns)
	require.Contains(t, out, "✔ configmaps (step config-provider, app-deploy): may create, patch, delete")
	require.Contains(t, out, "✗ tests.test.run (step source-provider, image-builder): may not create, patch, delete in "+ns)

	// The namespace's default account may stamp everything (newNamespace binds it).
	code, out, errOut = check("--chain", chain, "-n", ns)
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "✔ tests.test.run (step source-provider, image-builder): may create, patch, delete")

	code, out, _ = check("--chain", chain, "-n", ns, "--service-account", "ghost")
	require.Equal(t, 1, code)
	require.Contains(t, out, "✗ ServiceAccount "+ns+"/ghost does not exist")
}

// TestCLICompletionFromCluster: names complete from the cluster, in the
// namespace of -n, and -n itself completes namespaces (not files).
func TestCLICompletionFromCluster(t *testing.T) {
	ns := newNamespace(t)
	chain := uniq(ns, "chain")
	apply(t, ns, fourStepChain(ns))
	apply(t, ns, workloadYAML(ns, "app", chain, ""))
	complete := func(args ...string) string {
		var out, errb bytes.Buffer
		// The word being completed comes last, so the kubeconfig goes first.
		code := cli.MainContext(context.Background(), append([]string{"__complete", "--kubeconfig", env.kubeconfig}, args...),
			strings.NewReader(""), &out, &errb)
		require.Equal(t, 0, code, errb.String())
		return out.String()
	}
	require.Equal(t, "app\n:4\n", complete("-n", ns, "get", "workload", ""))
	require.Equal(t, "app\n:4\n", complete("reconcile", "workload", "-n", ns, "a"))
	require.Equal(t, ns+"\n:4\n", complete("get", "workload", "-n", ns))
	require.Equal(t, ns+"\n:4\n", complete("get", "workload", "--namespace", ns))
}
