package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// results are the figures of one run: printed as a table, written as JSON.
type results struct {
	Date        string  `json:"date"`
	Commit      string  `json:"commit"`
	Dirty       bool    `json:"dirtyTree"`
	GoVersion   string  `json:"goVersion"`
	OS          string  `json:"os"`
	Cores       int     `json:"cores"`
	LoadAvg     string  `json:"loadAverageAtStart"`
	Params      params  `json:"params"`
	DurationS   float64 `json:"benchDurationSeconds"`
	Convergence struct {
		Workloads      int     `json:"workloads"`
		StampedObjects int     `json:"stampedObjects"`
		Seconds        float64 `json:"seconds"`
		// CreatedSeconds: when the bench had created the last workload.
		CreatedSeconds float64            `json:"allCreatedSeconds"`
		WorkloadReady  *summary           `json:"workloadCreateToReadySeconds"`
		CPUSeconds     map[string]float64 `json:"cpuSeconds"`
	} `json:"convergence"`
	Floor struct {
		Seconds         float64            `json:"seconds"`
		Writes          int                `json:"writes"`
		CPUSeconds      map[string]float64 `json:"cpuSeconds"`
		APIServerWrites map[string]int     `json:"apiserverWrites,omitempty"`
	} `json:"floor"`
	Ratio    float64 `json:"convergenceOverFloor"`
	APICalls struct {
		// Convergence: Kontinue's calls from the first create to the last
		// Ready, by HTTP method (GET = get, list and watch).
		Convergence map[string]int `json:"convergence"`
		// Errors: failed calls until quiet, by "METHOD code".
		Errors            map[string]int `json:"errorsUntilQuiet,omitempty"`
		PerWorkload       float64        `json:"perWorkload"`
		WritesPerWorkload float64        `json:"writesPerWorkload"`
		// ToQuiet adds what trails the last Ready (events, re-reconciles).
		ToQuiet                  map[string]int `json:"toQuiet"`
		ToQuietPerWorkload       float64        `json:"toQuietPerWorkload"`
		ToQuietWritesPerWorkload float64        `json:"toQuietWritesPerWorkload"`
		// APIServerWrites: every client's writes seen by the API server
		// during convergence, by verb and resource (includes the bench's
		// workload creates and the API server's own leases).
		APIServerWrites map[string]int `json:"apiserverWritesDuringConvergence,omitempty"`
		// Diag: from the first create until quiet.
		Diag *phaseDiag `json:"diagnostics,omitempty"`
	} `json:"apiCalls"`
	Settle struct {
		Seconds float64        `json:"seconds"`
		Calls   map[string]int `json:"calls"`
		Writes  int            `json:"writes"`
	} `json:"settleAfterConvergence"`
	Idle struct {
		Window string         `json:"window"`
		Calls  map[string]int `json:"calls"`
		Writes int            `json:"writes"`
	} `json:"idle"`
	Restart struct {
		ReadySeconds      float64        `json:"readySeconds"`
		ReconciledSeconds float64        `json:"quietSeconds"`
		Calls             map[string]int `json:"calls"`
		Writes            int            `json:"writes"`
		Resync            string         `json:"resyncPeriod"`
		Window            string         `json:"window"`
		IdleCalls         map[string]int `json:"idleCalls"`
		IdleWrites        int            `json:"idleWrites"`
		// APIServerWrites: all clients' writes from the restart until quiet.
		APIServerWrites map[string]int `json:"apiserverWritesUntilQuiet,omitempty"`
	} `json:"restart"`
	ChangeLatency struct {
		Changes       int      `json:"changes"`
		RatePerSecond float64  `json:"ratePerSecond"`
		Lost          int      `json:"lost"`
		Ms            *summary `json:"ms"`
		// FirstStepMs: the part until the first step's object was updated
		// (event delivery, queue wait, first apply); the rest is the two
		// later applies.
		FirstStepMs     *summary       `json:"toFirstStepMs,omitempty"`
		Calls           map[string]int `json:"calls"`
		WritesPerChange float64        `json:"writesPerChange"`
		Errors          map[string]int `json:"errors,omitempty"`
		Diag            *phaseDiag     `json:"diagnostics,omitempty"`
		// APIServerWrites: all clients' writes during the changes
		// (includes the bench's own workload patches).
		APIServerWrites map[string]int `json:"apiserverWrites,omitempty"`
		// CPUSeconds: each process's CPU from the first change until
		// Kontinue is quiet after the last.
		CPUSeconds map[string]float64 `json:"cpuSeconds,omitempty"`
	} `json:"changeLatency"`
	// WaveLatency: changes made while a template edit re-renders every
	// workload (-wave-changes).
	WaveLatency struct {
		Changes       int      `json:"changes,omitempty"`
		RatePerSecond float64  `json:"ratePerSecond,omitempty"`
		Lost          int      `json:"lost"`
		Ms            *summary `json:"ms,omitempty"`
		FirstStepMs   *summary `json:"toFirstStepMs,omitempty"`
		// WaveSeconds: the template edit until every last step holds it.
		WaveSeconds float64 `json:"waveSeconds,omitempty"`
		// ChangesDoneDuringWave: the last change landed before the wave
		// was over (else the later changes measure an idle controller).
		ChangesDoneDuringWave bool       `json:"changesDoneDuringWave"`
		Diag                  *phaseDiag `json:"diagnostics,omitempty"`
		// Calls: Kontinue's API calls from the edit until quiet.
		Calls map[string]int `json:"calls,omitempty"`
	} `json:"waveLatency,omitzero"`
	// Alerts: -alerts, what the notifier did with the events of the
	// changes (and the wave): messages sent and events dropped by reason.
	Alerts struct {
		Mode    string         `json:"mode,omitempty"`
		Sent    int            `json:"sent"`
		Dropped map[string]int `json:"dropped,omitempty"`
		// Ready: each alert's Ready condition at the end of the changes.
		Ready map[string]string `json:"ready,omitempty"`
	} `json:"alerts,omitzero"`
	Memory struct {
		BaselineRSSMiB  float64 `json:"baselineRSSMiB"`
		BaselineHeapMiB float64 `json:"baselineHeapMiB"`
		PeakRSSMiB      float64 `json:"peakRSSMiB"`
		SteadyRSSMiB    float64 `json:"steadyRSSMiB"`
		PeakHeapMiB     float64 `json:"peakHeapMiB"`
		// PeakAnonRSSMiB is the sampled peak of RssAnon: the RSS without
		// the executable's pages mapped from the page cache.
		PeakAnonRSSMiB float64 `json:"peakAnonRSSMiB"`
		// PeakRenderersAnonRSSMiB is the sampled peak of the RssAnon of
		// Kontinue's child processes (goTemplate renderers), summed.
		PeakRenderersAnonRSSMiB float64 `json:"peakRenderersAnonRSSMiB"`
		SteadyHeapMiB           float64 `json:"steadyHeapMiB"`
		RSSPerObjectKiB         float64 `json:"steadyRSSPerStampedObjectKiB"`
		HeapPerObjectKiB        float64 `json:"steadyHeapPerStampedObjectKiB"`
		AddedRSSPerObject       float64 `json:"addedRSSPerStampedObjectKiB"`
		AddedHeapPerObject      float64 `json:"addedHeapPerStampedObjectKiB"`
		RestartPeakRSSMiB       float64 `json:"restartPeakRSSMiB"`
		RestartSteadyRSSMiB     float64 `json:"restartSteadyRSSMiB"`
		RestartPeakHeapMiB      float64 `json:"restartPeakHeapMiB"`
	} `json:"memory"`
	Targets []target `json:"targets"`

	started time.Time
	conv    struct {
		before, after metrics
		readyAt       time.Time
	}
}

type params struct {
	Workloads     int     `json:"workloads"`
	Steps         int     `json:"stepsPerWorkload"`
	Workers       int     `json:"workers"`
	QPS           float64 `json:"qps"`
	Burst         int     `json:"burst"`
	FloorWriters  int     `json:"floorWriters,omitempty"`
	Idle          string  `json:"idleWindow"`
	Changes       int     `json:"changes"`
	ChangeRate    float64 `json:"changeRate"`
	Resync        string  `json:"resyncAfterRestart"`
	Seed          uint64  `json:"seed"`
	KontinueFlags string  `json:"kontinueFlags"`
	KontinueEnv   string  `json:"kontinueEnv,omitempty"`
	Engine        string  `json:"engine,omitempty"`
	Verify        bool    `json:"verify,omitempty"` // -verify: a signature policy on the last step
	Alerts        string  `json:"alerts,omitempty"`
}

type target struct {
	Name   string  `json:"name"`
	Target string  `json:"target"`
	Value  float64 `json:"value"`
	Met    bool    `json:"met"`
}

// summary is a distribution.
type summary struct {
	Count int     `json:"count"`
	Min   float64 `json:"min"`
	P50   float64 `json:"p50"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
	Mean  float64 `json:"mean"`
}

// summarize scales values (e.g. ×1000 for ms) and summarizes them.
func summarize(values []float64, scale float64) *summary {
	if len(values) == 0 {
		return nil
	}
	v := make([]float64, len(values))
	sum := 0.0
	for i, x := range values {
		v[i] = x * scale
		sum += v[i]
	}
	sort.Float64s(v)
	return &summary{Count: len(v), Min: round(v[0], 1), P50: round(percentile(v, 50), 1), P95: round(percentile(v, 95), 1),
		P99: round(percentile(v, 99), 1), Max: round(v[len(v)-1], 1), Mean: round(sum/float64(len(v)), 1)}
}

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}

func newResults(o options, root string) *results {
	r := &results{started: time.Now()}
	r.Date = r.started.Format(time.RFC3339)
	r.GoVersion = goVersion()
	r.OS = runtime.GOOS + "/" + runtime.GOARCH
	r.Cores = runtime.NumCPU()
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		f := strings.Fields(string(b))
		if len(f) >= 3 {
			r.LoadAvg = strings.Join(f[:3], " ")
		}
	}
	if out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output(); err == nil {
		r.Commit = strings.TrimSpace(string(out))
	}
	if out, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output(); err == nil {
		r.Dirty = len(strings.TrimSpace(string(out))) > 0
	}
	r.Params = params{Workloads: o.n, Steps: stepsPerWorkload, Workers: o.workers, QPS: o.qps, Burst: o.burst,
		Idle: o.idle.String(), Changes: o.changes, ChangeRate: o.changeRate, Resync: o.resync.String(), Seed: o.seed,
		KontinueFlags: strings.Join(o.kontinueFlags(), " "), FloorWriters: o.floorWriters,
		KontinueEnv: o.extraEnv, Engine: o.engine, Verify: o.verify, Alerts: o.alerts}
	return r
}

// finish derives the ratio, per-object memory and the verdicts.
func (r *results) finish() {
	r.DurationS = round(time.Since(r.started).Seconds(), 0)
	if r.Floor.Seconds > 0 {
		r.Ratio = round(r.Convergence.Seconds/r.Floor.Seconds, 2)
	}
	objs := float64(r.Convergence.StampedObjects)
	if objs > 0 {
		r.Memory.RSSPerObjectKiB = round(r.Memory.SteadyRSSMiB*1024/objs, 2)
		r.Memory.HeapPerObjectKiB = round(r.Memory.SteadyHeapMiB*1024/objs, 2)
		r.Memory.AddedRSSPerObject = round((r.Memory.SteadyRSSMiB-r.Memory.BaselineRSSMiB)*1024/objs, 2)
		r.Memory.AddedHeapPerObject = round((r.Memory.SteadyHeapMiB-r.Memory.BaselineHeapMiB)*1024/objs, 2)
	}
	r.Targets = nil
	if r.Ratio > 0 {
		r.Targets = append(r.Targets, target{"convergence / floor", "≤ 1.3", r.Ratio, r.Ratio <= 1.3})
	}
	r.Targets = append(r.Targets,
		target{"idle writes after convergence", "0", float64(r.Idle.Writes), r.Idle.Writes == 0},
		target{"writes on restart (nothing changed)", "0", float64(r.Restart.Writes), r.Restart.Writes == 0},
		target{"idle writes after restart, with resyncs", "0", float64(r.Restart.IdleWrites), r.Restart.IdleWrites == 0})
	if s := r.ChangeLatency.Ms; s != nil {
		r.Targets = append(r.Targets, target{"change latency p99 (ms)", "≤ 250", s.P99, s.P99 <= 250 && r.ChangeLatency.Lost == 0})
	}
	if w := r.APICalls.ToQuietWritesPerWorkload; w > 0 {
		r.Targets = append(r.Targets, target{"Kontinue's writes per workload until quiet", "≤ 4.5", w, w <= 4.5})
	}
	// Issue 20: 100 MiB at 1,000 workloads, 500 MiB at 10,000; in between
	// and beyond, the line through them.
	peak := math.Max(r.Memory.PeakRSSMiB, r.Memory.RestartPeakRSSMiB)
	limit := 100 + 400*float64(r.Params.Workloads-1000)/9000
	r.Targets = append(r.Targets, target{fmt.Sprintf("peak RSS (MiB) at %d workloads", r.Params.Workloads), fmt.Sprintf("≤ %.0f", limit), peak, peak <= limit})
}

// table renders the figures for people.
func (r *results) table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nKontinue benchmark  %s  commit %s%s  %s  %d cores  load %s\n", r.Date, r.Commit, map[bool]string{true: "+dirty"}[r.Dirty], r.GoVersion, r.Cores, r.LoadAvg)
	fmt.Fprintf(&b, "%d workloads × %d steps = %d ConfigMaps (%s templates); Kontinue %s %s\n\n", r.Params.Workloads, r.Params.Steps, r.Convergence.StampedObjects, r.Params.Engine, r.Params.KontinueFlags, r.Params.KontinueEnv)
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	row := func(name, value string) { fmt.Fprintf(w, "%s\t%s\n", name, value) }
	cpu := func(m map[string]float64) string {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %.1f", k, m[k]))
		}
		return strings.Join(parts, ", ")
	}
	row("1 convergence (first create → all Ready)", fmt.Sprintf("%.1f s (workloads created in %.1f s)", r.Convergence.Seconds, r.Convergence.CreatedSeconds))
	if s := r.Convergence.WorkloadReady; s != nil {
		row("  each workload, create → Ready", fmt.Sprintf("p50 %.1f s, p99 %.1f s, max %.1f s", s.P50, s.P99, s.Max))
	}
	row("  CPU seconds during convergence", cpu(r.Convergence.CPUSeconds))
	if r.Floor.Seconds > 0 {
		row("2 floor (minimal writes, same clients)", fmt.Sprintf("%.1f s for %d writes (%.0f/s)", r.Floor.Seconds, r.Floor.Writes, float64(r.Floor.Writes)/r.Floor.Seconds))
		row("  CPU seconds during the floor", cpu(r.Floor.CPUSeconds))
		row("  convergence / floor", fmt.Sprintf("%.2f×", r.Ratio))
	}
	row("3 API calls during convergence", formatCounts(r.APICalls.Convergence))
	row("  per workload", fmt.Sprintf("%.2f calls, %.2f writes", r.APICalls.PerWorkload, r.APICalls.WritesPerWorkload))
	row("  until quiet (+ trailing work)", fmt.Sprintf("%s; %.2f calls, %.2f writes per workload", formatCounts(r.APICalls.ToQuiet), r.APICalls.ToQuietPerWorkload, r.APICalls.ToQuietWritesPerWorkload))
	if len(r.APICalls.Errors) > 0 {
		row("  failed calls", formatCounts(r.APICalls.Errors))
	}
	if len(r.APICalls.APIServerWrites) > 0 {
		row("  API server writes (all clients)", formatCounts(r.APICalls.APIServerWrites))
	}
	if d := r.APICalls.Diag; d != nil {
		row("  where the time went", d.String())
	}
	row("  settle after last Ready", fmt.Sprintf("%.1f s, %d writes", r.Settle.Seconds, r.Settle.Writes))
	row(fmt.Sprintf("4 idle writes (%s after convergence)", r.Idle.Window), fmt.Sprintf("%d  (calls: %s)", r.Idle.Writes, formatCounts(r.Idle.Calls)))
	row("  restart: ready / quiet after", fmt.Sprintf("%.1f s / %.1f s", r.Restart.ReadySeconds, r.Restart.ReconciledSeconds))
	row("  restart: writes until quiet", fmt.Sprintf("%d  (calls: %s)", r.Restart.Writes, formatCounts(r.Restart.Calls)))
	if len(r.Restart.APIServerWrites) > 0 {
		row("  restart: API server writes (all clients)", formatCounts(r.Restart.APIServerWrites))
	}
	row(fmt.Sprintf("  idle writes (%s after restart, resync %s)", r.Restart.Window, r.Restart.Resync), fmt.Sprintf("%d  (calls: %s)", r.Restart.IdleWrites, formatCounts(r.Restart.IdleCalls)))
	if s := r.ChangeLatency.Ms; s != nil {
		row(fmt.Sprintf("5 change latency (%d changes at %g/s)", r.ChangeLatency.Changes, r.ChangeLatency.RatePerSecond),
			fmt.Sprintf("p50 %.0f ms, p95 %.0f ms, p99 %.0f ms, max %.0f ms, lost %d", s.P50, s.P95, s.P99, s.Max, r.ChangeLatency.Lost))
		if f := r.ChangeLatency.FirstStepMs; f != nil {
			row("  of which until the first step's object", fmt.Sprintf("p50 %.0f ms, p95 %.0f ms, p99 %.0f ms, max %.0f ms", f.P50, f.P95, f.P99, f.Max))
		}
		row("  Kontinue writes per change", fmt.Sprintf("%.2f  (calls: %s)", r.ChangeLatency.WritesPerChange, formatCounts(r.ChangeLatency.Calls)))
		if c := r.ChangeLatency.CPUSeconds; len(c) > 0 {
			row("  CPU seconds, changes until quiet", cpu(c))
		}
		if d := r.ChangeLatency.Diag; d != nil {
			row("  where the time went", d.String())
		}
		if len(r.ChangeLatency.Errors) > 0 {
			row("  failed calls", formatCounts(r.ChangeLatency.Errors))
		}
		if len(r.ChangeLatency.APIServerWrites) > 0 {
			row("  API server writes (all clients)", formatCounts(r.ChangeLatency.APIServerWrites))
		}
	} else if r.ChangeLatency.Changes > 0 {
		row("5 change latency", fmt.Sprintf("no change seen (lost %d)", r.ChangeLatency.Lost))
	}
	if wl := r.WaveLatency; wl.Ms != nil {
		row(fmt.Sprintf("5b during a wave (%d changes at %g/s)", wl.Changes, wl.RatePerSecond),
			fmt.Sprintf("p50 %.0f ms, p95 %.0f ms, p99 %.0f ms, max %.0f ms, lost %d", wl.Ms.P50, wl.Ms.P95, wl.Ms.P99, wl.Ms.Max, wl.Lost))
		if f := wl.FirstStepMs; f != nil {
			row("  of which until the first step's object", fmt.Sprintf("p50 %.0f ms, p95 %.0f ms, p99 %.0f ms, max %.0f ms", f.P50, f.P95, f.P99, f.Max))
		}
		row("  the wave (template edit → all re-rendered)", fmt.Sprintf("%.1f s; all changes landed during it: %v", wl.WaveSeconds, wl.ChangesDoneDuringWave))
		if wl.Calls != nil {
			row("  Kontinue's calls, edit until quiet", formatCounts(wl.Calls))
		}
		if d := wl.Diag; d != nil {
			row("  where the time went", d.String())
		}
	}
	if a := r.Alerts; a.Mode != "" {
		row(fmt.Sprintf("5c notifications (-alerts %s, every workload)", a.Mode), fmt.Sprintf("%d messages sent, events dropped: %s", a.Sent, formatCounts(a.Dropped)))
		for _, name := range slices.Sorted(maps.Keys(a.Ready)) {
			row("  alert "+name, a.Ready[name])
		}
	}
	m := r.Memory
	row("6 RSS peak / steady (baseline)", fmt.Sprintf("%.1f / %.1f MiB (%.1f MiB before the workloads)", m.PeakRSSMiB, m.SteadyRSSMiB, m.BaselineRSSMiB))
	row("  anonymous RSS peak (sampled)", fmt.Sprintf("%.1f MiB (the rest is the executable's pages, mapped from the page cache)", m.PeakAnonRSSMiB))
	row("  renderers' anonymous RSS peak", fmt.Sprintf("%.1f MiB (Kontinue's child processes, summed, sampled)", m.PeakRenderersAnonRSSMiB))
	row("  Go heap peak / steady (baseline)", fmt.Sprintf("%.1f / %.1f MiB (%.1f MiB)", m.PeakHeapMiB, m.SteadyHeapMiB, m.BaselineHeapMiB))
	row("  per stamped object, steady", fmt.Sprintf("RSS %.1f KiB, heap %.1f KiB (added by the workloads: RSS %.1f KiB, heap %.1f KiB)", m.RSSPerObjectKiB, m.HeapPerObjectKiB, m.AddedRSSPerObject, m.AddedHeapPerObject))
	row("  after restart: RSS peak / steady, heap peak", fmt.Sprintf("%.1f / %.1f MiB, %.1f MiB", m.RestartPeakRSSMiB, m.RestartSteadyRSSMiB, m.RestartPeakHeapMiB))
	_ = w.Flush()
	fmt.Fprintln(&b, "\ntargets:")
	w = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, t := range r.Targets {
		verdict := "met"
		if !t.Met {
			verdict = "MISSED"
		}
		fmt.Fprintf(w, "  %s\t%g\t%s\t%s\n", t.Name, t.Value, t.Target, verdict)
	}
	_ = w.Flush()
	fmt.Fprintln(&b, "  micro-benchmarks: go test -bench . ./paths/ ./reconciler/render/ (see bench/README.md)")
	return b.String()
}

// write stores the figures as dir/<date>.json (a second run the same day
// gets the time too).
func (r *results) write(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, r.started.Format("2006-01-02")+".json")
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		path = filepath.Join(dir, r.started.Format("2006-01-02T150405")+".json")
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	return path, os.WriteFile(path, append(data, '\n'), 0o644)
}
