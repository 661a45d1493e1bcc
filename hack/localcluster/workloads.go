package localcluster

import (
	"context"
	"crypto/tls"
	_ "embed"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Workloads makes Pods run: kube-controller-manager runs its workload
// controllers too (deployment, replicaset, job, statefulset, daemonset,
// cronjob, …; all but node-lifecycle), kube-scheduler places Pods, and kwok
// plays the kubelet of a few fake nodes with the Stages of Stages. There is
// no container runtime: what a container does is played (see
// kwok-stages.yaml: exit codes and Tekton results come from its env).
type Workloads struct {
	// KwokBinary is kwok's executable (hack/install-kwok.sh).
	KwokBinary string
	// Nodes is the number of fake nodes (default 2).
	Nodes int
	// Stages are the kwok Stage documents (YAML) that move Pods along;
	// nil means DefaultStages. They replace kwok's built-in Pod stages.
	Stages []byte
}

// DefaultStages are the kwok Stages the fake nodes play by default:
// Pods start (Ready, or crash-looping for a container whose KWOK_EXIT_CODE
// is not 0), Job and TaskRun Pods complete with their containers' exit
// codes (and Tekton's termination message), deleted Pods go.
//
//go:embed kwok-stages.yaml
var DefaultStages []byte

const (
	schedulerName = "kube-scheduler"
	kwokName      = "kwok"

	// Every controller enabled by default but node-lifecycle: nothing
	// renews the fake nodes' health the way it expects, and it would
	// declare them not ready and every Pod with them.
	workloadControllers = "*,-node-lifecycle-controller"

	// NodeNamePrefix names the fake nodes: kwok-node-0, kwok-node-1, ...
	NodeNamePrefix = "kwok-node-"
	notReadyTaint  = "node.kubernetes.io/not-ready"
)

var (
	schedulerTimeout = 60 * time.Second
	kwokTimeout      = 60 * time.Second
	nodesTimeout     = 60 * time.Second
)

func (w *Workloads) nodes() int {
	if w.Nodes <= 0 {
		return 2
	}
	return w.Nodes
}

func (w *Workloads) check(binDir string) error {
	if w.KwokBinary == "" {
		return errors.New("Workloads.KwokBinary is empty (run hack/install-kwok.sh)")
	}
	if err := executable(w.KwokBinary); err != nil {
		return fmt.Errorf("kwok: %w (run hack/install-kwok.sh)", err)
	}
	if err := executable(filepath.Join(binDir, schedulerName)); err != nil {
		return fmt.Errorf("%w (run hack/install-controlplane.sh)", err)
	}
	return nil
}

func executable(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if st.IsDir() || st.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", path)
	}
	return nil
}

// startWorkloads starts kube-scheduler and kwok, then registers the fake
// nodes and waits until they are Ready and schedulable.
func (c *Cluster) startWorkloads(ctx context.Context, logf func(string, ...any), o Options) error {
	w := o.Workloads
	logsDir := filepath.Join(c.Dir, "logs")
	err := c.startComponent(ctx, logf, schedulerName, schedulerTimeout, func() (*process, func(context.Context) error, error) {
		ports, err := freePorts(1)
		if err != nil {
			return nil, nil, err
		}
		port := strconv.Itoa(ports[0])
		args := []string{
			"--kubeconfig=" + c.Kubeconfig,
			"--authentication-kubeconfig=" + c.Kubeconfig,
			"--authorization-kubeconfig=" + c.Kubeconfig,
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			"--secure-port=" + port,
		}
		proc, err := launch(schedulerName, filepath.Join(o.BinDir, schedulerName), append(args, o.SchedulerArgs...),
			nil, c.Dir, filepath.Join(logsDir, schedulerName+".log"), o.Detach)
		// Its serving certificate is self-signed, made at start.
		insecure := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a local health probe
		return proc, func(ctx context.Context) error {
			return probe(ctx, insecure, "https://127.0.0.1:"+port+"/healthz", http.StatusOK)
		}, err
	})
	if err != nil {
		return err
	}

	stages := w.Stages
	if stages == nil {
		stages = DefaultStages
	}
	stagesFile := filepath.Join(c.Dir, "kwok-stages.yaml")
	if err := os.WriteFile(stagesFile, stages, 0o600); err != nil {
		return fmt.Errorf("localcluster: kwok stages: %w", err)
	}
	err = c.startComponent(ctx, logf, kwokName, kwokTimeout, func() (*process, func(context.Context) error, error) {
		ports, err := freePorts(1)
		if err != nil {
			return nil, nil, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(ports[0])
		args := []string{
			"--kubeconfig=" + c.Kubeconfig,
			"--config=" + stagesFile, // also keeps ~/.kwok/kwok.yaml out
			"--manage-all-nodes=true",
			"--server-address=" + addr,
			"--cidr=10.244.0.1/16",
		}
		proc, err := launch(kwokName, w.KwokBinary, append(args, o.KwokArgs...),
			nil, c.Dir, filepath.Join(logsDir, kwokName+".log"), o.Detach)
		return proc, func(ctx context.Context) error {
			return probe(ctx, http.DefaultClient, "http://"+addr+"/healthz", http.StatusOK)
		}, err
	})
	if err != nil {
		return err
	}

	t0 := time.Now()
	n := w.nodes()
	for i := range n {
		if err := c.create(ctx, "/api/v1/nodes", fakeNode(NodeNamePrefix+strconv.Itoa(i))); err != nil {
			return fmt.Errorf("localcluster: node: %w", err)
		}
	}
	// The API server taints a new Node not-ready; node-lifecycle, which
	// would lift the taint once kwok reports the node Ready, does not run.
	for i := range n {
		name := NodeNamePrefix + strconv.Itoa(i)
		if err := poll(ctx, nodesTimeout, "node "+name+" Ready", func(ctx context.Context) error {
			return c.nodeSchedulable(ctx, name)
		}); err != nil {
			return fmt.Errorf("localcluster: %w\n--- last 20 lines of the kwok log ---\n%s", err,
				tail(filepath.Join(logsDir, kwokName+".log"), 20))
		}
	}
	logf("%d fake nodes ready after %.1fs", n, time.Since(t0).Seconds())
	return nil
}

// nodeSchedulable returns nil once the node is Ready and carries no taint,
// removing the not-ready taint once it is Ready.
func (c *Cluster) nodeSchedulable(ctx context.Context, name string) error {
	var node map[string]any
	if err := c.call(ctx, http.MethodGet, "/api/v1/nodes/"+name, "", nil, &node); err != nil {
		return err
	}
	if st, _, _ := conditionStatus(node, "Ready"); st != "True" {
		return fmt.Errorf("condition Ready is %q", st)
	}
	spec, _ := node["spec"].(map[string]any)
	taints, _ := spec["taints"].([]any)
	if len(taints) == 0 {
		return nil
	}
	var keep []any
	for _, t := range taints {
		if m, _ := t.(map[string]any); str(m, "key") != notReadyTaint {
			keep = append(keep, t)
		}
	}
	if len(keep) == len(taints) {
		return fmt.Errorf("tainted: %v", taints)
	}
	patch := map[string]any{"spec": map[string]any{"taints": keep}}
	if err := c.call(ctx, http.MethodPatch, "/api/v1/nodes/"+name, "application/merge-patch+json", patch, nil); err != nil {
		return err
	}
	return errors.New("not-ready taint removed, checking again")
}

// fakeNode is a Node kwok manages: big enough for any test's Pods.
func fakeNode(name string) map[string]any {
	resources := map[string]any{"cpu": "32", "memory": "256Gi", "pods": "110"}
	return map[string]any{
		"apiVersion": "v1",
		"kind":       "Node",
		"metadata": map[string]any{
			"name":        name,
			"annotations": map[string]any{"kwok.x-k8s.io/node": "fake"},
			"labels": map[string]any{
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
				"type":                   "kwok",
			},
		},
		"status": map[string]any{"allocatable": resources, "capacity": resources},
	}
}
