// Command runlocal is `make run-local`: it starts the local control plane
// with the workload controllers, kube-scheduler and two fake nodes (kwok
// plays their kubelet, so Pods run), runs `kontinue controller` against it
// (installing the CRDs, with leader election in kontinue-system as in a
// cluster, so that `kontinue check` finds it), applies
// examples/real-chain.yaml (a commit, its tests as a Job, a Deployment) into
// the default namespace, prints the example workload's status as it changes,
// and once it is Ready what to try next. Ctrl-C stops Kontinue and the
// cluster. docs/walkthrough.md walks through it.
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"kontinue.dev/kontinue/hack/localcluster"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "run-local:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, err := localcluster.RepoRoot(".")
	if err != nil {
		return err
	}
	bins, err := install(root, "install-controlplane.sh")
	if err != nil {
		return fmt.Errorf("building the control plane: %w", err)
	}
	kwok, err := install(root, "install-kwok.sh")
	if err != nil {
		return fmt.Errorf("building kwok: %w", err)
	}
	dir := filepath.Join(root, "_output", "run-local")
	_ = os.RemoveAll(dir)
	cluster, err := localcluster.Start(ctx, localcluster.Options{BinDir: bins, Dir: dir, Log: os.Stderr,
		Workloads: &localcluster.Workloads{KwokBinary: kwok, Nodes: 2}})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("stopping the cluster")
		_ = cluster.Stop()
	}()
	fmt.Printf("cluster up (workload controllers, scheduler, 2 fake nodes); use it with:\n  export KUBECONFIG=%s\n", cluster.Kubeconfig)

	cfg, err := clientcmd.BuildConfigFromFlags("", cluster.Kubeconfig)
	if err != nil {
		return err
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(cfg)))
	// The namespace of the Lease, as deploy/ creates it.
	if err := applyExample(ctx, dyn, mapper, filepath.Join(root, "deploy", "namespace.yaml"), ""); err != nil {
		return err
	}

	logPath := filepath.Join(dir, "kontinue.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	bin := filepath.Join(root, "_output", "bin", "kontinue")
	k := exec.Command(bin, "controller", "--kubeconfig", cluster.Kubeconfig, "--install-crds",
		"--leader-elect", "--leader-election-namespace", "kontinue-system",
		"--metrics-bind-address", "127.0.0.1:0", "--health-probe-bind-address", "127.0.0.1:0")
	k.Stdout, k.Stderr = logf, logf
	if err := k.Start(); err != nil {
		return err
	}
	defer func() {
		_ = k.Process.Signal(syscall.SIGTERM)
		_, _ = k.Process.Wait()
	}()
	fmt.Printf("kontinue running (logs: %s)\n", logPath)

	if err := applyExample(ctx, dyn, mapper, filepath.Join(root, "examples", "real-chain.yaml"), "default"); err != nil {
		return err
	}
	fmt.Println("applied examples/real-chain.yaml; watching workload default/web (Ctrl-C to stop)")
	wl := schema.GroupVersionResource{Group: "carto.run", Version: "v1alpha1", Resource: "workloads"}
	last := ""
	suggested := false
	started := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
		w, err := dyn.Resource(wl).Namespace("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			continue
		}
		if s := summary(w); s != last {
			fmt.Println(time.Now().Format("15:04:05"), s)
			last = s
		}
		if !suggested && (ready(w) || time.Since(started) > 60*time.Second) {
			suggested = true
			rel, _ := filepath.Rel(mustGetwd(), bin)
			if rel == "" || strings.HasPrefix(rel, "..") {
				rel = bin
			}
			fmt.Printf("\nKontinue runs. In another shell:\n  export KUBECONFIG=%s\n", cluster.Kubeconfig)
			for _, l := range [][2]string{
				{"kubectl get jobs,deployments,pods", "the commit's tests, then its rollout"},
				{rel + " check", "CRDs, controller"},
				{rel + " get workload web -n default --watch", "the tree of its steps, live"},
				{rel + " events workload web -n default", "what happened to it"},
				{rel + " dashboard", "chains and workloads in the browser"},
			} {
				fmt.Printf("  %-60s # %s\n", l[0], l[1])
			}
			fmt.Print(`  kubectl patch workload web --type merge -p '{"spec":{"source":{"git":{"ref":{"commit":"second"}}}}}'
docs/walkthrough.md goes on with broken commits and crash-looping ones.
Ctrl-C here stops it all.

`)
		}
	}
}

func ready(w *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(w.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" && m["status"] == "True" {
			return true
		}
	}
	return false
}

func mustGetwd() string {
	d, _ := os.Getwd()
	return d
}

// install runs one of hack/install-*.sh (each builds what is missing, once)
// and returns the path it prints.
func install(root, script string) (string, error) {
	cmd := exec.Command(filepath.Join(root, "hack", script))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}

// applyExample applies the example (namespaced objects without a namespace
// into ns), retrying while the CRDs are being installed by Kontinue.
func applyExample(ctx context.Context, dyn dynamic.Interface, mapper *restmapper.DeferredDiscoveryRESTMapper, path, ns string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for _, doc := range strings.Split(string(data), "\n---") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil || len(u.Object) == 0 {
			continue
		}
		for {
			err := applyOne(ctx, dyn, mapper, u, ns)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("apply %s %s: %w", u.GetKind(), u.GetName(), err)
			}
			mapper.Reset()
			time.Sleep(500 * time.Millisecond)
		}
	}
	return nil
}

func applyOne(ctx context.Context, dyn dynamic.Interface, mapper *restmapper.DeferredDiscoveryRESTMapper, u *unstructured.Unstructured, ns string) error {
	gvk := u.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	var r dynamic.ResourceInterface = dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if u.GetNamespace() == "" {
			u.SetNamespace(ns)
		}
		r = dyn.Resource(m.Resource).Namespace(u.GetNamespace())
	}
	_, err = r.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "run-local", Force: true})
	return err
}

func summary(w *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(w.Object, "status", "conditions")
	var parts []string
	for _, c := range conds {
		m, _ := c.(map[string]any)
		parts = append(parts, fmt.Sprintf("%v=%v(%v)", m["type"], m["status"], m["reason"]))
	}
	res, _, _ := unstructured.NestedSlice(w.Object, "status", "resources")
	steps := []string{}
	for _, r := range res {
		m, _ := r.(map[string]any)
		name, _, _ := unstructured.NestedString(m, "stampedRef", "name")
		steps = append(steps, fmt.Sprintf("%v→%s", m["name"], name))
	}
	return fmt.Sprintf("workload web: %s\n    steps: %s", strings.Join(parts, " "), strings.Join(steps, ", "))
}
