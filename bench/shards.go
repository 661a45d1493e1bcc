package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// The sharding scenario (`-shards`, issue 33): N Workloads in two
// namespaces (half each) on the bench chain, created before the controller
// starts (a cold start). Once with one unsharded replica, once with the
// Workloads of each namespace labelled kontinue.dev/shard=<namespace> and
// one replica per shard (--shard). Each on a fresh control plane. Measured:
// from the controllers' start until every Workload is Ready, each
// replica's peak and final RSS and its CPU seconds.

const shardLabel = "kontinue.dev/shard"

var shardNamespaces = []string{"shard-a", "shard-b"}

type shardReplica struct {
	Shard      string  `json:"shard"`
	PeakRSSMiB float64 `json:"peakRssMiB"`
	RSSMiB     float64 `json:"rssMiB"` // once converged
	CPUSeconds float64 `json:"cpuSeconds"`
}

type shardRun struct {
	Name         string          `json:"name"`
	LoadAtStart  string          `json:"loadAtStart"`
	ReadySeconds float64         `json:"readySeconds"`
	Replicas     []*shardReplica `json:"replicas"`
}

type sharding struct {
	Date      string      `json:"date"`
	Commit    string      `json:"commit"`
	GoVersion string      `json:"goVersion"`
	Cores     int         `json:"cores"`
	Workloads int         `json:"workloads"`
	Runs      []*shardRun `json:"runs"`
}

// runShards runs one replica, then two shards.
func runShards(ctx context.Context, o options, root string) error {
	work := filepath.Join(root, "_output", "bench", "shards")
	_ = os.RemoveAll(work)
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	r := newResults(o, root)
	out := &sharding{Date: r.Date, Commit: r.Commit, GoVersion: r.GoVersion, Cores: r.Cores, Workloads: o.n}
	bins, err := exec.CommandContext(ctx, filepath.Join(root, "hack", "install-controlplane.sh")).Output()
	if err != nil {
		return fmt.Errorf("hack/install-controlplane.sh: %w", err)
	}
	binDir := strings.TrimSpace(string(bins))
	for _, shards := range []bool{false, true} {
		run, err := runShardCase(ctx, o, shards, work, binDir)
		if err != nil {
			return err
		}
		out.Runs = append(out.Runs, run)
	}
	fmt.Print(out.table())
	return writeResult(o.out, "shards", out)
}

func runShardCase(ctx context.Context, o options, sharded bool, work, binDir string) (*shardRun, error) {
	name := "1 replica"
	if sharded {
		name = fmt.Sprintf("%d shards", len(shardNamespaces))
	}
	res := &shardRun{Name: name, LoadAtStart: loadAvg()}
	dir := filepath.Join(work, strings.ReplaceAll(name, " ", "-"))
	c, err := startCluster(ctx, filepath.Join(dir, "cluster"), binDir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.lc.Stop() }()
	crds, err := exec.CommandContext(ctx, o.kontinueBin, "crds").Output()
	if err != nil {
		return nil, fmt.Errorf("kontinue crds: %w", err)
	}
	if err := c.installCRDs(ctx, string(crds)); err != nil {
		return nil, err
	}
	y := stamperRole + "\n---\n" + chainYAML
	for _, ns := range shardNamespaces {
		y += "\n---\n" + namespaceYAML(ns)
	}
	setup, err := parseObjects(y)
	if err != nil {
		return nil, err
	}
	if err := applyAll(ctx, c.dyn, setup); err != nil {
		return nil, err
	}
	per := o.n / len(shardNamespaces)
	var watchers []*watcher
	for _, ns := range shardNamespaces {
		w, err := newWatcher(ctx, c.dyn, ns, per)
		if err != nil {
			return nil, err
		}
		defer w.stop()
		watchers = append(watchers, w)
		logf("%s: creating %d workloads in %s", name, per, ns)
		if err := parallel(ctx, per, 16, func(i int) error {
			u := workload(ns, i, true)
			if sharded {
				l := u.GetLabels()
				l[shardLabel] = ns
				u.SetLabels(l)
			}
			_, err := create(ctx, c.dyn, u)
			return err
		}); err != nil {
			return nil, err
		}
	}

	type replica struct {
		p   *process
		res *shardReplica
	}
	var reps []*replica
	shards := []string{""}
	if sharded {
		shards = shardNamespaces
	}
	start := time.Now()
	for _, s := range shards {
		args := []string{"controller", "--kubeconfig=" + c.kubeconfig, "--metrics-bind-address=0", "--health-probe-bind-address=0"}
		if s != "" {
			args = append(args, "--shard="+s)
		}
		p, err := startProcess(o.kontinueBin, filepath.Join(dir, "kontinue-"+s+".log"), append(args, o.kontinueFlags()...), strings.Fields(o.extraEnv))
		if err != nil {
			return nil, err
		}
		defer p.signalStop(time.Minute)
		reps = append(reps, &replica{p: p, res: &shardReplica{Shard: s}})
	}
	// VmHWM is the process's own peak: read at the end.
	for i, w := range watchers {
		if err := waitAllReady(ctx, w, options{n: per, timeout: o.timeout}, name+" "+shardNamespaces[i], start, reps[0].p); err != nil {
			return nil, err
		}
	}
	res.ReadySeconds = round(time.Since(start).Seconds(), 1)
	logf("%s: %d workloads Ready in %.1fs; settling", name, o.n, res.ReadySeconds)
	if err := sleep(ctx, 10*time.Second); err != nil {
		return nil, err
	}
	for _, r := range reps {
		rss, hwm, err := memory(r.p.pid)
		if err != nil {
			return nil, err
		}
		cpu, err := cpuSeconds(r.p.pid, true)
		if err != nil {
			return nil, err
		}
		r.res.RSSMiB, r.res.PeakRSSMiB, r.res.CPUSeconds = round(float64(rss)/(1<<20), 1), round(float64(hwm)/(1<<20), 1), round(cpu, 1)
		res.Replicas = append(res.Replicas, r.res)
	}
	return res, nil
}

func (s *sharding) table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nSharding: %d workloads in %d namespaces, cold start; one replica, then one replica per shard. %d cores, commit %s\n\n",
		s.Workloads, len(shardNamespaces), s.Cores, s.Commit)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "run\tload at start\tall Ready (s)\treplica\tpeak RSS (MiB)\tRSS converged (MiB)\tCPU (s)\t")
	for _, r := range s.Runs {
		for i, rep := range r.Replicas {
			run, load, ready := r.Name, r.LoadAtStart, fmt.Sprintf("%.1f", r.ReadySeconds)
			if i > 0 {
				run, load, ready = "", "", ""
			}
			shard := rep.Shard
			if shard == "" {
				shard = "(all)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.1f\t%.1f\t%.1f\t\n", run, load, ready, shard, rep.PeakRSSMiB, rep.RSSMiB, rep.CPUSeconds)
		}
	}
	_ = tw.Flush()
	return b.String()
}
