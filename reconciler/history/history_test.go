package history

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	st "kontinue.dev/kontinue/reconciler/status"
)

const repo = "https://git.example/app.git"

var t0 = time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)

func at(s int) *metav1.Time { t := metav1.NewTime(t0.Add(time.Duration(s) * time.Second)); return &t }

func outputs(when int, kv ...string) []st.Output {
	var out []st.Output
	for i := 0; i < len(kv); i += 2 {
		p, d := st.Preview(kv[i+1])
		out = append(out, st.Output{Name: kv[i], Preview: p, Digest: d, LastTransitionTime: *at(when)})
	}
	return out
}

// source is a first step that published commit at when, from its set of
// generation gen.
func source(commit string, gen int64, when int) st.Resource {
	return st.Resource{Name: "source", Outputs: outputs(when, "url", repo, "revision", commit),
		Provenance: &st.Provenance{Current: &st.InputSet{Digest: "src-" + commit, OwnerGeneration: gen, TakenAt: at(when),
			EndedAt: at(when), Outcome: st.OutcomeSucceeded}}}
}

func buildSet(commit, outcome string, taken int, ended *metav1.Time) *st.InputSet {
	return &st.InputSet{Digest: "build-" + commit, Sources: []st.SourceValue{{Name: "source", Resource: "source", URL: repo, Revision: commit}},
		TakenAt: at(taken), EndedAt: ended, Outcome: outcome}
}

func deploySet(image, outcome string, taken int, ended *metav1.Time) *st.InputSet {
	return &st.InputSet{Digest: "deploy-" + image, Images: []st.ImageValue{{Name: "image", Resource: "build", Image: image}},
		TakenAt: at(taken), EndedAt: ended, Outcome: outcome}
}

func build(p st.Provenance, image string, conds ...metav1.Condition) st.Resource {
	r := st.Resource{Name: "build", Inputs: []st.Input{{Name: "source"}}, Provenance: &p, Conditions: conds}
	if image != "" {
		r.Outputs = outputs(0, "image", image)
	}
	return r
}

func deploy(p st.Provenance) st.Resource {
	return st.Resource{Name: "deploy", Inputs: []st.Input{{Name: "build"}}, Provenance: &p}
}

var failed = metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "BuildFailed", Message: "tests failed"}

// summary is a history as "label: step=outcome ..." lines, newest first.
func summary(h History) []string {
	var out []string
	for _, r := range h.Revisions {
		line := r.Label() + ":"
		for _, c := range r.Steps {
			line += " " + c.Step + "=" + c.Outcome
			if c.Reason != "" {
				line += "(" + c.Reason + ")"
			}
			if c.Shadowed {
				line += "[shadow]"
			}
		}
		out = append(out, line)
	}
	return out
}

// TestRecordRevisions walks TestProvenance's story status by status: c1
// goes through, c2 fails at the build while c3 is held and replaced by c4
// (superseded), c4 goes through. Each status write's events are folded in
// as the Recorder does; View adds what the last status still shows.
func TestRecordRevisions(t *testing.T) {
	c1src := source("c1", 1, 0)
	statuses := [][]st.Resource{
		// c1 taken by the build.
		{c1src, build(st.Provenance{Latest: buildSet("c1", st.OutcomeProcessing, 1, nil)}, "")},
		// c1 built and deployed.
		{c1src, build(st.Provenance{Current: buildSet("c1", st.OutcomeSucceeded, 1, at(5))}, "img-c1"),
			deploy(st.Provenance{Current: deploySet("img-c1", st.OutcomeSucceeded, 5, at(6))})},
		// c2 taken, c3 held.
		{source("c3", 3, 20), build(st.Provenance{Current: buildSet("c1", st.OutcomeSucceeded, 1, at(5)),
			Latest: buildSet("c2", st.OutcomeProcessing, 10, nil), Held: buildSet("c3", st.OutcomeHeld, 20, nil)}, "img-c1"),
			deploy(st.Provenance{Current: deploySet("img-c1", st.OutcomeSucceeded, 5, at(6))})},
		// c4 replaces c3.
		{source("c4", 4, 30), build(st.Provenance{Current: buildSet("c1", st.OutcomeSucceeded, 1, at(5)),
			Latest: buildSet("c2", st.OutcomeProcessing, 10, nil), Held: buildSet("c4", st.OutcomeHeld, 30, nil)}, "img-c1"),
			deploy(st.Provenance{Current: deploySet("img-c1", st.OutcomeSucceeded, 5, at(6))})},
		// c2 fails.
		{source("c4", 4, 30), build(st.Provenance{Current: buildSet("c1", st.OutcomeSucceeded, 1, at(5)),
			Latest: buildSet("c2", st.OutcomeFailed, 10, at(40)), Held: buildSet("c4", st.OutcomeHeld, 30, nil)}, "img-c1", failed),
			deploy(st.Provenance{Current: deploySet("img-c1", st.OutcomeSucceeded, 5, at(6))})},
		// c4 goes in, succeeds, deployed.
		{source("c4", 4, 30), build(st.Provenance{Current: buildSet("c4", st.OutcomeSucceeded, 41, at(50))}, "img-c4"),
			deploy(st.Provenance{Current: deploySet("img-c4", st.OutcomeSucceeded, 50, at(51))})},
	}
	var h History
	var prev []st.Resource
	var writes []int
	for i, next := range statuses {
		var changed bool
		h, changed = Apply(h, Events(prev, next, t0.Add(time.Duration(10*i)*time.Second)), 10)
		if changed {
			writes = append(writes, i)
		}
		// The same status again: nothing happened, nothing to write.
		assert.Empty(t, Events(next, next, t0), "status %d written again", i)
		prev = next
	}
	assert.Equal(t, []int{2, 3, 5}, writes, "written when a set left the status: not for the first revision, not for c2's failure while the status shows it")
	assert.Equal(t, []string{
		repo + "@c3: source=Succeeded build=Superseded",
		repo + "@c2: build=Failed(BuildFailed)",
		repo + "@c1: source=Succeeded build=Succeeded deploy=Succeeded",
	}, summary(h), "what left the status")
	c2 := h.Revisions[1].Cell("build")
	require.NotNil(t, c2)
	assert.Equal(t, "tests failed", c2.Message)
	assert.Equal(t, at(10), c2.TakenAt)
	assert.Equal(t, at(40), c2.EndedAt)
	assert.Equal(t, "build-c2", c2.Digest)
	sup := h.Revisions[0].Cell("build")
	require.NotNil(t, sup)
	assert.Equal(t, at(30), sup.EndedAt, "superseded when the status that dropped it was written")

	last := statuses[len(statuses)-1]
	assert.Equal(t, []string{
		repo + "@c4: source=Succeeded build=Succeeded deploy=Succeeded",
		repo + "@c3: source=Succeeded build=Superseded",
		repo + "@c2: build=Failed(BuildFailed)",
		repo + "@c1: source=Succeeded build=Succeeded deploy=Succeeded",
	}, summary(View(h, last, 10)))
	assert.Len(t, h.Revisions, 3, "View writes nothing back")

	// Bounded: the newest two.
	h2, changed := Apply(h, nil, 2)
	assert.True(t, changed)
	assert.Equal(t, []string{repo + "@c3", repo + "@c2"}, []string{h2.Revisions[0].Label(), h2.Revisions[1].Label()})
	assert.Len(t, View(h, last, 2).Revisions, 2)
}

// TestRecordTracesThroughHistory: a deploy step's set still shown after
// the build moved on is traced to its revision by the build's recorded
// outputs, not to the build's current.
func TestRecordTracesThroughHistory(t *testing.T) {
	s1 := []st.Resource{source("c1", 1, 0), build(st.Provenance{Current: buildSet("c1", st.OutcomeSucceeded, 1, at(5))}, "img-c1"),
		deploy(st.Provenance{Latest: deploySet("img-c1", st.OutcomeProcessing, 5, nil)})}
	s2 := []st.Resource{source("c2", 2, 20), build(st.Provenance{Current: buildSet("c2", st.OutcomeSucceeded, 21, at(25))}, "img-c2"),
		deploy(st.Provenance{Current: deploySet("img-c1", st.OutcomeSucceeded, 5, at(26)), Held: deploySet("img-c2", st.OutcomeHeld, 25, nil)})}
	h, changed := Apply(History{}, Events(s1, s2, t0), 10)
	require.True(t, changed)
	assert.Equal(t, []string{repo + "@c1: source=Succeeded build=Succeeded"}, summary(h))
	assert.Equal(t, []string{
		repo + "@c2: source=Succeeded build=Succeeded deploy=Held",
		repo + "@c1: source=Succeeded build=Succeeded deploy=Succeeded",
	}, summary(View(h, s2, 10)))
}

// TestRecordSourceCommitsOfOneSet: a source controller's new commit
// changes a first step's outputs, not its set: still a new revision.
func TestRecordSourceCommitsOfOneSet(t *testing.T) {
	one := func(commit string, when int) st.Resource {
		r := source(commit, 1, when)
		r.Provenance.Current.Digest = "src"
		r.Provenance.Current.TakenAt = at(0)
		return r
	}
	prev, next := []st.Resource{one("c1", 0)}, []st.Resource{one("c2", 60)}
	ev := Events(prev, next, t0)
	require.Len(t, ev, 1)
	h, changed := Apply(History{}, ev, 10)
	require.True(t, changed)
	v := View(h, next, 10)
	assert.Equal(t, []string{repo + "@c2: source=Succeeded", repo + "@c1: source=Succeeded"}, summary(v))
	assert.Equal(t, at(60), v.Revisions[0].Since, "the revision is as new as the commit, not as the set")
}

// TestRecordShadow: a failed set whose step served the shadow's outputs.
func TestRecordShadow(t *testing.T) {
	prev := []st.Resource{source("c2", 2, 0), build(st.Provenance{Current: buildSet("c1", st.OutcomeSucceeded, 0, at(1)),
		Latest: buildSet("c2", st.OutcomeFailed, 2, at(9))}, "img-c1", failed)}
	prev[1].ServedBy = "shadow"
	assert.Equal(t, repo+"@c2: source=Succeeded build=Failed(BuildFailed)[shadow]", summary(View(History{}, prev, 10))[0])
	next := []st.Resource{source("c3", 3, 10), build(st.Provenance{Current: buildSet("c1", st.OutcomeSucceeded, 0, at(1)),
		Latest: buildSet("c3", st.OutcomeProcessing, 10, nil)}, "img-c1")}
	h, changed := Apply(History{}, Events(prev, next, t0), 10)
	assert.True(t, changed)
	assert.Equal(t, []string{repo + "@c2: source=Succeeded build=Failed(BuildFailed)[shadow]"}, summary(h))
}

func TestMessageCut(t *testing.T) {
	c := cellOf(Event{Step: "s", Set: st.InputSet{Outcome: st.OutcomeFailed}, Message: strings.Repeat("é", 300)})
	assert.LessOrEqual(t, len(c.Message), MessageLimit+len(st.TruncatedMarker))
	assert.True(t, strings.HasSuffix(c.Message, st.TruncatedMarker))
}

func TestName(t *testing.T) {
	assert.Equal(t, "kontinue-history.workload.app", Name("Workload", "app"))
	assert.NotEqual(t, Name("Workload", "app"), Name("Deliverable", "app"))
	long := strings.Repeat("a", 253)
	n := Name("Deliverable", long)
	assert.Len(t, n, 253)
	assert.NotEqual(t, n, Name("Deliverable", long[:252]+"b"))
	// Long names with '.' or '-' where the name is cut (index 210 of a
	// Workload's name) stay valid names.
	a := func(n int) string { return strings.Repeat("a", n) }
	for _, name := range []string{
		a(253), a(210) + "." + a(42), a(209) + "." + a(43), a(209) + "-" + a(43),
		a(200) + strings.Repeat(".a-a", 13), a(201) + strings.Repeat("-a.a", 13), a(210) + "--" + a(41), a(100) + "." + a(100) + "-" + a(51),
	} {
		require.Empty(t, validation.IsDNS1123Subdomain(name), "an owner's name: %s", name)
		for _, kind := range []string{"Workload", "Deliverable"} {
			assert.Empty(t, validation.IsDNS1123Subdomain(Name(kind, name)), "%s %s: %s", kind, name, Name(kind, name))
		}
	}
}

// TestTruncatedProvenance: a step whose provenance was dropped to fit the
// status has not seen its sets leave.
func TestTruncatedProvenance(t *testing.T) {
	prev := []st.Resource{source("c1", 1, 0), build(st.Provenance{Current: buildSet("c1", st.OutcomeSucceeded, 1, at(5)),
		Latest: buildSet("c2", st.OutcomeProcessing, 6, nil)}, "img-c1")}
	next := []st.Resource{source("c1", 1, 0), build(st.Provenance{}, "img-c1")}
	next[1].Provenance = nil
	assert.Empty(t, Events(prev, next, t0))
	assert.Empty(t, Ended(prev, next, t0))
}

// lattice is a chain of n steps, each after the first two reading the
// images of the two before it, every step's current set publishing one.
func lattice(n int) []st.Resource {
	rs := make([]st.Resource, n)
	for i := range rs {
		name := "s" + strconv.Itoa(i)
		set := &st.InputSet{Digest: "set-" + name, Outcome: st.OutcomeSucceeded, TakenAt: at(i), EndedAt: at(i)}
		r := st.Resource{Name: name, Outputs: outputs(i, "image", "img-"+name), Provenance: &st.Provenance{Current: set}}
		for _, j := range []int{i - 1, i - 2} {
			if j >= 0 && i >= 2 {
				up := "s" + strconv.Itoa(j)
				r.Inputs = append(r.Inputs, st.Input{Name: up})
				set.Images = append(set.Images, st.ImageValue{Name: up, Resource: up, Image: "img-" + up})
			}
		}
		rs[i] = r
	}
	return rs
}

// TestRootsShared: tracing the last step of a chain whose steps each read
// the two before visits each step once, not once per path (exponential).
func TestRootsShared(t *testing.T) {
	for _, n := range []int{20, 40} {
		rs := lattice(n)
		last := &rs[n-1]
		w := (&History{}).walk(rs)
		roots := w.roots(last.Name, last.Provenance.Current, 0)
		require.LessOrEqual(t, w.visits, n, "%d steps: each step's set traced once", n)
		assert.Equal(t, []string{"s0@" + outHash(rs[0].Outputs), "s1@" + outHash(rs[1].Outputs)},
			[]string{roots[0].Key, roots[1].Key}, "%d steps", n)
		assert.Len(t, roots, 2)
		assert.Equal(t, roots, RevisionOf(rs, last.Name, last.Provenance.Current).Roots)
	}
	// Apply and View walk the same way: the two first steps' revisions
	// (each its own) and theirs together, which every later step took.
	v := View(History{}, lattice(40), 10)
	require.Len(t, v.Revisions, 3)
	assert.Len(t, v.Revisions[0].Roots, 2)
	assert.Len(t, v.Revisions[0].Steps, 38)
}

// TestEncodeBounded: a history of many revisions of a long chain, failure
// messages at their longest, is cut to its newest revisions under
// MaxBytes, as many as fit.
func TestEncodeBounded(t *testing.T) {
	var h History
	for i := 0; i < 300; i++ {
		r := Revision{Roots: []Root{{Key: "source@" + strconv.Itoa(i), Label: repo + "@c" + strconv.Itoa(i)}}, Since: at(300 - i)}
		for s := 0; s < 40; s++ {
			r.Steps = append(r.Steps, Cell{Step: "step-" + strconv.Itoa(s), Digest: "sha256:" + strings.Repeat("d", 64),
				Outcome: st.OutcomeFailed, TakenAt: at(i), EndedAt: at(i + 1), Reason: "Failed", Message: strings.Repeat("m", MessageLimit)})
		}
		h.Revisions = append(h.Revisions, r)
	}
	b, err := Encode(h, MaxBytes)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(b), MaxBytes)
	var got History
	require.NoError(t, json.Unmarshal(b, &got))
	n := len(got.Revisions)
	require.Positive(t, n)
	require.Less(t, n, len(h.Revisions))
	assert.Equal(t, h.Revisions[0].Key(), got.Revisions[0].Key(), "the newest kept")
	assert.Equal(t, h.Revisions[n-1].Key(), got.Revisions[n-1].Key())
	more, err := json.Marshal(History{Revisions: h.Revisions[:n+1]})
	require.NoError(t, err)
	assert.Greater(t, len(more), MaxBytes, "as many as fit")

	small := History{Revisions: h.Revisions[:2]}
	b, err = Encode(small, MaxBytes)
	require.NoError(t, err)
	want, _ := json.Marshal(small)
	assert.Equal(t, want, b, "under the bound: all of it")
}
