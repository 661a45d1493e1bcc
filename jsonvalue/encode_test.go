package jsonvalue

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMarshalJSONAsEncodingJSON(t *testing.T) {
	for _, v := range []any{
		nil, true, "", "plain", "<a href=\"x\">&amp;</a>", "tab\t nl\n cr\r bs\b ff\f \x00 \x1f \x7f \\",
		"é 中文 😀", "sep \u2028 \u2029", int64(-9223372036854775808), 42, int64(0),
		0.0, math.Copysign(0, -1), 1.5, 1e20, 1e21, 1e-6, 1e-7, 123456789.123, 5e-324, math.MaxFloat64, -2.5e-10,
		map[string]any{}, map[string]any(nil), []any{}, []any(nil),
		map[string]any{"b": 1, "a": []any{nil, "x", map[string]any{"z": false, "<": ">"}}, "A": int64(3), "é": 1.0},
		map[string]any{"s": []string{"x"}, "m": map[string]string{"k": "<v>"}, "t": metav1.Time{}, "i32": int32(7)},
	} {
		want, wantErr := json.Marshal(v)
		got, err := Marshal(v)
		require.NoError(t, wantErr, "%#v", v)
		require.NoError(t, err, "%#v", v)
		assert.Equal(t, string(want), string(got), "%#v", v)
	}
	// Invalid UTF-8 (no object read from the API server holds it: its
	// decoder replaces it) is written as U+FFFD itself, not as encoding/json's
	// escape \ufffd: the same string once read.
	for _, s := range []string{"bad \xff\xfe utf8 \xc3", "\xed\xa0\x80 surrogate", "<\xff>"} {
		want, _ := json.Marshal(s)
		got, err := Marshal(s)
		require.NoError(t, err)
		assert.Equal(t, strings.ReplaceAll(string(want), `\ufffd`, "\ufffd"), string(got), "%q", s)
	}
	for _, v := range []any{math.NaN(), math.Inf(1), map[string]any{"a": math.Inf(-1)}, map[string]any{"c": make(chan int)}} {
		_, wantErr := json.Marshal(v)
		_, err := Marshal(v)
		require.Error(t, wantErr)
		assert.Error(t, err, "%#v", v)
	}
}

func FuzzMarshalJSON(f *testing.F) {
	for _, c := range decodeCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		m, ok := DecodeObject(doc)
		if !ok {
			return
		}
		want, wantErr := json.Marshal(m)
		got, err := Marshal(m)
		require.Equal(t, wantErr == nil, err == nil)
		if string(want) != string(got) {
			t.Fatalf("encoding/json %q, Marshal %q", want, got)
		}
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		require.NoError(t, enc.Encode(m))
		got, err = MarshalUnescaped(m)
		require.NoError(t, err)
		if want := strings.TrimSuffix(b.String(), "\n"); want != string(got) {
			t.Fatalf("encoding/json unescaped %q, MarshalUnescaped %q", want, got)
		}
	})
}
