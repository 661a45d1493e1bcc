// Command bench measures Kontinue at scale on the local control plane:
// convergence of N workloads against the floor the API server and the client
// rate limits set, API calls, idle writes (also after a restart), change
// latency and memory. It prints one table and writes the same figures to
// bench/results/<date>.json. `make bench` runs it; see bench/README.md.
//
// Benchmarks, not tests: nothing here fails on a slow machine.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"kontinue.dev/kontinue/hack/localcluster"
)

type options struct {
	verify          bool
	n               int
	workers         int
	qps             float64
	burst           int
	floorWriters    int
	idle            time.Duration
	changes         int
	changeRate      float64
	waveChanges     int
	branchPrefix    string // of the branches runChanges sets ("": change-)
	changeTimeout   time.Duration
	resync          time.Duration
	timeout         time.Duration
	seed            uint64
	kontinueBin     string
	out             string
	skipFloor       bool
	pprof           bool
	extraArgs       string
	extraEnv        string
	compare         bool
	fairness        bool
	shards          bool
	switchover      bool
	fairChanges     int
	fairControllers string
	fairWaves       string
	cartoBin        string
	engine          string
	alerts          string
}

func main() {
	var o options
	flag.IntVar(&o.n, "n", 1000, "workloads (each stamps 3 ConfigMaps)")
	flag.IntVar(&o.workers, "workers", 0, "Kontinue's --workers (0: Kontinue's default)")
	flag.Float64Var(&o.qps, "qps", 0, "Kontinue's --kube-api-qps (0: Kontinue's default, no client limit)")
	flag.IntVar(&o.burst, "burst", 0, "Kontinue's --kube-api-burst (0: Kontinue's default)")
	flag.IntVar(&o.floorWriters, "floor-writers", 16, "the floor's concurrent unthrottled writers (16 was the fastest of 4, 16 and 64 in -compare on 2 cores)")
	flag.DurationVar(&o.idle, "idle", 2*time.Minute, "quiet window in which writes are counted, after convergence and again after the restart")
	flag.IntVar(&o.changes, "changes", 200, "workload spec changes for the change-latency measure")
	flag.Float64Var(&o.changeRate, "change-rate", 10, "spec changes per second")
	flag.IntVar(&o.waveChanges, "wave-changes", 0, "after the change latency: edit the chain's last template (all N workloads re-render) and make this many changes at -change-rate during that wave (0: skip; the simple engine only)")
	flag.DurationVar(&o.changeTimeout, "change-timeout", time.Minute, "a change not seen on the last step's object after this counts as lost")
	flag.DurationVar(&o.resync, "resync", 30*time.Second, "Kontinue's --resync-period after the restart, so that informer resyncs fall in the second quiet window")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Minute, "give up if the workloads are not all Ready after this")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the random choice of changed workloads")
	flag.StringVar(&o.kontinueBin, "kontinue", "", "Kontinue binary (default: build _output/bin/kontinue from the repository)")
	flag.StringVar(&o.out, "out", "", "results folder (default: bench/results in the repository)")
	flag.BoolVar(&o.skipFloor, "skip-floor", false, "skip the floor measure")
	flag.BoolVar(&o.pprof, "pprof", false, "pass --pprof-bind-address to Kontinue and save CPU and heap profiles in _output/bench/profiles (needs a Kontinue that has the flag)")
	flag.StringVar(&o.extraArgs, "kontinue-args", "", "more Kontinue flags, space-separated")
	flag.StringVar(&o.extraEnv, "kontinue-env", "", "environment for Kontinue, space-separated NAME=value (e.g. GOMEMLIMIT=120MiB)")
	flag.BoolVar(&o.compare, "compare", false, "head-to-head instead: Cartographer v0.8.11 and Kontinue at their defaults, each on a fresh control plane (cold start and created-while-running), and the floor of unthrottled writers (bench/README.md)")
	flag.BoolVar(&o.fairness, "fairness", false, "the fairness scenario instead (issue 33): tenant noisy's N workloads (-n, 5,000 unless given) make waves (-fairness-waves) while tenant quiet and a person of noisy change one workload each -fairness-changes times; each controller on a fresh control plane (bench/README.md)")
	flag.BoolVar(&o.shards, "shards", false, "the sharding scenario instead (issue 33): N workloads (-n, 2,000 unless given) in two namespaces, cold start, on one replica and then on two shards (--shard, one replica each); each on a fresh control plane (bench/README.md)")
	flag.BoolVar(&o.switchover, "switch", false, "the switch scenario instead (issue 48): on a fresh control plane Cartographer v0.8.11 converges N workloads, is stopped, Kontinue's CRDs go over its own and Kontinue starts, both at their defaults; until every workload's status and stamped object are Kontinue's, what was re-created or changed, the writes, and a quiet window (-idle) after (bench/README.md)")
	flag.IntVar(&o.fairChanges, "fairness-changes", 20, "changes of quiet's workload (and of one of noisy's) per wave in -fairness, one after the other")
	flag.StringVar(&o.fairControllers, "fairness-controllers", fairFIFO+","+fairFair+","+fairCarto, "the controllers -fairness runs, in order: "+fairFIFO+" (Kontinue --fair-queue=false), "+fairFair+" (Kontinue's default), "+fairCarto+" (v0.8.11)")
	flag.StringVar(&o.fairWaves, "fairness-waves", strings.Join(allWaves, ","), "noisy's waves in -fairness, in order, on the same control plane: "+strings.Join(allWaves, ", ")+" (bench/README.md)")
	flag.BoolVar(&o.verify, "verify", false, "a signature policy on the chain's last step: every workload's image is checked before it goes in (issue 49; an in-process registry signs each image the first time it is read; the simple engine only)")
	flag.StringVar(&o.engine, "engine", engineSimple, "the engine of the chain's templates: "+engineSimple+" ($(…)$ tags) or "+engineGoTemplate)
	flag.StringVar(&o.alerts, "alerts", "", "before the change latency, an Alert on every workload sending to a dead receiver: "+alertsRefused+" (connection refused), "+alertsBlackhole+" (accepts, never answers) or "+alertsDead+" (both); Kontinue runs with --notification-allow-private-networks (bench/README.md)")
	flag.Parse()
	if o.alerts != "" && !slices.Contains(alertModes, o.alerts) || o.alerts != "" && (o.compare || o.fairness || o.shards) {
		fmt.Fprintln(os.Stderr, "bench: -alerts is one of "+strings.Join(alertModes, ", ")+", and not with -compare, -fairness or -shards")
		os.Exit(2)
	}
	if o.fairness || o.shards {
		given := false
		flag.Visit(func(f *flag.Flag) { given = given || f.Name == "n" })
		if !given && o.fairness {
			o.n = 5000
		}
		if !given && o.shards {
			o.n = 2000
		}
	}
	if o.verify && (o.engine != engineSimple || o.compare || o.fairness || o.shards || o.switchover) {
		fmt.Fprintln(os.Stderr, "bench: -verify is for the default measures with the "+engineSimple+" engine")
		os.Exit(2)
	}
	if o.engine != engineSimple && o.engine != engineGoTemplate || (o.compare || o.switchover) && o.engine != engineSimple {
		fmt.Fprintln(os.Stderr, "bench: -engine is "+engineSimple+" or "+engineGoTemplate+" (and only "+engineSimple+" with -compare and -switch: Cartographer has no goTemplate)")
		os.Exit(2)
	}
	if o.n < 1 || o.workers < 0 || o.burst < 0 || o.floorWriters < 1 || o.changeRate <= 0 || o.changes < 0 {
		fmt.Fprintln(os.Stderr, "bench: -n, -floor-writers and -change-rate must be positive, -workers and -burst not negative")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		stop()
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench %s: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func run(ctx context.Context, o options) (err error) {
	root, err := localcluster.RepoRoot(".")
	if err != nil {
		return err
	}
	if o.out == "" {
		o.out = filepath.Join(root, "bench", "results")
	}
	if o.fairness {
		if o.kontinueBin == "" {
			o.kontinueBin = filepath.Join(root, "_output", "bin", "kontinue")
		}
		if strings.Contains(o.fairControllers, fairCarto) {
			out, err := exec.CommandContext(ctx, filepath.Join(root, "hack", "install-cartographer.sh")).Output()
			if err != nil {
				return fmt.Errorf("hack/install-cartographer.sh: %w", err)
			}
			o.cartoBin = strings.TrimSpace(string(out))
		}
		return runFairness(ctx, o, root)
	}
	if o.shards {
		if o.kontinueBin == "" {
			o.kontinueBin = filepath.Join(root, "_output", "bin", "kontinue")
		}
		return runShards(ctx, o, root)
	}
	if o.switchover {
		if o.kontinueBin == "" {
			o.kontinueBin = filepath.Join(root, "_output", "bin", "kontinue")
		}
		return runSwitch(ctx, o, root)
	}
	if o.compare {
		if o.kontinueBin == "" {
			o.kontinueBin = filepath.Join(root, "_output", "bin", "kontinue")
		}
		return runCompare(ctx, o, root)
	}
	res := newResults(o, root)
	work := filepath.Join(root, "_output", "bench")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}

	if o.kontinueBin == "" {
		o.kontinueBin = filepath.Join(root, "_output", "bin", "kontinue")
		logf("building %s", o.kontinueBin)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", o.kontinueBin, ".")
		cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("building kontinue: %w", err)
		}
	}
	out, err := exec.CommandContext(ctx, filepath.Join(root, "hack", "install-controlplane.sh")).Output()
	if err != nil {
		return fmt.Errorf("hack/install-controlplane.sh: %w", err)
	}
	cluster, err := localcluster.Start(ctx, localcluster.Options{
		BinDir: strings.TrimSpace(string(out)), Dir: filepath.Join(work, "cluster"), Log: os.Stderr,
	})
	if err != nil {
		return err
	}
	defer func() {
		if serr := cluster.Stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	cfg, err := clientcmd.BuildConfigFromFlags("", cluster.Kubeconfig)
	if err != nil {
		return err
	}
	// The bench's own client must never be the bottleneck: it creates the
	// workloads and changes them.
	setup := rest.CopyConfig(cfg)
	setup.QPS, setup.Burst = 2000, 4000
	setup.UserAgent = "kontinue-bench"
	dyn, err := dynamic.NewForConfig(setup)
	if err != nil {
		return err
	}
	apiserver, err := newAPIServerScraper(cluster)
	if err != nil {
		return err
	}
	pids := map[string]int{"bench": os.Getpid()}
	for _, p := range cluster.Processes() {
		pids[p.Name] = p.Pid
	}

	b := &bench{o: o, res: res, cfg: cfg, dyn: dyn, apiserver: apiserver, pids: pids, work: work}
	defer b.stopKontinue()
	if err := b.measureKontinue(ctx); err != nil {
		return err
	}
	if !o.skipFloor {
		if err := b.measureFloor(ctx); err != nil {
			return fmt.Errorf("floor: %w", err)
		}
	}
	res.finish()
	fmt.Print(res.table())
	path, err := res.write(o.out)
	if err != nil {
		return err
	}
	logf("wrote %s", path)
	return nil
}

// bench is one run's state.
type bench struct {
	o         options
	res       *results
	cfg       *rest.Config
	dyn       dynamic.Interface
	apiserver *apiserverScraper
	pids      map[string]int
	work      string

	k       *kontinue
	watcher *watcher
	dead    *deadReceivers // -alerts
	prof    *profiler
	// waitProfile waits for a CPU profile still being recorded.
	waitProfile func()
}

// kontinueFlags are the flags the bench's options set; Kontinue's own
// defaults apply to the others.
func (o options) kontinueFlags() []string {
	var f []string
	if o.workers > 0 {
		f = append(f, fmt.Sprintf("--workers=%d", o.workers))
	}
	if o.qps != 0 {
		f = append(f, fmt.Sprintf("--kube-api-qps=%g", o.qps))
	}
	if o.burst > 0 {
		f = append(f, fmt.Sprintf("--kube-api-burst=%d", o.burst))
	}
	if o.alerts != "" {
		// The dead receivers listen on loopback, refused by default.
		f = append(f, "--notification-allow-private-networks")
	}
	return append(f, strings.Fields(o.extraArgs)...)
}

func (b *bench) kontinueArgs(extra ...string) []string {
	kubeconfig := filepath.Join(b.work, "cluster", "kubeconfig")
	args := append([]string{"controller", "--kubeconfig=" + kubeconfig}, b.o.kontinueFlags()...)
	return append(args, extra...)
}

func (b *bench) startKontinue(ctx context.Context, name string, extra ...string) error {
	logPath := filepath.Join(b.work, name+".log")
	if b.o.pprof {
		ports, err := freePorts(1)
		if err != nil {
			return err
		}
		addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
		extra = append(extra, "--pprof-bind-address="+addr)
		b.prof = &profiler{base: "http://" + addr + "/debug/pprof/", dir: filepath.Join(b.work, "profiles")}
		if err := os.MkdirAll(b.prof.dir, 0o755); err != nil {
			return err
		}
	}
	k, err := startKontinue(b.o.kontinueBin, logPath, b.kontinueArgs(extra...), strings.Fields(b.o.extraEnv))
	if err != nil {
		return err
	}
	b.k = k
	if err := k.waitReady(ctx, 2*time.Minute); err != nil {
		return err
	}
	logf("kontinue ready in %.1fs (pid %d, logs %s)", time.Since(k.started).Seconds(), k.pid, logPath)
	return nil
}

func (b *bench) stopKontinue() {
	if b.k != nil {
		if err := b.k.stop(time.Minute); err != nil {
			logf("%v", err)
		}
	}
}

func (b *bench) cpuMeter() *cpuMeter {
	pids := map[string]int{}
	for k, v := range b.pids {
		pids[k] = v
	}
	if b.k != nil {
		pids["kontinue"] = b.k.pid
	}
	return newCPUMeter(pids)
}

// measureKontinue runs every measure that needs Kontinue.
func (b *bench) measureKontinue(ctx context.Context) error {
	o, res := b.o, b.res
	if err := b.startKontinue(ctx, "kontinue", "--install-crds"); err != nil {
		return err
	}
	chain := benchChainYAML(o.engine)
	var reg *signingRegistry
	if o.verify {
		reg = startSigningRegistry()
		defer reg.close()
		chain = reg.chainYAML()
		if err := reg.prepare(o.n); err != nil {
			return err
		}
	}
	objs, err := parseObjects(stamperRole + "\n---\n" + namespaceYAML(benchNS) + "\n---\n" + chain)
	if err != nil {
		return err
	}
	if err := applyAll(ctx, b.dyn, objs); err != nil {
		return err
	}
	if err := waitChainReady(ctx, b.dyn, chainName, time.Minute); err != nil {
		return err
	}
	if b.watcher, err = newWatcher(ctx, b.dyn, benchNS, o.n); err != nil {
		return err
	}
	if reg != nil {
		b.watcher.imageOf = reg.expected
	}
	defer b.watcher.stop()

	// Memory before any workload: what the stamped objects add is measured
	// against it.
	if err := sleep(ctx, 3*time.Second); err != nil {
		return err
	}
	if m, err := b.k.scrape(ctx); err == nil {
		res.Memory.BaselineHeapMiB = mib(m.sum("go_memstats_heap_alloc_bytes", nil))
	}
	if rss, _, err := memory(b.k.pid); err == nil {
		res.Memory.BaselineRSSMiB = mib(float64(rss))
	}
	samp := startSampler(ctx, b.k, time.Second)

	// 1. Convergence.
	if err := b.converge(ctx); err != nil {
		return err
	}
	// Events and re-reconciles triggered by Kontinue's own writes trail the
	// last Ready: wait for the queues to drain before the quiet window.
	m1 := res.conv.after
	quietAt, m2, err := waitQuiet(ctx, b.k, 3*time.Second, 5*time.Minute)
	if err != nil {
		return err
	}
	res.Settle.Seconds = round(quietAt.Sub(res.conv.readyAt).Seconds(), 1)
	if res.Settle.Seconds < 0 {
		res.Settle.Seconds = 0
	}
	res.Settle.Calls = apiCalls(m1, m2)
	res.Settle.Writes = writesOf(res.Settle.Calls)
	all := apiCalls(res.conv.before, m2)
	res.APICalls.ToQuiet = all
	res.APICalls.Errors = apiErrors(res.conv.before, m2)
	res.APICalls.Diag = diagnose(res.conv.before, m2)
	res.APICalls.ToQuietPerWorkload = round(float64(total(all))/float64(o.n), 2)
	res.APICalls.ToQuietWritesPerWorkload = round(float64(writesOf(all))/float64(o.n), 2)

	if b.waitProfile != nil {
		b.waitProfile() // not into the quiet window
	}
	// 4a. Idle writes after convergence; steady memory at its end.
	logf("quiet window of %s after convergence", o.idle)
	if err := sleep(ctx, o.idle); err != nil {
		return err
	}
	m3, err := b.k.scrape(ctx)
	if err != nil {
		return err
	}
	b.prof.fetch(ctx, "heap-steady", "heap?gc=1", time.Minute)
	res.Idle.Window = o.idle.String()
	res.Idle.Calls = apiCalls(m2, m3)
	res.Idle.Writes = writesOf(res.Idle.Calls)
	res.Memory.SteadyHeapMiB = mib(m3.sum("go_memstats_heap_alloc_bytes", nil))
	if rss, _, err := memory(b.k.pid); err == nil {
		res.Memory.SteadyRSSMiB = mib(float64(rss))
	}

	// 5. Change latency at full load (with -alerts, every status write
	// notifying dead receivers).
	if o.alerts != "" {
		if err := b.startAlerts(ctx); err != nil {
			return fmt.Errorf("alerts: %w", err)
		}
		defer b.dead.stop()
	}
	if o.changes > 0 {
		if err := b.changeLatency(ctx, m3); err != nil {
			return err
		}
	}
	// 5b. Change latency during a wave of re-renders.
	if o.waveChanges > 0 && o.engine == engineSimple {
		if err := b.waveLatency(ctx); err != nil {
			return err
		}
	}
	if o.alerts != "" {
		if m, err := b.k.scrape(ctx); err == nil {
			b.alertFigures(ctx, m)
		}
	}
	if _, hwm, err := memory(b.k.pid); err == nil {
		res.Memory.PeakRSSMiB = mib(float64(hwm))
	}
	heap, anon, kids := samp.finish()
	res.Memory.PeakHeapMiB, res.Memory.PeakAnonRSSMiB, res.Memory.PeakRenderersAnonRSSMiB = mib(heap), mib(anon), mib(kids)

	// 4b. Forced resync: a restart re-lists everything and reconciles every
	// workload; then a second quiet window with a short resync period.
	logf("restarting kontinue (SIGTERM) with --resync-period=%s", o.resync)
	if err := b.k.stop(time.Minute); err != nil {
		return err
	}
	a0, _ := b.apiserver.scrape(ctx)
	restartAt := time.Now()
	if err := b.startKontinue(ctx, "kontinue-restarted", "--resync-period="+o.resync.String()); err != nil {
		return err
	}
	res.Restart.ReadySeconds = round(time.Since(restartAt).Seconds(), 1)
	samp2 := startProfilingSampler(ctx, b.k, time.Second, b.prof, "heap-restart-peak")
	quietAt, m4, err := waitQuiet(ctx, b.k, 3*time.Second, 10*time.Minute)
	if err != nil {
		return err
	}
	res.Restart.ReconciledSeconds = round(quietAt.Sub(restartAt).Seconds(), 1)
	res.Restart.Calls = apiCalls(nil, m4)
	res.Restart.Writes = writesOf(res.Restart.Calls)
	if a1, _ := b.apiserver.scrape(ctx); a0 != nil && a1 != nil {
		res.Restart.APIServerWrites = apiserverWrites(a0, a1)
	}
	logf("quiet window of %s after the restart", o.idle)
	if err := sleep(ctx, o.idle); err != nil {
		return err
	}
	m5, err := b.k.scrape(ctx)
	if err != nil {
		return err
	}
	res.Restart.Window = o.idle.String()
	res.Restart.Resync = o.resync.String()
	res.Restart.IdleCalls = apiCalls(m4, m5)
	res.Restart.IdleWrites = writesOf(res.Restart.IdleCalls)
	if rss, hwm, err := memory(b.k.pid); err == nil {
		res.Memory.RestartPeakRSSMiB = mib(float64(hwm))
		res.Memory.RestartSteadyRSSMiB = mib(float64(rss))
	}
	heap2, _, _ := samp2.finish()
	res.Memory.RestartPeakHeapMiB = mib(heap2)
	b.stopKontinue()
	b.k = nil
	return nil
}

// converge creates the workloads and waits until all are Ready.
func (b *bench) converge(ctx context.Context) error {
	o, res := b.o, b.res
	m0, err := b.k.scrape(ctx)
	if err != nil {
		return err
	}
	a0, _ := b.apiserver.scrape(ctx)
	cpu := b.cpuMeter()
	logf("creating %d workloads", o.n)
	// A CPU profile over about the whole convergence: the profile endpoint
	// needs its length up front, and the client rate says nothing about it
	// when there is no client limit. ~16 ms per workload covers the runs
	// measured so far; a longer profile only adds the settle.
	b.waitProfile = b.prof.cpu(ctx, "cpu-convergence", min(max(time.Duration(o.n)*16*time.Millisecond, 5*time.Second), 10*time.Minute))
	start := time.Now()
	createdAt := make([]time.Time, o.n)
	createErr := make(chan error, 1)
	go func() {
		createErr <- parallel(ctx, o.n, 16, func(i int) error {
			_, err := create(ctx, b.dyn, workload(benchNS, i, true))
			createdAt[i] = time.Now()
			return err
		})
	}()
	progress := time.NewTicker(10 * time.Second)
	defer progress.Stop()
	deadline := time.After(o.timeout)
	created := false
	for done := false; !done; {
		select {
		case err := <-createErr:
			if err != nil {
				return fmt.Errorf("creating workloads: %w", err)
			}
			created = true
			res.Convergence.CreatedSeconds = round(time.Since(start).Seconds(), 2)
			createErr = nil
		case <-b.watcher.allReady:
			done = true
		case <-progress.C:
			logf("%d/%d workloads Ready after %s", b.watcher.readyCount(), o.n, time.Since(start).Round(time.Second))
		case <-deadline:
			return fmt.Errorf("only %d of %d workloads Ready after %s; see %s", b.watcher.readyCount(), o.n, o.timeout, b.k.logPath)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	readyAt := time.Now()
	if !created {
		if err := <-createErr; err != nil {
			return fmt.Errorf("creating workloads: %w", err)
		}
		res.Convergence.CreatedSeconds = round(time.Since(start).Seconds(), 2)
	}
	m1, err := b.k.scrape(ctx)
	if err != nil {
		return err
	}
	a1, _ := b.apiserver.scrape(ctx)
	res.Convergence.CPUSeconds = cpu.read()
	b.prof.fetch(ctx, "heap-converged", "heap", time.Minute)
	res.Convergence.Seconds = round(readyAt.Sub(start).Seconds(), 2)
	res.Convergence.Workloads = o.n
	res.Convergence.StampedObjects = o.n * stepsPerWorkload
	// Per-workload time from its create to its Ready.
	var lat []float64
	byName := map[string]time.Time{}
	for i, t := range createdAt {
		byName[workloadName(i)] = t
	}
	b.watcher.mu.Lock()
	for name, t := range b.watcher.readyAt {
		if c, ok := byName[name]; ok {
			lat = append(lat, t.Sub(c).Seconds())
		}
	}
	b.watcher.mu.Unlock()
	res.Convergence.WorkloadReady = summarize(lat, 1)
	res.APICalls.Convergence = apiCalls(m0, m1)
	res.APICalls.PerWorkload = round(float64(total(res.APICalls.Convergence))/float64(o.n), 2)
	res.APICalls.WritesPerWorkload = round(float64(writesOf(res.APICalls.Convergence))/float64(o.n), 2)
	if a0 != nil && a1 != nil {
		res.APICalls.APIServerWrites = apiserverWrites(a0, a1)
	}
	res.conv.before, res.conv.after, res.conv.readyAt = m0, m1, readyAt
	logf("all %d workloads Ready in %.1fs", o.n, res.Convergence.Seconds)
	return nil
}

// changeLatency changes random workloads' branch at a steady rate and times
// each change until the last step's ConfigMap holds the new value.
func (b *bench) changeLatency(ctx context.Context, before metrics) error {
	o, res := b.o, b.res
	logf("%d spec changes at %g/s", o.changes, o.changeRate)
	a0, _ := b.apiserver.scrape(ctx)
	cpu := b.cpuMeter()
	waitProfile := b.prof.cpu(ctx, "cpu-changes", time.Duration(float64(o.changes)/o.changeRate*float64(time.Second)))
	lat, first, lost, err := runChanges(ctx, b.dyn, b.watcher, o)
	if err != nil {
		return err
	}
	waitProfile()
	b.prof.fetch(ctx, "mutex-changes", "mutex", time.Minute)
	b.prof.fetch(ctx, "block-changes", "block", time.Minute)
	// Writes trailing the last change belong to the changes.
	_, after, err := waitQuiet(ctx, b.k, 3*time.Second, 5*time.Minute)
	if err != nil {
		return err
	}
	res.ChangeLatency.CPUSeconds = cpu.read()
	if a1, _ := b.apiserver.scrape(ctx); a0 != nil && a1 != nil {
		res.ChangeLatency.APIServerWrites = apiserverWrites(a0, a1)
	}
	res.ChangeLatency.Changes = o.changes
	res.ChangeLatency.RatePerSecond = o.changeRate
	res.ChangeLatency.Lost = lost
	res.ChangeLatency.Ms = summarize(lat, 1000)
	res.ChangeLatency.FirstStepMs = summarize(first, 1000)
	res.ChangeLatency.Calls = apiCalls(before, after)
	res.ChangeLatency.Errors = apiErrors(before, after)
	res.ChangeLatency.Diag = diagnose(before, after)
	res.ChangeLatency.WritesPerChange = round(float64(writesOf(res.ChangeLatency.Calls))/float64(o.changes), 2)
	return nil
}

// waveLatency edits the chain's last template, so that every workload
// re-renders its last step (a wave of N applies), and makes -wave-changes
// changes at -change-rate from the edit on: the change latency while the
// controller is busiest. The wave is timed until every last step holds
// the edit (the bench's informer).
func (b *bench) waveLatency(ctx context.Context) error {
	o, res := b.o, b.res
	before, err := b.k.scrape(ctx)
	if err != nil {
		return err
	}
	waveDone := b.watcher.startWave("1")
	// A CPU profile of about the wave (-pprof): what each re-render costs.
	waitProfile := b.prof.cpu(ctx, "cpu-wave", min(max(time.Duration(o.n)*8*time.Millisecond, 5*time.Second), 5*time.Minute))
	defer waitProfile()
	editAt := time.Now()
	if _, err := b.dyn.Resource(gvrByKind["ClusterTemplate"]).Patch(ctx, "bench-app", types.MergePatchType,
		[]byte(`{"spec":{"template":{"data":{"wave":"1"}}}}`), metav1.PatchOptions{FieldManager: "bench"}); err != nil {
		return fmt.Errorf("editing the last template: %w", err)
	}
	logf("last template edited: %d changes at %g/s during the wave", o.waveChanges, o.changeRate)
	// Where the workers wait, 3 and 10 seconds into the wave (-pprof).
	go func() {
		for _, at := range []time.Duration{3 * time.Second, 10 * time.Second} {
			select {
			case <-time.After(time.Until(editAt.Add(at))):
				b.prof.fetch(ctx, fmt.Sprintf("goroutines-wave-%s", at), "goroutine?debug=1", time.Minute)
			case <-ctx.Done():
				return
			}
		}
	}()
	wo := o
	// Branches of their own: a workload changed to change-k before would
	// not change again.
	wo.changes, wo.seed, wo.branchPrefix = o.waveChanges, o.seed+1, "wave-"
	lat, first, lost, err := runChanges(ctx, b.dyn, b.watcher, wo)
	if err != nil {
		return err
	}
	w := &res.WaveLatency
	w.ChangesDoneDuringWave = b.watcher.waveCount() < o.n
	select {
	case <-waveDone:
	case <-time.After(o.timeout):
		return fmt.Errorf("the wave: %d of %d after %s", b.watcher.waveCount(), o.n, o.timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
	w.WaveSeconds = round(time.Since(editAt).Seconds(), 1)
	_, after, err := waitQuiet(ctx, b.k, 3*time.Second, 5*time.Minute)
	if err != nil {
		return err
	}
	w.Changes, w.RatePerSecond, w.Lost = o.waveChanges, o.changeRate, lost
	w.Ms, w.FirstStepMs = summarize(lat, 1000), summarize(first, 1000)
	w.Diag = diagnose(before, after)
	w.Calls = apiCalls(before, after)
	logf("wave of %d re-renders in %.1fs; changes during it p50 %.0f ms, p99 %.0f ms", o.n, w.WaveSeconds, w.Ms.P50, w.Ms.P99)
	return nil
}

// waitQuiet waits until Kontinue's queues are empty and nothing was added
// or written for `still`; it returns when the quiet began and a scrape.
func waitQuiet(ctx context.Context, k *kontinue, still, max time.Duration) (time.Time, metrics, error) {
	deadline := time.Now().Add(max)
	var lastAdds, lastWrites float64 = -1, -1
	var since time.Time
	for {
		m, err := k.scrape(ctx)
		if err != nil {
			if k.exited() {
				return time.Time{}, nil, fmt.Errorf("kontinue exited (%v); see %s", k.waitErr, k.logPath)
			}
		} else {
			depth := m.sum("kontinue_workqueue_depth", nil)
			busy := m.sum("kontinue_workqueue_unfinished_work_seconds", nil)
			adds := m.sum("kontinue_workqueue_adds_total", nil)
			writes := m.sum(apiRequests, func(l map[string]string) bool { return isWriteMethod(l["verb"]) })
			now := time.Now()
			if depth == 0 && busy == 0 && adds == lastAdds && writes == lastWrites {
				if since.IsZero() {
					since = now
				}
				if now.Sub(since) >= still {
					return since, m, nil
				}
			} else {
				since = time.Time{}
			}
			lastAdds, lastWrites = adds, writes
			if now.After(deadline) {
				logf("kontinue still busy after %s (queue depth %g); measuring anyway", max, depth)
				return now, m, nil
			}
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return time.Time{}, nil, err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func mib(bytes float64) float64 { return round(bytes/(1<<20), 1) }

// parallel runs f(0..n-1) on `workers` goroutines and returns the first error.
func parallel(ctx context.Context, n, workers int, f func(i int) error) error {
	next := make(chan int)
	errc := make(chan error, workers)
	for range workers {
		go func() {
			var first error
			for i := range next {
				if first != nil {
					continue
				}
				if err := f(i); err != nil {
					first = err
				}
			}
			errc <- first
		}()
	}
	var err error
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(next)
	for range workers {
		if e := <-errc; e != nil && err == nil {
			err = e
		}
	}
	return err
}

// goVersion is the toolchain that built the bench (and, with the same
// PATH, Kontinue).
func goVersion() string { return runtime.Version() }

// writeResult writes v as indented JSON to dir/<prefix>-<UTC time>.json,
// the results files bench/README.md explains.
func writeResult(dir, prefix string, v any) error {
	path := filepath.Join(dir, prefix+"-"+time.Now().UTC().Format("2006-01-02T150405")+".json")
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return err
	}
	logf("wrote %s", path)
	return nil
}
