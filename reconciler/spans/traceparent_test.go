package spans

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	st "kontinue.dev/kontinue/reconciler/status"
)

const (
	validTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	validSpan  = "00f067aa0ba902b7"
)

// TestParse: what W3C Trace Context lets a receiver use, and nothing
// else; a later version is read for its first four fields.
func TestParse(t *testing.T) {
	v00 := "00-" + validTrace + "-" + validSpan + "-01"
	for _, tt := range []struct {
		name, in string
		ok       bool
		flags    byte
	}{
		{"version 00, sampled", v00, true, 0x01},
		{"version 00, not sampled", "00-" + validTrace + "-" + validSpan + "-00", true, 0x00},
		{"unknown flags are kept", "00-" + validTrace + "-" + validSpan + "-09", true, 0x09},
		{"a later version, exactly four fields", "cc-" + validTrace + "-" + validSpan + "-01", true, 0x01},
		{"a later version with more fields", "cc-" + validTrace + "-" + validSpan + "-01-what-comes-next", true, 0x01},
		{"a later version, something glued on", "cc-" + validTrace + "-" + validSpan + "-01x", false, 0},
		{"version 00 with more", v00 + "-00", false, 0},
		{"version ff", "ff-" + validTrace + "-" + validSpan + "-01", false, 0},
		{"uppercase hex", "00-" + strings.ToUpper(validTrace) + "-" + validSpan + "-01", false, 0},
		{"uppercase version", "0A-" + validTrace + "-" + validSpan + "-01", false, 0},
		{"all-zero trace", "00-" + strings.Repeat("0", 32) + "-" + validSpan + "-01", false, 0},
		{"all-zero span", "00-" + validTrace + "-" + strings.Repeat("0", 16) + "-01", false, 0},
		{"short", v00[:54], false, 0},
		{"empty", "", false, 0},
		{"wrong separator", "00_" + validTrace + "-" + validSpan + "-01", false, 0},
		{"trace one short, span one long", "00-" + validTrace[:31] + "-" + validSpan + "0-01", false, 0},
		{"not hex", "00-" + validTrace[:31] + "g-" + validSpan + "-01", false, 0},
		{"spaces", " 00-" + validTrace + "-" + validSpan + "-1", false, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tp, err := Parse(tt.in)
			if !tt.ok {
				assert.ErrorIs(t, err, ErrTraceParent)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, validTrace, hexOf(tp.TraceID[:]))
			assert.Equal(t, validSpan, hexOf(tp.SpanID[:]))
			assert.Equal(t, tt.flags, tp.Flags)
			assert.Equal(t, "00-"+validTrace+"-"+validSpan+"-"+tt.in[53:55], tp.String(), "passed on as version 00")
		})
	}
}

// TestFormat: version 00, lowercase, sampled; Parse reads it back.
func TestFormat(t *testing.T) {
	tid := TraceID("uid", "source@0a1b2c3d4e5f")
	sid := SpanID(tid, "build")
	s := Format(tid, sid)
	assert.Equal(t, "00-"+hexOf(tid[:])+"-"+hexOf(sid[:])+"-01", s)
	tp, err := Parse(s)
	require.NoError(t, err)
	assert.Equal(t, TraceParent{TraceID: tid, SpanID: sid, Flags: FlagSampled}, tp)
}

// FuzzParse: an annotation anyone wrote never panics the parser; what it
// accepts is 55 characters or more, reads back the same, and version 00 is
// passed on unchanged.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"00-" + validTrace + "-" + validSpan + "-01", "cc-" + validTrace + "-" + validSpan + "-01-x",
		"ff-" + validTrace + "-" + validSpan + "-01", "", "00-", strings.Repeat("-", 60)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tp, err := Parse(s)
		if err != nil {
			return
		}
		if len(s) < traceParentLen {
			t.Fatalf("accepted %q, shorter than a traceparent", s)
		}
		again, err := Parse(tp.String())
		if err != nil || again != tp {
			t.Fatalf("%q read as %+v, which reads back as %+v (%v)", s, tp, again, err)
		}
		if strings.HasPrefix(s, "00-") && tp.String() != s {
			t.Fatalf("version 00 %q passed on as %q", s, tp.String())
		}
	})
}

// TestForSet: the traceparent a step's object carries is the span the step
// gets once its set ends: same trace, same span; none for a first step,
// nor when an input's step has moved on.
func TestForSet(t *testing.T) {
	o := Owner{Kind: "Workload", Namespace: "dev", Name: "app", UID: "u1", Chain: "c"}
	src := source("c1", 1, 0)
	taken := set("c1", st.OutcomeProcessing, 1, nil)
	tp, ok := ForSet("u1", []st.Resource{src}, "build", taken)
	require.True(t, ok)

	// The build succeeds: its span is the annotation's.
	done := []st.Resource{src, build(st.Provenance{Current: set("c1", st.OutcomeSucceeded, 1, at(5))})}
	spans := Of(o, []st.Resource{src, build(st.Provenance{Latest: taken})}, done, t0)
	require.Len(t, spans, 1)
	assert.Equal(t, Format(spans[0].TraceID, spans[0].SpanID), tp)
	again, ok := ForSet("u1", done, "build", taken)
	assert.True(t, ok)
	assert.Equal(t, tp, again, "the same set, the same value, whatever the step did since")

	// A step reading the build: traced through it to c1.
	img := done[1]
	img.Outputs = []st.Output{output("image", "img-c1")}
	deploy := &st.InputSet{Images: []st.ImageValue{{Name: "image", Resource: "build", Image: "img-c1"}}}
	dtp, ok := ForSet("u1", []st.Resource{src, img}, "deploy", deploy)
	require.True(t, ok)
	parsed, err := Parse(dtp)
	require.NoError(t, err)
	assert.Equal(t, spans[0].TraceID, parsed.TraceID, "the build's revision")
	assert.Equal(t, SpanID(spans[0].TraceID, "deploy"), parsed.SpanID)

	for _, tt := range []struct {
		name string
		in   []st.Resource
		step string
		set  *st.InputSet
	}{
		{"a first step: its input is the owner's spec", []st.Resource{src}, "source", &st.InputSet{OwnerGeneration: 1}},
		{"no set", []st.Resource{src}, "build", nil},
		{"the build has moved on: img-c1 is no output of it now", []st.Resource{src, func() st.Resource {
			r := img
			r.Outputs = []st.Output{output("image", "img-c2")}
			return r
		}()}, "deploy", deploy},
		{"the build has nothing current", []st.Resource{src, build(st.Provenance{Latest: taken})}, "deploy", deploy},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ForSet("u1", tt.in, tt.step, tt.set)
			assert.False(t, ok)
			assert.Empty(t, got)
		})
	}
}

func output(name, v string) st.Output {
	p, d := st.Preview(v)
	return st.Output{Name: name, Preview: p, Digest: d, LastTransitionTime: *at(0)}
}

// BenchmarkForSet: what traces cost each step of each reconcile (a step
// reading a step that read a source).
func BenchmarkForSet(b *testing.B) {
	src := source("c1", 1, 0)
	img := build(st.Provenance{Current: set("c1", st.OutcomeSucceeded, 1, at(5))})
	img.Outputs = []st.Output{output("image", "img-c1")}
	in := []st.Resource{src, img}
	deploy := &st.InputSet{Images: []st.ImageValue{{Name: "image", Resource: "build", Image: "img-c1"}}}
	for b.Loop() {
		if _, ok := ForSet("u1", in, "deploy", deploy); !ok {
			b.Fatal("not proven")
		}
	}
}
