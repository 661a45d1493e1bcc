package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/cli/view"
	"kontinue.dev/kontinue/reconciler/api"
	st "kontinue.dev/kontinue/reconciler/status"
)

// traceOf is `kontinue trace kind name -o json`, and the hop of owner's
// step in it.
func traceOf(t *testing.T, ns, kind, name, owner, step string) (view.Trace, view.Hop) {
	t.Helper()
	code, out, errOut := kontinueCLI(t, "trace", kind, name, "-n", ns, "-o", "json")
	require.Equal(t, 0, code, errOut)
	var tr view.Trace
	require.NoError(t, json.Unmarshal([]byte(out), &tr), out)
	for _, h := range tr.Hops {
		if h.Owner == owner && h.Step == step {
			return tr, h
		}
	}
	t.Fatalf("no hop of %s step [%s] in %s", owner, step, out)
	return tr, view.Hop{}
}

// TestTraceDeliverableRevisions: kontinue trace proves which Workload
// revision made what a Deliverable's first step published, with the
// proof the controller's span links use (traces off here: no traceparent
// to weigh), at two revisions in turn; and, when the Deliverable's source
// finds a branch's commit rather than the image it names, says the hop is
// not proven and which condition failed.
func TestTraceDeliverableRevisions(t *testing.T) {
	ns := newNamespace(t)
	apply(t, ns, deliverableRBAC)
	apply(t, ns, contextChains(ns))
	workload, deliverable := "Workload/"+ns+"/app", "Deliverable/"+ns+"/app"

	for _, commit := range []string{"c1", "c2"} {
		revision(t, ns, commit)
		applied := get(t, deliverableGVR, ns, "app").GetAnnotations()[api.AnnotationDigest]
		require.NotEmpty(t, applied)

		tr, root := traceOf(t, ns, "deliverable", "app", deliverable, "gitops")
		c := root.From
		require.NotNil(t, c, "the Deliverable's first step says where its revision came from")
		assert.True(t, c.Proven, "%s: %+v", commit, c)
		assert.Equal(t, workload, c.Workload)
		assert.Equal(t, "deliverable", c.Step)
		assert.Equal(t, "https://git.example/app.git@"+commit, c.Revision, "the Workload revision")
		assert.Equal(t, []string{"owner", "applied-digest", "value"}, c.Evidence, "no traceparent with traces off")
		assert.Equal(t, "revision", c.Output)
		require.NotNil(t, c.Set)
		assert.Equal(t, applied, c.Set.Digest, "the set the Deliverable carries")
		require.Len(t, c.Set.Images, 1)
		assert.Equal(t, "img-"+commit, c.Set.Images[0].Image)
		require.NotNil(t, c.Set.TakenAt)
		require.NotNil(t, c.Set.EndedAt)
		assert.Empty(t, c.Failed)
		assert.Equal(t, "img-"+commit, root.Outputs["revision"])
		for _, n := range tr.Notes {
			assert.NotContains(t, n, "not proven", commit)
		}
		assert.Equal(t, workload, tr.Hops[0].Owner, "the Workload's chains first")
		assert.Equal(t, commit, tr.Hops[0].Outputs["revision"], "back to the commit")

		// As text, from an object the Deliverable's last step stamped.
		code, out, errOut := kontinueCLI(t, "trace", "configmap", "app-live", "-n", ns)
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "made by "+workload+" [deliverable] revision https://git.example/app.git@"+commit+"  Succeeded  taken ")
		assert.Contains(t, out, "proven by owner, applied-digest, value (out revision is a value it took); no traceparent to weigh")
		assert.NotContains(t, out, "not proven")
	}

	// c3: the Deliverable's source follows a branch, and finds a gitops
	// commit: nothing in the Workload's status names it.
	fetched(t, ns, "c3", "main@sha1:4e1f")
	tr, root := traceOf(t, ns, "deliverable", "app", deliverable, "gitops")
	c := root.From
	require.NotNil(t, c)
	assert.False(t, c.Proven)
	assert.Equal(t, "value", c.Failed)
	assert.Equal(t, 4, c.Condition)
	assert.Equal(t, "the Deliverable's revision is no value the Workload's step took", c.Reason)
	assert.Equal(t, []string{"owner", "applied-digest"}, c.Evidence, "the Workload did stamp it, with c3's set")
	assert.Equal(t, "https://git.example/app.git@c3", c.Revision)
	assert.Contains(t, tr.Notes, deliverable+" step [gitops]: that "+workload+" step [deliverable] made the revision it published is not proven (condition 4, value): "+c.Reason)
	code, out, errOut := kontinueCLI(t, "trace", "deliverable", "app", "-n", ns)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "made by "+workload+" [deliverable]: not proven (condition 4, value): the Deliverable's revision is no value the Workload's step took")
	assert.Contains(t, out, "out revision: main@sha1:4e1f")
}

// TestRestampKeepsProvenance: a template edit that keeps every step's
// input values re-renders the objects but not the input sets. The objects
// are written anew and name the set they were taken for
// (kontinue.dev/input-set); the Workload's status, provenance included,
// is not written at all; kontinue trace still proves the hop to the
// Deliverable. A gated step's re-render is the same set too, once the
// object reports on it.
func TestRestampKeepsProvenance(t *testing.T) {
	ns := newNamespace(t)
	apply(t, ns, deliverableRBAC)
	chains := contextChains(ns)
	apply(t, ns, chains)
	revision(t, ns, "c1")

	// The Workload's status settles first (its last steps catch up after
	// the Deliverable is Ready).
	var w0 *unstructured.Unstructured
	eventually(t, 30*time.Second, func() string {
		w0 = get(t, workloadGVR, ns, "app")
		time.Sleep(time.Second)
		if rv := get(t, workloadGVR, ns, "app").GetResourceVersion(); rv != w0.GetResourceVersion() {
			return "the Workload is still being written: " + rv
		}
		return ""
	})
	before := map[string]st.Provenance{}
	for _, step := range []string{"build", "deploy", "deliverable"} {
		before[step] = provenanceOf(t, w0, step)
		require.NotNil(t, before[step].Current, step)
	}
	deployed := get(t, configMapGVR, ns, "app-deploy").GetAnnotations()
	delivered := get(t, deliverableGVR, ns, "app").GetAnnotations()

	// The platform edits the deploy and Deliverable templates: the same
	// inputs render other objects.
	edited := strings.Replace(chains, "data: {image: $(image)$}", "data: {image: $(image)$, edited: \"1\"}", 1)
	edited = strings.Replace(edited, "labels: {tc-delivery: "+uniq(ns, "tcdel")+"}", "labels: {tc-delivery: "+uniq(ns, "tcdel")+", edited: \"1\"}", 1)
	require.NotEqual(t, chains, edited)
	apply(t, ns, edited)
	cm := waitFor(t, configMapGVR, ns, "app-deploy", fieldIs("1", "data", "edited"))
	d := waitFor(t, deliverableGVR, ns, "app", fieldIs("1", "metadata", "labels", "edited"))
	for name, got := range map[string][2]map[string]string{"ConfigMap app-deploy": {deployed, cm.GetAnnotations()}, "Deliverable app": {delivered, d.GetAnnotations()}} {
		was, now := got[0], got[1]
		assert.NotEqual(t, was[api.AnnotationDigest], now[api.AnnotationDigest], "%s: re-rendered, re-applied", name)
		assert.Equal(t, was[api.AnnotationInputSet], now[api.AnnotationInputSet], "%s: the same input set", name)
	}
	assert.Equal(t, before["deploy"].Current.Digest, cm.GetAnnotations()[api.AnnotationInputSet])
	assert.Equal(t, before["deliverable"].Current.Digest, d.GetAnnotations()[api.AnnotationInputSet])

	// The reconcile that applied them writes the status right after, when
	// it writes one: a second is ample to see it.
	time.Sleep(time.Second)
	w1 := get(t, workloadGVR, ns, "app")
	assert.Equal(t, w0.GetResourceVersion(), w1.GetResourceVersion(), "the Workload is not written: its status is what it was")
	for step, p := range before {
		assert.Equal(t, p, provenanceOf(t, w1, step), step)
	}

	_, root := traceOf(t, ns, "deliverable", "app", "Deliverable/"+ns+"/app", "gitops")
	require.NotNil(t, root.From)
	assert.True(t, root.From.Proven, "%+v", root.From)
	require.NotNil(t, root.From.Set)
	assert.Equal(t, before["deliverable"].Current.Digest, root.From.Set.Digest)

	// The gated build step: its object is re-rendered, processes, and
	// succeeds on the same inputs; its set stays the one that made c1.
	built := get(t, testGVR, ns, "app-build").GetAnnotations()[api.AnnotationDigest]
	apply(t, ns, strings.Replace(edited, "commit: $(source.revision)$", "commit: $(source.revision)$\n      edited: \"1\"", 1))
	waitFor(t, testGVR, ns, "app-build", fieldIs("1", "spec", "edited"))
	b := get(t, testGVR, ns, "app-build").GetAnnotations()
	assert.NotEqual(t, built, b[api.AnnotationDigest])
	assert.Equal(t, before["build"].Current.Digest, b[api.AnnotationInputSet])
	build(t, ns, "True", "img-c1")
	eventually(t, 30*time.Second, func() string {
		w := get(t, workloadGVR, ns, "app")
		if got := stepStatus(w, "build")["inputDigest"]; got != b[api.AnnotationDigest] {
			return fmt.Sprintf("the build step's outputs come from render %v, want the new render %s", got, b[api.AnnotationDigest])
		}
		p := provenanceOf(t, w, "build")
		assert.Equal(t, before["build"].Current, p.Current, "the same set, its times kept")
		assert.Nil(t, p.Latest)
		return ""
	})

	// An owner edit no step renders (a param nothing reads): a newer
	// generation, but every object is as it was, and so is every set, the
	// restamped ones too (the object on the cluster names theirs).
	deployRV, deliverableRV := get(t, configMapGVR, ns, "app-deploy").GetResourceVersion(), get(t, deliverableGVR, ns, "app").GetResourceVersion()
	buildRV := get(t, testGVR, ns, "app-build").GetResourceVersion()
	w3 := get(t, workloadGVR, ns, "app")
	sets := map[string]*st.InputSet{}
	for _, step := range []string{"source", "build", "deploy", "deliverable"} {
		sets[step] = provenanceOf(t, w3, step).Current
	}
	apply(t, ns, strings.Replace(provWorkload(ns, "c1"), "params: [{name: commit, value: c1}]", "params: [{name: commit, value: c1}, {name: unused, value: x}]", 1))
	waitOwner(t, workloadGVR, ns, "app", "Ready", "True", "")
	eventually(t, 30*time.Second, func() string {
		w := get(t, workloadGVR, ns, "app")
		if og, _, _ := unstructured.NestedInt64(w.Object, "status", "observedGeneration"); og != w.GetGeneration() || og == w3.GetGeneration() {
			return fmt.Sprintf("observedGeneration %d of %d", og, w.GetGeneration())
		}
		for step, c := range sets {
			assert.Equal(t, c, provenanceOf(t, w, step).Current, "%s: the same set after an edit it does not render", step)
		}
		return ""
	})
	assert.Equal(t, deployRV, get(t, configMapGVR, ns, "app-deploy").GetResourceVersion(), "not written again")
	assert.Equal(t, deliverableRV, get(t, deliverableGVR, ns, "app").GetResourceVersion(), "not written again")
	assert.Equal(t, buildRV, get(t, testGVR, ns, "app-build").GetResourceVersion(), "not written again")
}
