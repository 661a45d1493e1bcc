package status

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestValue(t *testing.T) {
	assert.Equal(t, "abc", Value("abc"))
	assert.Equal(t, "", Value(nil))
	assert.Equal(t, `{"sha":"x"}`, Value(map[string]any{"sha": "x"}))
	long := Value(strings.Repeat("é", ValueLimit))
	assert.LessOrEqual(t, len(long), ValueLimit)
	assert.True(t, strings.HasSuffix(long, TruncatedMarker))
	_, d := Preview(map[string]any{"a": 1})
	assert.Equal(t, d, ConfigDigest(map[string]any{"a": 1}), "a config is recorded by the digest its step's outputs show")
}

func TestTransitions(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(90 * time.Second))
	set := func(d, outcome string, ended *metav1.Time) *InputSet {
		return &InputSet{Digest: d, Outcome: outcome, TakenAt: &t0, EndedAt: ended}
	}
	res := func(p *Provenance) []Resource { return []Resource{{Name: "build", Provenance: p}} }
	cases := []struct {
		name       string
		prev, next []Resource
		want       []Transition
	}{
		{"a success counts with its lead time",
			res(&Provenance{Latest: set("d1", OutcomeProcessing, nil)}), res(&Provenance{Current: set("d1", OutcomeSucceeded, &t1)}),
			[]Transition{{Step: "build", Outcome: OutcomeSucceeded, LeadTime: 90 * time.Second}}},
		{"the same status again counts nothing",
			res(&Provenance{Current: set("d1", OutcomeSucceeded, &t1)}), res(&Provenance{Current: set("d1", OutcomeSucceeded, &t1)}), nil},
		{"a failure counts once",
			res(&Provenance{Latest: set("d2", OutcomeProcessing, nil)}), res(&Provenance{Latest: set("d2", OutcomeFailed, &t1)}),
			[]Transition{{Step: "build", Outcome: OutcomeFailed}}},
		{"a held set replaced by a newer one is superseded",
			res(&Provenance{Latest: set("d2", OutcomeProcessing, nil), Held: set("d3", OutcomeHeld, nil)}),
			res(&Provenance{Latest: set("d2", OutcomeProcessing, nil), Held: set("d4", OutcomeHeld, nil)}),
			[]Transition{{Step: "build", Outcome: OutcomeSuperseded}}},
		{"a failed set replaced is not superseded",
			res(&Provenance{Latest: set("d2", OutcomeFailed, &t1)}), res(&Provenance{Latest: set("d3", OutcomeProcessing, nil)}), nil},
		{"a success the previous status did not have (first write)",
			nil, res(&Provenance{Current: set("d1", OutcomeSucceeded, &t1)}),
			[]Transition{{Step: "build", Outcome: OutcomeSucceeded, LeadTime: 90 * time.Second}}},
		{"a success of unknown start has no lead time",
			nil, res(&Provenance{Current: &InputSet{Digest: "d1", Outcome: OutcomeSucceeded, EndedAt: &t1}}),
			[]Transition{{Step: "build", Outcome: OutcomeSucceeded, LeadTime: -1}}},
		{"a success within the second it was taken has a lead time of 0",
			nil, res(&Provenance{Current: &InputSet{Digest: "d1", Outcome: OutcomeSucceeded, TakenAt: &t0, EndedAt: &t0}}),
			[]Transition{{Step: "build", Outcome: OutcomeSucceeded}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, Transitions(c.prev, c.next))
		})
	}
}

func TestChainLeadTimes(t *testing.T) {
	at := func(s int) *metav1.Time { m := metav1.NewTime(time.Date(2026, 1, 2, 3, 0, s, 0, time.UTC)); return &m }
	out := func(name, v string, ltt *metav1.Time) Output {
		p, d := Preview(v)
		return Output{Name: name, Preview: p, Digest: d, LastTransitionTime: *ltt}
	}
	// source (revision c1 seen at :00) -> build (image, ended :20) -> deploy (ended :30).
	chain := func(buildTook, deployTook string) []Resource {
		return []Resource{
			{Name: "source", Outputs: []Output{out("url", "git", at(0)), out("revision", "c1", at(0))},
				Provenance: &Provenance{Current: &InputSet{Digest: "s", TakenAt: at(-60), EndedAt: at(-59), Outcome: OutcomeSucceeded}}},
			{Name: "build", Inputs: []Input{{Name: "source"}}, Outputs: []Output{out("image", "img-c1", at(20))},
				Provenance: &Provenance{Current: &InputSet{Digest: "b", TakenAt: at(1), EndedAt: at(20), Outcome: OutcomeSucceeded,
					Sources: []SourceValue{{Name: "source", Resource: "source", URL: "git", Revision: buildTook}}}}},
			{Name: "deploy", Inputs: []Input{{Name: "build"}},
				Provenance: &Provenance{Current: &InputSet{Digest: "d", TakenAt: at(21), EndedAt: at(30), Outcome: OutcomeSucceeded,
					Images: []ImageValue{{Name: "image", Resource: "build", Image: deployTook}}}}},
		}
	}
	before := chain("c1", "img-c1")
	before[2].Provenance = &Provenance{Latest: &InputSet{Digest: "d", TakenAt: at(21), Outcome: OutcomeProcessing}}
	assert.Equal(t, []time.Duration{30 * time.Second}, ChainLeadTimes(before, chain("c1", "img-c1")),
		"from the source's new revision to the last step's success")
	assert.Empty(t, ChainLeadTimes(chain("c1", "img-c1"), chain("c1", "img-c1")), "counted once")
	assert.Empty(t, ChainLeadTimes(before, chain("c1", "img-c0")), "deploy ran an older image: not proven, not counted")
	assert.Empty(t, ChainLeadTimes(before, chain("c0", "img-c1")), "build was made from another revision than the source shows")
}
