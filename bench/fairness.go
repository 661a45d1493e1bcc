package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"kontinue.dev/kontinue/hack/localcluster"
)

// The fairness scenario (`-fairness`, issue 33): tenant noisy has N
// Workloads Ready on its own chain, tenant quiet one on its own. Then noisy
// makes waves, one after the other (-fairness-waves): a template edit, a
// chain edit, the controller restarted with a template edit waiting, a
// template edit rolled out in waves (spec.rollout), N more Workloads
// created. 2 s into each wave, quiet changes its Workload's branch, and a
// person of noisy changes one of noisy's own Workloads, again and again
// (each change once the previous one has reached the Workload's last
// step). Measured per wave: each change until that Workload's last stamped
// object holds it, and the wave until noisy's last objects all hold it (or
// its new Workloads are all Ready). Each controller on a fresh control
// plane, the waves on the same one.

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

// Waves -fairness can make, in the default order.
const (
	waveTemplate = "template" // noisy's last template edited: all N re-render
	waveChain    = "chain"    // noisy's chain points its last step at a new template
	waveRestart  = "restart"  // the controller restarted, a template edit made while it was down
	waveRollout  = "rollout"  // a template edit rolled out in waves of 10, 50, 100% (Kontinue's spec.rollout)
	waveCreate   = "create"   // noisy creates N more Workloads
)

var allWaves = []string{waveTemplate, waveChain, waveRestart, waveRollout, waveCreate}

type fairContender struct {
	Name        string `json:"name"`
	LoadAtStart string `json:"loadAtStart"`
	// NoisyReadySeconds: N noisy workloads created until all Ready.
	NoisyReadySeconds float64     `json:"noisyReadySeconds"`
	Waves             []*fairWave `json:"waves"`
}

// fairWave is one of noisy's waves and the changes made during it.
type fairWave struct {
	Kind        string `json:"kind"`
	LoadAtStart string `json:"loadAtStart,omitempty"`
	// Skipped says why the wave was not made (the controller cannot).
	Skipped string `json:"skipped,omitempty"`
	// WaveSeconds: the edit (the restart, the first create) until noisy's
	// last objects all hold it (its new workloads are all Ready).
	WaveSeconds float64 `json:"waveSeconds"`
	// Quiet: quiet's changes; NoisyOwn: a person's changes of one of
	// noisy's own workloads, in the wave's namespace.
	Quiet    *fairSeries `json:"quiet,omitempty"`
	NoisyOwn *fairSeries `json:"noisyOwn,omitempty"`
	// CPUSeconds from the edit until the wave and the changes are done, by
	// process.
	CPUSeconds map[string]float64 `json:"cpuSeconds,omitempty"`
}

// fairSeries is one workload's changes during a wave.
type fairSeries struct {
	// ChangeMs: sent until the workload's last object holds the change.
	ChangeMs *summary `json:"changeMs"`
	// FirstChangeMs is the first change (sent 2 s into the wave).
	FirstChangeMs float64 `json:"firstChangeMs"`
	// DuringWave: changes that landed before the wave was over.
	DuringWave int `json:"changesDuringWave"`
	Lost       int `json:"lost"`
	lat        []float64
}

type fairness struct {
	Date       string           `json:"date"`
	Commit     string           `json:"commit"`
	GoVersion  string           `json:"goVersion"`
	Cores      int              `json:"cores"`
	Workloads  int              `json:"noisyWorkloads"`
	Changes    int              `json:"changesPerWorkload"`
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

// parseWaves checks -fairness-waves.
func parseWaves(list string) ([]string, error) {
	var out []string
	for _, w := range strings.Split(list, ",") {
		w = strings.TrimSpace(w)
		if !slices.Contains(allWaves, w) {
			return nil, fmt.Errorf("unknown wave %q (want some of %s)", w, strings.Join(allWaves, ","))
		}
		out = append(out, w)
	}
	return out, nil
}

// runFairness runs the scenario for each controller of -fairness-controllers.
func runFairness(ctx context.Context, o options, root string) error {
	waves, err := parseWaves(o.fairWaves)
	if err != nil {
		return err
	}
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
		c, err := runFairContender(ctx, o, strings.TrimSpace(name), root, work, binDir, waves)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		out.Contenders = append(out.Contenders, c)
	}
	fmt.Print(out.table())
	return writeResult(o.out, "fairness", out)
}

// fairRun is one controller's run: its control plane, its process and the
// tenants' watchers.
type fairRun struct {
	o            options
	name         string
	c            *cluster
	p            *process
	start        func() (*process, error)
	noisy, quiet *watcher
	created      int    // noisy's workloads
	lastTemplate string // the template of noisy's last step (the chain wave changes it)
}

func runFairContender(ctx context.Context, o options, name, root, work, binDir string, waves []string) (*fairContender, error) {
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

	run := &fairRun{o: o, name: name, c: c, lastTemplate: noisyNS + "-app"}
	starts := 0
	run.start = func() (*process, error) {
		starts++
		logPath := filepath.Join(dir, fmt.Sprintf("%s-%d.log", name, starts))
		if name == fairCarto {
			certs := filepath.Join(dir, "certs")
			if err := localcluster.WriteServingCert(certs); err != nil {
				return nil, err
			}
			return startProcess(o.cartoBin, logPath, []string{"--cert-dir=" + certs}, []string{"KUBECONFIG=" + c.kubeconfig})
		}
		args := []string{"controller", "--kubeconfig=" + c.kubeconfig,
			"--metrics-bind-address=127.0.0.1:0", "--health-probe-bind-address=127.0.0.1:0", "--fair-queue=" + fmt.Sprint(name == fairFair)}
		return startProcess(o.kontinueBin, logPath, append(args, o.kontinueFlags()...), strings.Fields(o.extraEnv))
	}
	if run.p, err = run.start(); err != nil {
		return nil, err
	}
	defer func() { run.p.signalStop(time.Minute) }()

	if run.noisy, err = newWatcher(ctx, c.dyn, noisyNS, o.n); err != nil {
		return nil, err
	}
	defer run.noisy.stop()
	if run.quiet, err = newWatcher(ctx, c.dyn, quietNS, 1); err != nil {
		return nil, err
	}
	defer run.quiet.stop()
	if _, err := create(ctx, c.dyn, tenantWorkload(quietNS, 0)); err != nil {
		return nil, err
	}
	logf("%s: creating %d noisy workloads", name, o.n)
	start := time.Now()
	if err := run.createNoisy(ctx, o.n); err != nil {
		return nil, err
	}
	if err := waitAllReady(ctx, run.noisy, o, name, start, run.p); err != nil {
		return nil, err
	}
	res.NoisyReadySeconds = round(time.Since(start).Seconds(), 1)
	if err := waitAllReady(ctx, run.quiet, options{n: 1, timeout: time.Minute}, name, start, run.p); err != nil {
		return nil, fmt.Errorf("quiet: %w", err)
	}
	logf("%s: %d noisy workloads Ready in %.1fs", name, o.n, res.NoisyReadySeconds)
	for i, kind := range waves {
		// What trails the last Ready or wave (events, status re-reads) is
		// not the next wave's.
		if err := sleep(ctx, 10*time.Second); err != nil {
			return nil, err
		}
		w, err := run.wave(ctx, kind, fmt.Sprint(i+1))
		if err != nil {
			return nil, fmt.Errorf("%s wave: %w", kind, err)
		}
		res.Waves = append(res.Waves, w)
	}
	return res, nil
}

// createNoisy creates n more of noisy's workloads, 16 at a time.
func (r *fairRun) createNoisy(ctx context.Context, n int) error {
	first := r.created
	r.created += n
	return parallel(ctx, n, 16, func(i int) error {
		_, err := create(ctx, r.c.dyn, tenantWorkload(noisyNS, first+i))
		return err
	})
}

// patch merge-patches a cluster-scoped object of kind.
func (r *fairRun) patch(ctx context.Context, kind, name, patch string) error {
	_, err := r.c.dyn.Resource(gvrByKind[kind]).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "bench"})
	if err != nil {
		return fmt.Errorf("patching %s %s: %w", kind, name, err)
	}
	return nil
}

// editTemplate sets data.wave on the template of noisy's last step.
func (r *fairRun) editTemplate(ctx context.Context, value string) error {
	return r.patch(ctx, "ClusterTemplate", r.lastTemplate, `{"spec":{"template":{"data":{"wave":"`+value+`"}}}}`)
}

// begin makes the wave's edit and returns when it was made and the channel
// closed once the wave is over.
func (r *fairRun) begin(ctx context.Context, kind, value string) (time.Time, <-chan struct{}, error) {
	switch kind {
	case waveTemplate:
		done := r.noisy.startWave(value)
		return time.Now(), done, r.editTemplate(ctx, value)
	case waveChain:
		// A new template, the last one with data.wave set, and the chain's
		// last step pointed at it.
		tmpl, err := r.c.dyn.Resource(gvrByKind["ClusterTemplate"]).Get(ctx, r.lastTemplate, metav1.GetOptions{})
		if err != nil {
			return time.Time{}, nil, err
		}
		next := &unstructured.Unstructured{Object: map[string]any{"apiVersion": tmpl.GetAPIVersion(), "kind": tmpl.GetKind(),
			"metadata": map[string]any{"name": noisyNS + "-app-" + value}, "spec": tmpl.Object["spec"]}}
		if err := unstructured.SetNestedField(next.Object, value, "spec", "template", "data", "wave"); err != nil {
			return time.Time{}, nil, err
		}
		if _, err := create(ctx, r.c.dyn, next); err != nil {
			return time.Time{}, nil, err
		}
		done := r.noisy.startWave(value)
		at := time.Now()
		_, err = r.c.dyn.Resource(gvrByKind["ClusterSupplyChain"]).Patch(ctx, noisyNS, types.JSONPatchType,
			[]byte(`[{"op":"replace","path":"/spec/resources/2/templateRef/name","value":"`+next.GetName()+`"}]`), metav1.PatchOptions{FieldManager: "bench"})
		r.lastTemplate = next.GetName()
		return at, done, err
	case waveRestart:
		r.p.signalStop(time.Minute)
		done := r.noisy.startWave(value)
		if err := r.editTemplate(ctx, value); err != nil {
			return time.Time{}, nil, err
		}
		at := time.Now()
		p, err := r.start()
		if err != nil {
			return time.Time{}, nil, err
		}
		r.p = p
		return at, done, nil
	case waveRollout:
		// The policy first (no new revision: the chain adopts the live
		// definitions as stable), then the edit it rolls out.
		if err := r.patch(ctx, "ClusterSupplyChain", noisyNS, `{"spec":{"rollout":{"waves":[{"percent":10},{"percent":50}]}}}`); err != nil {
			return time.Time{}, nil, err
		}
		if err := r.waitRolledOut(ctx); err != nil {
			return time.Time{}, nil, err
		}
		done := r.noisy.startWave(value)
		return time.Now(), done, r.editTemplate(ctx, value)
	case waveCreate:
		done := r.noisy.expectReady(r.created + r.o.n)
		at := time.Now()
		go func() {
			if err := r.createNoisy(ctx, r.o.n); err != nil {
				logf("%s: creating noisy's workloads: %v", r.name, err)
			}
		}()
		return at, done, nil
	}
	return time.Time{}, nil, fmt.Errorf("unknown wave %q", kind)
}

// waitRolledOut waits until noisy's chain says RolledOut=True.
func (r *fairRun) waitRolledOut(ctx context.Context) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		ch, err := r.c.dyn.Resource(gvrByKind["ClusterSupplyChain"]).Get(ctx, noisyNS, metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(ch.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "RolledOut" && m["status"] == "True" {
				return nil
			}
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("noisy's chain did not say RolledOut=True within a minute")
}

// wave makes one of noisy's waves and times quiet's and noisy's own
// changes during it.
func (r *fairRun) wave(ctx context.Context, kind, value string) (*fairWave, error) {
	res := &fairWave{Kind: kind, LoadAtStart: loadAvg()}
	if kind == waveRollout && r.name == fairCarto {
		res.Skipped = "Cartographer has no roll-outs"
		return res, nil
	}
	logf("%s: %s wave", r.name, kind)
	pids := map[string]int{r.name: r.p.pid}
	editAt, waveDone, err := r.begin(ctx, kind, value)
	if err != nil {
		return nil, err
	}
	pids[r.name] = r.p.pid // restarted
	for k, v := range r.c.pids {
		pids[k] = v
	}
	cpu := newCPUMeter(pids)
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
	res.Quiet, res.NoisyOwn = &fairSeries{}, &fairSeries{}
	for i := range r.o.fairChanges {
		for _, s := range []struct {
			w      *watcher
			ns     string
			series *fairSeries
		}{{r.quiet, quietNS, res.Quiet}, {r.noisy, noisyNS, res.NoisyOwn}} {
			if err := r.change(ctx, s.w, s.ns, fmt.Sprintf("%s-%s-%d", s.ns, kind, i), waveDone, s.series); err != nil {
				return nil, err
			}
		}
	}
	logf("%s: changes done (quiet %d, noisy's own %d during the wave); waiting for the wave", r.name, res.Quiet.DuringWave, res.NoisyOwn.DuringWave)
	select {
	case <-waveDone:
	case <-time.After(r.o.timeout):
		return nil, fmt.Errorf("%d of %d after %s", r.noisy.waveCount(), r.o.n, r.o.timeout)
	case <-r.p.done:
		return nil, fmt.Errorf("%s exited", r.name)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	<-waveTimed
	res.WaveSeconds = round(waveAt.Sub(editAt).Seconds(), 1)
	res.CPUSeconds = cpu.read()
	for _, s := range []*fairSeries{res.Quiet, res.NoisyOwn} {
		s.ChangeMs = summarize(s.lat, 1000)
	}
	if kind == waveRollout {
		// Later waves reach every owner at once again.
		if err := r.patch(ctx, "ClusterSupplyChain", noisyNS, `{"spec":{"rollout":null}}`); err != nil {
			return nil, err
		}
	}
	logf("%s: %s wave %.1fs; quiet p50 %.0f ms p99 %.0f ms; noisy's own p50 %.0f ms p99 %.0f ms", r.name, kind, res.WaveSeconds,
		res.Quiet.ChangeMs.P50, res.Quiet.ChangeMs.P99, res.NoisyOwn.ChangeMs.P50, res.NoisyOwn.ChangeMs.P99)
	return res, nil
}

// change sets the branch of the first workload of ns and times it until
// its last object holds it.
func (r *fairRun) change(ctx context.Context, w *watcher, ns, branch string, waveDone <-chan struct{}, s *fairSeries) error {
	name := workloadName(0)
	ch, ok := w.expect(name, branch)
	if !ok {
		return fmt.Errorf("a change of %s/%s is still pending", ns, name)
	}
	ch.sent = time.Now()
	if _, err := r.c.dyn.Resource(workloadGVR).Namespace(ns).Patch(ctx, name, types.MergePatchType,
		branchPatch(branch), metav1.PatchOptions{FieldManager: "bench"}); err != nil {
		return fmt.Errorf("changing %s/%s: %w", ns, name, err)
	}
	select {
	case <-ch.done:
		d := ch.seen.Sub(ch.sent).Seconds()
		if len(s.lat) == 0 {
			s.FirstChangeMs = round(d*1000, 1)
		}
		s.lat = append(s.lat, d)
		select {
		case <-waveDone:
		default:
			s.DuringWave++
		}
	case <-time.After(r.o.timeout):
		w.forget(ch)
		s.Lost++
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
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
	fmt.Fprintf(&b, "\nFairness: noisy has %d workloads and makes waves; 2 s into each, quiet and a person of noisy change one workload each, %d times in turn. %d cores, commit %s\n\n",
		f.Workloads, f.Changes, f.Cores, f.Commit)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "controller\twave\tload at start\twave (s)\tquiet first (ms)\tquiet p50 (ms)\tquiet p99 (ms)\tquiet during\tnoisy's own p50 (ms)\tnoisy's own p99 (ms)\tlost\tcontroller CPU (s)\t")
	for _, c := range f.Contenders {
		fmt.Fprintf(tw, "%s\tcreate %d\t%s\t%.1f\t\t\t\t\t\t\t\t\t\n", c.Name, f.Workloads, c.LoadAtStart, c.NoisyReadySeconds)
		for _, w := range c.Waves {
			if w.Skipped != "" {
				fmt.Fprintf(tw, "%s\t%s\t(%s)\t\t\t\t\t\t\t\t\t\t\n", c.Name, w.Kind, w.Skipped)
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\t%.0f\t%.0f\t%.0f\t%d/%d\t%.0f\t%.0f\t%d\t%.1f\t\n", c.Name, w.Kind, w.LoadAtStart, w.WaveSeconds,
				w.Quiet.FirstChangeMs, w.Quiet.ChangeMs.P50, w.Quiet.ChangeMs.P99, w.Quiet.DuringWave, f.Changes,
				w.NoisyOwn.ChangeMs.P50, w.NoisyOwn.ChangeMs.P99, w.Quiet.Lost+w.NoisyOwn.Lost, w.CPUSeconds[c.Name])
		}
	}
	_ = tw.Flush()
	return b.String()
}
