//go:build unix

package localcluster

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const repoRoot = "../.."

// binDir returns the folder with the control-plane binaries. The tests that
// need them are skipped when they are absent, unless KONTINUE_REQUIRE_CLUSTER
// is set (then they fail).
func binDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("LOCAL_CLUSTER_BIN_DIR")
	if dir == "" {
		var err error
		if dir, err = CachedBinDir(repoRoot); err != nil {
			t.Fatal(err)
		}
	}
	if err := HaveBinaries(dir); err != nil {
		if os.Getenv("KONTINUE_REQUIRE_CLUSTER") != "" {
			t.Fatalf("KONTINUE_REQUIRE_CLUSTER is set but the control-plane binaries are missing: %v (run hack/local-cluster.sh install)", err)
		}
		t.Skipf("control-plane binaries missing: %v (run hack/local-cluster.sh install; set KONTINUE_REQUIRE_CLUSTER=1 to fail instead)", err)
	}
	return dir
}

// logWriter sends progress lines to t.Log and keeps them.
type logWriter struct {
	t   *testing.T
	mu  sync.Mutex
	buf strings.Builder
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (w *logWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// api does a raw JSON request as the admin.
type api struct {
	t      *testing.T
	host   string
	client *http.Client
}

func (a api) do(method, path string, body any) (int, map[string]any) {
	a.t.Helper()
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			a.t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, a.host+path, r)
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	var out map[string]any
	_ = json.Unmarshal(data, &out)
	return resp.StatusCode, out
}

func (a api) must(want int, method, path string, body any) map[string]any {
	a.t.Helper()
	code, out := a.do(method, path, body)
	if code != want {
		a.t.Fatalf("%s %s: got %d, want %d: %v", method, path, code, want, out)
	}
	return out
}

func field(obj map[string]any, path ...string) string {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = m[p]
	}
	s, _ := cur.(string)
	return s
}

func TestCluster(t *testing.T) {
	bins := binDir(t)
	versions, err := PinnedVersions(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	t0 := time.Now()
	c, err := Start(ctx, Options{BinDir: bins, Dir: t.TempDir(), Log: &logWriter{t: t}, Audit: &Audit{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	t.Logf("START TIME: %.2fs (%s)", time.Since(t0).Seconds(), c.Host)
	cancel() // the components must not depend on Start's context

	client, err := c.HTTPClient()
	if err != nil {
		t.Fatal(err)
	}
	a := api{t: t, host: c.Host, client: client}

	// /readyz and /version.
	resp, err := client.Get(c.Host + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		t.Fatalf("/readyz: %s %q", resp.Status, body)
	}
	if v := field(a.must(http.StatusOK, "GET", "/version", nil), "gitVersion"); v != versions.Kubernetes {
		t.Fatalf("/version gitVersion = %q, want %q", v, versions.Kubernetes)
	}

	// Garbage collection: a ConfigMap owned by another one goes with it.
	a.must(http.StatusCreated, "POST", "/api/v1/namespaces", map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "gc-test"},
	})
	cms := "/api/v1/namespaces/gc-test/configmaps"
	owner := a.must(http.StatusCreated, "POST", cms, map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "owner"},
	})
	uid := field(owner, "metadata", "uid")
	if uid == "" {
		t.Fatalf("owner has no uid: %v", owner)
	}
	a.must(http.StatusCreated, "POST", cms, map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{
			"name": "child",
			"ownerReferences": []any{map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid,
			}},
		},
		"data": map[string]any{"k": "v"},
	})
	checkAudit(t, c.AuditLog, uid)
	a.must(http.StatusOK, "DELETE", cms+"/owner", nil)
	gcStart := time.Now()
	for {
		code, _ := a.do("GET", cms+"/child", nil)
		if code == http.StatusNotFound {
			t.Logf("child garbage-collected after %.2fs", time.Since(gcStart).Seconds())
			break
		}
		if code != http.StatusOK {
			t.Fatalf("GET child: %d", code)
		}
		if time.Since(gcStart) > 30*time.Second {
			t.Fatal("child ConfigMap still there 30s after its owner was deleted: the garbage collector does not work")
		}
		time.Sleep(100 * time.Millisecond)
	}

	// TokenRequest for the default ServiceAccount, and the token
	// authenticates (403 as that user, not 401).
	tr := a.must(http.StatusCreated, "POST", "/api/v1/namespaces/default/serviceaccounts/default/token", map[string]any{
		"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": map[string]any{},
	})
	token := field(tr, "status", "token")
	if token == "" {
		t.Fatalf("TokenRequest returned no token: %v", tr)
	}
	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(c.CAFile)
	pool.AppendCertsFromPEM(caPEM)
	tokenClient := &http.Client{Transport: client.Transport.(*http.Transport).Clone()}
	tokenClient.Transport.(*http.Transport).TLSClientConfig.Certificates = nil
	req, _ := http.NewRequest("GET", c.Host+"/api/v1/namespaces/kube-system/secrets", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err = tokenClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "system:serviceaccount:default:default") {
		t.Fatalf("request with the service-account token: %s %s", resp.Status, body)
	}

	// Stop: every process is gone.
	procs := c.Processes()
	if len(procs) != 3 {
		t.Fatalf("processes: %+v", procs)
	}
	t1 := time.Now()
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("STOP TIME: %.2fs", time.Since(t1).Seconds())
	for _, p := range procs {
		if err := syscall.Kill(p.Pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("%s (pid %d) still exists after Stop (kill 0: %v)", p.Name, p.Pid, err)
		}
	}
	for _, p := range c.Processes() {
		if p.Running {
			t.Errorf("%s reported running after Stop", p.Name)
		}
	}
	if _, err := os.Stat(filepath.Join(c.Dir, pidsFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pids file still there after Stop: %v", err)
	}
	if err := c.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// checkAudit: the audit log has the creates of gc-test's ConfigMaps with
// their bodies (the child's owner reference names the owner's uid) and no
// read.
func checkAudit(t *testing.T, path, ownerUID string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var child map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		if v := field(ev, "verb"); v == "get" || v == "list" || v == "watch" {
			t.Errorf("a read is in the audit log: %s", line)
		}
		if field(ev, "verb") == "create" && field(ev, "objectRef", "namespace") == "gc-test" && field(ev, "objectRef", "name") == "child" {
			child = ev
		}
	}
	if child == nil {
		t.Fatalf("no create of gc-test/child in the audit log %s", path)
	}
	resp, _ := child["responseObject"].(map[string]any)
	refs, _ := field2(resp, "metadata", "ownerReferences").([]any)
	if field(resp, "metadata", "uid") == "" || len(refs) != 1 || refs[0].(map[string]any)["uid"] != ownerUID || field(resp, "data", "k") != "v" {
		t.Fatalf("the create of child is recorded without its body: %v", child)
	}
	if field(child, "user", "username") != "kontinue-admin" {
		t.Fatalf("the create of child is recorded as %q", field(child, "user", "username"))
	}
}

func field2(obj map[string]any, path ...string) any {
	var cur any = obj
	for _, p := range path {
		m, _ := cur.(map[string]any)
		cur = m[p]
	}
	return cur
}

// TestStartRetriesBusyPort hands etcd and the apiserver a taken port first.
func TestStartRetriesBusyPort(t *testing.T) {
	bins := binDir(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port
	calls := 0
	freePorts = func(n int) ([]int, error) {
		calls++
		ports, err := pickFreePorts(n)
		if err == nil && (calls == 1 || calls == 3) { // first etcd and first apiserver attempt
			ports[0] = busyPort
		}
		return ports, err
	}
	t.Cleanup(func() { freePorts = pickFreePorts })

	log := &logWriter{t: t}
	c, err := Start(context.Background(), Options{BinDir: bins, Dir: t.TempDir(), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if strings.Contains(c.Host, ":"+strconv.Itoa(busyPort)) {
		t.Fatalf("apiserver on the busy port: %s", c.Host)
	}
	if n := strings.Count(log.String(), "retrying with new ports"); n != 2 {
		t.Fatalf("%d retries logged, want 2", n)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
}

// fakeBins writes shell scripts standing in for the three binaries.
func fakeBins(t *testing.T, etcd string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range Binaries {
		script := "#!/bin/sh\necho fake; exit 1\n"
		if name == etcdName {
			script = "#!/bin/sh\n" + etcd
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestStartFailureReportsStepAndLogTail(t *testing.T) {
	bins := fakeBins(t, `for i in $(seq 1 30); do echo "etcd line $i"; done; exit 3`+"\n")
	_, err := Start(context.Background(), Options{BinDir: bins, Dir: t.TempDir()})
	if err == nil {
		t.Fatal("Start succeeded with a failing etcd")
	}
	msg := err.Error()
	t.Log(msg)
	for _, want := range []string{"start etcd", "exited", "etcd line 30", "etcd line 11", "last 20 lines"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q", want)
		}
	}
	if strings.Contains(msg, "etcd line 10\n") {
		t.Error("error has more than the last 20 lines")
	}
}

func TestStartCancelledStopsWhatItStarted(t *testing.T) {
	// A "etcd" that never becomes healthy and records its pid.
	bins := fakeBins(t, "echo $$ > \"$PWD/fake-etcd.pid\"\nexec sleep 60\n")
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	t0 := time.Now()
	_, err := Start(ctx, Options{BinDir: bins, Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "start etcd") || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Start: %v", err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("Start took %s after its context ended", d)
	}
	data, err := os.ReadFile(filepath.Join(dir, "fake-etcd.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	if pid <= 0 || syscall.Kill(pid, 0) == nil {
		t.Fatalf("fake etcd (pid %d) still runs", pid)
	}
}

func TestStartRefusesForeignDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "precious"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Start(context.Background(), Options{BinDir: fakeBins(t, "exit 1\n"), Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "refusing to wipe") {
		t.Fatalf("Start: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "precious")); err != nil {
		t.Fatal("the foreign file was removed")
	}
}

func TestPKI(t *testing.T) {
	p, err := newPKI()
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(p.ca.cert)
	for _, host := range []string{"127.0.0.1", "localhost", "kubernetes.default.svc", "10.0.0.1"} {
		if _, err := p.apiserver.cert.Verify(x509.VerifyOptions{DNSName: host, Roots: roots}); err != nil {
			t.Errorf("serving certificate for %s: %v", host, err)
		}
	}
	for _, kp := range []*keyPair{p.admin, p.kcm} {
		opts := x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		if _, err := kp.cert.Verify(opts); err != nil {
			t.Errorf("client certificate %s: %v", kp.cert.Subject, err)
		}
		if fmt.Sprint(kp.cert.Subject.Organization) != "[system:masters]" {
			t.Errorf("client certificate %s: organization %v", kp.cert.Subject, kp.cert.Subject.Organization)
		}
	}
}

// TestAttachStopsOnlyRecordedProcesses checks that Stop on an attached
// cluster kills a recorded process that runs from the state folder and
// leaves alone a pid that now belongs to something else.
func TestAttachStopsOnlyRecordedProcesses(t *testing.T) {
	dir := t.TempDir()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip(err)
	}
	// Ours: the state folder is in its command line ($0).
	ours := exec.Command(sh, "-c", "while :; do sleep 0.1; done", dir)
	// Not ours: same binary, but unrelated to the folder.
	foreign := exec.Command(sh, "-c", "while :; do sleep 0.1; done", "elsewhere")
	for _, c := range []*exec.Cmd{ours, foreign} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Process.Kill(); _ = c.Wait() }()
		// Start returns once the child began its exec, which may not have
		// set up its arguments yet: /proc/<pid>/cmdline can still be empty
		// (CI saw "ours" not running). Wait for the command line first.
		arg := c.Args[len(c.Args)-1]
		deadline := time.Now().Add(10 * time.Second)
		for {
			args, _ := cmdline(c.Process.Pid)
			if len(args) > 0 && args[len(args)-1] == arg {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pid %d: command line %q after 10s", c.Process.Pid, args)
			}
			time.Sleep(time.Millisecond)
		}
	}
	pids := fmt.Sprintf("etcd\t%d\t%s\nkube-apiserver\t%d\t%s\n", ours.Process.Pid, sh, foreign.Process.Pid, sh)
	if err := os.WriteFile(filepath.Join(dir, pidsFile), []byte(pids), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Attach(dir)
	if err != nil {
		t.Fatal(err)
	}
	ps := c.Processes()
	if len(ps) != 2 || !ps[0].Running || ps[1].Running {
		t.Fatalf("processes: %+v", ps)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if alive(ours.Process.Pid) {
		t.Error("the recorded process survived Stop")
	}
	if !alive(foreign.Process.Pid) {
		t.Error("Stop killed a process that was not ours")
	}
	if _, err := Attach(dir); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Attach after Stop: %v", err)
	}
}

// The real-controllers options are checked before anything starts or the
// state folder is touched.
func TestStartRefusesIncompleteRealOptions(t *testing.T) {
	bins := binDir(t)
	for name, tc := range map[string]struct {
		opts Options
		want string
	}{
		"Tekton without Workloads": {Options{Tekton: &Tekton{Dir: t.TempDir()}}, "Options.Tekton needs Options.Workloads"},
		"no kwok":                  {Options{Workloads: &Workloads{}}, "Workloads.KwokBinary is empty"},
		"kwok missing":             {Options{Workloads: &Workloads{KwokBinary: "/nonexistent/kwok"}}, "no such file"},
		"no Tekton folder":         {Options{Workloads: &Workloads{KwokBinary: "/bin/true"}, Tekton: &Tekton{}}, "Tekton.Dir is empty"},
		"no Tekton controller":     {Options{Workloads: &Workloads{KwokBinary: "/bin/true"}, Tekton: &Tekton{Dir: t.TempDir()}}, "run hack/install-tekton.sh"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			tc.opts.BinDir, tc.opts.Dir = bins, dir
			_, err := Start(context.Background(), tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start: %v, want an error containing %q", err, tc.want)
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the state folder was touched: %v", err)
			}
		})
	}
}

// The default kwok Stages are well-formed YAML, one Pod stage per step of a
// Pod's life the suite relies on.
func TestDefaultStages(t *testing.T) {
	docs, err := splitYAML(DefaultStages)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range docs {
		if d["kind"] != "Stage" || str(d, "spec", "resourceRef", "kind") != "Pod" {
			t.Fatalf("not a Pod Stage: %v", d)
		}
		names = append(names, str(d, "metadata", "name"))
	}
	if got := strings.Join(names, ","); got != "kontinue-pod-delete,kontinue-pod-start,kontinue-pod-complete" {
		t.Fatalf("stages %s", got)
	}
}

// Every Service reference of a CRD's conversion webhook and of a webhook
// configuration gets the webhook's port; other objects are left alone.
func TestWebhookPort(t *testing.T) {
	svc := func() map[string]any {
		return map[string]any{"service": map[string]any{"name": "tekton-pipelines-webhook", "namespace": "tekton-pipelines"}}
	}
	for _, tc := range []struct {
		name string
		obj  map[string]any
		want string
	}{
		{"crd", map[string]any{"spec": map[string]any{"conversion": map[string]any{"strategy": "Webhook", "webhook": map[string]any{"clientConfig": svc()}}}},
			"map[spec:map[conversion:map[strategy:Webhook webhook:map[clientConfig:map[service:map[name:tekton-pipelines-webhook namespace:tekton-pipelines port:8443]]]]]]"},
		{"crd without conversion", map[string]any{"spec": map[string]any{"group": "tekton.dev"}}, "map[spec:map[group:tekton.dev]]"},
		{"webhook configuration", map[string]any{"webhooks": []any{map[string]any{"clientConfig": svc()}, map[string]any{"clientConfig": svc()}}},
			"map[webhooks:[map[clientConfig:map[service:map[name:tekton-pipelines-webhook namespace:tekton-pipelines port:8443]]] map[clientConfig:map[service:map[name:tekton-pipelines-webhook namespace:tekton-pipelines port:8443]]]]]"},
		{"url, no service", map[string]any{"webhooks": []any{map[string]any{"clientConfig": map[string]any{"url": "https://x"}}}},
			"map[webhooks:[map[clientConfig:map[url:https://x]]]]"},
		{"secret", map[string]any{"kind": "Secret"}, "map[kind:Secret]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			webhookPort(tc.obj, 8443)
			if got := fmt.Sprint(tc.obj); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
