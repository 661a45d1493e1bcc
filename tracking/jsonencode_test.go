package tracking

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMarshalJSONAsEncodingJSON(t *testing.T) {
	for _, v := range []any{
		nil, true, "", "plain", "<a href=\"x\">&amp;</a>", "tab\t nl\n cr\r bs\b ff\f \x00 \x1f \x7f \\",
		"é 中文 😀", "bad \xff\xfe utf8 \xc3", "sep \u2028 \u2029", int64(-9223372036854775808), 42, int64(0),
		0.0, math.Copysign(0, -1), 1.5, 1e20, 1e21, 1e-6, 1e-7, 123456789.123, 5e-324, math.MaxFloat64, -2.5e-10,
		map[string]any{}, map[string]any(nil), []any{}, []any(nil),
		map[string]any{"b": 1, "a": []any{nil, "x", map[string]any{"z": false, "<": ">"}}, "A": int64(3), "é": 1.0},
		map[string]any{"s": []string{"x"}, "m": map[string]string{"k": "<v>"}, "t": metav1.Time{}, "i32": int32(7)},
	} {
		want, wantErr := json.Marshal(v)
		got, err := MarshalJSON(v)
		require.Equal(t, wantErr, err, "%#v", v)
		assert.Equal(t, string(want), string(got), "%#v", v)
	}
	for _, v := range []any{math.NaN(), math.Inf(1), map[string]any{"a": math.Inf(-1)}, map[string]any{"c": make(chan int)}} {
		_, wantErr := json.Marshal(v)
		_, err := MarshalJSON(v)
		require.Error(t, wantErr)
		assert.Equal(t, wantErr.Error(), err.Error())
	}
}

func FuzzMarshalJSON(f *testing.F) {
	for _, c := range decodeCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		m, ok := decodeObject(doc)
		if !ok {
			return
		}
		want, wantErr := json.Marshal(m)
		got, err := MarshalJSON(m)
		require.Equal(t, wantErr, err)
		if string(want) != string(got) {
			t.Fatalf("encoding/json %q, MarshalJSON %q", want, got)
		}
	})
}

func BenchmarkMarshalJSON(b *testing.B) {
	doc, err := os.ReadFile("testdata/workload.json")
	require.NoError(b, err)
	m, ok := decodeObject(doc)
	require.True(b, ok)
	b.Run("MarshalJSON", func(b *testing.B) {
		for b.Loop() {
			if _, err := MarshalJSON(m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(m); err != nil {
				b.Fatal(err)
			}
		}
	})
}
