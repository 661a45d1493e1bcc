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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"kontinue.dev/kontinue/hack/localcluster"
)

// The fairness scenario (`-fairness`, issue 33): tenant noisy has N
// Workloads Ready on its own chain; its platform team edits the chain's last
// template, so all N re-render; 2 s later tenant quiet changes its one
// Workload's branch, again and again (each change once the previous one
// has reached quiet's last step). Measured: each change until quiet's last
// stamped object holds it, and noisy's wave until its N last objects hold
// the edit. Each controller on a fresh control plane.

const (
	noisyNS = "noisy"
	quietNS = "quiet"
)

// Controllers -fairness can run.
const (
	fairFIFO  = "kontinue-fifo" // --fair-queue=false: one client-go FIFO per controller, as before issue 33
	fairFair  = "kontinue-fair" // the default
	fairCarto = "cartographer"
)

type fairContender struct {
	Name        string `json:"name"`
	LoadAtStart string `json:"loadAtStart"`
	// NoisyReadySeconds: N noisy workloads created until all Ready.
	NoisyReadySeconds float64 `json:"noisyReadySeconds"`
	// WaveSeconds: the template edit until noisy's N last objects hold it.
	WaveSeconds float64 `json:"waveSeconds"`
	// ChangeMs: quiet's changes, sent until its last object holds them.
	ChangeMs *summary `json:"changeMs"`
	// FirstChangeMs is the first change (sent 2 s into the wave).
	FirstChangeMs float64 `json:"firstChangeMs"`
	// DuringWave: changes that landed before the wave was over.
	DuringWave int `json:"changesDuringWave"`
	Lost       int `json:"lost"`
	// CPUSeconds from the template edit until the wave and the changes are
	// done, by process.
	CPUSeconds map[string]float64 `json:"cpuSeconds"`
}

type fairness struct {
	Date       string           `json:"date"`
	Commit     string           `json:"commit"`
	GoVersion  string           `json:"goVersion"`
	Cores      int              `json:"cores"`
	Workloads  int              `json:"noisyWorkloads"`
	Changes    int              `json:"quietChanges"`
	Contenders []*fairContender `json:"contenders"`
}

// tenantChainYAML is the bench chain with templates and chain named after
// the tenant, selecting the tenant's workloads.
func tenantChainYAML(tenant string) string {
	y := strings.ReplaceAll(chainYAML, "bench-", tenant+"-")
	y = strings.Replace(y, "metadata: {name: "+chainName+"}", "metadata: {name: "+tenant+"}", 1)
	return strings.Replace(y, "{"+chainLabel+": "+chainName+"}", "{"+chainLabel+": "+tenant+"}", 1)
}

func tenantWorkload(ns string, i int) *unstructured.Unstructured {
	u := workload(ns, i, true)
	labels := u.GetLabels()
	labels[chainLabel] = ns
	u.SetLabels(labels)
	return u
}

// runFairness runs the scenario for each controller of -fairness-controllers.
func runFairness(ctx context.Context, o options, root string) error {
	work := filepath.Join(root, "_output", "bench", "fairness")
	_ = os.RemoveAll(work)
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	r := newResults(o, root)
	out := &fairness{Date: r.Date, Commit: r.Commit, GoVersion: r.GoVersion, Cores: r.Cores, Workloads: o.n, Changes: o.fairChanges}
	bins, err := exec.CommandContext(ctx, filepath.Join(root, "hack", "install-controlplane.sh")).Output()
	if err != nil {
		return fmt.Errorf("hack/install-controlplane.sh: %w", err)
	}
	binDir := strings.TrimSpace(string(bins))
	for _, name := range strings.Split(o.fairControllers, ",") {
		c, err := runFairContender(ctx, o, strings.TrimSpace(name), root, work, binDir)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		out.Contenders = append(out.Contenders, c)
	}
	fmt.Print(out.table())
	return writeResult(o.out, "fairness", out)
}

func runFairContender(ctx context.Context, o options, name, root, work, binDir string) (*fairContender, error) {
	res := &fairContender{Name: name, LoadAtStart: loadAvg()}
	dir := filepath.Join(work, name)
	c, err := startCluster(ctx, filepath.Join(dir, "cluster"), binDir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.lc.Stop() }()

	var crds string
	switch name {
	case fairFIFO, fairFair:
		out, err := exec.CommandContext(ctx, o.kontinueBin, "crds").Output()
		if err != nil {
			return nil, fmt.Errorf("kontinue crds: %w", err)
		}
		crds = string(out)
	case fairCarto:
		if crds, err = cartographerCRDs(ctx, root); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unknown controller (want %s, %s or %s)", fairFIFO, fairFair, fairCarto)
	}
	if err := c.installCRDs(ctx, crds); err != nil {
		return nil, err
	}
	setup, err := parseObjects(stamperRole + "\n---\n" + namespaceYAML(noisyNS) + "\n---\n" + namespaceYAML(quietNS) +
		"\n---\n" + tenantChainYAML(noisyNS) + "\n---\n" + tenantChainYAML(quietNS))
	if err != nil {
		return nil, err
	}
	if err := applyAll(ctx, c.dyn, setup); err != nil {
		return nil, err
	}

	logPath := filepath.Join(dir, name+".log")
	var p *process
	switch name {
	case fairCarto:
		certs := filepath.Join(dir, "certs")
		if err := localcluster.WriteServingCert(certs); err != nil {
			return nil, err
		}
		p, err = startProcess(o.cartoBin, logPath, []string{"--cert-dir=" + certs}, []string{"KUBECONFIG=" + c.kubeconfig})
	default:
		args := []string{"controller", "--kubeconfig=" + c.kubeconfig,
			"--metrics-bind-address=127.0.0.1:0", "--health-probe-bind-address=127.0.0.1:0", "--fair-queue=" + fmt.Sprint(name == fairFair)}
		p, err = startProcess(o.kontinueBin, logPath, append(args, o.kontinueFlags()...), strings.Fields(o.extraEnv))
	}
	if err != nil {
		return nil, err
	}
	defer p.signalStop(time.Minute)

	noisy, err := newWatcher(ctx, c.dyn, noisyNS, o.n)
	if err != nil {
		return nil, err
	}
	defer noisy.stop()
	quiet, err := newWatcher(ctx, c.dyn, quietNS, 1)
	if err != nil {
		return nil, err
	}
	defer quiet.stop()
	if _, err := create(ctx, c.dyn, tenantWorkload(quietNS, 0)); err != nil {
		return nil, err
	}
	logf("%s: creating %d noisy workloads", name, o.n)
	start := time.Now()
	if err := parallel(ctx, o.n, 16, func(i int) error {
		_, err := create(ctx, c.dyn, tenantWorkload(noisyNS, i))
		return err
	}); err != nil {
		return nil, err
	}
	if err := waitAllReady(ctx, noisy, o, name, start, p); err != nil {
		return nil, err
	}
	res.NoisyReadySeconds = round(time.Since(start).Seconds(), 1)
	if err := waitAllReady(ctx, quiet, options{n: 1, timeout: time.Minute}, name, start, p); err != nil {
		return nil, fmt.Errorf("quiet: %w", err)
	}
	logf("%s: %d noisy workloads Ready in %.1fs; settling", name, o.n, res.NoisyReadySeconds)
	// What trails the last Ready (events, status re-reads) is not the wave's.
	if err := sleep(ctx, 10*time.Second); err != nil {
		return nil, err
	}

	pids := map[string]int{name: p.pid}
	for k, v := range c.pids {
		pids[k] = v
	}
	cpu := newCPUMeter(pids)
	waveDone := noisy.startWave("1")
	editAt := time.Now()
	if _, err := c.dyn.Resource(gvrByKind["ClusterTemplate"]).Patch(ctx, noisyNS+"-app", types.MergePatchType,
		[]byte(`{"spec":{"template":{"data":{"wave":"1"}}}}`), metav1.PatchOptions{FieldManager: "bench"}); err != nil {
		return nil, fmt.Errorf("editing noisy's template: %w", err)
	}
	logf("%s: noisy's last template edited; quiet changes in 2 s", name)
	var waveAt time.Time
	waveTimed := make(chan struct{})
	go func() {
		defer close(waveTimed)
		select {
		case <-waveDone:
			waveAt = time.Now()
		case <-ctx.Done():
		}
	}()
	if err := sleep(ctx, 2*time.Second); err != nil {
		return nil, err
	}
	var lat []float64
	quietName := workloadName(0)
	for i := range o.fairChanges {
		branch := fmt.Sprintf("quiet-%d", i)
		ch, ok := quiet.expect(quietName, branch)
		if !ok {
			return nil, fmt.Errorf("a change of %s is still pending", quietName)
		}
		ch.sent = time.Now()
		if _, err := c.dyn.Resource(workloadGVR).Namespace(quietNS).Patch(ctx, quietName, types.MergePatchType,
			branchPatch(branch), metav1.PatchOptions{FieldManager: "bench"}); err != nil {
			return nil, fmt.Errorf("changing quiet: %w", err)
		}
		select {
		case <-ch.done:
			d := ch.seen.Sub(ch.sent).Seconds()
			lat = append(lat, d)
			if i == 0 {
				res.FirstChangeMs = round(d*1000, 1)
			}
			select {
			case <-waveDone:
			default:
				res.DuringWave++
			}
		case <-time.After(o.timeout):
			quiet.forget(ch)
			res.Lost++
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	logf("%s: %d quiet changes done (%d during the wave); waiting for noisy's wave (%d/%d)", name, len(lat), res.DuringWave, noisy.waveCount(), o.n)
	select {
	case <-waveDone:
	case <-time.After(o.timeout):
		return nil, fmt.Errorf("noisy's wave: %d of %d after %s", noisy.waveCount(), o.n, o.timeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	<-waveTimed
	res.WaveSeconds = round(waveAt.Sub(editAt).Seconds(), 1)
	res.CPUSeconds = cpu.read()
	res.ChangeMs = summarize(lat, 1000)
	logf("%s: wave %.1fs; quiet's changes p50 %.0f ms, p99 %.0f ms, first %.0f ms", name, res.WaveSeconds, res.ChangeMs.P50, res.ChangeMs.P99, res.FirstChangeMs)
	return res, nil
}

// cartographerCRDs installs Cartographer (hack/install-cartographer.sh)
// and returns its CRDs.
func cartographerCRDs(ctx context.Context, root string) (string, error) {
	modDir, err := exec.CommandContext(ctx, "go", "-C", filepath.Join(root, "hack", "cartographer"), "list", "-m", "-f", "{{.Dir}}", "github.com/vmware-tanzu/cartographer").Output()
	if err != nil {
		return "", fmt.Errorf("locating Cartographer's module: %w", err)
	}
	files, _ := filepath.Glob(filepath.Join(strings.TrimSpace(string(modDir)), "config", "crd", "bases", "*.yaml"))
	var docs []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		docs = append(docs, string(b))
	}
	return strings.Join(docs, "\n---\n"), nil
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func (f *fairness) table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nFairness: noisy has %d workloads and edits its last template; 2 s later quiet changes its one workload %d times in a row. %d cores, commit %s\n\n",
		f.Workloads, f.Changes, f.Cores, f.Commit)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "controller\tload at start\tnoisy Ready (s)\tnoisy's wave (s)\tquiet first change (ms)\tquiet p50 (ms)\tquiet p99 (ms)\tduring the wave\tlost\tcontroller CPU in the wave (s)\t")
	for _, c := range f.Contenders {
		var p50, p99 float64
		if c.ChangeMs != nil {
			p50, p99 = c.ChangeMs.P50, c.ChangeMs.P99
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%.0f\t%.0f\t%.0f\t%d/%d\t%d\t%.1f\t\n", c.Name, c.LoadAtStart, c.NoisyReadySeconds, c.WaveSeconds,
			c.FirstChangeMs, p50, p99, c.DuringWave, f.Changes, c.Lost, c.CPUSeconds[c.Name])
	}
	_ = tw.Flush()
	return b.String()
}
