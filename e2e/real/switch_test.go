package e2ereal

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// switchChain is a supply chain and a delivery written for Cartographer
// (simple $(…)$ templates only), whose steps stamp objects real controllers
// own:
//
//	source   ConfigMap <wl>-source (mutable)
//	test     lifecycle: tekton, a TaskRun per input set; its result is the revision
//	check    lifecycle: immutable, a Job per input set, judged by its conditions
//	lint     a Runnable (mutable) of a hand-written ClusterRunTemplate: a TaskRun per input set
//	config   ConfigMap <wl>-config: the lint report and the revision
//	deliver  the Deliverable <wl>
//
// and the delivery: manifest (ConfigMap), deploy (a Deployment, complete
// when rolled out). A hand-written Runnable of the same run template stands
// alone. Runs keep two of each outcome.
type switchChain struct {
	ns                                                                                     string
	chain, delivery, source, test, check, lint, lintRun, config, deliver, manifest, deploy string
	owners                                                                                 []string
}

func newSwitchChain(ns string) switchChain {
	return switchChain{
		ns: ns, chain: uniq(ns, "chain"), delivery: uniq(ns, "delivery"), source: uniq(ns, "source"),
		test: uniq(ns, "test"), check: uniq(ns, "check"), lint: uniq(ns, "lint"), lintRun: uniq(ns, "lint-run"),
		config: uniq(ns, "config"), deliver: uniq(ns, "deliver"), manifest: uniq(ns, "manifest"), deploy: uniq(ns, "deploy"),
		owners: []string{"w1", "w2"},
	}
}

func (c switchChain) yaml() string {
	return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterSourceTemplate
metadata: {name: %[2]s}
spec:
  urlPath: data.url
  revisionPath: data.revision
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-source}
    data:
      url: $(workload.spec.source.git.url)$
      revision: $(workload.spec.source.git.ref.commit)$
---
apiVersion: carto.run/v1alpha1
kind: ClusterSourceTemplate
metadata: {name: %[3]s}
spec:
  lifecycle: tekton
  retentionPolicy: {maxFailedRuns: 2, maxSuccessfulRuns: 2}
  urlPath: spec.params[?(@.name=="url")].value
  revisionPath: status.results[?(@.name=="revision")].value
  template:
    apiVersion: tekton.dev/v1
    kind: TaskRun
    metadata: {generateName: $(workload.metadata.name)$-test-}
    spec:
      params:
      - {name: url, value: $(source.url)$}
      - {name: revision, value: $(source.revision)$}
      taskSpec:
        params: [{name: url}, {name: revision}]
        results: [{name: revision}]
        steps:
        - name: test
          image: registry.example.com/tester
          command: [make, test]
          env: [{name: KWOK_RESULTS, value: '{"revision": "$(source.revision)$"}'}]
---
apiVersion: carto.run/v1alpha1
kind: ClusterSourceTemplate
metadata: {name: %[4]s}
spec:
  lifecycle: immutable
  retentionPolicy: {maxFailedRuns: 2, maxSuccessfulRuns: 2}
  urlPath: metadata.annotations.app-url
  revisionPath: metadata.annotations.app-revision
  healthRule:
    multiMatch:
      healthy: {matchConditions: [{type: Complete, status: "True"}]}
      unhealthy: {matchConditions: [{type: Failed, status: "True"}]}
  template:
    apiVersion: batch/v1
    kind: Job
    metadata:
      generateName: $(workload.metadata.name)$-check-
      annotations:
        app-url: $(source.url)$
        app-revision: $(source.revision)$
    spec:
      backoffLimit: 0
      template:
        spec:
          restartPolicy: Never
          containers:
          - name: check
            image: registry.example.com/checker
            command: [make, check]
            env: [{name: REVISION, value: $(source.revision)$}]
---
apiVersion: carto.run/v1alpha1
kind: ClusterRunTemplate
metadata: {name: %[6]s}
spec:
  outputs:
    report: status.results[?(@.name=="report")].value
  template:
    apiVersion: tekton.dev/v1
    kind: TaskRun
    metadata: {generateName: $(runnable.metadata.name)$-}
    spec:
      taskSpec:
        results: [{name: report}]
        steps:
        - name: lint
          image: registry.example.com/linter
          command: [make, lint]
          env: [{name: KWOK_RESULTS, value: '{"report": "clean at $(runnable.spec.inputs.revision)$"}'}]
---
apiVersion: carto.run/v1alpha1
kind: ClusterConfigTemplate
metadata: {name: %[5]s}
spec:
  configPath: status.outputs.report
  template:
    apiVersion: carto.run/v1alpha1
    kind: Runnable
    metadata: {name: $(workload.metadata.name)$-lint}
    spec:
      runTemplateRef: {name: %[6]s}
      serviceAccountName: default
      retentionPolicy: {maxFailedRuns: 2, maxSuccessfulRuns: 2}
      inputs:
        revision: $(source.revision)$
---
apiVersion: carto.run/v1alpha1
kind: ClusterConfigTemplate
metadata: {name: %[7]s}
spec:
  configPath: data
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-config}
    data:
      lint: $(config)$
      url: $(source.url)$
      revision: $(source.revision)$
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[8]s}
spec:
  template:
    apiVersion: carto.run/v1alpha1
    kind: Deliverable
    metadata:
      name: $(workload.metadata.name)$
      labels: {app.example.com/delivery: %[10]s}
    spec:
      source: {image: "registry.example.com/app:$(config.revision)$"}
---
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: %[1]s}
spec:
  selector: {app.example.com/chain: %[1]s}
  resources:
  - name: source
    templateRef: {kind: ClusterSourceTemplate, name: %[2]s}
  - name: test
    templateRef: {kind: ClusterSourceTemplate, name: %[3]s}
    sources: [{name: source, resource: source}]
  - name: check
    templateRef: {kind: ClusterSourceTemplate, name: %[4]s}
    sources: [{name: source, resource: test}]
  - name: lint
    templateRef: {kind: ClusterConfigTemplate, name: %[5]s}
    sources: [{name: source, resource: check}]
  - name: config
    templateRef: {kind: ClusterConfigTemplate, name: %[7]s}
    sources: [{name: source, resource: check}]
    configs: [{name: lint, resource: lint}]
  - name: deliver
    templateRef: {kind: ClusterTemplate, name: %[8]s}
    configs: [{name: config, resource: config}]
---
apiVersion: carto.run/v1alpha1
kind: ClusterSourceTemplate
metadata: {name: %[9]s}
spec:
  urlPath: data.image
  revisionPath: data.image
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(deliverable.metadata.name)$-manifest}
    data:
      image: $(deliverable.spec.source.image)$
---
apiVersion: carto.run/v1alpha1
kind: ClusterDeploymentTemplate
metadata: {name: %[11]s}
spec:
  observedCompletion:
    succeeded: {key: 'status.conditions[?(@.type=="Available")].status', value: "True"}
    failed: {key: 'status.conditions[?(@.type=="Progressing")].reason', value: ProgressDeadlineExceeded}
  template:
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: $(deliverable.metadata.name)$}
    spec:
      replicas: 1
      selector: {matchLabels: {app: $(deliverable.metadata.name)$}}
      template:
        metadata: {labels: {app: $(deliverable.metadata.name)$}}
        spec:
          containers: [{name: app, image: $(deployment.url)$}]
---
apiVersion: carto.run/v1alpha1
kind: ClusterDelivery
metadata: {name: %[10]s}
spec:
  selector: {app.example.com/delivery: %[10]s}
  resources:
  - name: manifest
    templateRef: {kind: ClusterSourceTemplate, name: %[9]s}
  - name: deploy
    templateRef: {kind: ClusterDeploymentTemplate, name: %[11]s}
    deployment: {resource: manifest}
---
apiVersion: carto.run/v1alpha1
kind: Runnable
metadata: {name: standalone}
spec:
  runTemplateRef: {name: %[6]s}
  serviceAccountName: default
  retentionPolicy: {maxFailedRuns: 2, maxSuccessfulRuns: 2}
  inputs: {revision: standalone}
`, c.chain, c.source, c.test, c.check, c.lint, c.lintRun, c.config, c.deliver, c.manifest, c.delivery, c.deploy)
}

// commit applies every workload on a commit.
func (c switchChain) commit(t *testing.T, commit string) {
	t.Helper()
	for _, w := range c.owners {
		apply(t, c.ns, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: Workload
metadata:
  name: %s
  labels: {app.example.com/chain: %[2]s}
spec:
  source:
    git:
      url: https://git.example.com/%[1]s.git
      ref: {commit: %[3]s}
`, w, c.chain, commit))
	}
}

// waitReady waits until every owner is Ready on commit: the workloads,
// their deliverables (deployed), their Runnables and the standalone one.
// kontinue asks that Kontinue wrote their statuses (every step records
// its provenance, every Runnable its latest run).
func (c switchChain) waitReady(t *testing.T, commit string, kontinue bool) {
	t.Helper()
	const timeout = 2 * time.Minute
	eventually(t, timeout, func() string {
		for _, w := range c.owners {
			for _, gvr := range []schema.GroupVersionResource{workloadGVR, deliverableGVR} {
				u, err := tryGet(gvr, c.ns, w)
				if err != nil {
					return err.Error()
				}
				if msg := readyOn(u, commit, kontinue); msg != "" {
					return gvr.Resource + " " + w + ": " + msg
				}
			}
		}
		for _, r := range append(c.runnables(), "standalone") {
			u, err := tryGet(runnableGVR, c.ns, r)
			if err != nil {
				return err.Error()
			}
			if fmt.Sprint(condition(u.Object, "Ready")["status"]) != "True" {
				return "runnable " + r + ": " + fmt.Sprint(nested(u.Object, "status"))
			}
			if kontinue && nested(u.Object, "status", "latestRunRef") == nil {
				return "runnable " + r + ": no latestRunRef: Kontinue has not written its status yet"
			}
			if want := "clean at " + commit; r != "standalone" && nested(u.Object, "status", "outputs", "report") != want {
				return fmt.Sprintf("runnable %s: outputs %v, want report %q", r, nested(u.Object, "status", "outputs"), want)
			}
		}
		return ""
	})
}

// waitRerun waits until Cartographer, started at since, has looked at
// every owner: it creates a run of every immutable step and Runnable when
// it starts (it knows which inputs a run had only in memory), so every
// step's newest run, and every Runnable's, is one it created then.
func (c switchChain) waitRerun(t *testing.T, since time.Time) {
	t.Helper()
	eventually(t, 2*time.Minute, func() string {
		for _, w := range c.owners {
			u, err := tryGet(workloadGVR, c.ns, w)
			if err != nil {
				return err.Error()
			}
			for _, s := range []string{"test", "check"} {
				ref, _ := step(u, s)["stampedRef"].(map[string]any)
				gvr := taskRunGVR
				if ref["kind"] == "Job" {
					gvr = jobGVR
				}
				run, err := tryGet(gvr, c.ns, fmt.Sprint(ref["name"]))
				if err != nil {
					return fmt.Sprintf("workload %s step %s: %v", w, s, err)
				}
				if run.GetCreationTimestamp().Time.Before(since) {
					return fmt.Sprintf("workload %s step %s: its run %s is from before Cartographer started", w, s, run.GetName())
				}
			}
		}
		for _, r := range append(c.runnables(), "standalone") {
			runs := list(t, taskRunGVR, c.ns, "carto.run/runnable-name="+r)
			if len(runs) == 0 || runs[len(runs)-1].GetCreationTimestamp().Time.Before(since) {
				return "runnable " + r + ": no run since Cartographer started"
			}
		}
		return ""
	})
}

func readyOn(u *unstructured.Unstructured, commit string, kontinue bool) string {
	if u.GetGeneration() != nestedInt(u.Object, "status", "observedGeneration") {
		return "generation not observed yet"
	}
	if c := condition(u.Object, "Ready"); fmt.Sprint(c["status"]) != "True" {
		return fmt.Sprintf("Ready %v", c)
	}
	if u.GetKind() == "Deliverable" {
		if img := nested(u.Object, "spec", "source", "image"); img != "registry.example.com/app:"+commit {
			return fmt.Sprintf("source image %v, want commit %s", img, commit)
		}
	} else if s := fmt.Sprint(stepOutput(u, "config", "config")); !strings.Contains(s, "lint: clean at "+commit+"\nrevision: "+commit+"\n") {
		return fmt.Sprintf("config step's output %q, want the lint report and revision of %s", s, commit)
	}
	if kontinue {
		res, _, _ := unstructured.NestedSlice(u.Object, "status", "resources")
		for _, r := range res {
			if m, _ := r.(map[string]any); m["provenance"] == nil {
				return fmt.Sprintf("step %v: no provenance: Kontinue has not written this status yet", m["name"])
			}
		}
	}
	return ""
}

func nestedInt(obj map[string]any, path ...string) int64 {
	v, _, _ := unstructured.NestedInt64(obj, path...)
	return v
}

// stepOutput is the preview of an output of a step.
func stepOutput(u *unstructured.Unstructured, stepName, output string) any {
	s := step(u, stepName)
	outs, _ := s["outputs"].([]any)
	for _, o := range outs {
		if m, _ := o.(map[string]any); m["name"] == output {
			return m["preview"]
		}
	}
	return nil
}

func (c switchChain) runnables() []string {
	var out []string
	for _, w := range c.owners {
		out = append(out, w+"-lint")
	}
	return out
}

// switchKinds are the kinds whose objects the switch must keep.
var switchKinds = []schema.GroupVersionResource{configMapGVR, taskRunGVR, jobGVR, deploymentGVR, runnableGVR, deliverableGVR, workloadGVR}

// isRun says whether a kind is one of the chain's runs.
func isRun(gvr schema.GroupVersionResource) bool { return gvr == taskRunGVR || gvr == jobGVR }

// snapshot is what the switch must keep: every object of switchKinds in
// the namespace that a controller stamped (or the owners), by UID.
type snapshot struct {
	objs    map[string]*unstructured.Unstructured // by UID
	kinds   map[string]schema.GroupVersionResource
	outputs map[string]string // owner → its outputs, as people read them
	rv      map[schema.GroupVersionResource]string
}

func takeSnapshot(t *testing.T, ns string) snapshot {
	t.Helper()
	s := snapshot{objs: map[string]*unstructured.Unstructured{}, kinds: map[string]schema.GroupVersionResource{},
		outputs: map[string]string{}, rv: map[schema.GroupVersionResource]string{}}
	for _, gvr := range switchKinds {
		l, err := env.dyn.Resource(gvr).Namespace(ns).List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		s.rv[gvr] = l.GetResourceVersion()
		for i := range l.Items {
			u := &l.Items[i]
			if !stampedOrOwner(gvr, u) {
				continue
			}
			s.objs[string(u.GetUID())] = u
			s.kinds[string(u.GetUID())] = gvr
			switch gvr {
			case workloadGVR, deliverableGVR:
				s.outputs[u.GetKind()+"/"+u.GetName()] = ownerOutputs(u)
			case runnableGVR:
				s.outputs[u.GetKind()+"/"+u.GetName()] = fmt.Sprint(nested(u.Object, "status", "outputs"))
			}
		}
	}
	return s
}

func stampedOrOwner(gvr schema.GroupVersionResource, u *unstructured.Unstructured) bool {
	if gvr == workloadGVR || gvr == runnableGVR || gvr == deliverableGVR {
		return true
	}
	for k := range u.GetLabels() {
		if strings.HasPrefix(k, "carto.run/") {
			return true
		}
	}
	return false
}

// ownerOutputs is every step's outputs (name, digest, preview), in order.
func ownerOutputs(u *unstructured.Unstructured) string {
	var b strings.Builder
	res, _, _ := unstructured.NestedSlice(u.Object, "status", "resources")
	for _, r := range res {
		m, _ := r.(map[string]any)
		outs, _ := m["outputs"].([]any)
		for _, o := range outs {
			om, _ := o.(map[string]any)
			fmt.Fprintf(&b, "%v.%v=%v (%v); ", m["name"], om["name"], om["digest"], om["preview"])
		}
	}
	return b.String()
}

// runs are the UIDs of the runs of a snapshot, by kind and name.
func (s snapshot) runs() map[string]string {
	out := map[string]string{}
	for uid, u := range s.objs {
		if isRun(s.kinds[uid]) {
			out[uid] = u.GetKind() + "/" + u.GetName()
		}
	}
	return out
}

// rendered is what a template rendered of an object: all but metadata
// and status. Kontinue's Runnable CRD defaults spec.runTemplateRef.kind
// (Cartographer's controller assumed it): the API server shows the default
// to every reader once Kontinue's CRDs are installed, so it is left out.
func rendered(u *unstructured.Unstructured) map[string]any {
	out := map[string]any{}
	for k, v := range u.Object {
		if k != "metadata" && k != "status" {
			out[k] = v
		}
	}
	if u.GetKind() == "Runnable" {
		c := u.DeepCopy()
		if k, _, _ := unstructured.NestedString(c.Object, "spec", "runTemplateRef", "kind"); k == "ClusterRunTemplate" {
			unstructured.RemoveNestedField(c.Object, "spec", "runTemplateRef", "kind")
			out["spec"] = c.Object["spec"]
		}
	}
	return out
}

// added returns the keys of after that before lacks, and the keys whose
// value differs or that after lacks (changed).
func added(before, after map[string]string) (added, changed []string) {
	for k, v := range after {
		if bv, ok := before[k]; !ok {
			added = append(added, k)
		} else if bv != v {
			changed = append(changed, k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			changed = append(changed, k)
		}
	}
	sort.Strings(added)
	sort.Strings(changed)
	return added, changed
}

// kept checks that every object of before is still there (same UID) with
// what its template rendered unchanged, and, with onlyKontinue, that the
// labels and annotations it gained are Kontinue's (kontinue.dev/…) and
// none it had changed. Without onlyKontinue (back on Cartographer) a run
// may be gone: Cartographer's retention counts the runs it creates when it
// starts.
func (s snapshot) kept(t *testing.T, after snapshot, onlyKontinue bool) {
	t.Helper()
	for uid, b := range s.objs {
		what := b.GetKind() + "/" + b.GetName()
		a, ok := after.objs[uid]
		if !ok && !onlyKontinue && isRun(s.kinds[uid]) {
			continue // Cartographer's retention (runsPruned)
		}
		if !assert.True(t, ok, "%s (uid %s) is gone", what, uid) {
			continue
		}
		assert.Equal(t, rendered(b), rendered(a), "%s: what its template rendered changed", what)
		if !onlyKontinue {
			continue
		}
		for _, m := range []struct {
			what          string
			before, after map[string]string
		}{{"labels", b.GetLabels(), a.GetLabels()}, {"annotations", b.GetAnnotations(), a.GetAnnotations()}} {
			add, changed := added(m.before, m.after)
			assert.Empty(t, changed, "%s: %s changed", what, m.what)
			for _, k := range add {
				assert.True(t, strings.HasPrefix(k, "kontinue.dev/"), "%s: %s %s added, not Kontinue's", what, m.what, k)
			}
		}
	}
}

// writeCounter counts, per object, the writes that changed it outside its
// status (its spec, labels, annotations, or who manages its fields), and
// per owner its status writes, from a watch of every kind in switchKinds.
type writeCounter struct {
	mu       sync.Mutex
	writes   map[string]int // uid → writes
	statuses map[string]int // uid → status writes
	what     map[string]string
	errs     []string // the watches' errors: the counts miss writes
	stop     func()
}

func countWrites(t *testing.T, ns string, from snapshot) *writeCounter {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	wc := &writeCounter{writes: map[string]int{}, statuses: map[string]int{}, what: map[string]string{}}
	var wg sync.WaitGroup
	for _, gvr := range switchKinds {
		ri := env.dyn.Resource(gvr).Namespace(ns)
		// A CRD's update ends the watches of its kind: watch on from the
		// last version seen.
		w, err := watchtools.NewRetryWatcherWithContext(ctx, from.rv[gvr], &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return ri.Watch(ctx, o)
		}})
		require.NoError(t, err)
		last := map[string]*unstructured.Unstructured{}
		for uid, u := range from.objs {
			if from.kinds[uid] == gvr {
				last[uid] = u
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer w.Stop()
			for ev := range w.ResultChan() {
				u, ok := ev.Object.(*unstructured.Unstructured)
				if !ok {
					wc.mu.Lock()
					wc.errs = append(wc.errs, fmt.Sprintf("%s: %v", gvr.Resource, ev.Object))
					wc.mu.Unlock()
					continue
				}
				uid := string(u.GetUID())
				prev := last[uid]
				last[uid] = u
				wc.mu.Lock()
				wc.what[uid] = u.GetKind() + "/" + u.GetName()
				switch {
				case ev.Type == watch.Added || ev.Type == watch.Deleted:
					wc.writes[uid]++
				case ev.Type == watch.Modified && prev != nil:
					if !reflect.DeepEqual(outsideStatus(prev), outsideStatus(u)) {
						wc.writes[uid]++
					}
					if !reflect.DeepEqual(prev.Object["status"], u.Object["status"]) {
						wc.statuses[uid]++
					}
				}
				wc.mu.Unlock()
			}
		}()
	}
	wc.stop = func() { cancel(); wg.Wait() }
	return wc
}

// outsideStatus is an object without its status, resource version and
// the times of its field managers (their fields stay: taking a field over
// is a write).
func outsideStatus(u *unstructured.Unstructured) map[string]any {
	c := u.DeepCopy()
	delete(c.Object, "status")
	c.SetResourceVersion("")
	var mf []metav1.ManagedFieldsEntry
	for _, e := range c.GetManagedFields() {
		if e.Subresource == "status" {
			continue
		}
		e.Time = nil
		mf = append(mf, e)
	}
	c.SetManagedFields(mf)
	return c.Object
}

// TestRealSwitchFromCartographer switches a running Cartographer v0.8.11
// to Kontinue as docs/migration.md says, and back, with nothing re-run:
// Workloads through mutable steps, a lifecycle: tekton step (TaskRuns), a
// lifecycle: immutable step (Jobs) and Runnables (stamped by a step, and
// one written by hand), Ready under Cartographer on their second commit.
// After the switch: no run is created for inputs Cartographer ran, no
// object is created again (same UIDs), nothing a template rendered
// changes (only Kontinue's labels and annotations are added), each object
// is written at most once, every owner is Ready with the same outputs,
// and Kontinue writes nothing more. Back to Cartographer nothing is lost
// (Cartographer itself creates one run per immutable step and Runnable on
// any start: it remembers the runs it created in memory only). To Kontinue
// again, Cartographer's new runs are recognised too; a new commit then
// creates one run per step, and retention counts Cartographer's runs.
func TestRealSwitchFromCartographer(t *testing.T) {
	ns := newNamespace(t)
	c := newSwitchChain(ns)
	waitOtherNamespacesGone(t, ns)
	stopKontinue(t)
	useCartographerCRDs(t)

	// Cartographer runs the chain on two commits.
	apply(t, ns, c.yaml())
	carto := startCartographer(t, "first")
	c.commit(t, "a1")
	c.waitReady(t, "a1", false)
	c.commit(t, "a2")
	c.waitReady(t, "a2", false)
	carto.stop()

	// Kontinue's CRDs over Cartographer's, then Kontinue.
	installKontinueCRDs(t)
	before := takeSnapshot(t, ns)
	require.Len(t, before.runs(), 2*2*len(c.owners)+2*len(c.owners)+1, "Cartographer's runs: two per immutable step and Runnable (one for the standalone Runnable)")
	writes := countWrites(t, ns, before)
	startKontinueNow(t)
	c.waitReady(t, "a2", true)
	assertIdle(t, ns)
	writes.stop()
	require.Empty(t, writes.errs, "the watches that count writes")
	after := takeSnapshot(t, ns)

	assert.Equal(t, before.runs(), after.runs(), "no run created or deleted")
	before.kept(t, after, true)
	assert.Equal(t, before.outputs, after.outputs, "every owner's outputs")
	total, statuses := 0, 0
	byKind := map[string]int{}
	for uid, n := range writes.writes {
		total += n
		byKind[strings.Split(writes.what[uid], "/")[0]] += n
		assert.LessOrEqual(t, n, 1, "%s written more than once", writes.what[uid])
	}
	for uid, n := range writes.statuses {
		kind := strings.Split(writes.what[uid], "/")[0]
		byKind[kind+" status"] += n
		switch kind {
		case "Workload", "Runnable":
			statuses += n
			assert.LessOrEqual(t, n, 1, "%s: its status written more than once", writes.what[uid])
		case "Deliverable":
			// Kontinue's annotation on the Deployment is a new
			// generation of it (the Deployment's rule): the deploy step
			// waits for the Deployment to observe it, then is Ready again.
			statuses += n
			assert.LessOrEqual(t, n, 2, "%s: its status written more than twice", writes.what[uid])
		}
	}
	t.Logf("writes by kind: %v", byKind)
	owners := 3*len(c.owners) + 1 // workloads, deliverables, their Runnables, the standalone one
	t.Logf("switch to Kontinue: %d objects, %d owners; %d writes of objects (each at most once), %d status writes of owners (%.1f and %.1f per owner)",
		len(before.objs), owners, total, statuses, float64(total)/float64(owners), float64(statuses)/float64(owners))

	// Back to Cartographer: nothing lost.
	env.kontinue.stop()
	useCartographerCRDs(t)
	since := time.Now().Truncate(time.Second)
	carto = startCartographer(t, "again")
	c.waitRerun(t, since)
	c.waitReady(t, "a2", false)
	carto.stop()
	back := takeSnapshot(t, ns)
	for uid, u := range after.objs {
		if !isRun(after.kinds[uid]) {
			assert.Contains(t, back.objs, uid, "%s/%s (uid %s) is gone", u.GetKind(), u.GetName(), uid)
		}
	}
	after.kept(t, back, false)
	assert.Equal(t, after.outputs, back.outputs, "every owner's outputs, back on Cartographer")
	created, pruned := 0, 0
	for uid := range back.runs() {
		if _, ok := after.objs[uid]; !ok {
			created++
		}
	}
	for uid := range after.runs() {
		if _, ok := back.objs[uid]; !ok {
			pruned++
		}
	}
	assert.Equal(t, created-1, pruned, "Cartographer's retention keeps two runs of each step and Runnable (the standalone one had one)")
	assert.Equal(t, 2*len(c.owners)+len(c.owners)+1, created, "Cartographer creates a run per immutable step and Runnable when it starts")

	// Kontinue again: Cartographer's newer runs are recognised too.
	installKontinueCRDs(t)
	startKontinueNow(t)
	c.waitReady(t, "a2", true)
	again := takeSnapshot(t, ns)
	assert.Equal(t, back.runs(), again.runs(), "no run created or deleted, to Kontinue again")
	back.kept(t, again, true)

	// A new commit: one run per step, and retention (two of each outcome)
	// counts Cartographer's runs.
	c.commit(t, "a3")
	c.waitReady(t, "a3", true)
	last := takeSnapshot(t, ns)
	newRuns := map[string]int{}
	for uid, name := range last.runs() {
		if _, ok := again.objs[uid]; !ok {
			newRuns[strings.Split(name, "/")[0]]++
		}
	}
	assert.Equal(t, map[string]int{"TaskRun": 2 * len(c.owners), "Job": len(c.owners)}, newRuns, "one run per step and Runnable for the new commit")
	eventually(t, time.Minute, func() string {
		now := takeSnapshot(t, ns)
		byStep := map[string]int{}
		for uid := range now.runs() {
			l := now.objs[uid].GetLabels()
			byStep[l["carto.run/workload-name"]+l["carto.run/resource-name"]+l["carto.run/runnable-name"]]++
		}
		for k, n := range byStep {
			if n > 2 && !strings.HasPrefix(k, "standalone") {
				return fmt.Sprintf("%s keeps %d runs, retention keeps 2: %v", k, n, byStep)
			}
		}
		return ""
	})
}
