package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"kontinue.dev/kontinue/hack/localcluster"
)

// The switch (`-switch`, issue 48): on a fresh control plane Cartographer
// v0.8.11 converges N workloads on the bench chain, is stopped, Kontinue's
// CRDs are applied over Cartographer's and Kontinue starts, both at their
// defaults, as docs/migration.md#switching says. Measured: from Kontinue's
// start until every workload's status and every stamped object are
// Kontinue's (switchDone), what the switch re-created or changed, the API
// server's writes, Kontinue's CPU and memory, and the writes in a quiet
// window after.

// annotationDigest and labelStamped are what Kontinue puts on an object it
// applied (reconciler/api); Cartographer puts neither.
const (
	annotationDigest = "kontinue.dev/applied-digest"
	labelStamped     = "kontinue.dev/stamped"
)

// switchCriterion says, in the results, when a workload counts as switched.
const switchCriterion = "Ready=True for its generation; each of its 3 steps in status.resources has provenance " +
	"(a Kontinue-only field, written with Kontinue's first status of the owner); each step's stampedRef " +
	"ConfigMap carries kontinue.dev/stamped=true and kontinue.dev/applied-digest (Kontinue's apply)"

type switchResult struct {
	Date      string `json:"date"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
	Cores     int    `json:"cores"`
	Workloads int    `json:"workloads"`
	Criterion string `json:"criterion"`

	LoadAtCartographerStart string `json:"loadAtCartographerStart"`
	LoadAtKontinueStart     string `json:"loadAtKontinueStart"`
	LoadAtEnd               string `json:"loadAtEnd"`

	// Cartographer's part, for the record.
	CartographerReadySeconds float64        `json:"cartographerReadySeconds"`
	CartographerWrites       map[string]int `json:"cartographerWrites"` // its start until it stopped, all clients but the bench's creates

	// From Kontinue's start.
	KontinueReadyzSeconds float64 `json:"kontinueReadyzSeconds"` // /readyz answers (caches synced)
	SwitchedSeconds       float64 `json:"switchedSeconds"`       // every workload meets Criterion
	QuietSeconds          float64 `json:"quietSeconds"`          // Kontinue's queue empty and no writes for 3 s

	StampedBefore  int `json:"stampedBefore"`
	StampedAfter   int `json:"stampedAfter"`
	Recreated      int `json:"recreated"`      // same name, another UID
	Gone           int `json:"gone"`           // not there after
	New            int `json:"new"`            // not there before
	SpecsChanged   int `json:"specsChanged"`   // a ConfigMap's data or a Workload's spec/generation
	ForeignMeta    int `json:"foreignMeta"`    // labels or annotations changed or added that are not kontinue.dev/…
	OutputsChanged int `json:"outputsChanged"` // a workload's output digests
	DigestMismatch int `json:"digestMismatch"` // steps whose provenance.current.digest is not their object's applied digest

	// Kontinue's start until quiet.
	APIServerWrites map[string]int `json:"apiserverWrites"` // by "VERB resource", leases included, refused ones too
	// APIServerRefused: the write requests among them the API server
	// refused, by "VERB resource code" (Kontinue creates an object it does
	// not see in its cache, and a 409 sends it to read and apply).
	APIServerRefused map[string]int `json:"apiserverRefused"`
	// WritesPerWorkload: the requests, leases left out; StoredWritesPerWorkload:
	// those answered 2xx (what changed an object or made an event).
	WritesPerWorkload       float64            `json:"writesPerWorkload"`
	StoredWritesPerWorkload float64            `json:"storedWritesPerWorkload"`
	KontinueCalls           map[string]int     `json:"kontinueCalls"`  // Kontinue's own, by verb
	KontinueErrors          map[string]int     `json:"kontinueErrors"` // Kontinue's own, not 2xx, by "VERB code"
	KontinueEvents          map[string]int     `json:"kontinueEvents"` // events in the bench namespace created since Kontinue's start, by "reason (type)"
	CPUSeconds              map[string]float64 `json:"cpuSeconds"`     // by process (Kontinue with its render children)
	CPUToSwitched           float64            `json:"kontinueCpuToSwitchedSeconds"`
	Diag                    *phaseDiag         `json:"diag"` // Kontinue's reconciles, applies, queue waits and API call times, start to quiet
	PeakRSSMiB              float64            `json:"peakRssMiB"`

	IdleWindow        string         `json:"idleWindow"`
	IdleWrites        map[string]int `json:"idleWrites"` // API server, leases left out
	IdleKontinueCalls map[string]int `json:"idleKontinueCalls"`
}

func runSwitch(ctx context.Context, o options, root string) error {
	work := filepath.Join(root, "_output", "bench", "switch")
	_ = os.RemoveAll(work)
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	r := newResults(o, root)
	res := &switchResult{Date: r.Date, Commit: r.Commit, GoVersion: r.GoVersion, Cores: r.Cores, Workloads: o.n, Criterion: switchCriterion}
	bins, err := exec.CommandContext(ctx, filepath.Join(root, "hack", "install-controlplane.sh")).Output()
	if err != nil {
		return fmt.Errorf("hack/install-controlplane.sh: %w", err)
	}
	carto, err := exec.CommandContext(ctx, filepath.Join(root, "hack", "install-cartographer.sh")).Output()
	if err != nil {
		return fmt.Errorf("hack/install-cartographer.sh: %w", err)
	}
	modDir, err := exec.CommandContext(ctx, "go", "-C", filepath.Join(root, "hack", "cartographer"), "list", "-m", "-f", "{{.Dir}}", "github.com/vmware-tanzu/cartographer").Output()
	if err != nil {
		return fmt.Errorf("locating Cartographer's module: %w", err)
	}
	c, err := startCluster(ctx, filepath.Join(work, "cluster"), strings.TrimSpace(string(bins)))
	if err != nil {
		return err
	}
	defer func() { _ = c.lc.Stop() }()

	// Cartographer, as -compare runs it: its CRDs, the chain, N workloads,
	// then the controller, until all are Ready.
	files, _ := filepath.Glob(filepath.Join(strings.TrimSpace(string(modDir)), "config", "crd", "bases", "*.yaml"))
	var docs []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		docs = append(docs, string(b))
	}
	if err := c.installCRDs(ctx, strings.Join(docs, "\n---\n")); err != nil {
		return err
	}
	setup, err := parseObjects(stamperRole + "\n---\n" + namespaceYAML(benchNS) + "\n---\n" + chainYAML)
	if err != nil {
		return err
	}
	if err := applyAll(ctx, c.dyn, setup); err != nil {
		return err
	}
	logf("switch: creating %d workloads", o.n)
	if err := c.createWorkloads(ctx, benchNS, o.n); err != nil {
		return err
	}
	ready, err := newWatcher(ctx, c.dyn, benchNS, o.n)
	if err != nil {
		return err
	}
	defer ready.stop()
	certs := filepath.Join(work, "certs")
	if err := localcluster.WriteServingCert(certs); err != nil {
		return err
	}
	res.LoadAtCartographerStart = loadAvg()
	a0, err := c.apiserver.scrape(ctx)
	if err != nil {
		return err
	}
	cp, err := startProcess(strings.TrimSpace(string(carto)), filepath.Join(work, "cartographer.log"), []string{"--cert-dir=" + certs}, []string{"KUBECONFIG=" + c.kubeconfig})
	if err != nil {
		return err
	}
	start := time.Now()
	if err := waitAllReady(ctx, ready, o, "cartographer", start, cp); err != nil {
		cp.signalStop(time.Minute)
		return err
	}
	res.CartographerReadySeconds = round(time.Since(start).Seconds(), 1)
	logf("switch: Cartographer: %d workloads Ready in %.1fs", o.n, res.CartographerReadySeconds)
	// What trails the last Ready is Cartographer's, not the switch's.
	if err := sleep(ctx, 10*time.Second); err != nil {
		cp.signalStop(time.Minute)
		return err
	}
	// Stopping Cartographer (docs/migration.md, step 2): the bench runs it
	// as a process with no Deployment and no webhook configuration, so
	// stopping is SIGTERM.
	cp.signalStop(time.Minute)
	ready.stop()

	// Kontinue's CRDs over Cartographer's (step 3: a forced server-side apply).
	crds, err := exec.CommandContext(ctx, o.kontinueBin, "crds").Output()
	if err != nil {
		return fmt.Errorf("kontinue crds: %w", err)
	}
	if err := c.installCRDs(ctx, string(crds)); err != nil {
		return err
	}
	a1, err := c.apiserver.scrape(ctx)
	if err != nil {
		return err
	}
	res.CartographerWrites = apiserverWrites(a0, a1)
	before, err := takeSwitchSnapshot(ctx, c.dyn)
	if err != nil {
		return err
	}
	res.StampedBefore = len(before.stamped)
	sw, err := newSwitchWatcher(ctx, c.dyn, o.n)
	if err != nil {
		return err
	}
	defer sw.stop()
	if n := sw.count(); n != 0 {
		return fmt.Errorf("%d workloads already count as switched before Kontinue starts: the criterion does not tell Cartographer's status from Kontinue's", n)
	}

	// Kontinue at its defaults (only its ports chosen).
	pids := map[string]int{}
	for k, v := range c.pids {
		pids[k] = v
	}
	res.LoadAtKontinueStart = loadAvg()
	k, err := startKontinue(o.kontinueBin, filepath.Join(work, "kontinue.log"), []string{"controller", "--kubeconfig=" + c.kubeconfig}, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err := k.stop(time.Minute); err != nil {
			logf("%v", err)
		}
	}()
	pids["kontinue"] = k.pid
	cpu := newCPUMeter(pids)
	readyz := make(chan time.Time, 1)
	go func() {
		if k.waitReady(ctx, 5*time.Minute) == nil {
			readyz <- time.Now()
		}
	}()
	if err := waitSwitched(ctx, sw, o, k); err != nil {
		return err
	}
	res.SwitchedSeconds = round(sw.allAt.Sub(k.started).Seconds(), 1)
	if c, err := cpuSeconds(k.pid, true); err == nil {
		res.CPUToSwitched = round(c, 1)
	}
	select {
	case t := <-readyz:
		res.KontinueReadyzSeconds = round(t.Sub(k.started).Seconds(), 1)
	default:
	}
	logf("switch: every workload's status and stamped object Kontinue's %.1fs after its start", res.SwitchedSeconds)
	quietAt, m, err := waitQuiet(ctx, k, 3*time.Second, 5*time.Minute)
	if err != nil {
		return err
	}
	res.QuietSeconds = round(quietAt.Sub(k.started).Seconds(), 1)
	a2, err := c.apiserver.scrape(ctx)
	if err != nil {
		return err
	}
	res.CPUSeconds = cpu.read()
	if _, hwm, err := memory(k.pid); err == nil {
		res.PeakRSSMiB = mib(float64(hwm))
	}
	res.APIServerWrites = apiserverWrites(a1, a2)
	res.APIServerRefused = apiserverRefused(a1, a2)
	res.WritesPerWorkload = round(float64(withoutLeases(res.APIServerWrites))/float64(o.n), 2)
	res.StoredWritesPerWorkload = round(float64(withoutLeases(res.APIServerWrites)-withoutLeases(res.APIServerRefused))/float64(o.n), 2)
	res.KontinueCalls = apiCalls(nil, m)
	res.KontinueErrors = apiErrors(nil, m)
	res.Diag = diagnose(nil, m)

	after, err := takeSwitchSnapshot(ctx, c.dyn)
	if err != nil {
		return err
	}
	if res.KontinueEvents, err = eventsSince(ctx, c.dyn, k.started); err != nil {
		return err
	}
	before.compare(after, res)

	// The quiet window.
	logf("switch: quiet window of %s", o.idle)
	if err := sleep(ctx, o.idle); err != nil {
		return err
	}
	a3, err := c.apiserver.scrape(ctx)
	if err != nil {
		return err
	}
	m3, err := k.scrape(ctx)
	if err != nil {
		return err
	}
	res.IdleWindow = o.idle.String()
	res.IdleWrites = apiserverWrites(a2, a3)
	for key := range res.IdleWrites {
		if strings.HasSuffix(key, " leases") {
			delete(res.IdleWrites, key)
		}
	}
	res.IdleKontinueCalls = apiCalls(m, m3)
	res.LoadAtEnd = loadAvg()
	fmt.Print(res.table())
	return writeResult(o.out, "switch", res)
}

// apiserverRefused is the API server's write requests answered other than
// 2xx, by "VERB resource[/sub] code", between two scrapes.
func apiserverRefused(before, after metrics) map[string]int {
	sumBy := func(m metrics) map[string]float64 {
		out := map[string]float64{}
		for _, s := range m {
			l := s.labels
			if s.name != "apiserver_request_total" || strings.HasPrefix(l["code"], "2") {
				continue
			}
			switch l["verb"] {
			case "GET", "LIST", "WATCH", "CONNECT":
				continue
			}
			r := l["resource"]
			if l["subresource"] != "" {
				r += "/" + l["subresource"]
			}
			out[l["verb"]+" "+r+" "+l["code"]] += s.value
		}
		return out
	}
	b, a := sumBy(before), sumBy(after)
	out := map[string]int{}
	for k, v := range a {
		if d := int(v - b[k] + 0.5); d != 0 {
			out[k] = d
		}
	}
	return out
}

// eventsSince counts the bench namespace's events created since t, by
// "reason (type)".
func eventsSince(ctx context.Context, dyn dynamic.Interface, t time.Time) (map[string]int, error) {
	l, err := dyn.Resource(eventGVR).Namespace(benchNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	since := t.Truncate(time.Second)
	for _, e := range l.Items {
		if !e.GetCreationTimestamp().Time.Before(since) {
			reason, _, _ := unstructured.NestedString(e.Object, "reason")
			typ, _, _ := unstructured.NestedString(e.Object, "type")
			out[reason+" ("+typ+")"]++
		}
	}
	return out, nil
}

var eventGVR = schema.GroupVersionResource{Version: "v1", Resource: "events"}

func withoutLeases(w map[string]int) int {
	n := 0
	for k, v := range w {
		if !strings.HasSuffix(k, " leases") {
			n += v
		}
	}
	return n
}

func waitSwitched(ctx context.Context, sw *switchWatcher, o options, k *kontinue) error {
	progress := time.NewTicker(10 * time.Second)
	defer progress.Stop()
	deadline := time.After(o.timeout)
	for {
		select {
		case <-sw.all:
			return nil
		case <-progress.C:
			logf("switch: %d/%d workloads switched after %s", sw.count(), o.n, time.Since(k.started).Round(time.Second))
		case <-k.done:
			return fmt.Errorf("kontinue exited (%v); see %s", k.waitErr, k.logPath)
		case <-deadline:
			return fmt.Errorf("only %d of %d workloads switched after %s", sw.count(), o.n, o.timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// switchWatcher sees, through its own informers, when each workload meets
// switchCriterion.
type switchWatcher struct {
	want      int
	workloads cache.Store
	cms       cache.Store

	mu    sync.Mutex
	done  map[string]bool
	all   chan struct{}
	allAt time.Time

	cancel context.CancelFunc
}

func newSwitchWatcher(ctx context.Context, dyn dynamic.Interface, want int) (*switchWatcher, error) {
	w := &switchWatcher{want: want, done: map[string]bool{}, all: make(chan struct{})}
	ctx, w.cancel = context.WithCancel(ctx)
	wf := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, benchNS, nil)
	cf := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, benchNS, func(o *metav1.ListOptions) {
		o.LabelSelector = labelWorkloadName
	})
	wi, ci := wf.ForResource(workloadGVR).Informer(), cf.ForResource(configMapGVR).Informer()
	w.workloads, w.cms = wi.GetStore(), ci.GetStore()
	for inf, name := range map[cache.SharedIndexInformer]func(*unstructured.Unstructured) string{
		wi: func(u *unstructured.Unstructured) string { return u.GetName() },
		ci: func(u *unstructured.Unstructured) string { return u.GetLabels()[labelWorkloadName] },
	} {
		_ = inf.SetTransform(dropManagedFields)
		seen := func(o any) {
			if u, ok := o.(*unstructured.Unstructured); ok {
				w.check(name(u))
			}
		}
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, o any) { seen(o) }}); err != nil {
			return nil, err
		}
	}
	wf.Start(ctx.Done())
	cf.Start(ctx.Done())
	for _, inf := range []cache.SharedIndexInformer{wi, ci} {
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return nil, fmt.Errorf("bench informers did not sync")
		}
	}
	return w, nil
}

func (w *switchWatcher) stop() { w.cancel() }

func (w *switchWatcher) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.done)
}

// check records the first time workload name meets switchCriterion.
func (w *switchWatcher) check(name string) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if name == "" || w.done[name] {
		return
	}
	o, ok, _ := w.workloads.GetByKey(benchNS + "/" + name)
	if !ok {
		return
	}
	u, _ := o.(*unstructured.Unstructured)
	if u == nil || !switched(u, func(n string) *unstructured.Unstructured {
		c, ok, _ := w.cms.GetByKey(benchNS + "/" + n)
		if !ok {
			return nil
		}
		cm, _ := c.(*unstructured.Unstructured)
		return cm
	}) {
		return
	}
	w.done[name] = true
	if len(w.done) == w.want {
		w.allAt = now
		close(w.all)
	}
}

// switched is switchCriterion for a workload; configMap finds a stamped
// ConfigMap by name (nil when absent).
func switched(u *unstructured.Unstructured, configMap func(string) *unstructured.Unstructured) bool {
	if !isReady(u) {
		return false
	}
	steps, _, _ := unstructured.NestedSlice(u.Object, "status", "resources")
	if len(steps) != stepsPerWorkload {
		return false
	}
	for _, s := range steps {
		m, _ := s.(map[string]any)
		if m["provenance"] == nil {
			return false
		}
		name, _, _ := unstructured.NestedString(m, "stampedRef", "name")
		cm := configMap(name)
		if cm == nil || cm.GetLabels()[labelStamped] != "true" || cm.GetAnnotations()[annotationDigest] == "" {
			return false
		}
	}
	return true
}

// switchSnapshot is what the switch must keep: the stamped ConfigMaps and
// the workloads, by namespace/name.
type switchSnapshot struct {
	stamped   map[string]*unstructured.Unstructured
	workloads map[string]*unstructured.Unstructured
}

func takeSwitchSnapshot(ctx context.Context, dyn dynamic.Interface) (*switchSnapshot, error) {
	s := &switchSnapshot{stamped: map[string]*unstructured.Unstructured{}, workloads: map[string]*unstructured.Unstructured{}}
	cms, err := dyn.Resource(configMapGVR).Namespace(benchNS).List(ctx, metav1.ListOptions{LabelSelector: labelWorkloadName})
	if err != nil {
		return nil, err
	}
	for i := range cms.Items {
		s.stamped[cms.Items[i].GetName()] = &cms.Items[i]
	}
	wls, err := dyn.Resource(workloadGVR).Namespace(benchNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range wls.Items {
		s.workloads[wls.Items[i].GetName()] = &wls.Items[i]
	}
	return s, nil
}

// compare counts what the switch re-created, lost, added or changed.
func (s *switchSnapshot) compare(after *switchSnapshot, res *switchResult) {
	res.StampedAfter = len(after.stamped)
	for name, b := range s.stamped {
		a, ok := after.stamped[name]
		switch {
		case !ok:
			res.Gone++
			continue
		case a.GetUID() != b.GetUID():
			res.Recreated++
		}
		if !reflect.DeepEqual(b.Object["data"], a.Object["data"]) {
			res.SpecsChanged++
		}
		if foreignMetaChanged(b.GetLabels(), a.GetLabels()) || foreignMetaChanged(b.GetAnnotations(), a.GetAnnotations()) {
			res.ForeignMeta++
		}
		// Provenance names the input set by its applied digest.
		for _, st := range stepsOf(after.workloads[a.GetLabels()[labelWorkloadName]]) {
			if ref, _, _ := unstructured.NestedString(st, "stampedRef", "name"); ref == name {
				if d, _, _ := unstructured.NestedString(st, "provenance", "current", "digest"); d != a.GetAnnotations()[annotationDigest] {
					res.DigestMismatch++
				}
			}
		}
	}
	for name := range after.stamped {
		if _, ok := s.stamped[name]; !ok {
			res.New++
		}
	}
	for name, b := range s.workloads {
		a, ok := after.workloads[name]
		switch {
		case !ok:
			res.Gone++
			continue
		case a.GetUID() != b.GetUID():
			res.Recreated++
		}
		if a.GetGeneration() != b.GetGeneration() || !reflect.DeepEqual(b.Object["spec"], a.Object["spec"]) {
			res.SpecsChanged++
		}
		if foreignMetaChanged(b.GetLabels(), a.GetLabels()) || foreignMetaChanged(b.GetAnnotations(), a.GetAnnotations()) {
			res.ForeignMeta++
		}
		if outputDigests(b) != outputDigests(a) {
			res.OutputsChanged++
		}
	}
}

func stepsOf(u *unstructured.Unstructured) []map[string]any {
	if u == nil {
		return nil
	}
	steps, _, _ := unstructured.NestedSlice(u.Object, "status", "resources")
	var out []map[string]any
	for _, s := range steps {
		if m, ok := s.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// foreignMetaChanged: a key of before changed or went, or a key not
// Kontinue's (kontinue.dev/…) was added.
func foreignMetaChanged(before, after map[string]string) bool {
	for k, v := range before {
		if av, ok := after[k]; !ok || av != v {
			return true
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok && !strings.HasPrefix(k, "kontinue.dev/") {
			return true
		}
	}
	return false
}

// outputDigests is every step's outputs by name and digest, in order.
func outputDigests(u *unstructured.Unstructured) string {
	var parts []string
	for _, s := range stepsOf(u) {
		outs, _ := s["outputs"].([]any)
		for _, o := range outs {
			m, _ := o.(map[string]any)
			parts = append(parts, fmt.Sprintf("%v.%v=%v", s["name"], m["name"], m["digest"]))
		}
	}
	return strings.Join(parts, " ")
}

func (r *switchResult) table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nSwitch from Cartographer v0.8.11 to Kontinue, %d workloads (%d stamped ConfigMaps), %d cores, commit %s\n",
		r.Workloads, r.StampedBefore, r.Cores, r.Commit)
	fmt.Fprintf(&b, "load average: Cartographer's start %s, Kontinue's start %s, end %s\n", r.LoadAtCartographerStart, r.LoadAtKontinueStart, r.LoadAtEnd)
	fmt.Fprintf(&b, "switched: %s\n\n", r.Criterion)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	row := func(k, v string, args ...any) { fmt.Fprintf(tw, "%s\t"+v+"\t\n", append([]any{k}, args...)...) }
	row("Cartographer: all Ready (s)", "%.1f", r.CartographerReadySeconds)
	row("Kontinue: /readyz after its start (s)", "%.1f", r.KontinueReadyzSeconds)
	row("every workload switched, from Kontinue's start (s)", "%.1f", r.SwitchedSeconds)
	row("Kontinue quiet, from its start (s)", "%.1f", r.QuietSeconds)
	row("stamped objects before / after", "%d / %d", r.StampedBefore, r.StampedAfter)
	row("objects re-created (UID changed) / gone / new", "%d / %d / %d", r.Recreated, r.Gone, r.New)
	row("specs changed (ConfigMap data, Workload spec)", "%d", r.SpecsChanged)
	row("labels/annotations changed, other than kontinue.dev/ added", "%d", r.ForeignMeta)
	row("workloads whose outputs changed", "%d", r.OutputsChanged)
	row("steps whose provenance digest is not the object's applied digest", "%d", r.DigestMismatch)
	row("API server write requests per workload (start to quiet, leases left out)", "%.2f", r.WritesPerWorkload)
	row("  of which answered 2xx (stored)", "%.2f", r.StoredWritesPerWorkload)
	row("Kontinue CPU to switched / to quiet (s)", "%.1f / %.1f", r.CPUToSwitched, r.CPUSeconds["kontinue"])
	row("kube-apiserver + etcd CPU to quiet (s)", "%.1f", r.CPUSeconds["kube-apiserver"]+r.CPUSeconds["etcd"])
	row("Kontinue peak RSS (MiB)", "%.1f", r.PeakRSSMiB)
	row("API server writes in the quiet window ("+r.IdleWindow+", leases left out)", "%d", total(r.IdleWrites))
	_ = tw.Flush()
	fmt.Fprintf(&b, "\nAPI server writes, Kontinue's start to quiet: %s\n  refused: %s\nKontinue's calls: %s (not 2xx: %s)\nKontinue, start to quiet: %s\nevents since Kontinue's start: %s\nquiet window: API server %s; Kontinue's calls %s\nCartographer's run (its start to its stop and the CRDs' apply): %s\n",
		formatCounts(r.APIServerWrites), formatCounts(r.APIServerRefused), formatCounts(r.KontinueCalls), formatCounts(r.KontinueErrors), r.Diag, formatCounts(r.KontinueEvents), formatCounts(r.IdleWrites), formatCounts(r.IdleKontinueCalls), formatCounts(r.CartographerWrites))
	return b.String()
}
