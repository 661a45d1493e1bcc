package selector

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNormalize(t *testing.T) {
	type point struct {
		X int `json:"x"`
	}
	tests := []struct {
		name string
		in   any
		want any
	}{
		{"nil", nil, nil},
		{"int", 3, int64(3)},
		{"int32", int32(-3), int64(-3)},
		{"uint8", uint8(7), int64(7)},
		{"uint64 small", uint64(7), int64(7)},
		{"uint64 huge", uint64(math.MaxUint64), float64(math.MaxUint64)},
		{"float32 shortest", float32(0.1), 0.1},
		{"json.Number int", json.Number("12"), int64(12)},
		{"json.Number float", json.Number("1.5"), 1.5},
		{"nested", map[string]any{"a": []any{1, json.Number("2")}}, map[string]any{"a": []any{int64(1), int64(2)}}},
		{"struct via json", point{X: 4}, map[string]any{"x": int64(4)}},
		{"string slice via json", []string{"a", "b"}, []any{"a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := normalize(tt.in)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}

	_, err := normalize(json.Number("x"))
	assert.ErrorContains(t, err, `invalid number "x"`)
	_, err = normalize(map[string]any{"f": func() {}})
	assert.ErrorContains(t, err, `member "f": not a JSON value`)
}

func TestValueMatches(t *testing.T) {
	tests := []struct {
		name string
		got  any // as paths.Value returns it
		want any // as listed
		eq   bool
	}{
		{"int int", int64(3), 3, true},
		{"int float", int64(3), 3.0, true},
		{"float int", 3.0, 3, true},
		{"int float fraction", int64(3), 3.5, false},
		{"int64 max vs float rounding", int64(math.MaxInt64), float64(math.MaxInt64), false},
		{"huge float vs int", int64(1), 1e300, false},
		{"int vs string", int64(3), "3", true},
		{"negative int vs string", int64(-3), "-3", true},
		{"string vs int", "3", 3, true},
		{"string vs float integral", "3", 3.0, true},
		{"float vs string", 0.5, "0.5", true},
		{"float vs padded string", 0.5, "0.50", false},
		{"string padded vs int", " 3", 3, false},
		{"bool vs string", true, "true", true},
		{"string vs bool", "false", false, true},
		{"string vs bool mismatch", "true", false, false},
		{"null vs null", nil, nil, true},
		{"null vs string null", nil, "null", false},
		{"string null vs null", "null", nil, false},
		{"object vs object", map[string]any{"a": int64(1)}, map[string]any{"a": 1.0}, true},
		{"object vs object extra", map[string]any{"a": int64(1)}, map[string]any{"a": 1, "b": 2}, false},
		{"list vs list", []any{"a", int64(1)}, []any{"a", 1}, true},
		{"list vs list loose inside", []any{int64(1)}, []any{"1"}, false},
		{"list vs object", []any{}, map[string]any{}, false},
		{"object vs string", map[string]any{}, "{}", false},
		{"NaN listed", 1.0, math.NaN(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := newWantValue(tt.want)
			require.NoError(t, err)
			assert.Equal(t, tt.eq, w.matches(tt.got))
		})
	}
}
