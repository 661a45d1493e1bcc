// Package jsonvalue compares JSON values the way Kontinue reads them: from
// the cache (int64), from a JSON round trip (float64), from a template or a
// test (int, json.Number). Numbers compare by exact value, so int64 2^53+1
// differs from float64 2^53 even though a float64 conversion would merge them.
//
// Unmarshal and Remarshal decode JSON as the API server and apimachinery's
// unstructured objects do: every JSON decode of a value that may reach a
// stamped object or a status goes through them, never encoding/json's
// decoder into an any (which makes every number a float64 and alters
// integers past 2^53).
package jsonvalue

import (
	"encoding/json"
	"math"
	"regexp"
	"strconv"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// Unmarshal decodes data into v as apimachinery decodes an object's JSON
// (k8s.io/apimachinery/pkg/util/json): a number decoded into an any is an
// int64 when it is written without a fraction or exponent and fits, a
// float64 otherwise; object keys match struct fields case-sensitively.
func Unmarshal(data []byte, v any) error { return utiljson.Unmarshal(data, v) }

// Remarshal converts in to out through JSON (in encoded by encoding/json,
// decoded by Unmarshal): an unstructured value into a struct, a struct
// into unstructured values.
func Remarshal(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return Unmarshal(b, out)
}

// Number is a JSON number, exact when it is an integer that fits an int64.
type Number struct {
	i     int64
	f     float64
	isInt bool
}

// Equal compares exactly, never rounding an integer to a float64.
func (n Number) Equal(m Number) bool {
	switch {
	case n.isInt && m.isInt:
		return n.i == m.i
	case n.isInt:
		return floatIsInt(m.f, n.i)
	case m.isInt:
		return floatIsInt(n.f, m.i)
	}
	return n.f == m.f
}

func floatIsInt(f float64, i int64) bool {
	if f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return false
	}
	return int64(f) == i
}

// NumberOf returns v as a Number when v is one of Go's number types or a
// json.Number.
func NumberOf(v any) (Number, bool) {
	switch x := v.(type) {
	case int:
		return Number{i: int64(x), isInt: true}, true
	case int8:
		return Number{i: int64(x), isInt: true}, true
	case int16:
		return Number{i: int64(x), isInt: true}, true
	case int32:
		return Number{i: int64(x), isInt: true}, true
	case int64:
		return Number{i: x, isInt: true}, true
	case uint8:
		return Number{i: int64(x), isInt: true}, true
	case uint16:
		return Number{i: int64(x), isInt: true}, true
	case uint32:
		return Number{i: int64(x), isInt: true}, true
	case uint:
		return unsigned(uint64(x)), true
	case uint64:
		return unsigned(x), true
	case float32:
		return float(float64(x)), true
	case float64:
		return float(x), true
	case json.Number:
		return ParseNumber(string(x))
	}
	return Number{}, false
}

func unsigned(u uint64) Number {
	if u <= math.MaxInt64 {
		return Number{i: int64(u), isInt: true}
	}
	return Number{f: float64(u)}
}

func float(f float64) Number {
	if f == math.Trunc(f) && f >= math.MinInt64 && f < math.MaxInt64 {
		return Number{i: int64(f), isInt: true}
	}
	return Number{f: f}
}

var numberSyntax = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// ParseNumber accepts only JSON number syntax, so "Inf", "0x10" or " 3" are
// not numbers.
func ParseNumber(s string) (Number, bool) {
	if !numberSyntax.MatchString(s) {
		return Number{}, false
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return Number{i: i, isInt: true}, true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return Number{}, false
	}
	return Number{f: f}, true
}

// NumbersEqual reports whether a and b are both numbers, and equal.
func NumbersEqual(a, b any) bool {
	x, ok := NumberOf(a)
	if !ok {
		return false
	}
	y, ok := NumberOf(b)
	return ok && x.Equal(y)
}

// Equal is deep equality of JSON values with numbers compared by exact
// value and no other coercion ("3" is not 3).
func Equal(a, b any) bool { return EqualWith(a, b, strictScalar) }

func strictScalar(a, b any) bool {
	if x, ok := NumberOf(a); ok {
		y, ok := NumberOf(b)
		return ok && x.Equal(y)
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	}
	return false
}

// EqualWith is deep equality of JSON values: objects and lists compare
// member by member, everything else with scalar.
func EqualWith(a, b any, scalar func(a, b any) bool) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !EqualWith(xv, yv, scalar) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !EqualWith(x[i], y[i], scalar) {
				return false
			}
		}
		return true
	}
	switch b.(type) {
	case map[string]any, []any:
		return false
	}
	return scalar(a, b)
}

// MaxDepth is the deepest nesting of objects and arrays Kontinue writes
// into an object: a rendered object deeper than this is refused before it
// is written, a status field copied from elsewhere (outputs, a last good
// object) is left out, and the render context is bounded alike.
//
// The API server decodes JSON to 10,000 levels and no further, and
// counts managedFields, which mirror an object's fields five levels
// further down, in the object it serves. Measured on kube-apiserver 1.32:
// a custom resource written 9,994 levels deep makes every LIST of its
// kind fail for every client, one of 9,996 is stored but can then be
// neither read, listed nor deleted. Kontinue never writes anything near
// that; real objects nest a few dozen levels.
const MaxDepth = 1000

// DeeperThan reports whether v (unstructured values: maps, slices,
// scalars) nests objects and arrays more than n levels deep ({} is one
// level, a scalar none). It looks no deeper than n+1 levels.
func DeeperThan(v any, n int) bool {
	switch x := v.(type) {
	case map[string]any:
		if n <= 0 {
			return true
		}
		for _, e := range x {
			if DeeperThan(e, n-1) {
				return true
			}
		}
	case []any:
		if n <= 0 {
			return true
		}
		for _, e := range x {
			if DeeperThan(e, n-1) {
				return true
			}
		}
	}
	return false
}
