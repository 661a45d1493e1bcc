// Package e2ereal runs Kontinue against real workload controllers: the
// local cluster with kube-controller-manager's workload controllers,
// kube-scheduler, kwok playing the kubelet of fake nodes, and Tekton
// Pipelines' controller (hack/localcluster, Options.Workloads and Tekton).
// Deployments, ReplicaSets, Jobs, TaskRuns and PipelineRuns get the status
// their own controllers write; only what a kubelet and a container would do
// is played (docs/testing.md says what exactly).
//
// The suite starts its own cluster. KONTINUE_E2E_REAL_KUBECONFIG points it
// at one started by hand instead (hack/local-cluster.sh start -tekton): the
// suite then only waits until kwok's nodes and Tekton answer. Kontinue runs
// as a separate process of the real binary, so that tests can kill it
// with SIGKILL.
package e2ereal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"sigs.k8s.io/yaml"

	"kontinue.dev/kontinue/crds"
	"kontinue.dev/kontinue/hack/localcluster"
)

// env is the suite's shared state.
var env struct {
	cfg        *rest.Config
	dyn        dynamic.Interface
	kubeconfig string
	root       string
	// cluster is the cluster the suite started (nil with
	// KONTINUE_E2E_REAL_KUBECONFIG).
	cluster *localcluster.Cluster
	// bin is the kontinue binary the tests run.
	bin string
	// kontinue is the running Kontinue process; tests that kill it start
	// the next one here.
	kontinue *kontinueProc
}

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	ctx := context.Background()
	fail := func(what string, err error) int {
		fmt.Fprintf(os.Stderr, "e2e/real: %s: %v\n", what, err)
		return 1
	}
	root, err := localcluster.RepoRoot(".")
	if err != nil {
		return fail("repository", err)
	}
	env.root = root
	env.kubeconfig = os.Getenv("KONTINUE_E2E_REAL_KUBECONFIG")
	if env.kubeconfig == "" {
		cluster, err := startCluster(ctx, root)
		if err != nil {
			return fail("cannot start the cluster with real controllers", err)
		}
		defer func() { _ = cluster.Stop() }()
		env.cluster = cluster
		env.kubeconfig = cluster.Kubeconfig
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", env.kubeconfig)
	if err != nil {
		return fail("kubeconfig", err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	env.cfg = cfg
	env.dyn = dynamic.NewForConfigOrDie(cfg)
	if env.cluster == nil {
		// A cluster started elsewhere: wait until it runs Pods and TaskRuns.
		if err := waitKwokReady(ctx, env.dyn, time.Minute); err != nil {
			return fail("kwok's nodes", err)
		}
		if err := waitTektonReady(ctx, env.dyn, 2*time.Minute); err != nil {
			return fail("Tekton", err)
		}
	}
	if err := installCRDs(ctx, env.dyn); err != nil { // a no-op on the suite's own cluster
		return fail("installing CRDs", err)
	}
	if err := setupRBAC(ctx); err != nil {
		return fail("RBAC", err)
	}
	if env.bin, err = buildKontinue(root); err != nil {
		return fail("building kontinue", err)
	}
	env.kontinue, err = startKontinue("k0")
	if err != nil {
		return fail("starting kontinue", err)
	}
	defer func() { env.kontinue.kill() }()
	return m.Run()
}

// startCluster builds what is missing (once, cached) and starts etcd, the
// API server, the controller-manager with its workload controllers, the
// scheduler, kwok with two fake nodes and Tekton's controller; Start
// returns once a Tekton TaskRun has succeeded on it.
func startCluster(ctx context.Context, root string) (*localcluster.Cluster, error) {
	t0 := time.Now()
	in, err := localcluster.Install(ctx, root, true, os.Stderr)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kontinue-e2e-real-")
	if err != nil {
		return nil, err
	}
	c, err := localcluster.Start(ctx, localcluster.Options{
		BinDir:    in.BinDir,
		Dir:       dir,
		Log:       os.Stderr,
		Workloads: &localcluster.Workloads{KwokBinary: in.Kwok, Nodes: 2},
		Tekton:    &localcluster.Tekton{Dir: in.TektonDir},
		// Kontinue's CRDs before the garbage collector starts, so that it
		// collects what Runnables, Workloads and Deliverables own at once.
		BeforeControllers: func(ctx context.Context, c *localcluster.Cluster) error {
			cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
			if err != nil {
				return err
			}
			return installCRDs(ctx, dynamic.NewForConfigOrDie(cfg))
		},
	})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "e2e/real: cluster with real controllers ready in %s (state and logs in %s)\n",
		time.Since(t0).Round(100*time.Millisecond), dir)
	return c, nil
}

// installCRDs installs Kontinue's CRDs and the minimal ones of the kinds
// Cartographer's examples stamp whose controllers do not run here
// (exampleCRDs).
func installCRDs(ctx context.Context, dyn dynamic.Interface) error {
	ours, err := crds.All()
	if err != nil {
		return err
	}
	for _, doc := range strings.Split(exampleCRDs, "\n---") {
		var u unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			return fmt.Errorf("exampleCRDs: %w", err)
		}
		ours = append(ours, &u)
	}
	return crds.Install(ctx, dyn, "e2e-real", ours, 2*time.Minute)
}

// logPath is where a Kontinue process of this run logs.
func logPath(name string) string {
	_ = os.MkdirAll(filepath.Join(env.root, "_output"), 0o755)
	return filepath.Join(env.root, "_output", fmt.Sprintf("e2e-real-kontinue-%s-%d.log", name, os.Getpid()))
}
