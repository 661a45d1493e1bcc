package spans

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kontinue.dev/kontinue/reconciler/api"
	st "kontinue.dev/kontinue/reconciler/status"
)

// workloadOf is a Workload's steps' statuses: source (commit) → build
// (image) → deliverable, which stamped the Deliverable "app" from the
// build's image (input set "d-<image>").
func workloadOf(commit, image string) []st.Resource {
	src := source(commit, 1, 0)
	b := build(st.Provenance{Current: set(commit, st.OutcomeSucceeded, 1, at(5))})
	b.Outputs = []st.Output{output("image", image)}
	d := st.Resource{Name: "deliverable", Inputs: []st.Input{{Name: "build"}},
		StampedRef: &st.StampedRef{APIVersion: "carto.run/v1alpha1", Kind: "Deliverable", Namespace: "dev", Name: "app"},
		Provenance: &st.Provenance{Current: &st.InputSet{Digest: "d-" + image, Outcome: st.OutcomeSucceeded, TakenAt: at(6), EndedAt: at(6),
			Images: []st.ImageValue{{Name: "image", Resource: "build", Image: image}}}}}
	return []st.Resource{src, b, d}
}

// feedOf is the Feed of Deliverable "app" stamped by the Workload's set
// for image (changed by took, when set), with the traceparent Kontinue put
// on it, as the controller reads it with traces on.
func feedOf(t *testing.T, steps []st.Resource, image string, took ...func(*st.InputSet)) *Feed {
	t.Helper()
	for _, f := range took {
		f(steps[2].Provenance.Current)
	}
	tp, ok := ForSet("w-uid", steps[:2], "deliverable", steps[2].Provenance.Current)
	require.True(t, ok)
	return &Feed{Namespace: "dev", Name: "app", UID: "w-uid", Steps: steps, Deliverable: "app", Applied: "d-" + image, TraceParent: tp, Traced: true}
}

// rootOf is the Deliverable's first step, publishing outputs (name=value)
// from its current set.
func rootOf(outs ...string) st.Resource {
	r := st.Resource{Name: "gitops", Provenance: &st.Provenance{Current: &st.InputSet{Digest: "g1", OwnerGeneration: 2,
		Outcome: st.OutcomeSucceeded, TakenAt: at(7), EndedAt: at(8)}}}
	for _, kv := range outs {
		k, v, _ := strings.Cut(kv, "=")
		r.Outputs = append(r.Outputs, output(k, v))
	}
	return r
}

// TestLinkOf: a Deliverable's revision is linked to the Workload's
// deliverable span of the revision that made it only when every proof
// holds; each failing case breaks one, and says which.
func TestLinkOf(t *testing.T) {
	w := workloadOf("c1", "registry.example/app@sha256:1")
	good := func() *Feed {
		return feedOf(t, workloadOf("c1", "registry.example/app@sha256:1"), "registry.example/app@sha256:1")
	}
	// untraced is the Feed of kontinue trace: traces may have been off
	// when the Deliverable was written.
	untraced := func(tp string) func() *Feed {
		return func() *Feed {
			f := good()
			f.Traced, f.TraceParent = false, tp
			return f
		}
	}
	delivered := rootOf("url=oci://registry.example/app", "revision=registry.example/app@sha256:1")

	p := LinkOf(good(), &delivered, delivered.Provenance.Current)
	require.True(t, p.Proven(), p.Why)
	wantTrace := Spans(t, w)
	assert.Equal(t, wantTrace, p.Link.TraceID, "the Workload's revision c1")
	assert.Equal(t, SpanID(wantTrace, "deliverable"), p.Link.SpanID, "its deliverable step's span")
	assert.Equal(t, Owner{Kind: api.KindWorkload, Namespace: "dev", Name: "app", UID: "w-uid"}, p.Link.Owner)
	assert.Equal(t, "deliverable", p.Link.Step)
	assert.Equal(t, []Condition{CondOwner, CondApplied, CondTraceParent, CondValue}, p.Held)
	assert.Equal(t, "deliverable", p.Step)
	assert.Equal(t, "d-registry.example/app@sha256:1", p.Set.Digest)
	assert.Equal(t, "https://git.example/app.git@c1", p.Revision)
	assert.Equal(t, "revision", p.Output)

	// Without tracing's evidence: the same link, proven by the other three.
	p = LinkOf(untraced("")(), &delivered, delivered.Provenance.Current)
	require.True(t, p.Proven(), p.Why)
	assert.Equal(t, wantTrace, p.Link.TraceID)
	assert.Equal(t, []Condition{CondOwner, CondApplied, CondValue}, p.Held, "no traceparent weighed")
	p = LinkOf(untraced(good().TraceParent)(), &delivered, delivered.Provenance.Current)
	require.True(t, p.Proven(), p.Why)
	assert.Equal(t, []Condition{CondOwner, CondApplied, CondTraceParent, CondValue}, p.Held, "a traceparent present is weighed")

	// Re-rendered since the set was taken (a template edit): the
	// Deliverable's applied digest moved on, the set it names did not.
	restamped := good()
	restamped.Applied, restamped.Set = "d-rerendered", "d-registry.example/app@sha256:1"
	p = LinkOf(restamped, &delivered, delivered.Provenance.Current)
	require.True(t, p.Proven(), p.Why)
	assert.Equal(t, "d-registry.example/app@sha256:1", p.Set.Digest)

	for _, tt := range []struct {
		name   string
		feed   func() *Feed
		root   st.Resource
		failed Condition
		why    string
	}{
		{"the Deliverable names a set the Workload does not record", func() *Feed {
			f := good()
			f.Applied, f.Set = "d-rerendered", "d-older"
			return f
		}, delivered, CondApplied, "records no input set"},
		{"no Workload", func() *Feed { return nil }, delivered, CondOwner, "no Workload controls"},
		{"no step names the Deliverable", func() *Feed {
			f := good()
			f.Deliverable = "other"
			return f
		}, delivered, CondOwner, "no step of the Workload's status names"},
		{"the Deliverable carries a set the Workload does not record", func() *Feed {
			f := good()
			f.Applied = "d-older"
			return f
		}, delivered, CondApplied, "records no input set"},
		{"no applied digest", func() *Feed {
			f := good()
			f.Applied = ""
			return f
		}, delivered, CondApplied, "records no input set"},
		{"the Workload's set traces to no known revision (the build moved on)", func() *Feed {
			f := good()
			steps := workloadOf("c1", "registry.example/app@sha256:1")
			steps[1].Outputs = []st.Output{output("image", "registry.example/app@sha256:2")}
			f.Steps = steps
			return f
		}, delivered, CondApplied, "traces to no known revision"},
		{"no traceparent (stamped before traces were on)", func() *Feed {
			f := good()
			f.TraceParent = ""
			return f
		}, delivered, CondTraceParent, "traceparent is not"},
		{"a traceparent of another revision", func() *Feed {
			f := good()
			other := workloadOf("c0", "registry.example/app@sha256:1")
			f.TraceParent = feedOf(t, other, "registry.example/app@sha256:1").TraceParent
			return f
		}, delivered, CondTraceParent, "traceparent is not"},
		{"a traceparent of another step", func() *Feed {
			f := good()
			tp, _ := Parse(f.TraceParent)
			f.TraceParent = Format(tp.TraceID, SpanID(tp.TraceID, "build"))
			return f
		}, delivered, CondTraceParent, "traceparent is not"},
		{"untraced: a traceparent of another step is weighed all the same", func() *Feed {
			tp, _ := Parse(good().TraceParent)
			return untraced(Format(tp.TraceID, SpanID(tp.TraceID, "build")))()
		}, delivered, CondTraceParent, "traceparent is not"},
		{"untraced: a malformed traceparent", untraced("00-garbage"), delivered, CondTraceParent, "traceparent is not"},
		{"the root published nothing", good, rootOf(), CondValue, "published nothing"},
		{"the set ended is not the one whose outputs the root publishes", good, func() st.Resource {
			r := rootOf("revision=registry.example/app@sha256:1")
			r.Provenance.Latest = &st.InputSet{Digest: "g2", Outcome: st.OutcomeFailed}
			return r
		}(), CondValue, "published nothing"},
		{"a branch's commit: no value the Workload took", good,
			rootOf("url=https://git.example/gitops.git", "revision=main@sha1:9f"), CondValue, "no value the Workload's step took"},
		{"untraced: a branch's commit", untraced(""),
			rootOf("url=https://git.example/gitops.git", "revision=main@sha1:9f"), CondValue, "no value the Workload's step took"},
		{"the repository URL alone", func() *Feed {
			return feedOf(t, workloadOf("c1", "registry.example/app@sha256:1"), "registry.example/app@sha256:1", func(s *st.InputSet) {
				s.Sources = []st.SourceValue{{Name: "src", Resource: "source", URL: "https://git.example/gitops.git", Revision: "c1"}}
			})
		}, rootOf("url=https://git.example/gitops.git", "revision=main@sha1:9f"), CondValue, "no value the Workload's step took"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.root
			ended := r.Provenance.Current
			if r.Provenance.Latest != nil {
				ended = r.Provenance.Latest
			}
			f := tt.feed()
			p := LinkOf(f, &r, ended)
			assert.False(t, p.Proven())
			assert.Equal(t, tt.failed, p.Failed, p.Why)
			assert.Contains(t, p.Why, tt.why)
			assert.Equal(t, Link{}, p.Link, "no link unless proven")
			var held []Condition
			for c := CondOwner; c < tt.failed; c++ {
				if c != CondTraceParent || f.Traced || f.TraceParent != "" {
					held = append(held, c)
				}
			}
			assert.Equal(t, held, p.Held, "the conditions before it held, the traceparent when weighed")
		})
	}

	// A source's revision, a config by digest: values the step took.
	for _, tt := range []struct {
		name   string
		took   func(s *st.InputSet)
		root   st.Resource
		output string
	}{
		{"a source's revision", func(s *st.InputSet) {
			s.Sources = []st.SourceValue{{Name: "src", Resource: "source", URL: "https://git.example/app.git", Revision: "c1"}}
		}, rootOf("url=https://git.example/gitops.git", "revision=c1"), "revision"},
		{"a config", func(s *st.InputSet) {
			_, d := st.Preview(map[string]any{"k": "v"})
			s.Configs = []st.ConfigValue{{Name: "config", Resource: "source", Digest: d}}
		}, func() st.Resource {
			r := rootOf()
			r.Outputs = []st.Output{func() st.Output {
				p, d := st.Preview(map[string]any{"k": "v"})
				return st.Output{Name: "config", Preview: p, Digest: d}
			}()}
			return r
		}(), "config"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := feedOf(t, workloadOf("c1", "registry.example/app@sha256:1"), "registry.example/app@sha256:1", tt.took)
			r := tt.root
			p := LinkOf(f, &r, r.Provenance.Current)
			assert.True(t, p.Proven(), p.Why)
			assert.Equal(t, tt.output, p.Output)
		})
	}
}

// TestStampedBy: the step whose status names the Deliverable, if any.
func TestStampedBy(t *testing.T) {
	f := feedOf(t, workloadOf("c1", "img@1"), "img@1")
	assert.Equal(t, "deliverable", f.StampedBy())
	f.Deliverable = "other"
	assert.Empty(t, f.StampedBy())
	assert.Empty(t, (*Feed)(nil).StampedBy())
}

// Spans is the trace of the Workload w's revision, as its spans carry it.
func Spans(t *testing.T, w []st.Resource) [16]byte {
	t.Helper()
	got := Of(Owner{UID: "w-uid"}, nil, w, t0)
	require.NotEmpty(t, got)
	for _, s := range got {
		if s.Name == "deliverable" {
			return s.TraceID
		}
	}
	t.Fatal("no span of the deliverable step")
	return [16]byte{}
}

// TestOfLinks: only a Deliverable's first step's span is linked, and the
// Feed is read once per status write, only when such a span ends.
func TestOfLinks(t *testing.T) {
	w := workloadOf("c1", "img@1")
	reads := 0
	o := Owner{Kind: "Deliverable", Namespace: "dev", Name: "app", UID: "d-uid", Chain: "delivery",
		Feed: func() *Feed { reads++; return feedOf(t, w, "img@1") }}
	root := rootOf("url=oci://r/app", "revision=img@1")
	// live publishes the image too: only the revision's root is linked
	// all the same.
	live := st.Resource{Name: "live", Inputs: []st.Input{{Name: "gitops"}}, Outputs: rootOf("revision=img@1").Outputs, Provenance: &st.Provenance{Current: &st.InputSet{Digest: "l1",
		Sources: []st.SourceValue{{Name: "source", Resource: "gitops", URL: "oci://r/app", Revision: "img@1"}},
		Outcome: st.OutcomeSucceeded, TakenAt: at(8), EndedAt: at(9)}}}
	got := Of(o, nil, []st.Resource{root, live}, t0)
	require.Len(t, got, 2)
	assert.Equal(t, 1, reads)
	byName := map[string]Span{}
	for _, s := range got {
		byName[s.Name] = s
	}
	require.Len(t, byName["gitops"].Links, 1)
	assert.Equal(t, Spans(t, w), byName["gitops"].Links[0].TraceID)
	assert.Empty(t, byName["live"].Links, "the root span carries the link")

	assert.Empty(t, Of(o, []st.Resource{root, live}, []st.Resource{root, live}, t0))
	assert.Equal(t, 1, reads, "nothing ended: the Workload is not read")

	b, err := Encode([]item{{o, byName["gitops"]}})
	require.NoError(t, err)
	l := byName["gitops"].Links[0]
	assert.Contains(t, string(b), `"links":[{"traceId":"`+hexOf(l.TraceID[:])+`","spanId":"`+hexOf(l.SpanID[:])+`","attributes":[{"key":"kontinue.owner.kind","value":{"stringValue":"Workload"}}`)
}

// FeedOf takes what the Deliverable says of its set from its annotations.
func TestFeedOf(t *testing.T) {
	w := &metav1.ObjectMeta{Namespace: "dev", Name: "app", UID: "w-uid"}
	d := &metav1.ObjectMeta{Namespace: "dev", Name: "app", Annotations: map[string]string{
		api.AnnotationDigest: "d2", api.AnnotationInputSet: "d1", api.AnnotationTraceParent: "tp"}}
	steps := workloadOf("c1", "img")
	assert.Equal(t, &Feed{Namespace: "dev", Name: "app", UID: "w-uid", Steps: steps, Deliverable: "app", Applied: "d2", Set: "d1", TraceParent: "tp"},
		FeedOf(w, d, steps))
}
