package view

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	tr, err := TraceStep(o, o.Leaves(), nil, "")
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
	tr, err = TraceStep(o, []string{"config"}, nil, "")
	require.NoError(t, err)
	assert.False(t, tr.Hops[len(tr.Hops)-1].Links[0].Matches)
	require.Len(t, tr.Notes, 1)
	assert.Contains(t, tr.Notes[0], "took img-c1 from step [build], which has published other outputs since")

	_, err = TraceStep(o, []string{"nope"}, nil, "")
	assert.ErrorContains(t, err, "has no step [nope]")
}

func TestTraceAcrossChains(t *testing.T) {
	w := chainOwner(false)
	d := TraceOwner{Kind: "Deliverable", Namespace: "dev", Name: "app", Status: st.OwnerStatus{Resources: []st.Resource{
		{Name: "source", Outputs: []st.Output{output("url", "https://git/gitops"), output("revision", "g7")},
			Provenance: &st.Provenance{Current: &st.InputSet{Digest: "x", OwnerGeneration: 1, Outcome: st.OutcomeSucceeded}}},
	}}}
	tr, err := TraceStep(d, d.Leaves(), &w, "deliverable")
	require.NoError(t, err)
	require.Len(t, tr.Hops, 5)
	assert.Equal(t, "Workload/dev/app", tr.Hops[0].Owner, "the workload's chain first: it produced what the deliverable deploys")
	assert.Equal(t, "Deliverable/dev/app", tr.Hops[4].Owner)
	assert.Contains(t, tr.Notes[0], "stamped by Workload/dev/app step [deliverable]")
	assert.Contains(t, tr.Notes[0], "not proven")
}

func TestTraceWithoutProvenance(t *testing.T) {
	o := TraceOwner{Kind: "Workload", Namespace: "dev", Name: "app", Status: st.OwnerStatus{Resources: []st.Resource{{Name: "a"}}}}
	tr, err := TraceStep(o, []string{"a"}, nil, "")
	require.NoError(t, err)
	require.Len(t, tr.Hops, 1)
	assert.Nil(t, tr.Hops[0].Input)
	assert.Contains(t, tr.Notes[0], "records no provenance")
}
