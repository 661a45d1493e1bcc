package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"kontinue.dev/kontinue/hack/localcluster"
)

// The head-to-head (`-compare`): Cartographer v0.8.11 and Kontinue, both at
// their default flags, each on a fresh control plane, on the same chain and
// workloads, and the floor the API server itself sets: the minimal writes by
// unthrottled concurrent writers. Nothing here uses Kontinue's own limits as
// a yardstick.

// Writers tried for the floor; the fastest counts.
var floorWriters = []int{4, 16, 64}

const liveNS = "bench-live"

// contender is one controller's figures.
type contender struct {
	Name string `json:"name"`
	// ColdSeconds: N workloads exist, the controller starts; until all Ready.
	ColdSeconds float64 `json:"coldSeconds"`
	// RunningSeconds: the controller runs (and has converged N others); N
	// new workloads are created; first create until all Ready.
	RunningSeconds    float64            `json:"runningSeconds"`
	CPUSeconds        map[string]float64 `json:"cpuSeconds"` // by process, both scenarios
	PeakRSSMiB        float64            `json:"peakRSSMiB"`
	APIServerWrites   map[string]int     `json:"apiserverWrites"` // both scenarios, all clients but the bench's creates
	WritesPerWorkload float64            `json:"writesPerWorkload"`
}

type floorResult struct {
	Writers        int                `json:"writers"`
	Seconds        float64            `json:"seconds"`
	CPUSeconds     map[string]float64 `json:"cpuSeconds"`
	SecondsByTried map[int]float64    `json:"secondsByWriters"`
}

type comparison struct {
	Date        string       `json:"date"`
	Commit      string       `json:"commit"`
	GoVersion   string       `json:"goVersion"`
	Cores       int          `json:"cores"`
	Workloads   int          `json:"workloads"`
	Contenders  []*contender `json:"contenders"`
	Floor       *floorResult `json:"floor"`
	LoadAtStart string       `json:"loadAtStart"`
}

// runCompare runs the head-to-head and prints the table.
func runCompare(ctx context.Context, o options, root string) error {
	work := filepath.Join(root, "_output", "bench", "compare")
	_ = os.RemoveAll(work)
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	cmp := newComparison(o, root)
	bins, err := exec.CommandContext(ctx, filepath.Join(root, "hack", "install-controlplane.sh")).Output()
	if err != nil {
		return fmt.Errorf("hack/install-controlplane.sh: %w", err)
	}
	binDir := strings.TrimSpace(string(bins))
	carto, err := exec.CommandContext(ctx, filepath.Join(root, "hack", "install-cartographer.sh")).Output()
	if err != nil {
		return fmt.Errorf("hack/install-cartographer.sh: %w", err)
	}
	cartoBin := strings.TrimSpace(string(carto))
	modDir, err := exec.CommandContext(ctx, "go", "-C", filepath.Join(root, "hack", "cartographer"), "list", "-m", "-f", "{{.Dir}}", "github.com/vmware-tanzu/cartographer").Output()
	if err != nil {
		return fmt.Errorf("locating Cartographer's module: %w", err)
	}
	cartoCRDs := filepath.Join(strings.TrimSpace(string(modDir)), "config", "crd", "bases")

	var sample *floorSample
	for _, name := range []string{"cartographer", "kontinue"} {
		c, s, err := runContender(ctx, o, name, work, binDir, cartoBin, cartoCRDs)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		cmp.Contenders = append(cmp.Contenders, c)
		if s != nil {
			sample = s
		}
	}
	if cmp.Floor, err = runFloor(ctx, o, work, binDir, sample); err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	fmt.Print(cmp.table())
	return writeResult(filepath.Join(root, "bench", "results"), "compare", cmp)
}

func newComparison(o options, root string) *comparison {
	r := newResults(o, root)
	return &comparison{Date: r.Date, Commit: r.Commit, GoVersion: r.GoVersion, Cores: r.Cores, Workloads: o.n, LoadAtStart: r.LoadAvg}
}

// cluster is a fresh control plane and a fast client on it.
type cluster struct {
	lc         *localcluster.Cluster
	dyn        dynamic.Interface
	cfg        *rest.Config
	apiserver  *apiserverScraper
	pids       map[string]int
	kubeconfig string
}

func startCluster(ctx context.Context, dir, binDir string) (*cluster, error) {
	lc, err := localcluster.Start(ctx, localcluster.Options{BinDir: binDir, Dir: dir, Log: os.Stderr})
	if err != nil {
		return nil, err
	}
	c := &cluster{lc: lc, kubeconfig: lc.Kubeconfig, pids: map[string]int{}}
	if c.cfg, err = clientcmd.BuildConfigFromFlags("", lc.Kubeconfig); err != nil {
		_ = lc.Stop()
		return nil, err
	}
	fast := rest.CopyConfig(c.cfg)
	fast.QPS, fast.Burst = 1e6, 1e6
	fast.UserAgent = "kontinue-bench"
	if c.dyn, err = dynamic.NewForConfig(fast); err != nil {
		_ = lc.Stop()
		return nil, err
	}
	if c.apiserver, err = newAPIServerScraper(lc); err != nil {
		_ = lc.Stop()
		return nil, err
	}
	for _, p := range lc.Processes() {
		c.pids[p.Name] = p.Pid
	}
	return c, nil
}

// installCRDs applies CRD manifests and waits until Workloads are served.
func (c *cluster) installCRDs(ctx context.Context, manifests string) error {
	objs, err := parseObjects(manifests)
	if err != nil {
		return err
	}
	if err := applyAll(ctx, c.dyn, objs); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := c.dyn.Resource(workloadGVR).Namespace("default").List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("workloads not served: %w", err)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

func (c *cluster) createWorkloads(ctx context.Context, ns string, n int) error {
	return parallel(ctx, n, 16, func(i int) error {
		_, err := create(ctx, c.dyn, workload(ns, i, true))
		return err
	})
}

// floorSample is what one converged workload wrote, to be copied by the
// floor's writers so that request sizes match.
type floorSample struct {
	status  any
	stamped []*unstructured.Unstructured
}

// process is a controller under test.
type process struct {
	cmd     *exec.Cmd
	pid     int
	done    chan struct{}
	waitErr error
}

// startProcess runs bin with args, env added to the bench's environment,
// output to logPath; it dies with the bench.
func startProcess(bin, logPath string, args, env []string) (*process, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	p := &process{cmd: cmd, pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// signalStop asks p to stop (SIGTERM) and kills it after grace.
func (p *process) signalStop(grace time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func runContender(ctx context.Context, o options, name, work, binDir, cartoBin, cartoCRDs string) (_ *contender, sample *floorSample, err error) {
	dir := filepath.Join(work, name)
	c, err := startCluster(ctx, filepath.Join(dir, "cluster"), binDir)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = c.lc.Stop() }()

	var crds string
	if name == "kontinue" {
		out, err := exec.CommandContext(ctx, o.kontinueBin, "crds").Output()
		if err != nil {
			return nil, nil, fmt.Errorf("kontinue crds: %w", err)
		}
		crds = string(out)
	} else {
		files, _ := filepath.Glob(filepath.Join(cartoCRDs, "*.yaml"))
		var docs []string
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, nil, err
			}
			docs = append(docs, string(b))
		}
		crds = strings.Join(docs, "\n---\n")
	}
	if err := c.installCRDs(ctx, crds); err != nil {
		return nil, nil, err
	}
	setup, err := parseObjects(stamperRole + "\n---\n" + namespaceYAML(benchNS) + "\n---\n" + namespaceYAML(liveNS) + "\n---\n" + chainYAML)
	if err != nil {
		return nil, nil, err
	}
	if err := applyAll(ctx, c.dyn, setup); err != nil {
		return nil, nil, err
	}
	logf("%s: creating %d workloads before the controller starts", name, o.n)
	if err := c.createWorkloads(ctx, benchNS, o.n); err != nil {
		return nil, nil, err
	}
	cold, err := newWatcher(ctx, c.dyn, benchNS, o.n)
	if err != nil {
		return nil, nil, err
	}
	defer cold.stop()

	logPath := filepath.Join(dir, name+".log")
	var p *process
	if name == "kontinue" {
		// Defaults, as a user runs it; only the ports are chosen here.
		p, err = startProcess(o.kontinueBin, logPath, []string{"controller", "--kubeconfig=" + c.kubeconfig,
			"--metrics-bind-address=127.0.0.1:0", "--health-probe-bind-address=127.0.0.1:0"}, nil)
	} else {
		certs := filepath.Join(dir, "certs")
		if err := localcluster.WriteServingCert(certs); err != nil {
			return nil, nil, err
		}
		p, err = startProcess(cartoBin, logPath, []string{"--cert-dir=" + certs}, []string{"KUBECONFIG=" + c.kubeconfig})
	}
	if err != nil {
		return nil, nil, err
	}
	defer p.signalStop(time.Minute)
	pids := map[string]int{name: p.pid}
	for k, v := range c.pids {
		pids[k] = v
	}
	cpu := newCPUMeter(pids)
	a0, _ := c.apiserver.scrape(ctx)
	res := &contender{Name: name}

	start := time.Now()
	if err := waitAllReady(ctx, cold, o, name, start, p); err != nil {
		return nil, nil, err
	}
	res.ColdSeconds = round(time.Since(start).Seconds(), 1)
	logf("%s: cold start, %d workloads Ready in %.1fs", name, o.n, res.ColdSeconds)

	live, err := newWatcher(ctx, c.dyn, liveNS, o.n)
	if err != nil {
		return nil, nil, err
	}
	defer live.stop()
	start = time.Now()
	created := make(chan error, 1)
	go func() { created <- c.createWorkloads(ctx, liveNS, o.n) }()
	if err := waitAllReady(ctx, live, o, name, start, p); err != nil {
		return nil, nil, err
	}
	if err := <-created; err != nil {
		return nil, nil, err
	}
	res.RunningSeconds = round(time.Since(start).Seconds(), 1)
	logf("%s: while running, %d new workloads Ready in %.1fs", name, o.n, res.RunningSeconds)

	// What trails the last Ready (events, re-reconciles) is part of the cost.
	if err := sleep(ctx, 10*time.Second); err != nil {
		return nil, nil, err
	}
	res.CPUSeconds = cpu.read()
	if a1, _ := c.apiserver.scrape(ctx); a0 != nil && a1 != nil {
		res.APIServerWrites = apiserverWrites(a0, a1)
		// The bench's own workload creates are not the controller's.
		res.APIServerWrites["POST workloads"] -= o.n
		if res.APIServerWrites["POST workloads"] <= 0 {
			delete(res.APIServerWrites, "POST workloads")
		}
		n := 0
		for k, v := range res.APIServerWrites {
			if !strings.HasSuffix(k, " leases") {
				n += v
			}
		}
		res.WritesPerWorkload = round(float64(n)/float64(2*o.n), 2)
	}
	if _, hwm, err := memory(p.pid); err == nil {
		res.PeakRSSMiB = mib(float64(hwm))
	}
	if name == "kontinue" {
		sample = &floorSample{}
		w := cold.workload(benchNS, workloadName(0))
		if w == nil {
			return nil, nil, fmt.Errorf("workload %s not in the cache", workloadName(0))
		}
		sample.status = w.Object["status"]
		for _, suffix := range []string{"-source", "-image", "-" + lastStep} {
			cm, err := c.dyn.Resource(configMapGVR).Namespace(benchNS).Get(ctx, workloadName(0)+suffix, metav1.GetOptions{})
			if err != nil {
				return nil, nil, err
			}
			sample.stamped = append(sample.stamped, cm)
		}
	}
	return res, sample, nil
}

func waitAllReady(ctx context.Context, w *watcher, o options, name string, start time.Time, p *process) error {
	progress := time.NewTicker(10 * time.Second)
	defer progress.Stop()
	deadline := time.After(o.timeout)
	for {
		select {
		case <-w.allReady:
			return nil
		case <-progress.C:
			logf("%s: %d/%d Ready after %s", name, w.readyCount(), o.n, time.Since(start).Round(time.Second))
		case <-p.done:
			return fmt.Errorf("%s exited", name)
		case <-deadline:
			return fmt.Errorf("only %d of %d Ready after %s", w.readyCount(), o.n, o.timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// runFloor times, on a fresh control plane, the minimal writes converging N
// workloads needs (three creates and one status update each, copies of what
// Kontinue wrote) by unthrottled writers, and keeps the fastest count.
func runFloor(ctx context.Context, o options, work, binDir string, sample *floorSample) (*floorResult, error) {
	if sample == nil {
		return nil, fmt.Errorf("no sample of what Kontinue wrote")
	}
	c, err := startCluster(ctx, filepath.Join(work, "floor", "cluster"), binDir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.lc.Stop() }()
	out, err := exec.CommandContext(ctx, o.kontinueBin, "crds").Output()
	if err != nil {
		return nil, err
	}
	if err := c.installCRDs(ctx, string(out)); err != nil {
		return nil, err
	}
	res := &floorResult{SecondsByTried: map[int]float64{}}
	for _, writers := range floorWriters {
		ns := fmt.Sprintf("%s-%d", floorNS, writers)
		objs, err := parseObjects(namespaceYAML(ns))
		if err != nil {
			return nil, err
		}
		if err := applyAll(ctx, c.dyn, objs); err != nil {
			return nil, err
		}
		owners := make([]*unstructured.Unstructured, o.n)
		if err := parallel(ctx, o.n, 16, func(i int) error {
			u, err := create(ctx, c.dyn, workload(ns, i, false))
			owners[i] = u
			return err
		}); err != nil {
			return nil, err
		}
		cpu := newCPUMeter(c.pids)
		start := time.Now()
		err = parallel(ctx, o.n, writers, func(i int) error {
			owner := owners[i].DeepCopy()
			for j, tmpl := range sample.stamped {
				cm := copyStamped(tmpl, owner)
				cm.SetName(workloadName(i) + []string{"-source", "-image", "-" + lastStep}[j])
				cm.SetNamespace(ns)
				if _, err := c.dyn.Resource(configMapGVR).Namespace(ns).Create(ctx, cm, metav1.CreateOptions{FieldManager: "kontinue"}); err != nil {
					return err
				}
			}
			owner.Object["status"] = renamespace(sample.status)
			_, err := c.dyn.Resource(workloadGVR).Namespace(ns).UpdateStatus(ctx, owner, metav1.UpdateOptions{FieldManager: "kontinue"})
			return err
		})
		if err != nil {
			return nil, err
		}
		secs := round(time.Since(start).Seconds(), 2)
		res.SecondsByTried[writers] = secs
		logf("floor: %d writers, %.2fs", writers, secs)
		if res.Writers == 0 || secs < res.Seconds {
			res.Writers, res.Seconds, res.CPUSeconds = writers, secs, cpu.read()
		}
	}
	return res, nil
}

func (cmp *comparison) table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nHead-to-head, %d workloads, 3-step ConfigMap chain, defaults, %d cores (load at start %s), commit %s\n\n",
		cmp.Workloads, cmp.Cores, cmp.LoadAtStart, cmp.Commit)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	var carto, kont *contender
	for _, c := range cmp.Contenders {
		if c.Name == "cartographer" {
			carto = c
		} else {
			kont = c
		}
	}
	ratio := func(a, b float64) string {
		if b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f×", a/b)
	}
	fmt.Fprintln(tw, "measure\tCartographer\tKontinue\tKontinue / Cartographer\tfloor\tKontinue / floor\t")
	f := cmp.Floor
	fmt.Fprintf(tw, "cold start, all Ready (s)\t%.1f\t%.1f\t%s\t%.1f\t%s\t\n", carto.ColdSeconds, kont.ColdSeconds, ratio(kont.ColdSeconds, carto.ColdSeconds), f.Seconds, ratio(kont.ColdSeconds, f.Seconds))
	fmt.Fprintf(tw, "created while running, all Ready (s)\t%.1f\t%.1f\t%s\t%.1f\t%s\t\n", carto.RunningSeconds, kont.RunningSeconds, ratio(kont.RunningSeconds, carto.RunningSeconds), f.Seconds, ratio(kont.RunningSeconds, f.Seconds))
	cc, kc := carto.CPUSeconds[carto.Name], kont.CPUSeconds[kont.Name]
	fmt.Fprintf(tw, "controller CPU (s)\t%.1f\t%.1f\t%s\t\t\t\n", cc, kc, ratio(kc, cc))
	ca := carto.CPUSeconds["kube-apiserver"] + carto.CPUSeconds["etcd"]
	ka := kont.CPUSeconds["kube-apiserver"] + kont.CPUSeconds["etcd"]
	fa := f.CPUSeconds["kube-apiserver"] + f.CPUSeconds["etcd"]
	fmt.Fprintf(tw, "kube-apiserver + etcd CPU (s)\t%.1f\t%.1f\t%s\t%.1f (one pass)\t\t\n", ca, ka, ratio(ka, ca), fa)
	fmt.Fprintf(tw, "peak RSS (MiB)\t%.0f\t%.0f\t%s\t\t\t\n", carto.PeakRSSMiB, kont.PeakRSSMiB, ratio(kont.PeakRSSMiB, carto.PeakRSSMiB))
	fmt.Fprintf(tw, "API server writes per workload\t%.2f\t%.2f\t%s\t4\t\t\n", carto.WritesPerWorkload, kont.WritesPerWorkload, ratio(kont.WritesPerWorkload, carto.WritesPerWorkload))
	_ = tw.Flush()
	fmt.Fprintf(&b, "\nfloor: %d writers fastest (%v s by writers); writes by verb and resource: Cartographer %s; Kontinue %s\n",
		f.Writers, f.SecondsByTried, formatCounts(carto.APIServerWrites), formatCounts(kont.APIServerWrites))
	return b.String()
}
