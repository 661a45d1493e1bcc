package view

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kontinue.dev/kontinue/reconciler/spans"
	st "kontinue.dev/kontinue/reconciler/status"
)

func output(name string, v any) st.Output {
	p, d := st.Preview(v)
	return st.Output{Name: name, Preview: p, Digest: d}
}

// A supply chain: source -> build (image) -> config -> deploy (no outputs).
func chainOwner(buildMovedOn bool) TraceOwner {
	cfg := map[string]any{"kind": "Deployment", "image": "img-c1"}
	buildOut := "img-c1"
	if buildMovedOn {
		buildOut = "img-c2"
	}
	return TraceOwner{Kind: "Workload", Namespace: "dev", Name: "app", Status: st.OwnerStatus{Resources: []st.Resource{
		{Name: "source", StampedRef: &st.StampedRef{Kind: "GitRepository", Namespace: "dev", Name: "app"},
			Outputs:    []st.Output{output("url", "https://git/app"), output("revision", "c1")},
			Provenance: &st.Provenance{Current: &st.InputSet{Digest: "s1", OwnerGeneration: 3, Outcome: st.OutcomeSucceeded}}},
		{Name: "build", Inputs: []st.Input{{Name: "source"}}, Outputs: []st.Output{output("image", buildOut)},
			Provenance: &st.Provenance{Current: &st.InputSet{Digest: "b1", Outcome: st.OutcomeSucceeded,
				Sources: []st.SourceValue{{Name: "source", Resource: "source", URL: "https://git/app", Revision: "c1"}}}}},
		{Name: "config", Inputs: []st.Input{{Name: "build"}}, Outputs: []st.Output{output("config", cfg)},
			Provenance: &st.Provenance{Current: &st.InputSet{Digest: "c1", Outcome: st.OutcomeSucceeded,
				Images: []st.ImageValue{{Name: "image", Resource: "build", Image: "img-c1"}}}}},
		{Name: "deploy", Inputs: []st.Input{{Name: "config"}},
			Provenance: &st.Provenance{Latest: &st.InputSet{Digest: "d1", Outcome: st.OutcomeProcessing,
				Configs: []st.ConfigValue{{Name: "config", Resource: "config", Digest: st.ConfigDigest(cfg)}}}}},
	}}}
}

func TestTraceStep(t *testing.T) {
	o := chainOwner(false)
	assert.Equal(t, []string{"deploy"}, o.Leaves())
	tr, err := TraceStep(o, o.Leaves(), nil)
	require.NoError(t, err)
	var steps []string
	for _, h := range tr.Hops {
		steps = append(steps, h.Step)
	}
	assert.Equal(t, []string{"source", "build", "config", "deploy"}, steps, "upstream first")
	assert.Equal(t, "GitRepository/dev/app", tr.Hops[0].Stamped)
	assert.Equal(t, "c1", tr.Hops[0].Outputs["revision"])
	assert.Equal(t, []Link{{Input: "source: source", Resource: "source", Value: "https://git/app@c1", Matches: true}}, tr.Hops[1].Links)
	assert.True(t, tr.Hops[2].Links[0].Matches, "an image proven by value")
	assert.True(t, tr.Hops[3].Links[0].Matches, "a config proven by the digest its step's outputs show")
	assert.Equal(t, "latest", tr.Hops[3].Set)
	require.Len(t, tr.Notes, 1)
	assert.Contains(t, tr.Notes[0], "step [deploy] has not succeeded yet")

	// build has published a newer image since config took img-c1.
	o = chainOwner(true)
	tr, err = TraceStep(o, []string{"config"}, nil)
	require.NoError(t, err)
	assert.False(t, tr.Hops[len(tr.Hops)-1].Links[0].Matches)
	require.Len(t, tr.Notes, 1)
	assert.Contains(t, tr.Notes[0], "took img-c1 from step [build], which has published other outputs since")

	_, err = TraceStep(o, []string{"nope"}, nil)
	assert.ErrorContains(t, err, "has no step [nope]")
}

// stampsDeliverable adds to w a step that stamped Deliverable dev/app from
// the build's image (input set "d1"), and returns the Deliverable the
// Workload claims: its first step published revision (its set "g1"), a
// live step took it.
func stampsDeliverable(w *TraceOwner, revision string) TraceOwner {
	w.Status.Resources = append(w.Status.Resources, st.Resource{Name: "deliverable", Inputs: []st.Input{{Name: "build"}},
		StampedRef: &st.StampedRef{APIVersion: "carto.run/v1alpha1", Kind: "Deliverable", Namespace: "dev", Name: "app"},
		Provenance: &st.Provenance{Current: &st.InputSet{Digest: "d1", Outcome: st.OutcomeSucceeded,
			Images: []st.ImageValue{{Name: "image", Resource: "build", Image: "img-c1"}}}}})
	return TraceOwner{Kind: "Deliverable", Namespace: "dev", Name: "app", Status: st.OwnerStatus{Resources: []st.Resource{
		{Name: "gitops", Outputs: []st.Output{output("url", "oci://registry/app"), output("revision", revision)},
			Provenance: &st.Provenance{Current: &st.InputSet{Digest: "g1", OwnerGeneration: 1, Outcome: st.OutcomeSucceeded}}},
		{Name: "live", Inputs: []st.Input{{Name: "gitops"}},
			Provenance: &st.Provenance{Current: &st.InputSet{Digest: "l1", Outcome: st.OutcomeSucceeded,
				Sources: []st.SourceValue{{Name: "source", Resource: "gitops", URL: "oci://registry/app", Revision: revision}}}}},
	}}}
}

// upstreamOf is the Workload w as kontinue trace reads it for Deliverable
// dev/app, which carries input set applied and no traceparent.
func upstreamOf(w TraceOwner, applied string) *Upstream {
	return &Upstream{Ref: "Workload/dev/app", Workload: w, Feed: &spans.Feed{Namespace: "dev", Name: "app", UID: "w-uid",
		Steps: w.Status.Resources, Deliverable: "app", Applied: applied}}
}

// TestTraceAcrossChains: a Deliverable's first step says whether the
// Workload revision that made what it published is proven (the proof of
// spans.LinkOf, without a traceparent), with the evidence or the
// condition that failed; the Workload's chains come first when its
// status names the Deliverable.
func TestTraceAcrossChains(t *testing.T) {
	hops := func(tr Trace) []string {
		var out []string
		for _, h := range tr.Hops {
			out = append(out, h.Owner+" "+h.Step)
		}
		return out
	}
	w := chainOwner(false)
	d := stampsDeliverable(&w, "img-c1")
	tr, err := TraceStep(d, d.Leaves(), upstreamOf(w, "d1"))
	require.NoError(t, err)
	assert.Equal(t, []string{"Workload/dev/app source", "Workload/dev/app build", "Workload/dev/app config", "Workload/dev/app deploy",
		"Workload/dev/app deliverable", "Deliverable/dev/app gitops", "Deliverable/dev/app live"}, hops(tr),
		"the workload's chains first: they produced what the deliverable deploys")
	require.NotNil(t, tr.Hops[5].From)
	assert.Equal(t, Crossing{Workload: "Workload/dev/app", Step: "deliverable", Proven: true, Evidence: []string{"owner", "applied-digest", "value"},
		Revision: "https://git/app@c1", Set: w.Status.Resources[4].Provenance.Current, Output: "revision"}, *tr.Hops[5].From)
	assert.Nil(t, tr.Hops[6].From, "only a first step crosses")
	assert.Len(t, tr.Notes, 1, "the deploy step's latest set, nothing on the crossing: %v", tr.Notes)

	// A branch's commit: no value the Workload took.
	w = chainOwner(false)
	d = stampsDeliverable(&w, "main@sha1:9f")
	tr, err = TraceStep(d, d.Leaves(), upstreamOf(w, "d1"))
	require.NoError(t, err)
	c := tr.Hops[5].From
	require.NotNil(t, c)
	assert.False(t, c.Proven)
	assert.Equal(t, []string{"owner", "applied-digest"}, c.Evidence)
	assert.Equal(t, "value", c.Failed)
	assert.Equal(t, 4, c.Condition)
	assert.Contains(t, c.Reason, "no value the Workload's step took")
	assert.Contains(t, tr.Notes, "Deliverable/dev/app step [gitops]: that Workload/dev/app step [deliverable] made the revision it published is not proven (condition 4, value): "+c.Reason)

	// A set the Workload no longer records (it stamped the Deliverable
	// again since, or someone else did).
	tr, err = TraceStep(d, d.Leaves(), upstreamOf(w, "d0"))
	require.NoError(t, err)
	assert.Equal(t, "applied-digest", tr.Hops[5].From.Failed)

	// The Workload's status does not name the Deliverable: its chains are
	// not traced.
	w = chainOwner(false)
	d = stampsDeliverable(&w, "img-c1")
	w.Status.Resources[4].StampedRef.Name = "other"
	tr, err = TraceStep(d, d.Leaves(), upstreamOf(w, "d1"))
	require.NoError(t, err)
	assert.Equal(t, []string{"Deliverable/dev/app gitops", "Deliverable/dev/app live"}, hops(tr))
	assert.Equal(t, "owner", tr.Hops[0].From.Failed)
	assert.Contains(t, tr.Hops[0].From.Reason, "no step of the Workload's status names the Deliverable")

	// The Workload could not be read: the caller says why.
	tr, err = TraceStep(d, d.Leaves(), &Upstream{Ref: "Workload/dev/app", Why: "workloads.carto.run \"app\" not found"})
	require.NoError(t, err)
	assert.Equal(t, []string{"Deliverable/dev/app gitops", "Deliverable/dev/app live"}, hops(tr))
	assert.Equal(t, &Crossing{Workload: "Workload/dev/app", Failed: "owner", Condition: 1, Reason: `workloads.carto.run "app" not found`}, tr.Hops[0].From)
}

func TestTraceWithoutProvenance(t *testing.T) {
	o := TraceOwner{Kind: "Workload", Namespace: "dev", Name: "app", Status: st.OwnerStatus{Resources: []st.Resource{{Name: "a"}}}}
	tr, err := TraceStep(o, []string{"a"}, nil)
	require.NoError(t, err)
	require.Len(t, tr.Hops, 1)
	assert.Nil(t, tr.Hops[0].Input)
	assert.Contains(t, tr.Notes[0], "records no provenance")
}

// An image a verify policy checked is taken pinned to the digest checked:
// it is what its step publishes now when the step's verification of it
// (always of the value its step publishes now) names that digest, and
// older when it names another: a tag published since, or moved.
func TestTracePinnedImage(t *testing.T) {
	const d1 = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	const d2 = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	for _, tt := range []struct {
		name      string
		published string
		verified  string
		matches   bool
	}{
		{"the tag it publishes, pinned to the digest checked", "registry.example/app:v1", d1, true},
		{"a tag published since, being checked (the step holds the image it had)", "registry.example/app:v2", d2, false},
		{"the tag checked again since, another digest", "registry.example/app:v1", d2, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := TraceOwner{Kind: "Workload", Namespace: "dev", Name: "app", Status: st.OwnerStatus{Resources: []st.Resource{
				{Name: "build", Outputs: []st.Output{output("image", tt.published)},
					Provenance: &st.Provenance{Current: &st.InputSet{Digest: "b1", Outcome: st.OutcomeSucceeded}}},
				{Name: "deploy", Inputs: []st.Input{{Name: "build"}},
					Verification: []st.InputVerification{{Type: "image", Name: "image", Result: "Verified", Digest: tt.verified}},
					Provenance: &st.Provenance{Current: &st.InputSet{Digest: "d1", Outcome: st.OutcomeSucceeded,
						Images: []st.ImageValue{{Name: "image", Resource: "build", Image: "registry.example/app@" + d1}}}}},
			}}}
			tr, err := TraceStep(o, []string{"deploy"}, nil)
			require.NoError(t, err)
			h := tr.Hops[len(tr.Hops)-1]
			require.Len(t, h.Links, 1)
			assert.Equal(t, tt.matches, h.Links[0].Matches)
		})
	}
}
