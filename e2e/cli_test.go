package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	require.Contains(t, out, "NAMESPACE")
	require.Contains(t, out, ns+"  ")
	require.Contains(t, out, chain)

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
	code := cli.MainContext(context.Background(), []string{"get", "workloads", "--context", "e2e-cli"}, nil, &out, &errb)
	require.Equal(t, 0, code, errb.String())
	require.Contains(t, out.String(), ns+"  app", "the context's namespace")

	out.Reset()
	code = cli.MainContext(context.Background(), []string{"get", "workloads", "--context", "no-such-context"}, nil, &out, &errb)
	require.NotEqual(t, 0, code)
}
