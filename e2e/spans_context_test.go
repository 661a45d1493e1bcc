package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"kontinue.dev/kontinue/reconciler/api"
	st "kontinue.dev/kontinue/reconciler/status"
)

// contextChains: provChain's steps plus a step that stamps a Deliverable
// from the build's image, and the delivery that Deliverable walks: a gated
// source step whose object the test plays (it "fetches" the image the
// Deliverable names, as a source controller would), a live step taking it.
func contextChains(ns string) string {
	return provChain(ns) + fmt.Sprintf(`
  - name: deliverable
    templateRef: {kind: ClusterTemplate, name: %[1]s}
    images: [{name: image, resource: build}]
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[1]s}
spec:
  template:
    apiVersion: carto.run/v1alpha1
    kind: Deliverable
    metadata: {name: $(workload.metadata.name)$, labels: {tc-delivery: %[2]s}}
    spec:
      params: [{name: image, value: $(image)$}]
---
apiVersion: carto.run/v1alpha1
kind: ClusterSourceTemplate
metadata: {name: %[3]s}
spec:
  urlPath: .spec.url
  revisionPath: .status.revision
%[5]s
  template:
    apiVersion: test.run/v1alpha1
    kind: Test
    metadata: {name: $(deliverable.metadata.name)$-gitops}
    spec: {url: "oci://registry.example/app", image: $(params.image)$}
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[4]s}
spec:
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(deliverable.metadata.name)$-live}
    data: {revision: $(source.revision)$}
---
apiVersion: carto.run/v1alpha1
kind: ClusterDelivery
metadata: {name: %[2]s}
spec:
  selector: {tc-delivery: %[2]s}
  resources:
  - name: gitops
    templateRef: {kind: ClusterSourceTemplate, name: %[3]s}
  - name: live
    templateRef: {kind: ClusterTemplate, name: %[4]s}
    sources: [{name: source, resource: gitops}]
`, uniq(ns, "mkdlv"), uniq(ns, "tcdel"), uniq(ns, "gitops"), uniq(ns, "live"), readyRule)
}

// writeCounter counts the writes Kontinue makes to the objects it stamps
// in one namespace (not owners' statuses, Workloads, events or histories):
// every create, apply, patch and delete that reaches the API server,
// whether or not it changes the object.
type writeCounter struct {
	ns   string
	mu   sync.Mutex
	what []string // "METHOD path" of each write since take
}

func (c *writeCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		p, in := r.URL.Path, "/namespaces/"+c.ns+"/"
		i := strings.Index(p, in)
		if r.Method == http.MethodGet || i < 0 || strings.HasSuffix(p, "/status") || strings.Contains(p, "/workloads") ||
			strings.Contains(p, "/events") || strings.Contains(p, "kontinue-history") {
			return rt.RoundTrip(r)
		}
		if r.Method == http.MethodPost && r.Body != nil {
			// A create names its object in the body: the history's is not
			// a stamped object.
			b, err := io.ReadAll(r.Body)
			if err != nil {
				return nil, err
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
			if bytes.Contains(b, []byte(`"kontinue-history.`)) {
				return rt.RoundTrip(r)
			}
		}
		c.mu.Lock()
		c.what = append(c.what, r.Method+" "+p[i+len(in):])
		c.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

// take returns the writes since the last take.
func (c *writeCounter) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.what
	c.what = nil
	return w
}

// stampedObj is one object a step stamped.
type stampedObj struct {
	gvr  schema.GroupVersionResource
	name string
}

func (o stampedObj) String() string { return o.gvr.Resource + "/" + o.name }

// TestSpansTraceContext: with traces on, every object a step stamps carries the
// traceparent of the step's exported span (none for a first step); a
// Deliverable's revision is linked to the Workload revision that made it;
// and the annotation costs no write: turning traces on or off, a restart
// or a reconcile of the same inputs write nothing, and a revision writes
// as often with traces as without.
func TestSpansTraceContext(t *testing.T) {
	tr := newTracer(t)
	ns := newNamespace(t)
	writes := &writeCounter{ns: ns}
	cfg := rest.CopyConfig(env.cfg)
	cfg.WrapTransport = writes.wrap
	tr.cfg = cfg
	apply(t, ns, deliverableRBAC)
	apply(t, ns, contextChains(ns))
	var (
		src    = stampedObj{configMapGVR, "app-src"}
		bld    = stampedObj{testGVR, "app-build"}
		dep    = stampedObj{configMapGVR, "app-deploy"}
		dlv    = stampedObj{deliverableGVR, "app"}
		gitops = stampedObj{testGVR, "app-gitops"}
		live   = stampedObj{configMapGVR, "app-live"}
		all    = []stampedObj{src, bld, dep, dlv, gitops, live}
	)
	annotations := func() map[stampedObj]string {
		out := map[stampedObj]string{}
		for _, o := range all {
			out[o] = get(t, o.gvr, ns, o.name).GetAnnotations()[api.AnnotationTraceParent]
		}
		return out
	}
	// versions are the objects' resourceVersions (not the Deliverable's:
	// an owner too, its status and the reconcile requests change it; the
	// write counter sees Kontinue's writes of it).
	versions := func() map[stampedObj]string {
		out := map[stampedObj]string{}
		for _, o := range all {
			if o != dlv {
				out[o] = get(t, o.gvr, ns, o.name).GetResourceVersion()
			}
		}
		return out
	}
	// idle asks both owners for a reconcile and waits for it: the same
	// inputs, nothing to write.
	idle := func() {
		t.Helper()
		for _, kind := range []string{"workload", "deliverable"} {
			code, _, errOut := kontinueCLI(t, "reconcile", kind, "app", "-n", ns, "--wait", "--timeout", "60s")
			require.Equal(t, 0, code, errOut)
		}
	}

	// Traces off: no annotation anywhere.
	tr.off()
	revision(t, ns, "c0")
	for o, tp := range annotations() {
		assert.Empty(t, tp, "%s with traces off", o)
	}
	created := len(writes.take())

	// Traces on: nothing is written for it, not even after a reconcile.
	before := versions()
	tr.on()
	idle()
	assert.Equal(t, before, versions(), "turning traces on writes nothing")
	assert.Empty(t, writes.take(), "writes after turning traces on")

	// c1 and c2: each written object carries its step's span; the
	// Deliverable's revision is linked to the Workload's.
	perRevision := map[string][]string{}
	for _, commit := range []string{"c1", "c2"} {
		revision(t, ns, commit)
		perRevision[commit] = writes.take()
		w, d := tr.recv.revisionSpans(t, ns, commit, "img-"+commit)
		got := annotations()
		assert.Equal(t, traceParentOf(w["build"]), got[bld], "the build's object: its step's span of %s", commit)
		assert.Equal(t, traceParentOf(w["deploy"]), got[dep])
		assert.Equal(t, traceParentOf(w["deliverable"]), got[dlv], "the Deliverable: the span of the step that stamped it")
		assert.Equal(t, traceParentOf(d["live"]), got[live], "the Deliverable's own step, in its own revision's trace")
		assert.NotEqual(t, w["build"].trace, d["live"].trace, "two owners, two traces")
		assert.Empty(t, got[src], "a first step's object: its revision is what it publishes")
		assert.Empty(t, got[gitops], "the Deliverable's first step's object")

		root := d["gitops"]
		require.Len(t, root.links, 1, "the Deliverable's revision %s is linked", commit)
		assert.Equal(t, w["deliverable"].trace, root.links[0].trace, "to the Workload's revision %s", commit)
		assert.Equal(t, w["deliverable"].id, root.links[0].id, "to the span of the step that stamped the Deliverable")
		assert.Equal(t, map[string]string{"kontinue.owner.kind": "Workload", "kontinue.owner.namespace": ns, "kontinue.owner.name": "app",
			"kontinue.step": "deliverable"}, root.links[0].attrs)
		assert.Empty(t, d["live"].links, "only the revision's root span is linked")
		for step, s := range w {
			assert.Empty(t, s.links, "a Workload's span %s", step)
		}

		// The same inputs: no write, in a reconcile or after a restart.
		before := versions()
		idle()
		tr.on()
		idle()
		assert.Equal(t, before, versions(), "%s: the same inputs write nothing, traced", commit)
		assert.Equal(t, got, annotations())
		assert.Empty(t, writes.take(), "writes of the same inputs, traced")
	}

	// Traces off: nothing is written for it; the annotation goes with the
	// next write (c3), which hands the create's fields over once; after
	// that (c4) a revision writes as often as with traces.
	before = versions()
	kept := annotations()
	tr.off()
	idle()
	assert.Equal(t, before, versions(), "turning traces off writes nothing")
	assert.Equal(t, kept, annotations(), "until the next write, the annotation stays")
	assert.Empty(t, writes.take(), "writes after turning traces off")
	for _, commit := range []string{"c3", "c4"} {
		revision(t, ns, commit)
		perRevision[commit] = writes.take()
		for o, tp := range annotations() {
			assert.Empty(t, tp, "%s written with traces off at %s", o, commit)
		}
	}
	t.Logf("writes to stamped objects: %d creating them (c0, traces off); per revision: %q", created, perRevision)
	assert.Equal(t, perRevision["c2"], perRevision["c4"], "a revision writes as often with traces (c2) as without (c4)")
	assert.Len(t, perRevision["c2"], 6, "one apply per stamped object")
	// The first write without the annotation of an object Kontinue created
	// hands the create's fields over (one patch), so that the apply
	// removes the annotation: once per object, the three annotated ones
	// (the Deliverable's was handed over at c1, for the reconcile
	// request's annotation the test put on it).
	assert.Len(t, perRevision["c3"], len(perRevision["c4"])+3, "c3: %q", perRevision["c3"])
}

// revision takes commit through both chains: the test builds its image,
// then fetches it for the Deliverable's source once the Workload's status
// records the input set that stamped the Deliverable (a source controller
// takes longer than a status write; the link needs that record).
func revision(t *testing.T, ns, commit string) {
	t.Helper()
	img := "img-" + commit
	apply(t, ns, provWorkload(ns, commit))
	waitFor(t, testGVR, ns, "app-build", fieldIs(commit, "spec", "commit"))
	time.Sleep(time.Second) // whole seconds: spans last at least one
	build(t, ns, "True", img)
	waitDeployed(t, ns, img)
	waitProvenance(t, ns, "deliverable", func(p st.Provenance) string {
		if p.Current == nil || len(p.Current.Images) != 1 || p.Current.Images[0].Image != img {
			return "the deliverable step's current set is not " + img
		}
		return ""
	})
	g := waitFor(t, testGVR, ns, "app-gitops", fieldIs(img, "spec", "image"))
	setStatus(t, testGVR, ns, "app-gitops", map[string]any{"observedGeneration": g.GetGeneration(), "revision": img,
		"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}})
	waitFor(t, configMapGVR, ns, "app-live", fieldIs(img, "data", "revision"))
	waitOwner(t, deliverableGVR, ns, "app", "Ready", "True", "")
	waitOwner(t, workloadGVR, ns, "app", "Ready", "True", "")
}

// revisionSpans waits for the spans of the Workload's revision commit and
// of the Deliverable's revision image, by step.
func (r *otlpReceiver) revisionSpans(t *testing.T, ns, commit, image string) (w, d map[string]gotSpan) {
	t.Helper()
	eventually(t, 20*time.Second, func() string {
		r.mu.Lock()
		defer r.mu.Unlock()
		w, d = map[string]gotSpan{}, map[string]gotSpan{}
		for _, s := range r.spans {
			switch {
			case s.attrs["kontinue.owner.namespace"] != ns:
			case s.attrs["kontinue.owner.kind"] == "Workload" && s.attrs["kontinue.revision"] == "https://git.example/app.git@"+commit:
				w[s.name] = s
			case s.attrs["kontinue.owner.kind"] == "Deliverable" && s.attrs["kontinue.revision"] == "oci://registry.example/app@"+image:
				d[s.name] = s
			}
		}
		if len(w) != 4 || len(d) != 2 {
			return fmt.Sprintf("spans of %s: Workload %v, Deliverable %v; want source, build, deploy, deliverable and gitops, live", commit, keys(w), keys(d))
		}
		return ""
	})
	return w, d
}

func keys(m map[string]gotSpan) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// traceParentOf is the W3C traceparent of a span received, sampled.
func traceParentOf(s gotSpan) string { return "00-" + s.trace + "-" + s.id + "-01" }

// deliverableRBAC lets the workload's service account stamp Deliverables.
const deliverableRBAC = `
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: stamp-deliverables}
rules:
- apiGroups: [carto.run]
  resources: [deliverables]
  verbs: [get, list, watch, create, update, patch, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: stamp-deliverables}
subjects: [{kind: ServiceAccount, name: default}]
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: stamp-deliverables}
`

// runsChain: a source (a ConfigMap of the workload's commit), a step with
// a run per input set (lifecycle tekton) and a runnable: true step, both
// reading the source.
func runsChain(ns string) string {
	return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterSourceTemplate
metadata: {name: %[1]s}
spec:
  urlPath: .data.url
  revisionPath: .data.revision
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-src}
    data: {url: "https://git.example/app.git", revision: $(params.commit)$}
---
apiVersion: carto.run/v1alpha1
kind: ClusterSourceTemplate
metadata: {name: %[2]s}
spec:
  lifecycle: tekton
  urlPath: spec.params[?(@.name=="url")].value
  revisionPath: spec.params[?(@.name=="revision")].value
  template:
    apiVersion: tekton.dev/v1beta1
    kind: PipelineRun
    metadata: {generateName: $(workload.metadata.name)$-lint-}
    spec:
      pipelineRef: {name: linter}
      params:
      - {name: url, value: $(source.url)$}
      - {name: revision, value: $(source.revision)$}
---
apiVersion: carto.run/v1alpha1
kind: ClusterSourceTemplate
metadata: {name: %[3]s}
spec:
  runnable: true
  healthRule: {singleConditionType: Succeeded}
  urlPath: spec.params[?(@.name=="url")].value
  revisionPath: spec.params[?(@.name=="revision")].value
  template:
    apiVersion: tekton.dev/v1beta1
    kind: PipelineRun
    metadata: {name: $(workload.metadata.name)$-check}
    spec:
      pipelineRef: {name: checker}
      params:
      - {name: url, value: $(source.url)$}
      - {name: revision, value: $(source.revision)$}
---
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: %[4]s}
spec:
  selector: {runs-trace: %[4]s}
  resources:
  - name: source
    templateRef: {kind: ClusterSourceTemplate, name: %[1]s}
  - name: lint
    templateRef: {kind: ClusterSourceTemplate, name: %[2]s}
    sources: [{name: source, resource: source}]
  - name: check
    templateRef: {kind: ClusterSourceTemplate, name: %[3]s}
    sources: [{name: source, resource: source}]
`, uniq(ns, "rsrc"), uniq(ns, "rlint"), uniq(ns, "rcheck"), uniq(ns, "rchain"))
}

// TestSpansTraceContextRuns: a run of an immutable step, the Runnable of a
// runnable: true step and the Runnable's run carry the traceparent of
// their step's span; a run, never updated, keeps it when the next
// revision's run comes.
func TestSpansTraceContextRuns(t *testing.T) {
	tr := newTracer(t)
	tr.on()
	k := &runKit{t: t, ns: newNamespace(t)}
	apply(t, k.ns, runsChain(k.ns))
	workload := func(commit string) {
		apply(t, k.ns, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: Workload
metadata: {name: app, labels: {runs-trace: %s}}
spec:
  params: [{name: commit, value: %s}]
`, uniq(k.ns, "rchain"), commit))
	}
	traced := func(u unstructured.Unstructured) string { return u.GetAnnotations()[api.AnnotationTraceParent] }

	var firstLint unstructured.Unstructured
	for _, commit := range []string{"c1", "c2"} {
		workload(commit)
		lint := k.waitStepRuns("app", "lint", append([]string{commit}, map[string][]string{"c1": nil, "c2": {"c1"}}[commit]...)...)
		checks := k.waitRevisions("app-check", append([]string{commit}, map[string][]string{"c1": nil, "c2": {"c1"}}[commit]...)...)
		time.Sleep(time.Second) // whole seconds: spans last at least one
		k.finish(lint[0].GetName(), "True", nil)
		k.finish(checks[0].GetName(), "True", nil)
		var w map[string]gotSpan
		eventually(t, 20*time.Second, func() string {
			w = tr.recv.stepSpans(k.ns, "https://git.example/app.git@"+commit)
			if w["lint"].id == "" || w["check"].id == "" {
				b, _ := json.Marshal(stepStatus(get(t, workloadGVR, k.ns, "app"), "check"))
				return fmt.Sprintf("spans of %s: %v; check %s", commit, keys(w), b)
			}
			return ""
		})
		assert.Equal(t, traceParentOf(w["lint"]), traced(lint[0]), "the run of %s: the lint step's span", commit)
		rn := get(t, immRunnableGVR, k.ns, "app-check")
		assert.Equal(t, traceParentOf(w["check"]), rn.GetAnnotations()[api.AnnotationTraceParent], "the Runnable: the check step's span of %s", commit)
		assert.Equal(t, traceParentOf(w["check"]), traced(checks[0]), "the Runnable's run: its Runnable's")
		// A runnable: true step records its provenance, as the others do.
		waitProvenance(t, k.ns, "check", func(p st.Provenance) string { return setIs(p.Current, commit, st.OutcomeSucceeded) })
		if commit == "c1" {
			firstLint = *get(t, immPipelineRunGVR, k.ns, lint[0].GetName()) // finished
			// Traces off, then on again: no run is created (a run's input
			// set leaves the annotation out), the Runnable is not written.
			rv := get(t, immRunnableGVR, k.ns, "app-check").GetResourceVersion()
			for _, restart := range []func(){tr.off, tr.on} {
				restart()
				code, _, errOut := kontinueCLI(t, "reconcile", "workload", "app", "-n", k.ns, "--wait", "--timeout", "60s")
				require.Equal(t, 0, code, errOut)
				assert.Len(t, k.listBy(immPipelineRunGVR, "carto.run/workload-name=app,carto.run/resource-name=lint"), 1, "lint runs")
				assert.Len(t, k.runs("app-check"), 1, "the Runnable's runs")
				assert.Equal(t, rv, get(t, immRunnableGVR, k.ns, "app-check").GetResourceVersion(), "the Runnable")
			}
			continue
		}
		again := get(t, immPipelineRunGVR, k.ns, firstLint.GetName())
		assert.Equal(t, firstLint.GetResourceVersion(), again.GetResourceVersion(), "a run is never written again")
		assert.NotEqual(t, traced(firstLint), traced(lint[0]), "c1's run keeps c1's span")
	}
}

// stepSpans are the spans received of a Workload's revision in ns, by
// step.
func (r *otlpReceiver) stepSpans(ns, revision string) map[string]gotSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]gotSpan{}
	for _, s := range r.spans {
		if s.attrs["kontinue.owner.namespace"] == ns && s.attrs["kontinue.revision"] == revision {
			out[s.name] = s
		}
	}
	return out
}
