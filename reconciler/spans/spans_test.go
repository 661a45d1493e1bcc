package spans

import (
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	st "kontinue.dev/kontinue/reconciler/status"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)

func at(s int) *metav1.Time { t := metav1.NewTime(t0.Add(time.Duration(s) * time.Second)); return &t }

func source(commit string, gen int64, when int) st.Resource {
	var outs []st.Output
	for _, kv := range [][2]string{{"url", "https://git.example/app.git"}, {"revision", commit}} {
		p, d := st.Preview(kv[1])
		outs = append(outs, st.Output{Name: kv[0], Preview: p, Digest: d, LastTransitionTime: *at(when)})
	}
	return st.Resource{Name: "source", Outputs: outs, Provenance: &st.Provenance{Current: &st.InputSet{Digest: "src-" + commit,
		OwnerGeneration: gen, TakenAt: at(when), EndedAt: at(when), Outcome: st.OutcomeSucceeded}}}
}

func build(p st.Provenance, conds ...metav1.Condition) st.Resource {
	return st.Resource{Name: "build", Inputs: []st.Input{{Name: "source"}}, Provenance: &p, Conditions: conds}
}

func set(commit, outcome string, taken int, ended *metav1.Time) *st.InputSet {
	return &st.InputSet{Digest: "b-" + commit, Sources: []st.SourceValue{{Name: "source", Resource: "source",
		URL: "https://git.example/app.git", Revision: commit}}, TakenAt: at(taken), EndedAt: ended, Outcome: outcome}
}

// TestSpans: a revision is one trace; a step's span runs from when it
// took the revision to when it ended, under the span of the step it read.
func TestSpans(t *testing.T) {
	o := Owner{Kind: "Workload", Namespace: "dev", Name: "app", UID: "u1", Chain: "c"}
	s0 := []st.Resource{source("c1", 1, 0), build(st.Provenance{Latest: set("c1", st.OutcomeProcessing, 1, nil)})}
	first := Of(o, nil, s0, t0)
	require.Len(t, first, 1, "the source's set ended; the build's has not")
	src := first[0]
	assert.Equal(t, "source", src.Name)
	assert.Equal(t, [8]byte{}, src.Parent, "a first step's span is the root")

	s1 := []st.Resource{source("c1", 1, 0), build(st.Provenance{Current: set("c1", st.OutcomeSucceeded, 1, at(5))})}
	got := Of(o, s0, s1, t0)
	require.Len(t, got, 1)
	b := got[0]
	assert.Equal(t, src.TraceID, b.TraceID, "one trace per revision")
	assert.Equal(t, src.SpanID, b.Parent, "the build's span is under the source's")
	assert.Equal(t, at(1).Time, b.Start)
	assert.Equal(t, at(5).Time, b.End)
	assert.Equal(t, st.OutcomeSucceeded, b.Outcome)
	assert.Equal(t, "https://git.example/app.git@c1", b.Revision)
	assert.Empty(t, Of(o, s1, s1, t0), "the same status again: no span")

	// c2 fails: another trace, the step's reason.
	failed := metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "BuildFailed", Message: "tests failed"}
	s2 := []st.Resource{source("c2", 2, 10), build(st.Provenance{Current: set("c1", st.OutcomeSucceeded, 1, at(5)), Latest: set("c2", st.OutcomeProcessing, 10, nil)})}
	s3 := []st.Resource{source("c2", 2, 10), build(st.Provenance{Current: set("c1", st.OutcomeSucceeded, 1, at(5)), Latest: set("c2", st.OutcomeFailed, 10, at(12))}, failed)}
	got = Of(o, s2, s3, t0)
	require.Len(t, got, 1)
	assert.NotEqual(t, src.TraceID, got[0].TraceID)
	assert.Equal(t, st.OutcomeFailed, got[0].Outcome)
	assert.Equal(t, "BuildFailed", got[0].Reason)
	assert.Equal(t, SpanID(got[0].TraceID, "source"), got[0].Parent)
	assert.NotEqual(t, TraceID("u2", "k"), TraceID("u1", "k"), "owners do not share traces")
}

// TestEncode: OTLP/JSON as the specification wants it: IDs in hex, times
// as decimal strings, no parent on a root span, an error status with the
// step's reason.
func TestEncode(t *testing.T) {
	o := Owner{Kind: "Workload", Namespace: "dev", Name: "app", UID: "u", Chain: "c"}
	tid := TraceID("u", "r")
	root := Span{TraceID: tid, SpanID: SpanID(tid, "source"), Name: "source", Start: at(0).Time, End: at(1).Time, Outcome: st.OutcomeSucceeded}
	fail := Span{TraceID: tid, SpanID: SpanID(tid, "build"), Parent: root.SpanID, Name: "build", Start: at(1).Time, End: at(3).Time,
		Outcome: st.OutcomeFailed, Reason: "BuildFailed", Message: "tests failed"}
	b, err := Encode([]item{{o, root}, {o, fail}})
	require.NoError(t, err)
	s := string(b)
	assert.Contains(t, s, `"traceId":"`+hexOf(tid[:])+`"`)
	assert.Contains(t, s, `"startTimeUnixNano":"`+fmt.Sprint(at(1).UnixNano())+`"`)
	assert.Contains(t, s, `"parentSpanId":"`+hexOf(root.SpanID[:])+`"`)
	assert.Equal(t, 1, strings.Count(s, "parentSpanId"), "the root span has none")
	assert.Contains(t, s, `"status":{"code":2,"message":"BuildFailed: tests failed"}`)
	assert.Contains(t, s, `{"key":"service.name","value":{"stringValue":"kontinue"}}`)
}

func hexOf(b []byte) string { return hex.EncodeToString(b) }
