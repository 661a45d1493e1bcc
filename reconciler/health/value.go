package health

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"kontinue.dev/kontinue/jsonvalue"
)

// ValuesEqual compares two JSON values (as decoded by encoding/json or
// paths.Value) with the leniency template authors rely on: YAML turns
// `value: True` into a boolean while status fields often hold the string
// "True", and numbers are sometimes quoted. So a string equals a boolean when
// it spells it case-insensitively ("True", "false"), a string equals a number
// when it is a JSON number of the same value ("3" == 3, "3.0" == 3), and
// integers equal floats of the same value. Lists and objects compare element
// by element with the same rules. Everything else compares strictly.
func ValuesEqual(a, b any) bool { return jsonvalue.EqualWith(a, b, lenientScalar) }

func lenientScalar(a, b any) bool {
	if x, ok := jsonvalue.NumberOf(a); ok {
		if y, ok := jsonvalue.NumberOf(b); ok {
			return x.Equal(y)
		}
		s, ok := b.(string)
		if !ok {
			return false
		}
		y, ok := jsonvalue.ParseNumber(s)
		return ok && x.Equal(y)
	}
	if _, ok := jsonvalue.NumberOf(b); ok {
		return lenientScalar(b, a)
	}
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
	case string:
		switch y := b.(type) {
		case string:
			return x == y
		case bool:
			return stringIsBool(x, y)
		}
	}
	return false
}

func stringIsBool(s string, b bool) bool {
	return strings.EqualFold(s, strconv.FormatBool(b))
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
