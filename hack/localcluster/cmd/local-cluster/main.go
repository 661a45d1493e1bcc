// Command local-cluster starts, stops and reports on a local Kubernetes
// control plane (etcd, kube-apiserver, kube-controller-manager) for
// development. See hack/local-cluster.sh.
//
//	local-cluster [-dir DIR] [-bin-dir DIR] start|stop|env|status
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"kontinue.dev/kontinue/hack/localcluster"
)

const usage = `usage: local-cluster [flags] start|stop|env|status

  start    start a detached cluster in -dir (wiped first); prints an export line:
             eval "$(local-cluster start)"
  stop     stop the processes recorded in -dir/pids
  env      print "export KUBECONFIG=..." if the cluster in -dir runs
  status   show the processes and whether the apiserver is ready

flags:
`

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "local-cluster:", err)
		os.Exit(1)
	}
}

func run() error {
	fs := flag.NewFlagSet("local-cluster", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	dir := fs.String("dir", os.Getenv("LOCAL_CLUSTER_DIR"),
		"state folder (env LOCAL_CLUSTER_DIR; default $REPO/_output/local-cluster)")
	binDir := fs.String("bin-dir", os.Getenv("LOCAL_CLUSTER_BIN_DIR"),
		"folder with etcd, kube-apiserver, kube-controller-manager (env LOCAL_CLUSTER_BIN_DIR; default: the folder printed by hack/install-controlplane.sh)")
	workloads := fs.Bool("workloads", false,
		"also run the workload controllers, kube-scheduler and kwok with fake nodes: Pods run (played), Deployments roll out, Jobs complete")
	tekton := fs.Bool("tekton", false, "also run Tekton Pipelines' controller (implies -workloads)")
	nodes := fs.Int("nodes", 2, "fake nodes, with -workloads")
	// Flags may come before or after the command.
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errors.New("missing command")
	}
	cmd := fs.Arg(0)
	if err := fs.Parse(fs.Args()[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}

	var root string
	if *tekton {
		*workloads = true
	}
	if *dir == "" || cmd == "start" {
		var err error
		if root, err = repoRoot(); err != nil {
			return fmt.Errorf("%w; pass -dir and -bin-dir", err)
		}
	}
	if *dir == "" {
		*dir = filepath.Join(root, "_output", "local-cluster")
	}

	switch cmd {
	case "start":
		return start(root, *dir, *binDir, *workloads, *tekton, *nodes)
	case "stop":
		return stop(*dir)
	case "env":
		c, err := attach(*dir)
		if err != nil {
			return err
		}
		if !c.Running() {
			return fmt.Errorf("the cluster in %s is not running (see %s status)", *dir, os.Args[0])
		}
		fmt.Println(exportLine(c))
		return nil
	case "status":
		return status(*dir)
	default:
		fs.Usage()
		return fmt.Errorf("unknown command %q", cmd)
	}
}

func start(root, dir, binDir string, workloads, tekton bool, nodes int) error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	opts := localcluster.Options{
		BinDir: binDir,
		Dir:    dir,
		Log:    prefixWriter{},
		Detach: true,
	}
	if binDir == "" || workloads {
		// Builds what is missing (minutes cold), else returns at once.
		in, err := localcluster.Install(ctx, root, workloads, os.Stderr)
		if err != nil {
			return err
		}
		if opts.BinDir == "" {
			opts.BinDir = in.BinDir
		}
		if workloads {
			opts.Workloads = &localcluster.Workloads{KwokBinary: in.Kwok, Nodes: nodes}
		}
		if tekton {
			opts.Tekton = &localcluster.Tekton{Dir: in.TektonDir}
		}
	}
	ctx, cancelT := context.WithTimeout(ctx, 5*time.Minute)
	defer cancelT()
	c, err := localcluster.Start(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "local-cluster: %s, state in %s; stop with: hack/local-cluster.sh stop\n", c.Host, c.Dir)
	fmt.Println(exportLine(c))
	return nil
}

func stop(dir string) error {
	c, err := localcluster.Attach(dir)
	if errors.Is(err, localcluster.ErrNotRunning) {
		fmt.Fprintf(os.Stderr, "local-cluster: no cluster in %s\n", dir)
		return nil
	}
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := c.Stop(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "local-cluster: stopped in %.1fs (logs kept in %s)\n", time.Since(t0).Seconds(), filepath.Join(c.Dir, "logs"))
	return nil
}

func status(dir string) error {
	c, err := attach(dir)
	if err != nil {
		return err
	}
	fmt.Printf("dir:        %s\nhost:       %s\nkubeconfig: %s\n", c.Dir, c.Host, c.Kubeconfig)
	for _, p := range c.Processes() {
		state := "stopped"
		if p.Running {
			state = "running"
		}
		fmt.Printf("%-24s pid %-7d %s  (log %s)\n", p.Name, p.Pid, state, p.LogFile)
	}
	if !c.Running() {
		return errors.New("not running")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ready(ctx); err != nil {
		return fmt.Errorf("apiserver not ready: %w", err)
	}
	fmt.Println("apiserver:  ready")
	return nil
}

// repoRoot finds the repository from the working folder, else from the
// executable (hack/local-cluster.sh builds it into $REPO/_output/bin).
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	root, err := localcluster.RepoRoot(wd)
	if err == nil {
		return root, nil
	}
	if exe, xerr := os.Executable(); xerr == nil {
		if r, xerr := localcluster.RepoRoot(filepath.Dir(exe)); xerr == nil {
			return r, nil
		}
	}
	return "", err
}

func attach(dir string) (*localcluster.Cluster, error) {
	c, err := localcluster.Attach(dir)
	if errors.Is(err, localcluster.ErrNotRunning) {
		return nil, fmt.Errorf("no cluster in %s (start one with hack/local-cluster.sh start)", dir)
	}
	return c, err
}

func exportLine(c *localcluster.Cluster) string {
	return "export KUBECONFIG=" + shellQuote(c.Kubeconfig)
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+:,@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// prefixWriter writes progress lines to stderr, prefixed.
type prefixWriter struct{}

func (prefixWriter) Write(p []byte) (int, error) {
	for _, line := range strings.SplitAfter(string(p), "\n") {
		if line != "" {
			fmt.Fprint(os.Stderr, "local-cluster: "+line)
		}
	}
	return len(p), nil
}
