package jsonvalue

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestEqual(t *testing.T) {
	tests := []struct {
		name string
		a, b any
		want bool
	}{
		{"int64 and float64", int64(3), float64(3), true},
		{"int and json.Number", 3, json.Number("3.0"), true},
		{"fraction", 2.5, int64(2), false},
		{"above 2^53", int64(1<<53 + 1), float64(1 << 53), false},
		{"2^53 exactly", int64(1 << 53), float64(1 << 53), true},
		{"max int64 and its float", int64(9223372036854775807), float64(9223372036854775807), false},
		{"string is not a number", "3", int64(3), false},
		{"nested", map[string]any{"a": []any{int64(1), "x", nil, true}}, map[string]any{"a": []any{float64(1), "x", nil, true}}, true},
		{"nested differs", map[string]any{"a": []any{int64(1)}}, map[string]any{"a": []any{int64(2)}}, false},
		{"map sizes", map[string]any{"a": 1}, map[string]any{"a": 1, "b": 2}, false},
		{"nil", nil, nil, true},
		{"nil and false", nil, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Equal(tt.a, tt.b))
			assert.Equal(t, tt.want, Equal(tt.b, tt.a), "symmetric")
		})
	}
}

func TestParseNumber(t *testing.T) {
	for s, ok := range map[string]bool{"3": true, "-0.5": true, "1e3": true, "Inf": false, "0x10": false, " 3": false, "1e999": false} {
		_, got := ParseNumber(s)
		assert.Equal(t, ok, got, s)
	}
	n, _ := ParseNumber("9007199254740993")
	m, _ := NumberOf(int64(9007199254740993))
	assert.True(t, n.Equal(m))
}

func nest(levels int) any {
	var v any = "leaf"
	for i := 0; i < levels; i++ {
		if i%2 == 0 {
			v = map[string]any{"a": v}
		} else {
			v = []any{1, v}
		}
	}
	return v
}

func TestDeeperThan(t *testing.T) {
	for _, tt := range []struct {
		v    any
		n    int
		want bool
	}{
		{"scalar", 0, false},
		{map[string]any{}, 0, true},
		{map[string]any{}, 1, false},
		{[]any{}, 1, false},
		{map[string]any{"a": []any{map[string]any{}}}, 2, true},
		{map[string]any{"a": []any{map[string]any{}}}, 3, false},
		{nest(MaxDepth), MaxDepth, false},
		{nest(MaxDepth + 1), MaxDepth, true},
		{map[string]any{"a": 1, "b": nest(5)}, 5, true},
	} {
		assert.Equal(t, tt.want, DeeperThan(tt.v, tt.n), "%v within %d", tt.v, tt.n)
	}
}

// Unmarshal is apimachinery's decoding: integers exact, 1.0 a float64.
func TestUnmarshalKeepsIntegers(t *testing.T) {
	var v struct {
		A any            `json:"a"`
		M map[string]any `json:"m"`
	}
	assert.NoError(t, Unmarshal([]byte(`{"a":9223372036854775807,"m":{"b":[9007199254740993,1.0,1e3,-0]}}`), &v))
	assert.Equal(t, int64(9223372036854775807), v.A)
	assert.Equal(t, []any{int64(9007199254740993), float64(1), float64(1000), int64(0)}, v.M["b"])
	var out map[string]any
	assert.NoError(t, Remarshal(map[string]any{"x": int64(9007199254740993), "f": 1.5}, &out))
	assert.Equal(t, map[string]any{"x": int64(9007199254740993), "f": 1.5}, out)
}
