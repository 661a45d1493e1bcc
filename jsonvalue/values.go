package jsonvalue

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// The one rule for numbers: a JSON number is what apimachinery's
// unstructured decoding makes of its text, an int64 when it is an
// integer literal (no fraction, no exponent) that fits, a float64
// otherwise. A Go number is what that decoding makes of the text
// encoding/json writes for it. DecodeObject, FromResult and Scalar
// follow it; Unmarshal is apimachinery's own.

// numberValue converts lit, a number in JSON's grammar, by the rule. ok
// is false when it is beyond float64's range (apimachinery refuses the
// document).
func numberValue[T string | []byte](lit T) (any, bool) {
	if n, ok := smallInt(lit); ok {
		return n, true
	}
	integer := true
	for i := 0; i < len(lit); i++ {
		if c := lit[i]; c == '.' || c == 'e' || c == 'E' {
			integer = false
			break
		}
	}
	if integer {
		if n, err := strconv.ParseInt(string(lit), 10, 64); err == nil {
			return n, true
		}
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return nil, false
	}
	return f, true
}

// smallInt converts an integer literal of at most 18 digits, which cannot
// overflow, without strconv's copy of it.
func smallInt[T string | []byte](lit T) (int64, bool) {
	if len(lit) == 0 {
		return 0, false
	}
	neg := lit[0] == '-'
	i := 0
	if neg {
		i = 1
	}
	if len(lit)-i > 18 || len(lit) == i {
		return 0, false
	}
	var n int64
	for ; i < len(lit); i++ {
		c := lit[i]
		if c < '0' || c > '9' {
			return 0, false // a fraction or an exponent
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// ErrNumber is FromResult's error for a number no object can hold: beyond
// float64's range (apimachinery refuses the document) or not in JSON's
// grammar (gjson reads invalid JSON leniently).
var ErrNumber = errors.New("not a number an object can hold")

// FromResult converts a gjson result (a path's value in a JSON document)
// to the Go value unstructured objects hold: map[string]any, []any,
// string (invalid UTF-8 as apimachinery reads it), bool, nil, and numbers
// by the rule. The value shares no memory with the document. A number
// beyond float64's range or outside JSON's grammar is ErrNumber.
func FromResult(r gjson.Result) (any, error) {
	switch r.Type {
	case gjson.String:
		if s := validUTF8(r.Str); s != r.Str {
			return s, nil
		}
		return strings.Clone(r.Str), nil
	case gjson.JSON:
		// One copy of the raw text; strings and keys below point into it.
		return fromResult(gjson.Parse(strings.Clone(r.Raw)))
	}
	return fromResult(r)
}

func fromResult(r gjson.Result) (any, error) {
	switch r.Type {
	case gjson.Null:
		return nil, nil
	case gjson.False:
		return false, nil
	case gjson.True:
		return true, nil
	case gjson.String:
		return validUTF8(r.Str), nil
	case gjson.Number:
		v, ok := numberValue(r.Raw)
		if !ok || !numberSyntax.MatchString(r.Raw) {
			return nil, fmt.Errorf("%s: %w", r.Raw, ErrNumber)
		}
		return v, nil
	}
	var err error
	switch {
	case r.IsArray():
		out := []any{}
		r.ForEach(func(_, e gjson.Result) bool {
			var v any
			v, err = fromResult(e)
			out = append(out, v)
			return err == nil
		})
		return out, err
	case r.IsObject():
		out := map[string]any{}
		r.ForEach(func(k, e gjson.Result) bool {
			out[validUTF8(k.Str)], err = fromResult(e)
			return err == nil
		})
		return out, err
	}
	return nil, nil
}

// validUTF8 is s with each byte of invalid UTF-8 replaced by U+FFFD, as
// apimachinery's (encoding/json's) decoder reads a string; gjson keeps
// the bytes.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return string([]rune(s)) // an invalid byte is one utf8.RuneError
}

// Scalar converts a Go scalar (nil, a bool, a number of any Go type, a
// json.Number) to the value the API server holds once an object carrying
// it is written and read back: numbers by the rule, so float64(3) is
// int64(3) (encoding/json writes it "3") and float32(0.1) is 0.1. ok is
// false for anything else, and for a number JSON cannot hold (NaN, ±Inf).
func Scalar(v any) (any, bool) {
	switch n := v.(type) {
	case nil, bool, int64:
		return v, true
	case float64:
		return floatValue(n)
	case float32:
		// encoding/json writes the shortest text that reads back as n.
		f, _ := strconv.ParseFloat(strconv.FormatFloat(float64(n), 'g', -1, 32), 64)
		return floatValue(f)
	case int:
		return int64(n), true
	case int8:
		return int64(n), true
	case int16:
		return int64(n), true
	case int32:
		return int64(n), true
	case uint8:
		return int64(n), true
	case uint16:
		return int64(n), true
	case uint32:
		return int64(n), true
	case uint:
		return uintValue(uint64(n)), true
	case uint64:
		return uintValue(n), true
	case json.Number:
		if !numberSyntax.MatchString(string(n)) {
			return nil, false
		}
		return numberValue(string(n))
	}
	return nil, false
}

// floatValue is f by the rule: what apimachinery decodes from the text
// encoding/json writes for it. That text is an integer literal for an
// integral f below 1e21, in the fewest digits that read back as f (so
// 2^62 is 4611686018427388000, not 4611686018427387904), an int64 when
// it fits.
func floatValue(f float64) (any, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, false
	}
	if f != math.Trunc(f) || math.Abs(f) >= 1e21 {
		return f, true // a fraction or an exponent: read back as f
	}
	var buf [32]byte
	return numberValue(strconv.AppendFloat(buf[:0], f, 'f', -1, 64))
}

func uintValue(u uint64) any {
	if u <= math.MaxInt64 {
		return int64(u)
	}
	return float64(u)
}
