package health

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ValuesEqual compares two JSON values (as decoded by encoding/json or
// paths.Value) with the leniency template authors rely on: YAML turns
// `value: True` into a boolean while status fields often hold the string
// "True", and numbers are sometimes quoted. So a string equals a boolean when
// it spells it case-insensitively ("True", "false"), a string equals a number
// when it is a JSON number of the same value ("3" == 3, "3.0" == 3), and
// integers equal floats of the same value. Lists and objects compare element
// by element with the same rules. Everything else compares strictly.
func ValuesEqual(a, b any) bool {
	a, b = normalize(a), normalize(b)
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		switch y := b.(type) {
		case bool:
			return x == y
		case string:
			return stringIsBool(y, x)
		}
	case number:
		switch y := b.(type) {
		case number:
			return x.equal(y)
		case string:
			n, ok := parseNumber(y)
			return ok && x.equal(n)
		}
	case string:
		switch y := b.(type) {
		case string:
			return x == y
		case bool:
			return stringIsBool(x, y)
		case number:
			n, ok := parseNumber(x)
			return ok && n.equal(y)
		}
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !ValuesEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !ValuesEqual(xv, yv) {
				return false
			}
		}
		return true
	}
	return false
}

// number holds a JSON number exactly when it is an integer that fits an int64.
type number struct {
	i     int64
	f     float64
	isInt bool
}

func (n number) equal(m number) bool {
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

// floatIsInt compares exactly, without rounding i to a float64.
func floatIsInt(f float64, i int64) bool {
	if f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return false
	}
	return int64(f) == i
}

var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// parseNumber accepts only JSON number syntax, so "Inf", "0x10" or " 3" are
// not numbers.
func parseNumber(s string) (number, bool) {
	if !jsonNumber.MatchString(s) {
		return number{}, false
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return number{i: i, isInt: true}, true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return number{}, false
	}
	return number{f: f}, true
}

func stringIsBool(s string, b bool) bool {
	return strings.EqualFold(s, strconv.FormatBool(b))
}

// normalize maps the Go types a caller may hand in (int from a test,
// json.Number from a UseNumber decoder) onto nil, bool, string, number,
// []any and map[string]any.
func normalize(v any) any {
	switch x := v.(type) {
	case int:
		return number{i: int64(x), isInt: true}
	case int8:
		return number{i: int64(x), isInt: true}
	case int16:
		return number{i: int64(x), isInt: true}
	case int32:
		return number{i: int64(x), isInt: true}
	case int64:
		return number{i: x, isInt: true}
	case uint8:
		return number{i: int64(x), isInt: true}
	case uint16:
		return number{i: int64(x), isInt: true}
	case uint32:
		return number{i: int64(x), isInt: true}
	case uint:
		return unsignedNumber(uint64(x))
	case uint64:
		return unsignedNumber(x)
	case float32:
		return floatNumber(float64(x))
	case float64:
		return floatNumber(x)
	case json.Number:
		if n, ok := parseNumber(string(x)); ok {
			return n
		}
		return string(x)
	}
	return v
}

func unsignedNumber(u uint64) number {
	if u <= math.MaxInt64 {
		return number{i: int64(u), isInt: true}
	}
	return number{f: float64(u)}
}

func floatNumber(f float64) number {
	if f == math.Trunc(f) && f >= math.MinInt64 && f < math.MaxInt64 {
		return number{i: int64(f), isInt: true}
	}
	return number{f: f}
}

// maxShown bounds how much of a value a message repeats.
const maxShown = 256

// show renders a value for a message: strings as they are, everything else
// as compact JSON, cut to maxShown bytes.
func show(v any) string {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case nil:
		s = "null"
	default:
		b, err := json.Marshal(x)
		if err != nil {
			s = fmt.Sprint(x)
		} else {
			s = string(b)
		}
	}
	if len(s) <= maxShown {
		return s
	}
	cut := maxShown
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// showList renders values as "a, b, c".
func showList(vs []any) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = show(v)
	}
	return strings.Join(parts, ", ")
}
