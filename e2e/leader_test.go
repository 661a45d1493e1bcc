package e2e

import (
	"bufio"
	"context"
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

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// This file runs the kontinue binary as separate processes against the
// suite's cluster (leader election, metrics). They reconcile the same
// objects as the suite's own Kontinue, which is harmless (same desired
// state, same field manager: their applies are no-ops), so these tests
// assert on what only a process itself can report: the Lease, its
// /metrics (kontinue_leader, its own reconcile and apply counters), its
// probes and its exit.

var leaseGVR = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}

var kontinueBinary struct {
	once sync.Once
	path string
	err  error
}

// buildKontinue builds the binary once per suite (incrementally, into _output).
func buildKontinue(t *testing.T) string {
	t.Helper()
	kontinueBinary.once.Do(func() {
		path := filepath.Join(env.root, "_output", "bin", "kontinue-e2e")
		cmd := exec.Command("go", "build", "-o", path, ".")
		cmd.Dir = env.root
		out, err := cmd.CombinedOutput()
		if err != nil {
			kontinueBinary.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		kontinueBinary.path = path
	})
	require.NoError(t, kontinueBinary.err)
	return kontinueBinary.path
}

// kontinueProc is one kontinue process.
type kontinueProc struct {
	name            string
	cmd             *exec.Cmd
	metrics, probes string // base URLs
	logPath         string
	done            chan struct{}
	err             error // exit status, once done is closed
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// startKontinueProc starts the binary with JSON logs in a file next to the
// suite's log, and kills it when the test ends. A port freeAddr picked can
// be taken (as the source port of some connection) before Kontinue binds
// it: then it starts again on new ports.
func startKontinueProc(t *testing.T, name string, args ...string) *kontinueProc {
	t.Helper()
	for attempt := 0; ; attempt++ {
		p := startKontinueProcOnce(t, name, args...)
		if attempt < 5 && p.bindFailed() {
			continue
		}
		return p
	}
}

// bindFailed waits until both listeners are bound (two "serving" lines) or
// the process exited, and reports whether it exited on a taken address.
func (p *kontinueProc) bindFailed() bool {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(p.logPath)
		if strings.Count(string(b), `"msg":"serving"`) >= 2 {
			return false
		}
		select {
		case <-p.done:
			b, _ = os.ReadFile(p.logPath)
			return strings.Contains(string(b), "address already in use")
		case <-time.After(10 * time.Millisecond):
		}
	}
	return false
}

func startKontinueProcOnce(t *testing.T, name string, args ...string) *kontinueProc {
	t.Helper()
	bin := buildKontinue(t)
	metricsAddr, probeAddr := freeAddr(t), freeAddr(t)
	logPath := filepath.Join(env.root, "_output", fmt.Sprintf("e2e-%s-%s-%d.log", t.Name(), name, os.Getpid()))
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	all := append([]string{
		"controller",
		"--kubeconfig=" + env.kubeconfig,
		"--metrics-bind-address=" + metricsAddr,
		"--health-probe-bind-address=" + probeAddr,
		"--log-format=json",
		"--shutdown-grace-period=5s",
		// The shards' Leases, where the suite's own Kontinue keeps its
		// (a test's own flag comes later and wins).
		"--leader-election-namespace=" + suiteLeaseNamespace,
		// The suite's chart repositories listen on 127.0.0.1, over http.
		"--helm-allow-private-networks", "--helm-allow-http",
	}, args...)
	cmd := exec.Command(bin, all...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start())
	p := &kontinueProc{name: name, cmd: cmd, metrics: "http://" + metricsAddr, probes: "http://" + probeAddr,
		logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("kontinue process %s logged to %s:\n%s", name, logPath, tail(logPath, 30))
		}
	})
	return p
}

func (p *kontinueProc) kill() {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// logged returns the first JSON log line whose msg is msg.
func (p *kontinueProc) logged(msg string) map[string]any {
	f, err := os.Open(p.logPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		var line map[string]any
		if json.Unmarshal(s.Bytes(), &line) == nil && line["msg"] == msg {
			return line
		}
	}
	return nil
}

// identity is the process's name in the Lease, from its first log lines.
func (p *kontinueProc) identity(t *testing.T) string {
	t.Helper()
	var id string
	eventually(t, 20*time.Second, func() string {
		line := p.logged("leader election: waiting for the lease")
		if line == nil {
			return p.name + " has not started leader election; log:\n" + tail(p.logPath, 10)
		}
		id, _ = line["identity"].(string)
		return ""
	})
	return id
}

func httpGet(url string) (int, string, error) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// sample is one Prometheus series.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape reads /metrics (the text format: `name{l="v",...} value`).
func (p *kontinueProc) scrape() ([]sample, error) {
	code, body, err := httpGet(p.metrics + "/metrics")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("/metrics: HTTP %d", code)
	}
	var out []sample
	for _, line := range strings.Split(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			return nil, fmt.Errorf("bad metrics line %q", line)
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("bad metrics line %q: %v", line, err)
		}
		s := sample{name: line[:sp], labels: map[string]string{}, value: v}
		if i := strings.IndexByte(s.name, '{'); i >= 0 {
			for _, kv := range splitLabels(strings.TrimSuffix(s.name[i+1:], "}")) {
				k, v, _ := strings.Cut(kv, "=")
				uq, err := strconv.Unquote(v)
				if err != nil {
					return nil, fmt.Errorf("bad label in %q: %v", line, err)
				}
				s.labels[k] = uq
			}
			s.name = s.name[:i]
		}
		out = append(out, s)
	}
	return out, nil
}

// splitLabels splits `a="x",b="y,z"` at the commas outside quotes.
func splitLabels(s string) []string {
	var out []string
	inQuote, start := false, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			inQuote = !inQuote
		case ',':
			if !inQuote {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// sum adds the series named name whose labels include want; found says
// whether any series matched.
func sum(samples []sample, name string, want map[string]string) (total float64, found bool) {
	for _, s := range samples {
		if s.name != name {
			continue
		}
		match := true
		for k, v := range want {
			match = match && s.labels[k] == v
		}
		if match {
			total += s.value
			found = true
		}
	}
	return total, found
}

// metric returns one summed series, or an error message for eventually.
func (p *kontinueProc) metric(name string, labels map[string]string) (float64, string) {
	samples, err := p.scrape()
	if err != nil {
		return 0, p.name + ": " + err.Error()
	}
	v, ok := sum(samples, name, labels)
	if !ok {
		return 0, fmt.Sprintf("%s: no series %s%v", p.name, name, labels)
	}
	return v, ""
}

func leaseHolder(ns, name string) (string, error) {
	u, err := tryGet(leaseGVR, ns, name)
	if err != nil {
		return "", err
	}
	h, _ := nested(u.Object, "spec", "holderIdentity").(string)
	return h, nil
}

// opsChain is a one-step chain stamping a ConfigMap, and a workload on it.
func opsChain(ns, chain string) string {
	return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[1]s}
spec:
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-cm}
    data: {owner: $(workload.metadata.name)$}
---
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: %[1]s}
spec:
  selector: {app.example.com/chain: %[1]s}
  resources:
  - name: config
    templateRef: {kind: ClusterTemplate, name: %[1]s}
`, chain)
}

func opsWorkload(name, chain string) string {
	return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: Workload
metadata:
  name: %s
  labels: {app.example.com/chain: %s}
spec: {}
`, name, chain)
}

// leaderOf waits until exactly one of procs reports kontinue_leader 1 and
// the Lease names it; the others must report 0.
func leaderOf(t *testing.T, timeout time.Duration, ns, lease string, ids map[*kontinueProc]string, procs ...*kontinueProc) *kontinueProc {
	t.Helper()
	var leader *kontinueProc
	eventually(t, timeout, func() string {
		leader = nil
		for _, p := range procs {
			v, msg := p.metric("kontinue_leader", nil)
			if msg != "" {
				return msg
			}
			if v == 1 {
				if leader != nil {
					return fmt.Sprintf("two leaders: %s and %s", leader.name, p.name)
				}
				leader = p
			}
		}
		if leader == nil {
			return "no process leads yet"
		}
		holder, err := leaseHolder(ns, lease)
		if err != nil {
			return err.Error()
		}
		if holder != ids[leader] {
			return fmt.Sprintf("%s reports leading but the Lease holder is %q, not %q", leader.name, holder, ids[leader])
		}
		return ""
	})
	return leader
}

func TestLeaderElectionHandover(t *testing.T) {
	ns := newNamespace(t)
	const lease = "kontinue-e2e-leader"
	const leaseDuration = 4 * time.Second
	args := []string{
		"--leader-elect", "--leader-election-namespace=" + ns, "--leader-election-id=" + lease,
		"--leader-elect-lease-duration=" + leaseDuration.String(),
		"--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms",
	}
	a := startKontinueProc(t, "a", args...)
	b := startKontinueProc(t, "b", args...)
	ids := map[*kontinueProc]string{a: a.identity(t), b: b.identity(t)}
	require.NotEqual(t, ids[a], ids[b])

	leader := leaderOf(t, 30*time.Second, ns, lease, ids, a, b)
	standby := a
	if leader == a {
		standby = b
	}
	// Work for the leader: only it reconciles.
	chain := uniq(ns, "ops")
	apply(t, ns, opsChain(ns, chain))
	apply(t, ns, opsWorkload("before", chain))
	waitOwner(t, workloadGVR, ns, "before", "Ready", "True", "")
	eventually(t, 20*time.Second, func() string {
		n, msg := leader.metric("kontinue_reconcile_duration_seconds_count", map[string]string{"controller": "Workload"})
		if msg != "" || n == 0 {
			return "the leader has not reconciled a Workload " + msg
		}
		return ""
	})
	for _, probe := range []string{"/healthz", "/readyz"} {
		for _, p := range []*kontinueProc{leader, standby} {
			code, body, err := httpGet(p.probes + probe)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, code, "%s %s: %s", p.name, probe, body)
		}
	}
	samples, err := standby.scrape()
	require.NoError(t, err)
	n, _ := sum(samples, "kontinue_reconcile_duration_seconds_count", nil)
	require.Zero(t, n, "the standby reconciled")
	n, _ = sum(samples, "kontinue_workqueue_adds_total", nil)
	require.Zero(t, n, "the standby queued work")

	// kill -9 the leader: no release, the standby waits out the lease.
	killed := time.Now()
	require.NoError(t, leader.cmd.Process.Signal(syscall.SIGKILL))
	<-leader.done
	eventually(t, 3*leaseDuration, func() string {
		v, msg := standby.metric("kontinue_leader", nil)
		if msg != "" || v != 1 {
			return standby.name + " has not taken over " + msg
		}
		holder, err := leaseHolder(ns, lease)
		if err != nil || holder != ids[standby] {
			return fmt.Sprintf("Lease holder %q (%v), want %q", holder, err, ids[standby])
		}
		return ""
	})
	takeover := time.Since(killed)
	t.Logf("takeover after kill -9: %s (lease duration %s)", takeover.Round(10*time.Millisecond), leaseDuration)

	// The new leader does the work: it reconciles and stamps (or finds
	// stamped) the workloads, including one created after the takeover.
	apply(t, ns, opsWorkload("after", chain))
	waitOwner(t, workloadGVR, ns, "after", "Ready", "True", "")
	eventually(t, 30*time.Second, func() string {
		samples, err := standby.scrape()
		if err != nil {
			return err.Error()
		}
		if n, _ := sum(samples, "kontinue_reconcile_duration_seconds_count", map[string]string{"controller": "Workload"}); n == 0 {
			return "the new leader has not reconciled a Workload"
		}
		if n, _ := sum(samples, "kontinue_stamped_applies_total", nil); n == 0 {
			return "the new leader has not stamped"
		}
		if code, body, _ := httpGet(standby.probes + "/readyz"); code != http.StatusOK {
			return "the new leader is not ready: " + body
		}
		return ""
	})
	ready := time.Since(killed)
	t.Logf("new leader reconciling and ready %s after the kill", ready.Round(10*time.Millisecond))

	// SIGTERM: the leader drains, releases the Lease and exits 0; a standby
	// takes it at once instead of waiting out the lease duration.
	c := startKontinueProc(t, "c", args...)
	ids[c] = c.identity(t)
	leader = leaderOf(t, 10*time.Second, ns, lease, ids, standby, c)
	require.Equal(t, standby, leader, "a newcomer does not take a held lease")
	termed := time.Now()
	require.NoError(t, leader.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-leader.done:
		require.NoError(t, leader.err, "exit status after SIGTERM")
	case <-time.After(15 * time.Second): // grace period 5s, plus the release
		t.Fatal("the leader did not exit within 15s of SIGTERM")
	}
	exited := time.Now()
	require.NotNil(t, leader.logged("leader election stopped"), "the leader logged its release")
	// Timed from the exit: draining the queue before releasing may take a
	// while on a busy cluster, the takeover of a released lease may not.
	leaderOf(t, leaseDuration, ns, lease, ids, c)
	handover := time.Since(exited)
	t.Logf("SIGTERM: leader exited after %s; the standby led %s after that (lease released)",
		exited.Sub(termed).Round(10*time.Millisecond), handover.Round(10*time.Millisecond))
	require.Less(t, handover, leaseDuration, "a released lease is taken without waiting for it to expire")

	// A leader that loses its Lease exits (non-zero) rather than keep
	// reconciling next to the new holder.
	eventually(t, 10*time.Second, func() string {
		u, err := tryGet(leaseGVR, ns, lease)
		if err != nil {
			return err.Error()
		}
		u.Object["spec"] = map[string]any{"holderIdentity": "intruder", "leaseDurationSeconds": int64(3600),
			"acquireTime": metav1.NowMicro().Format(metav1.RFC3339Micro), "renewTime": metav1.NowMicro().Format(metav1.RFC3339Micro)}
		if _, err := env.dyn.Resource(leaseGVR).Namespace(ns).Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
			return err.Error()
		}
		return ""
	})
	select {
	case <-c.done:
		var exit *exec.ExitError
		require.True(t, errors.As(c.err, &exit) && exit.ExitCode() == 1, "exit status %v", c.err)
	case <-time.After(15 * time.Second):
		t.Fatal("a leader whose lease was taken kept running")
	}
	require.NotNil(t, c.logged("lost the leader lease; exiting so that the process restarts clean"))
}

// TestLeaderMetricNamesShard: a shard's replicas report kontinue_leader
// with their shard, which the shipped alerts and dashboard group by and
// join every other series to: one series per process (a join needs no
// more), the standby's 0 from the start. client-go's
// leader_election_master_status names the shard's Lease.
func TestLeaderMetricNamesShard(t *testing.T) {
	ns := newNamespace(t)
	const lease = "kontinue-e2e-shardmetric"
	args := []string{"--shard=m",
		"--leader-elect", "--leader-election-namespace=" + ns, "--leader-election-id=" + lease,
		"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms"}
	a := startKontinueProc(t, "a", args...)
	b := startKontinueProc(t, "b", args...)
	ids := map[*kontinueProc]string{a: a.identity(t), b: b.identity(t)}
	leader := leaderOf(t, 30*time.Second, ns, lease+"-shard-m", ids, a, b)
	for _, p := range []*kontinueProc{a, b} {
		want := 0.0
		if p == leader {
			want = 1
		}
		samples, err := p.scrape()
		require.NoError(t, err)
		var got []sample
		for _, s := range samples {
			if s.name == "kontinue_leader" {
				got = append(got, s)
			}
		}
		require.Equal(t, []sample{{name: "kontinue_leader", labels: map[string]string{"shard": "m"}, value: want}}, got, p.name)
		v, ok := sum(samples, "leader_election_master_status", map[string]string{"name": lease + "-shard-m"})
		require.True(t, ok, "%s: no leader_election_master_status for the shard's Lease", p.name)
		require.Equal(t, want, v, p.name)
	}
}
