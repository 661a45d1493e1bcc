// Package e2e runs Kontinue against a real API server: the local control
// plane that hack/ builds (started here when KUBECONFIG is not set), or any
// cluster KUBECONFIG points at (kind, for people with Docker).
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/crds"
	"kontinue.dev/kontinue/hack/localcluster"
	"kontinue.dev/kontinue/reconciler"
	"kontinue.dev/kontinue/reconciler/metrics"
	"kontinue.dev/kontinue/reconciler/render"
)

// env is the suite's shared state.
var env struct {
	cfg        *rest.Config
	dyn        dynamic.Interface
	kubeconfig string
	root       string
	// external: Kontinue runs outside this process (e.g. deployed in kind).
	external bool
	kontinue *kontinueProcess
	// cluster is the local control plane the suite started (nil when
	// KUBECONFIG names another cluster): fault tests stop its API server.
	cluster *localcluster.Cluster
}

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	ctx := context.Background()
	root, err := localcluster.RepoRoot(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	env.root = root
	env.kubeconfig = os.Getenv("KUBECONFIG")
	if env.kubeconfig == "" {
		cluster, err := startLocalCluster(ctx, root)
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e: cannot start the local control plane:", err)
			return 1
		}
		defer func() { _ = cluster.Stop() }()
		env.kubeconfig = cluster.Kubeconfig
		env.cluster = cluster
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", env.kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	cfg.QPS, cfg.Burst = 200, 400
	env.cfg = cfg
	env.dyn = dynamic.NewForConfigOrDie(cfg)
	if err := installCRDs(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: installing CRDs:", err)
		return 1
	}
	if err := setupRBAC(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: RBAC setup:", err)
		return 1
	}
	env.external = os.Getenv("KONTINUE_E2E_EXTERNAL_CONTROLLER") == "true"
	if !env.external {
		klogToFile(root)
		env.kontinue = startKontinue(cfg)
		// Tests that restart Kontinue replace env.kontinue: stop the one
		// running at the end, not the first.
		defer func() { env.kontinue.stop() }()
	}
	return m.Run()
}

// startLocalCluster builds (once, cached) and starts the local control plane.
func startLocalCluster(ctx context.Context, root string) (*localcluster.Cluster, error) {
	start := time.Now()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "install-controlplane.sh"))
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("hack/install-controlplane.sh: %v\n%s", err, errb.String())
	}
	binDir := strings.TrimSpace(out.String())
	dir, err := os.MkdirTemp("", "kontinue-e2e-")
	if err != nil {
		return nil, err
	}
	c, err := localcluster.Start(ctx, localcluster.Options{BinDir: binDir, Dir: dir, Log: os.Stderr})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "e2e: local control plane ready in %s (state in %s)\n", time.Since(start).Round(100*time.Millisecond), dir)
	return c, nil
}

func installCRDs(ctx context.Context) error {
	ours, err := crds.All()
	if err != nil {
		return err
	}
	test, err := readObjects(filepath.Join(env.root, "e2e", "testdata", "test-crds.yaml"))
	if err != nil {
		return err
	}
	return crds.Install(ctx, env.dyn, "e2e", append(ours, test...), 2*time.Minute)
}

// klogToFile sends Kontinue's logs to a file ($KONTINUE_E2E_LOG, else
// _output/e2e-kontinue-<pid>.log) so that test output stays readable; the
// file is what to read when a test fails.
func klogToFile(root string) {
	path := os.Getenv("KONTINUE_E2E_LOG")
	if path == "" {
		_ = os.MkdirAll(filepath.Join(root, "_output"), 0o755)
		path = filepath.Join(root, "_output", fmt.Sprintf("e2e-kontinue-%d.log", os.Getpid()))
	}
	f, err := os.Create(path)
	if err != nil {
		return
	}
	fmt.Fprintln(os.Stderr, "e2e: Kontinue logs in", path)
	klog.LogToStderr(false)
	klog.SetOutput(f)
}

// kontinueProcess is Kontinue running in this process.
type kontinueProcess struct {
	m      *reconciler.Manager
	cancel context.CancelFunc
	done   chan struct{}
}

// suiteLeaseNamespace holds the Leases of the suite's replicas (reconciler.LeaseOptions).
const suiteLeaseNamespace = "default"

func startKontinue(cfg *rest.Config) *kontinueProcess {
	return startKontinueWith(cfg, func(*reconciler.Options) {})
}

// startKontinueWith starts the in-process Kontinue with options changed by set.
func startKontinueWith(cfg *rest.Config, set func(*reconciler.Options)) *kontinueProcess {
	ctx, cancel := context.WithCancel(context.Background())
	opts := reconciler.Options{Workers: 4, Resync: 10 * time.Hour, ShutdownGrace: 5 * time.Second, OnReconcile: reconciles.add,
		// The suite's chart repositories listen on 127.0.0.1, over http.
		Helm: render.HelmOptions{AllowPrivateNetworks: true, AllowHTTP: true},
		// Which shards run: the replicas of the suite keep their shard's
		// Lease there (startKontinueProc's too), as main.go does without
		// --leader-elect.
		Leases: reconciler.LeaseOptions{Namespace: suiteLeaseNamespace, ID: "kontinue-leader", Keep: true}}
	set(&opts)
	m, err := reconciler.NewManager(cfg, opts)
	if err != nil {
		panic(err)
	}
	// As main.go: TestProvenance reads them.
	m.OnInputSetEnded, m.OnChainDelivered = metrics.InputSetEnded, metrics.ChainDelivered
	p := &kontinueProcess{m: m, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		if err := m.Run(ctx); err != nil {
			klog.ErrorS(err, "kontinue stopped")
		}
	}()
	deadline := time.Now().Add(time.Minute)
	for !m.Synced() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	return p
}

func (p *kontinueProcess) stop() {
	p.cancel()
	<-p.done
}
