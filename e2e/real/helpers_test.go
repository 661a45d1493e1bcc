package e2ereal

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
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

	"kontinue.dev/kontinue/hack/localcluster"
)

var (
	workloadGVR    = schema.GroupVersionResource{Group: "carto.run", Version: "v1alpha1", Resource: "workloads"}
	deliverableGVR = schema.GroupVersionResource{Group: "carto.run", Version: "v1alpha1", Resource: "deliverables"}
	runnableGVR    = schema.GroupVersionResource{Group: "carto.run", Version: "v1alpha1", Resource: "runnables"}
	configMapGVR   = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	nodeGVR        = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	podGVR         = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	nsGVR          = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	saGVR          = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	jobGVR         = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
	deploymentGVR  = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	taskRunGVR     = schema.GroupVersionResource{Group: "tekton.dev", Version: "v1", Resource: "taskruns"}
	// taskRunV1beta1GVR reads TaskRuns through Tekton's conversion webhook.
	taskRunV1beta1GVR = schema.GroupVersionResource{Group: "tekton.dev", Version: "v1beta1", Resource: "taskruns"}
	pipelineRunGVR    = schema.GroupVersionResource{Group: "tekton.dev", Version: "v1", Resource: "pipelineruns"}
	schemaRS          = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}
	crGVR             = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}
)

// --- readiness of a cluster started elsewhere ------------------------------

// waitKwokReady waits until the cluster has a node kwok manages that is
// Ready and untainted: Pods can be scheduled and played.
func waitKwokReady(ctx context.Context, dyn dynamic.Interface, timeout time.Duration) error {
	return until(ctx, timeout, func() error {
		l, err := dyn.Resource(nodeGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, n := range l.Items {
			if n.GetAnnotations()["kwok.x-k8s.io/node"] != "fake" {
				continue
			}
			taints, _, _ := unstructured.NestedSlice(n.Object, "spec", "taints")
			if fmt.Sprint(condition(n.Object, "Ready")["status"]) == "True" && len(taints) == 0 {
				return nil
			}
		}
		return fmt.Errorf("no kwok node (annotation kwok.x-k8s.io/node=fake) is Ready and untainted among %d nodes", len(l.Items))
	})
}

// waitTektonReady waits until a one-step TaskRun succeeds through Tekton's
// controller (and kwok's played Pod), then deletes it.
func waitTektonReady(ctx context.Context, dyn dynamic.Interface, timeout time.Duration) error {
	tr := obj(`
apiVersion: tekton.dev/v1
kind: TaskRun
metadata: {generateName: e2e-real-canary-}
spec:
  taskSpec:
    steps: [{name: ok, image: tekton.invalid/canary, command: ["true"]}]
`)
	r := dyn.Resource(taskRunGVR).Namespace(localcluster.TektonNamespace)
	var created *unstructured.Unstructured
	err := until(ctx, timeout, func() error {
		var err error
		if created == nil {
			if created, err = r.Create(ctx, tr, metav1.CreateOptions{}); err != nil {
				created = nil
				return err
			}
		}
		got, err := r.Get(ctx, created.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := condition(got.Object, "Succeeded"); fmt.Sprint(c["status"]) != "True" {
			return fmt.Errorf("canary TaskRun %s: Succeeded %v", created.GetName(), c)
		}
		return nil
	})
	if created != nil {
		bg := metav1.DeletePropagationBackground
		_ = r.Delete(ctx, created.GetName(), metav1.DeleteOptions{PropagationPolicy: &bg})
	}
	return err
}

func until(ctx context.Context, timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// --- the Kontinue process --------------------------------------------------

func buildKontinue(root string) (string, error) {
	path := filepath.Join(root, "_output", "bin", "kontinue-e2e-real")
	cmd := exec.Command("go", "build", "-o", path, ".")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return path, nil
}

// kontinueProc is one Kontinue process.
type kontinueProc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	metrics string // http://host:port
	done    chan struct{}
}

var procs struct {
	mu sync.Mutex
	n  int
}

// startKontinue starts the binary against the suite's cluster, logging
// JSON to _output/e2e-real-kontinue-<name>-<pid>.log.
func startKontinue(name string) (*kontinueProc, error) {
	path := logPath(name)
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	metrics := freeAddr()
	cmd := exec.Command(env.bin, "controller",
		"--kubeconfig="+env.kubeconfig,
		"--metrics-bind-address="+metrics,
		"--health-probe-bind-address="+freeAddr(),
		"--log-format=json",
		"--shutdown-grace-period=5s",
		"--log-level=debug",
	)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	p := &kontinueProc{name: name, cmd: cmd, logPath: path, metrics: "http://" + metrics, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "127.0.0.1:0"
	}
	defer l.Close()
	return l.Addr().String()
}

// counter sums the series of metric name (every label set).
func (p *kontinueProc) counter(name string) (float64, error) {
	body, err := p.scrape()
	if err != nil {
		return 0, err
	}
	var total float64
	for _, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		_, value, _ := strings.Cut(rest, " ")
		if i := strings.LastIndex(rest, "} "); i >= 0 {
			value = rest[i+2:]
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return 0, fmt.Errorf("metrics line %q: %v", line, err)
		}
		total += v
	}
	return total, nil
}

// scrape reads the process's /metrics.
func (p *kontinueProc) scrape() (string, error) {
	resp, err := http.Get(p.metrics + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// writes sums kontinue_api_requests_total over the verbs that write.
func (p *kontinueProc) writes() (float64, error) {
	body, err := p.scrape()
	if err != nil {
		return 0, err
	}
	var total float64
	for _, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(line, "kontinue_api_requests_total{")
		if !ok {
			continue
		}
		labels, value, _ := strings.Cut(rest, "} ")
		if strings.Contains(labels, `verb="GET"`) || strings.Contains(labels, `verb="LIST"`) || strings.Contains(labels, `verb="WATCH"`) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return 0, fmt.Errorf("metrics line %q: %v", line, err)
		}
		total += v
	}
	return total, nil
}

// kill sends SIGKILL and waits for the exit.
func (p *kontinueProc) kill() {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// kill9 kills the running Kontinue with SIGKILL and starts a new process
// (empty caches, nothing remembered but what the cluster holds).
func kill9(t *testing.T) {
	t.Helper()
	env.kontinue.kill()
	procs.mu.Lock()
	procs.n++
	name := fmt.Sprintf("k%d", procs.n)
	procs.mu.Unlock()
	p, err := startKontinue(name)
	require.NoError(t, err)
	env.kontinue = p
}

// --- objects ---------------------------------------------------------------

const stamperRole = "kontinue-e2e-real-stamper"

// setupRBAC creates the ClusterRole test namespaces bind to their default
// service account: what a platform team grants a supply chain that runs
// Jobs, Deployments and Tekton runs.
func setupRBAC(ctx context.Context) error {
	role := obj(`
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: ` + stamperRole + `}
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [tekton.dev]
  resources: [pipelineruns, taskruns]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [carto.run]
  resources: [runnables, deliverables]
  verbs: [get, list, watch, create, update, patch, delete]
`)
	_, err := env.dyn.Resource(crGVR).Apply(ctx, role.GetName(), role, metav1.ApplyOptions{FieldManager: "e2e-real", Force: true})
	return err
}

func obj(y string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		panic(fmt.Sprintf("bad test YAML: %v\n%s", err, y))
	}
	return u
}

var (
	mapperOnce sync.Once
	mapper     *restmapper.DeferredDiscoveryRESTMapper
)

func resourceFor(t testing.TB, u *unstructured.Unstructured, ns string) dynamic.ResourceInterface {
	t.Helper()
	mapperOnce.Do(func() {
		mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(env.cfg)))
	})
	gvk := u.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		mapper.Reset()
		m, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	require.NoError(t, err, "mapping %s", gvk)
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
func apply(t testing.TB, ns, y string) {
	t.Helper()
	for _, doc := range bytes.Split([]byte(y), []byte("\n---")) {
		u := &unstructured.Unstructured{}
		require.NoError(t, yaml.Unmarshal(doc, &u.Object))
		if len(u.Object) == 0 {
			continue
		}
		r := resourceFor(t, u, ns)
		_, err := r.Apply(context.Background(), u.GetName(), u, metav1.ApplyOptions{FieldManager: "e2e-real", Force: true})
		require.NoError(t, err, "apply %s %s", u.GetKind(), u.GetName())
		if u.GetNamespace() == "" {
			name := u.GetName()
			t.Cleanup(func() {
				if !keep(t) {
					_ = r.Delete(context.Background(), name, metav1.DeleteOptions{})
				}
			})
		}
	}
}

// newNamespace creates a namespace whose default service account may stamp
// what the suite's chains stamp, and deletes it when the test ends (kept
// when the test fails and E2E_KEEP is set). It returns once the service
// account controller has made that account: a Pod or a TaskRun created
// before it exists is refused (Tekton fails the TaskRun for good: "failed
// to create task run pod: serviceaccounts "default" not found", seen in a
// CI rehearsal beside two robustness sweeps).
func newNamespace(t testing.TB) string {
	t.Helper()
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"generateName": "real-"}}}
	got, err := env.dyn.Resource(nsGVR).Create(context.Background(), ns, metav1.CreateOptions{})
	require.NoError(t, err)
	name := got.GetName()
	t.Cleanup(func() {
		if !keep(t) {
			_ = env.dyn.Resource(nsGVR).Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	})
	apply(t, name, `
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: stamper}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: `+stamperRole+`}
subjects: [{kind: ServiceAccount, name: default, namespace: `+name+`}]
`)
	waitFor(t, saGVR, name, "default", 30*time.Second, func(map[string]any) string { return "" })
	return name
}

// keep says whether to leave a failed test's objects for a look
// (E2E_KEEP set).
func keep(t testing.TB) bool { return t.Failed() && os.Getenv("E2E_KEEP") != "" }

// uniq makes a cluster-scoped name unique to the test's namespace.
func uniq(ns, name string) string { return name + "-" + strings.TrimPrefix(ns, "real-") }

func tryGet(gvr schema.GroupVersionResource, ns, name string) (*unstructured.Unstructured, error) {
	var r dynamic.ResourceInterface = env.dyn.Resource(gvr)
	if ns != "" {
		r = env.dyn.Resource(gvr).Namespace(ns)
	}
	return r.Get(context.Background(), name, metav1.GetOptions{})
}

func get(t testing.TB, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := tryGet(gvr, ns, name)
	require.NoError(t, err)
	return u
}

func gone(gvr schema.GroupVersionResource, ns, name string) bool {
	_, err := tryGet(gvr, ns, name)
	return apierrors.IsNotFound(err)
}

// list returns the objects matching selector, oldest first.
func list(t testing.TB, gvr schema.GroupVersionResource, ns, selector string) []unstructured.Unstructured {
	t.Helper()
	l, err := env.dyn.Resource(gvr).Namespace(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	require.NoError(t, err)
	items := l.Items
	sort.SliceStable(items, func(i, j int) bool {
		a, b := items[i].GetCreationTimestamp(), items[j].GetCreationTimestamp()
		if a.Equal(&b) {
			return items[i].GetName() < items[j].GetName()
		}
		return a.Before(&b)
	})
	return items
}

// eventually polls f until it returns "" (done) or timeout passes; the
// failure says what f last saw.
func eventually(t testing.TB, timeout time.Duration, f func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		msg := f()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not after %s: %s", timeout, msg)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// condition returns the condition typ of obj.status.conditions (nil if none).
func condition(obj map[string]any, typ string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(obj, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
}

func nested(obj map[string]any, path ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(obj, path...)
	return v
}

// step returns the status entry of a step of an owner (nil if none).
func step(u *unstructured.Unstructured, name string) map[string]any {
	res, _, _ := unstructured.NestedSlice(u.Object, "status", "resources")
	for _, r := range res {
		if m, ok := r.(map[string]any); ok && m["name"] == name {
			return m
		}
	}
	return nil
}

func stepCondition(u *unstructured.Unstructured, name, typ string) map[string]any {
	s := step(u, name)
	if s == nil {
		return nil
	}
	conds, _ := s["conditions"].([]any)
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
}

// waitStep waits until a step's condition has status and reason (any
// reason when reason is "") and returns the owner.
func waitStep(t testing.TB, gvr schema.GroupVersionResource, ns, owner, stepName, typ, status, reason string, timeout time.Duration) *unstructured.Unstructured {
	t.Helper()
	var u *unstructured.Unstructured
	eventually(t, timeout, func() string {
		var err error
		if u, err = tryGet(gvr, ns, owner); err != nil {
			return err.Error()
		}
		c := stepCondition(u, stepName, typ)
		if fmt.Sprint(c["status"]) != status || (reason != "" && c["reason"] != reason) {
			return fmt.Sprintf("%s step %s: %s is %v, want %s/%s; owner conditions %v", owner, stepName, typ, c, status, reason,
				nested(u.Object, "status", "conditions"))
		}
		return ""
	})
	return u
}

// waitOwner waits until an owner's condition has status and reason.
func waitOwner(t testing.TB, gvr schema.GroupVersionResource, ns, name, typ, status, reason string, timeout time.Duration) *unstructured.Unstructured {
	t.Helper()
	var u *unstructured.Unstructured
	eventually(t, timeout, func() string {
		var err error
		if u, err = tryGet(gvr, ns, name); err != nil {
			return err.Error()
		}
		c := condition(u.Object, typ)
		if fmt.Sprint(c["status"]) != status || (reason != "" && c["reason"] != reason) {
			return fmt.Sprintf("%s: %s is %v, want %s/%s; all conditions %v", name, typ, c, status, reason,
				nested(u.Object, "status", "conditions"))
		}
		return ""
	})
	return u
}

// waitFor waits until check, given the object, returns "" and returns the
// object.
func waitFor(t testing.TB, gvr schema.GroupVersionResource, ns, name string, timeout time.Duration, check func(map[string]any) string) *unstructured.Unstructured {
	t.Helper()
	var u *unstructured.Unstructured
	eventually(t, timeout, func() string {
		var err error
		if u, err = tryGet(gvr, ns, name); err != nil {
			return err.Error()
		}
		if msg := check(u.Object); msg != "" {
			return fmt.Sprintf("%s %s: %s; status %v", gvr.Resource, name, msg, u.Object["status"])
		}
		return ""
	})
	return u
}
