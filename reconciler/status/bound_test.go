package status

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func blob(n int) map[string]any { return map[string]any{"v": strings.Repeat("x", n)} }

// deep is an object nested levels deep.
func deep(levels int) map[string]any {
	m := map[string]any{}
	for range levels - 1 {
		m = map[string]any{"a": m}
	}
	return m
}

func TestBound(t *testing.T) {
	for _, tt := range []struct {
		name      string
		resources []Resource
		free      int
		kept      []string // step/field still set afterwards
		notes     []string // one substring per expected note
	}{
		{name: "small: nothing cut", free: ObjectLimit,
			resources: []Resource{{Name: "a", OutputValues: blob(10), LastGoodObject: blob(10)}},
			kept:      []string{"a/outputValues", "a/lastGoodObject"}},
		{name: "one field over its limit", free: ObjectLimit,
			resources: []Resource{{Name: "a", OutputValues: blob(FieldLimit), LastGoodObject: blob(10)}},
			kept:      []string{"a/lastGoodObject"},
			notes:     []string{"step [a]: outputValues (257 KiB) not kept in status, over the 256 KiB one field may take; downstream steps get no last good outputs"}},
		{name: "the whole over what is free: largest first until it fits", free: 450 << 10,
			resources: []Resource{{Name: "a", OutputValues: blob(200 << 10)}, {Name: "b", LastGoodObject: blob(210 << 10)}, {Name: "c", OutputValues: blob(100 << 10)}},
			kept:      []string{"a/outputValues", "c/outputValues"},
			notes:     []string{"step [b]: lastGoodObject (211 KiB) not kept in status, the status would take"}},
		{name: "provenance goes when it is the largest", free: 300,
			resources: []Resource{{Name: "a", OutputValues: blob(100), Provenance: &Provenance{Current: &InputSet{Digest: "d",
				Sources: []SourceValue{{URL: Value(strings.Repeat("u", 4<<10))}}}}}},
			kept:  []string{"a/outputValues"},
			notes: []string{"step [a]: provenance (1 KiB) not kept in status, the status would take 1 KiB, over the 1 KiB left for it; the step's input values are not shown"}},
		{name: "the object of the set on the object, over its limit", free: ObjectLimit,
			resources: []Resource{{Name: "a", AppliedInputDigest: "d2", AppliedObject: blob(FieldLimit), LastGoodObject: blob(10)}},
			kept:      []string{"a/lastGoodObject"},
			notes:     []string{"step [a]: appliedObject (257 KiB) not kept in status, over the 256 KiB one field may take; no shadow can be stamped from the input set on the object once it succeeds"}},
		{name: "a deployment's applied inputs go when they are the largest", free: 300,
			resources: []Resource{{Name: "a", OutputValues: blob(10), AppliedOutputValues: blob(1 << 10)}},
			kept:      []string{"a/outputValues"},
			notes:     []string{"step [a]: appliedOutputValues (2 KiB) not kept in status, the status would take 2 KiB, over the 1 KiB left for it; a success of the input set on the object is not recorded"}},
		{name: "copied values nested deeper than Kontinue writes", free: ObjectLimit,
			resources: []Resource{{Name: "a", OutputValues: map[string]any{"config": deep(1001)}, LastGoodObject: deep(1001)}, {Name: "b", OutputValues: map[string]any{"config": deep(999)}}},
			kept:      []string{"b/outputValues"},
			notes: []string{"step [a]: lastGoodObject not kept in status, nested deeper than the 1000 levels Kontinue writes; no shadow",
				"step [a]: outputValues not kept in status, nested deeper than the 1000 levels Kontinue writes; downstream steps"}},
		{name: "every bulky field is bounded in depth", free: ObjectLimit,
			resources: []Resource{{Name: "a", AppliedInputDigest: "d2", AppliedObject: deep(1001), AppliedOutputValues: map[string]any{"x": deep(1001)}}},
			notes: []string{"step [a]: appliedObject not kept in status, nested deeper than the 1000 levels Kontinue writes; no shadow",
				"step [a]: appliedOutputValues not kept in status, nested deeper than the 1000 levels Kontinue writes; a success"}},
		{name: "nothing left to drop: stops", free: 10,
			resources: []Resource{{Name: "a", OutputValues: blob(100)}},
			notes:     []string{"step [a]: outputValues"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := OwnerStatus{Resources: tt.resources}
			notes := Bound(&s, tt.free)
			require.Len(t, notes, len(tt.notes), "%v", notes)
			for i, n := range tt.notes {
				assert.Contains(t, notes[i], n)
			}
			var kept []string
			for _, r := range s.Resources {
				if r.OutputValues != nil {
					kept = append(kept, r.Name+"/outputValues")
				}
				if r.LastGoodObject != nil {
					kept = append(kept, r.Name+"/lastGoodObject")
				}
				if r.Provenance != nil {
					kept = append(kept, r.Name+"/provenance")
				}
				if r.AppliedObject != nil {
					kept = append(kept, r.Name+"/appliedObject")
				}
				if r.AppliedOutputValues != nil {
					kept = append(kept, r.Name+"/appliedOutputValues")
				}
			}
			assert.ElementsMatch(t, tt.kept, kept)
		})
	}
}

func TestBoundCutsLongMessages(t *testing.T) {
	long := strings.Repeat("é", MessageLimit) // two bytes each: the cut must not split one
	s := OwnerStatus{
		Conditions: []metav1.Condition{{Type: Ready, Message: long}, {Type: ResourcesSubmitted, Message: "short"}},
		Resources:  []Resource{{Name: "a", Conditions: []metav1.Condition{{Type: ResourceSubmitted, Message: long}}}},
	}
	assert.Empty(t, Bound(&s, ObjectLimit), "a cut message is marked in itself")
	for _, m := range []string{s.Conditions[0].Message, s.Resources[0].Conditions[0].Message} {
		assert.LessOrEqual(t, len(m), MessageLimit)
		assert.True(t, strings.HasSuffix(m, TruncatedMarker))
		assert.True(t, strings.HasPrefix(m, "éé"))
		assert.NotContains(t, strings.TrimSuffix(m, TruncatedMarker), "\uFFFD")
		assert.True(t, strings.HasSuffix(strings.TrimSuffix(m, TruncatedMarker), "é"))
	}
	assert.Equal(t, "short", s.Conditions[1].Message)
}
