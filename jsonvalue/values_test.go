package jsonvalue

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

var numberDocs = []string{
	"0", "-0", "1", "1.0", "-0.0", "1.5", "0.1", "1e-7", "1e2", "1E+2", "-1e2",
	"9007199254740993", "-9007199254740993", "123456789012345678", "1234567890123456789",
	"9223372036854775807", "-9223372036854775808", "9223372036854775808", "18446744073709551615",
	"1e21", "100000000000000000000", "1e308", "5e-324", "1e400", "-1e400",
	`{"a":[1,1.0,{"b":-0}],"c":"x","d":null,"e":true}`, `[]`, `{}`, `"s"`,
	// Invalid UTF-8 (found by the fuzzer), raw and escaped.
	"\"\x89\"", "{\"k\xff\":[\"a\xed\xa0\x80b\"]}", `"\ud800 \udc00x \ud83d\ude00"`,
}

// A gjson value converts to what apimachinery decodes from the same text.
func checkFromResult(t *testing.T, doc string) {
	var want any
	wantErr := Unmarshal([]byte(doc), &want)
	if wantErr != nil && gjson.Valid(doc) && !gjson.Parse(doc).IsObject() && !gjson.Parse(doc).IsArray() && gjson.Parse(doc).Type != gjson.Number {
		return
	}
	if !gjson.Valid(doc) {
		return
	}
	got, err := FromResult(gjson.Parse(doc))
	require.Equal(t, wantErr == nil, err == nil, "%s: apimachinery %v, FromResult %v", doc, wantErr, err)
	if err == nil {
		assert.Equal(t, want, got, doc)
	}
}

func TestFromResultAsApimachinery(t *testing.T) {
	for _, doc := range numberDocs {
		t.Run(doc, func(t *testing.T) { checkFromResult(t, doc) })
	}
}

func FuzzFromResultAsApimachinery(f *testing.F) {
	for _, doc := range numberDocs {
		f.Add(doc)
	}
	f.Fuzz(checkFromResult)
}

// A Go number is what apimachinery decodes from encoding/json's text of it.
func TestScalarAsApimachinery(t *testing.T) {
	for _, v := range []any{
		nil, true, int64(-3), 3, int8(-8), int16(16), int32(32), uint8(8), uint16(16), uint32(32), uint(7), uint64(math.MaxUint64),
		0.0, math.Copysign(0, -1), 3.0, 1.5, 1e20, 1e21, float64(math.MaxInt64), -float64(math.MaxInt64), float64(1 << 62), -float64(1<<62) + 1024, 4e18, 5e-324,
		float32(0.1), float32(3), float32(1e30), json.Number("12"), json.Number("1.0"), json.Number("1e400"),
	} {
		got, ok := Scalar(v)
		text, err := json.Marshal(v)
		require.NoError(t, err)
		var want any
		if err := Unmarshal(text, &want); err != nil {
			assert.False(t, ok, "%#v", v)
			continue
		}
		require.True(t, ok, "%#v", v)
		assert.Equal(t, want, got, "%#v (%s)", v, text)
	}
	for _, v := range []any{math.NaN(), math.Inf(1), float32(math.Inf(-1)), json.Number("x"), json.Number("Inf"), "s", []any{}} {
		_, ok := Scalar(v)
		assert.False(t, ok, "%#v", v)
	}
}

func FuzzScalarAsApimachinery(f *testing.F) {
	for _, x := range []float64{0, 3, 1.5, 1 << 62, 1e20, 1e21, -9.223372036854776e+18, 5e-324} {
		f.Add(x)
	}
	f.Fuzz(func(t *testing.T, x float64) {
		got, ok := Scalar(x)
		text, err := json.Marshal(x)
		if err != nil {
			require.False(t, ok)
			return
		}
		var want any
		require.NoError(t, Unmarshal(text, &want))
		require.True(t, ok)
		require.Equal(t, want, got, "%v (%s)", x, text)
	})
}
