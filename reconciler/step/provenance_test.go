package step

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/health"
	st "kontinue.dev/kontinue/reconciler/status"
)

func TestNextProvenance(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	gated := gatedSpec()
	plain := &api.TemplateSpec{}
	values := func(rev string) st.InputSet {
		return st.InputSet{OwnerGeneration: 2, Sources: []st.SourceValue{{Name: "source", Resource: "src", URL: "git", Revision: rev}}}
	}
	at := func(tm time.Time) *metav1.Time { m := metav1.NewTime(tm); return &m }
	set := func(d, rev, outcome string, taken, ended *metav1.Time) *st.InputSet {
		s := values(rev)
		s.Digest, s.Outcome, s.TakenAt, s.EndedAt = d, outcome, taken, ended
		return &s
	}
	cases := []struct {
		name string
		spec *api.TemplateSpec
		prev *st.Provenance
		o    Observed // Digest, Inputs, Now filled below
		ob   Observation
		want *st.Provenance
	}{{
		name: "a gated step takes its first set: processing, taken now",
		spec: gated, o: Observed{Digest: "d1", Inputs: values("r1"), Now: t0},
		ob:   Observation{Gated: true, applied: "d1", appliedOutcome: health.Processing},
		want: &st.Provenance{Latest: set("d1", "r1", st.OutcomeProcessing, at(t0), nil)},
	}, {
		name: "it succeeds: current, with the time it was taken and the time it ended",
		spec: gated, o: Observed{Digest: "d1", Inputs: values("r1"), Now: t1},
		prev: &st.Provenance{Latest: set("d1", "r1", st.OutcomeProcessing, at(t0), nil)},
		ob:   Observation{Gated: true, State: State{GoodDigest: "d1"}, applied: "d1", appliedOutcome: health.Succeeded},
		want: &st.Provenance{Current: set("d1", "r1", st.OutcomeSucceeded, at(t0), at(t1))},
	}, {
		name: "a success already recorded keeps its end",
		spec: gated, o: Observed{Digest: "d1", Inputs: values("r1"), Now: t1.Add(time.Hour)},
		prev: &st.Provenance{Current: set("d1", "r1", st.OutcomeSucceeded, at(t0), at(t1))},
		ob:   Observation{Gated: true, State: State{GoodDigest: "d1"}, applied: "d1", appliedOutcome: health.Succeeded},
		want: &st.Provenance{Current: set("d1", "r1", st.OutcomeSucceeded, at(t0), at(t1))},
	}, {
		name: "a newer set is held while the object processes another: three sets, values kept",
		spec: gated, o: Observed{Digest: "d3", Inputs: values("r3"), Now: t1},
		prev: &st.Provenance{Current: set("d1", "r1", st.OutcomeSucceeded, at(t0), at(t0)), Latest: set("d2", "r2", st.OutcomeProcessing, at(t0), nil)},
		ob:   Observation{Gated: true, State: State{GoodDigest: "d1"}, Held: true, HeldDigest: "d3", applied: "d2", appliedOutcome: health.Processing},
		want: &st.Provenance{Current: set("d1", "r1", st.OutcomeSucceeded, at(t0), at(t0)), Latest: set("d2", "r2", st.OutcomeProcessing, at(t0), nil),
			Held: set("d3", "r3", st.OutcomeHeld, at(t1), nil)},
	}, {
		name: "the held set, once applied, keeps the time it was first taken",
		spec: gated, o: Observed{Digest: "d3", Inputs: values("r3"), Now: t1.Add(time.Hour)},
		prev: &st.Provenance{Current: set("d1", "r1", st.OutcomeSucceeded, at(t0), at(t0)), Held: set("d3", "r3", st.OutcomeHeld, at(t1), nil)},
		ob:   Observation{Gated: true, State: State{GoodDigest: "d1"}, applied: "d3", appliedOutcome: health.Processing},
		want: &st.Provenance{Current: set("d1", "r1", st.OutcomeSucceeded, at(t0), at(t0)), Latest: set("d3", "r3", st.OutcomeProcessing, at(t1), nil)},
	}, {
		name: "a failure ends the latest set; current stays the last success",
		spec: gated, o: Observed{Digest: "d2", Inputs: values("r2"), Now: t1},
		prev: &st.Provenance{Current: set("d1", "r1", st.OutcomeSucceeded, at(t0), at(t0)), Latest: set("d2", "r2", st.OutcomeProcessing, at(t0), nil)},
		ob:   Observation{Gated: true, State: State{GoodDigest: "d1"}, applied: "d2", appliedOutcome: health.Failed},
		want: &st.Provenance{Current: set("d1", "r1", st.OutcomeSucceeded, at(t0), at(t0)), Latest: set("d2", "r2", st.OutcomeFailed, at(t0), at(t1))},
	}, {
		name: "a set taken before provenance was recorded keeps its digest only",
		spec: gated, o: Observed{Digest: "d2", Inputs: values("r2"), Now: t1},
		ob:   Observation{Gated: true, State: State{GoodDigest: "d1"}, applied: "d2", appliedOutcome: health.Processing},
		want: &st.Provenance{Current: &st.InputSet{Digest: "d1", Outcome: st.OutcomeSucceeded, EndedAt: at(t1)}, Latest: set("d2", "r2", st.OutcomeProcessing, at(t1), nil)},
	}, {
		name: "an ungated step: current once healthy with outputs",
		spec: plain, o: Observed{Digest: "d1", Inputs: values("r1"), Now: t1},
		prev: &st.Provenance{Latest: set("d1", "r1", st.OutcomeProcessing, at(t0), nil)},
		ob:   Observation{out: Outputs{"image": "x"}, applied: "d1", appliedOutcome: health.Succeeded},
		want: &st.Provenance{Current: set("d1", "r1", st.OutcomeSucceeded, at(t0), at(t1))},
	}, {
		name: "an ungated step healthy without outputs is still processing",
		spec: plain, o: Observed{Digest: "d1", Inputs: values("r1"), Now: t0},
		ob:   Observation{applied: "d1", appliedOutcome: health.Succeeded},
		want: &st.Provenance{Latest: set("d1", "r1", st.OutcomeProcessing, at(t0), nil)},
	}, {
		name: "an immutable step: current is the run whose outputs are published, latest the newest run",
		spec: &api.TemplateSpec{Lifecycle: api.LifecycleTekton}, o: Observed{Digest: "d2", Inputs: values("r2"), Now: t1},
		prev: &st.Provenance{Current: set("d1", "r1", st.OutcomeSucceeded, at(t0), at(t0))},
		ob:   Observation{runDigest: "d1", out: Outputs{"image": "x"}, applied: "d2", appliedOutcome: health.Processing},
		want: &st.Provenance{Current: set("d1", "r1", st.OutcomeSucceeded, at(t0), at(t0)), Latest: set("d2", "r2", st.OutcomeProcessing, at(t1), nil)},
	}, {
		name: "an ungated step whose object turns unhealthy on the set that succeeded: the set stays succeeded",
		spec: plain, o: Observed{Digest: "d1", Inputs: values("r1"), Now: t1},
		prev: &st.Provenance{Current: set("d1", "r1", st.OutcomeSucceeded, at(t0), at(t0))},
		ob:   Observation{out: Outputs{"image": "x"}, applied: "d1", appliedOutcome: health.Failed},
		want: &st.Provenance{Current: set("d1", "r1", st.OutcomeSucceeded, at(t0), at(t0))},
	}, {
		name: "a template edit re-renders the set that succeeded: the very same set, unchanged",
		spec: plain, o: Observed{Digest: "d1b", Inputs: values("r1"), Now: t1},
		prev: &st.Provenance{Current: set("d1", "r1", st.OutcomeSucceeded, at(t0), at(t0))},
		ob:   Observation{out: Outputs{"image": "x"}, applied: "d1b", appliedOutcome: health.Succeeded},
		want: &st.Provenance{Current: set("d1", "r1", st.OutcomeSucceeded, at(t0), at(t0))},
	}, {
		name: "a restamped object that names its set, under a newer render: still that set",
		spec: plain, o: Observed{Digest: "d1c", Inputs: values("r1"), Now: t1},
		prev: &st.Provenance{Current: set("d1", "r1", st.OutcomeSucceeded, at(t0), at(t0))},
		ob:   Observation{out: Outputs{"image": "x"}, applied: "d1b", appliedSaid: "d1", appliedOutcome: health.Succeeded},
		want: &st.Provenance{Current: set("d1", "r1", st.OutcomeSucceeded, at(t0), at(t0))},
	}, {
		name: "new values are a new set",
		spec: plain, o: Observed{Digest: "d2", Inputs: values("r2"), Now: t1},
		prev: &st.Provenance{Current: set("d1", "r1", st.OutcomeSucceeded, at(t0), at(t0))},
		ob:   Observation{out: Outputs{"image": "x"}, applied: "d2", appliedOutcome: health.Succeeded},
		want: &st.Provenance{Current: set("d2", "r2", st.OutcomeSucceeded, at(t1), at(t1))},
	}, {
		name: "the same values for a newer owner generation are a new set",
		spec: plain, o: Observed{Digest: "d1b", Inputs: func() st.InputSet { v := values("r1"); v.OwnerGeneration = 3; return v }(), Now: t1},
		prev: &st.Provenance{Current: set("d1", "r1", st.OutcomeSucceeded, at(t0), at(t0))},
		ob:   Observation{out: Outputs{"image": "x"}, applied: "d1b", appliedOutcome: health.Succeeded},
		want: &st.Provenance{Current: func() *st.InputSet {
			s := set("d1b", "r1", st.OutcomeSucceeded, at(t1), at(t1))
			s.OwnerGeneration = 3
			return s
		}()},
	}, {
		name: "a set recorded without values (no generation) is never restamped",
		spec: plain, o: Observed{Digest: "d1b", Inputs: values("r1"), Now: t1},
		prev: &st.Provenance{Current: &st.InputSet{Digest: "d1", Outcome: st.OutcomeSucceeded, EndedAt: at(t0)}},
		ob:   Observation{out: Outputs{"image": "x"}, applied: "d1b", appliedOutcome: health.Succeeded},
		want: &st.Provenance{Current: set("d1b", "r1", st.OutcomeSucceeded, at(t1), at(t1))},
	}, {
		name: "a gated re-render of the set that succeeded, processing: no latest set",
		spec: gated, o: Observed{Digest: "d1b", Inputs: values("r1"), Now: t1},
		prev: &st.Provenance{Current: set("d1", "r1", st.OutcomeSucceeded, at(t0), at(t0))},
		ob:   Observation{Gated: true, State: State{GoodDigest: "d1"}, applied: "d1b", appliedOutcome: health.Processing},
		want: &st.Provenance{Current: set("d1", "r1", st.OutcomeSucceeded, at(t0), at(t0))},
	}, {
		name: "a gated re-render that fails: the set stays succeeded (the step's condition says it)",
		spec: gated, o: Observed{Digest: "d1b", Inputs: values("r1"), Now: t1},
		prev: &st.Provenance{Current: set("d1", "r1", st.OutcomeSucceeded, at(t0), at(t0))},
		ob:   Observation{Gated: true, State: State{GoodDigest: "d1"}, applied: "d1b", appliedOutcome: health.Failed},
		want: &st.Provenance{Current: set("d1", "r1", st.OutcomeSucceeded, at(t0), at(t0))},
	}, {
		name: "the re-render succeeds: the gated step's good render moves, its set does not",
		spec: gated, o: Observed{Digest: "d1b", Inputs: values("r1"), Now: t1},
		prev: &st.Provenance{Current: set("d1", "r1", st.OutcomeSucceeded, at(t0), at(t0))},
		ob:   Observation{Gated: true, State: State{GoodDigest: "d1b"}, applied: "d1b", appliedOutcome: health.Succeeded},
		want: &st.Provenance{Current: set("d1", "r1", st.OutcomeSucceeded, at(t0), at(t0))},
	}, {
		name: "a held re-render of a set already recorded is no held set",
		spec: gated, o: Observed{Digest: "d2b", Inputs: values("r2"), Now: t1},
		prev: &st.Provenance{Current: set("d1", "r1", st.OutcomeSucceeded, at(t0), at(t0)), Latest: set("d2", "r2", st.OutcomeProcessing, at(t0), nil)},
		ob:   Observation{Gated: true, State: State{GoodDigest: "d1"}, Held: true, HeldDigest: "d2b", applied: "d2", appliedOutcome: health.Processing},
		want: &st.Provenance{Current: set("d1", "r1", st.OutcomeSucceeded, at(t0), at(t0)), Latest: set("d2", "r2", st.OutcomeProcessing, at(t0), nil)},
	}, {
		name: "an immutable step's new run of the set whose run succeeded: the same set",
		spec: &api.TemplateSpec{Lifecycle: api.LifecycleTekton}, o: Observed{Digest: "d1b", Inputs: values("r1"), Now: t1},
		prev: &st.Provenance{Current: set("d1", "r1", st.OutcomeSucceeded, at(t0), at(t0))},
		ob:   Observation{runDigest: "d1", out: Outputs{"image": "x"}, applied: "d1b", appliedSaid: "d1", appliedOutcome: health.Processing},
		want: &st.Provenance{Current: set("d1", "r1", st.OutcomeSucceeded, at(t0), at(t0))},
	}, {
		name: "…and once it succeeds, its outputs are that set's still",
		spec: &api.TemplateSpec{Lifecycle: api.LifecycleTekton}, o: Observed{Digest: "d1b", Inputs: values("r1"), Now: t1},
		prev: &st.Provenance{Current: set("d1", "r1", st.OutcomeSucceeded, at(t0), at(t0))},
		ob:   Observation{runDigest: "d1b", runSaid: "d1", out: Outputs{"image": "y"}, applied: "d1b", appliedSaid: "d1", appliedOutcome: health.Succeeded},
		want: &st.Provenance{Current: set("d1", "r1", st.OutcomeSucceeded, at(t0), at(t0))},
	}, {
		name: "nothing applied, nothing known: no provenance",
		spec: plain, o: Observed{Digest: "d1", Inputs: values("r1"), Now: t0},
		want: nil,
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.o.Spec, c.o.PrevProvenance = c.spec, c.prev
			got := NextProvenance(c.o, c.ob)
			assert.Equal(t, c.want, got)
		})
	}
}

// Through the gated decisions themselves: Admit holding a set while the
// live object processes another, then recording that one's success.
func TestProvenanceThroughGatedDecisions(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	o := observed(gatedSpec(), "d2", State{})
	o.Now = t0
	o.Inputs = st.InputSet{Sources: []st.SourceValue{{Name: "s", Resource: "src", Revision: "r2"}}}
	o.PrevProvenance = &st.Provenance{Latest: &st.InputSet{Digest: "d1", Outcome: st.OutcomeProcessing, Sources: []st.SourceValue{{Name: "s", Resource: "src", Revision: "r1"}}}}
	ob := Admit(o, object("app", "d1", processing()))
	require.True(t, ob.Held)
	p := NextProvenance(o, ob)
	require.NotNil(t, p.Latest)
	require.NotNil(t, p.Held)
	assert.Nil(t, p.Current)
	assert.Equal(t, "r1", p.Latest.Sources[0].Revision)
	assert.Equal(t, "r2", p.Held.Sources[0].Revision)
	assert.Equal(t, st.OutcomeHeld, p.Held.Outcome)

	// d1 succeeds: Admit records it (holding d2 one more reconcile).
	o.PrevProvenance, o.Now = p, t0.Add(time.Minute)
	ob = Admit(o, object("app", "d1", succeededOn("img-1")))
	p = NextProvenance(o, ob)
	require.NotNil(t, p.Current)
	assert.Equal(t, "r1", p.Current.Sources[0].Revision)
	assert.Equal(t, st.OutcomeSucceeded, p.Current.Outcome)
	assert.Equal(t, t0.Add(time.Minute), p.Current.EndedAt.Time)
	assert.Nil(t, p.Latest)
	require.NotNil(t, p.Held)
	assert.Equal(t, t0, p.Held.TakenAt.Time, "a held set keeps the time it was first taken")
}

// A failure seen as a newer set arrives is recorded (one reconcile's hold)
// before the newer set replaces it on the object; then the set goes in.
func TestAdmitRecordsAFailureBeforeTheNextSet(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	o := observed(gatedSpec(), "d2", State{GoodDigest: "d0", Good: Outputs{"image": "img-0"}})
	o.Now = t0
	o.PrevProvenance = &st.Provenance{Current: &st.InputSet{Digest: "d0", Outcome: st.OutcomeSucceeded},
		Latest: &st.InputSet{Digest: "d1", Outcome: st.OutcomeProcessing}}
	live := object("app", "d1", failedOn())
	ob := Admit(o, live)
	require.True(t, ob.Held, "the failure of d1 is recorded first")
	p := NextProvenance(o, ob)
	require.NotNil(t, p.Latest)
	assert.Equal(t, "d1", p.Latest.Digest)
	assert.Equal(t, st.OutcomeFailed, p.Latest.Outcome)
	assert.Equal(t, t0, p.Latest.EndedAt.Time)

	o.PrevProvenance = p
	assert.False(t, Admit(o, live).Held, "once recorded, the newer set goes in")
	o.PrevProvenance = nil
	assert.False(t, Admit(o, live).Held, "a step without provenance yet does not wait for it")
}

// A failed re-render of the set whose outputs stand (a template edit gone
// wrong) is the step's condition: it does not hold a newer set for a
// failure provenance never records.
func TestAdmitLetsANewSetPastAFailedRestamp(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	v := func(rev string) st.InputSet {
		return st.InputSet{OwnerGeneration: 4, Sources: []st.SourceValue{{Name: "s", Resource: "src", Revision: rev}}}
	}
	o := observed(gatedSpec(), "d2", State{GoodDigest: "d1", Good: Outputs{"image": "img-1"}})
	o.Now, o.Inputs = t0, v("r2")
	cur := v("r1")
	cur.Digest, cur.Outcome = "d1", st.OutcomeSucceeded
	o.PrevProvenance = &st.Provenance{Current: &cur}
	live := object("app", "d1b", failedOn())
	live.SetAnnotations(map[string]string{AnnotationDigest: "d1b", AnnotationInputSet: "d1"})
	ob := Admit(o, live)
	assert.False(t, ob.Held, "nothing to record: the newer set goes in")
	p := NextProvenance(o, ob)
	assert.Equal(t, &st.Provenance{Current: &cur}, p)

	// The same object naming no set (written before objects named theirs)
	// is a set of its own: its failure is recorded first, as before.
	live.SetAnnotations(map[string]string{AnnotationDigest: "d1b"})
	require.True(t, Admit(o, live).Held)
}

func TestSetID(t *testing.T) {
	v := func(gen int64, rev string) st.InputSet {
		return st.InputSet{OwnerGeneration: gen, Images: []st.ImageValue{{Name: "i", Resource: "build", Image: rev}}}
	}
	with := func(d string, s st.InputSet) *st.InputSet { s.Digest = d; return &s }
	failed := func(s *st.InputSet) *st.InputSet { s.Outcome = st.OutcomeFailed; return s }
	for _, c := range []struct {
		name string
		prev *st.Provenance
		in   st.InputSet
		live string // the set the live object of this render names
		want string
	}{
		{"no provenance: the render", nil, v(1, "a"), "", "r"},
		{"a set of that render", &st.Provenance{Current: with("x", v(1, "a")), Latest: with("r", v(1, "b"))}, v(1, "a"), "", "r"},
		{"a restamp of current", &st.Provenance{Current: with("x", v(1, "a"))}, v(1, "a"), "", "x"},
		{"a restamp of an unfinished latest", &st.Provenance{Current: with("x", v(1, "a")), Latest: with("y", v(1, "b"))}, v(1, "b"), "", "y"},
		{"a failed set is not taken again: the fix is a new set", &st.Provenance{Current: with("x", v(1, "a")), Latest: failed(with("y", v(1, "b")))}, v(1, "b"), "", "r"},
		{"other values", &st.Provenance{Current: with("x", v(1, "a"))}, v(1, "b"), "", "r"},
		{"another generation", &st.Provenance{Current: with("x", v(1, "a"))}, v(2, "a"), "", "r"},
		{"another generation, this render already on the cluster for current", &st.Provenance{Current: with("x", v(1, "a"))}, v(2, "a"), "x", "x"},
		{"the live render names a set of other values", &st.Provenance{Current: with("x", v(1, "a"))}, v(2, "b"), "x", "r"},
		{"the live render names a set the step does not record", &st.Provenance{Current: with("x", v(1, "a"))}, v(2, "a"), "z", "r"},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, SetID(Observed{Digest: "r", Inputs: c.in, PrevProvenance: c.prev, LiveSet: c.live}))
		})
	}
}

// A live object whose set name was edited to a set no object can be on
// (the held one) is taken by its render: the success is the set that was
// applied, with its values.
func TestAnEditedSetNameIsNotTaken(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	v := func(rev string) st.InputSet {
		return st.InputSet{OwnerGeneration: 4, Sources: []st.SourceValue{{Name: "s", Resource: "src", Revision: rev}}}
	}
	named := func(d, rev, outcome string) *st.InputSet {
		s := v(rev)
		s.Digest, s.Outcome = d, outcome
		return &s
	}
	o := observed(gatedSpec(), "d3", State{GoodDigest: "d1", Good: Outputs{"image": "img-1"}})
	o.Now, o.Inputs = t0, v("r3")
	o.PrevProvenance = &st.Provenance{Current: named("d1", "r1", st.OutcomeSucceeded), Latest: named("d2", "r2", st.OutcomeProcessing),
		Held: named("d3", "r3", st.OutcomeHeld)}
	live := object("app", "d2", succeededOn("img-2"))
	live.SetAnnotations(map[string]string{AnnotationDigest: "d2", AnnotationInputSet: "d3"})
	ob := Admit(o, live)
	require.True(t, ob.Held, "d2's success is recorded first")
	p := NextProvenance(o, ob)
	require.NotNil(t, p.Current)
	assert.Equal(t, "d2", p.Current.Digest)
	assert.Equal(t, "r2", p.Current.Sources[0].Revision)
}

// The live object is read for its set only when neither the render nor
// the values and generation name a recorded set: a restamped step reads
// nothing more per reconcile.
func TestNeedsLiveSet(t *testing.T) {
	v := func(gen int64) st.InputSet {
		return st.InputSet{OwnerGeneration: gen, Images: []st.ImageValue{{Name: "i", Resource: "build", Image: "a"}}}
	}
	cur := v(1)
	cur.Digest = "x"
	p := &st.Provenance{Current: &cur}
	assert.False(t, NeedsLiveSet(Observed{Digest: "r", Inputs: v(1)}), "no provenance: a new set")
	assert.False(t, NeedsLiveSet(Observed{Digest: "x", Inputs: v(2), PrevProvenance: p}), "the render is known")
	assert.False(t, NeedsLiveSet(Observed{Digest: "r", Inputs: v(1), PrevProvenance: p}), "a restamp of current")
	assert.True(t, NeedsLiveSet(Observed{Digest: "r", Inputs: v(2), PrevProvenance: p}), "a newer generation on a restamped render")
}
