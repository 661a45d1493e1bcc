package e2e

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kontinue.dev/kontinue/cli/view"
	"kontinue.dev/kontinue/reconciler/api"
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
