package history

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	st "kontinue.dev/kontinue/reconciler/status"
)

// A restamp of the same revision (a template edit: same input values, same
// owner generation, another set digest) is not a new revision: nothing is
// written. Anything else that left is.
func TestRestampsAreNotRevisions(t *testing.T) {
	o := Owner{Kind: "Workload", Namespace: "dev", Name: "app", UID: "u1"}
	restamp := func(s *st.InputSet) *st.InputSet {
		c := *s
		c.Digest += "-new-template"
		c.TakenAt, c.EndedAt = at(30), at(31)
		return &c
	}
	ok := buildSet("c1", st.OutcomeSucceeded, 1, at(5))
	for _, tt := range []struct {
		name   string
		before st.Provenance
		after  st.Provenance
		writes int
	}{
		{"a template edit restamps the revision: not written",
			st.Provenance{Current: ok}, st.Provenance{Current: restamp(ok)}, 0},
		{"a gated restamp still processing, the old set kept as current: nothing left yet",
			st.Provenance{Current: ok}, st.Provenance{Current: ok, Latest: func() *st.InputSet { s := restamp(ok); s.Outcome, s.EndedAt = "", nil; return s }()}, 0},
		{"a new revision: written",
			st.Provenance{Current: ok}, st.Provenance{Current: buildSet("c2", st.OutcomeSucceeded, 11, at(15))}, 1},
		{"a failed set replaced by a restamp: written (the failure is the revision's story)",
			st.Provenance{Current: buildSet("c1", st.OutcomeFailed, 1, at(5))}, st.Provenance{Current: restamp(ok)}, 1},
		{"a processing set replaced by a restamp: written, superseded",
			st.Provenance{Latest: buildSet("c1", "", 1, nil)}, st.Provenance{Current: restamp(ok)}, 1},
		{"the owner's spec changed (a param), same values: written",
			st.Provenance{Current: ok}, st.Provenance{Current: func() *st.InputSet { s := restamp(ok); s.OwnerGeneration = 2; return s }()}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			x := newRecorder()
			prev := []st.Resource{source("c1", 1, 0), build(tt.before, "img-c1")}
			next := []st.Resource{source("c1", 1, 0), build(tt.after, "img-c1")}
			x.Record(context.Background(), nil, o, prev, next)
			assert.Equal(t, tt.writes, x.writes)
		})
	}
}
