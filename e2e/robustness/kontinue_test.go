package robustness

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"kontinue.dev/kontinue/e2e/robustness/check"
)

// Kontinue runs as processes of the binary built from the worktree, three
// replicas: r1 and r2 serve the default shard with leader election (one
// leads, the other waits), rb serves shard b. A fault kills one with
// SIGKILL; it is started again as a fresh process (empty caches).

// replicaSpecs: name → shard.
var replicaSpecs = []struct{ name, shard string }{{"r1", ""}, {"r2", ""}, {"rb", "b"}}

// servedShards are the shards a replica serves ("" the default one).
func servedShards(s string) bool { return s == "" || s == "b" }

// Lease timings short enough that a failover fits in a run.
var leaseArgs = []string{
	"--leader-elect-lease-duration=4s",
	"--leader-elect-renew-deadline=3s",
	"--leader-elect-retry-period=1s",
}

type replica struct {
	name, shard             string
	bin, kubeconfig, logDir string

	// exited is told when a process ends that no fault killed (it is
	// restarted, as a Deployment would).
	exited func(rep *replica, log string, err error)

	mu      sync.Mutex
	n       int // processes started
	cmd     *exec.Cmd
	done    chan struct{}
	killed  *atomic.Bool // this process's: killed on purpose
	metrics string
	pprof   string
}

func (r *replica) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	logPath := filepath.Join(r.logDir, fmt.Sprintf("kontinue-%s-%d.log", r.name, r.n))
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	r.metrics, r.pprof = freeAddr(), freeAddr()
	args := []string{"controller",
		"--kubeconfig=" + r.kubeconfig,
		"--metrics-bind-address=" + r.metrics,
		"--pprof-bind-address=" + r.pprof,
		"--health-probe-bind-address=" + freeAddr(),
		"--log-format=json",
		"--log-level=debug",
		"--shutdown-grace-period=2s",
		"--leader-elect",
		"--leader-election-namespace=kontinue-system",
	}
	args = append(args, leaseArgs...)
	if r.shard != "" {
		args = append(args, "--shard="+r.shard)
	}
	cmd := exec.Command(r.bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = dieWithParent() // a test that dies leaves no replica behind
	if err := cmd.Start(); err != nil {
		log.Close()
		return err
	}
	done := make(chan struct{})
	killed := &atomic.Bool{}
	go func() {
		err := cmd.Wait()
		log.Close()
		close(done)
		if !killed.Load() && r.exited != nil {
			r.exited(r, logPath, err)
		}
	}()
	r.cmd, r.done, r.killed = cmd, done, killed
	return nil
}

// kill sends SIGKILL and waits for the exit.
func (r *replica) kill() {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	if r.killed != nil {
		r.killed.Store(true)
	}
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
	default:
		_ = cmd.Process.Kill()
		<-done
	}
}

func (r *replica) running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done == nil {
		return false
	}
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

// leading reads kontinue_leader from the replica's metrics.
func (r *replica) leading() bool {
	r.mu.Lock()
	addr := r.metrics
	r.mu.Unlock()
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "kontinue_leader{") && strings.HasSuffix(line, " 1") {
			return true
		}
	}
	return false
}

// reconciles reads the replica's reconciles so far (its
// kontinue_reconcile_duration_seconds count, by controller and result),
// and which of its processes answered: counts of two processes are not
// comparable.
func (r *replica) reconciles() (int, map[string]float64, error) {
	r.mu.Lock()
	addr, n := r.metrics, r.n
	r.mu.Unlock()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return n, nil, err
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return n, nil, err
	}
	out := map[string]float64{}
	if f := fams["kontinue_reconcile_duration_seconds"]; f != nil {
		for _, m := range f.GetMetric() {
			var k []string
			for _, l := range m.GetLabel() {
				k = append(k, l.GetValue())
			}
			out[strings.Join(k, " ")] += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return n, out, nil
}

// dumpGoroutines writes the replica's goroutines (what a stuck reconcile
// waits on) to path.
func (r *replica) dumpGoroutines(path string) error {
	r.mu.Lock()
	addr := r.pprof
	r.mu.Unlock()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/debug/pprof/goroutine?debug=2")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, body, 0o644)
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "127.0.0.1:0"
	}
	defer l.Close()
	return l.Addr().String()
}

// buildKontinue builds the worktree's binary once per test process.
func buildKontinue(root string) (string, error) {
	path := filepath.Join(root, "_output", "bin", "kontinue-robustness")
	cmd := exec.Command("go", "build", "-o", path, ".")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return path, nil
}

// readReconciled reads the "reconciled" lines (one per reconcile, at
// --log-level=debug) of every replica's logs in dir
// (kontinue-<replica>-<n>.log).
func readReconciled(dir string) ([]check.Reconciled, error) {
	files, err := filepath.Glob(filepath.Join(dir, "kontinue-*-*.log"))
	if err != nil {
		return nil, err
	}
	var out []check.Reconciled
	for _, name := range files {
		replica := strings.TrimPrefix(filepath.Base(name), "kontinue-")
		replica = replica[:strings.LastIndex(replica, "-")]
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if !bytes.Contains(line, []byte(`"msg":"reconciled"`)) {
				continue
			}
			var l struct {
				Time    time.Time `json:"time"`
				Key     string    `json:"key"`
				Outcome string    `json:"outcome"`
			}
			if json.Unmarshal(line, &l) != nil {
				continue // a line cut by a kill
			}
			out = append(out, check.Reconciled{Replica: replica, At: l.Time, Key: l.Key, Outcome: l.Outcome})
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return out, nil
}
