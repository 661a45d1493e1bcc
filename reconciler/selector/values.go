package selector

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"kontinue.dev/kontinue/jsonvalue"
)

// wantValue is a listed In/NotIn value, normalised once at compile time.
type wantValue struct {
	v    any
	text string // canonical JSON text when v is a number or a bool
	// scalar is true when text is set.
	scalar bool
}

func newWantValue(v any) (wantValue, error) {
	n, err := normalize(v)
	if err != nil {
		return wantValue{}, err
	}
	w := wantValue{v: n}
	w.text, w.scalar = scalarText(n)
	return w, nil
}

// matches reports whether the field's value got equals w (see the package
// comment for the rule).
func (w wantValue) matches(got any) bool {
	if jsonvalue.Equal(got, w.v) {
		return true
	}
	if s, ok := w.v.(string); ok {
		t, ok := scalarText(got)
		return ok && t == s
	}
	if s, ok := got.(string); ok {
		return w.scalar && w.text == s
	}
	return false
}

// normalize converts a listed value to the shapes paths.Value produces:
// map[string]any, []any, string, bool, nil, int64 or float64. Types it does
// not know go through encoding/json.
func normalize(v any) (any, error) {
	switch x := v.(type) {
	case nil, string, bool, int64, float64:
		return x, nil
	case int:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case uint:
		return normalizeUint(uint64(x)), nil
	case uint8:
		return int64(x), nil
	case uint16:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case uint64:
		return normalizeUint(x), nil
	case float32:
		// Through the shortest decimal text, so float32(0.1) is 0.1 and not 0.10000000149.
		f, _ := strconv.ParseFloat(strconv.FormatFloat(float64(x), 'g', -1, 32), 64)
		return f, nil
	case json.Number:
		return numberValue(string(x))
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			n, err := normalize(e)
			if err != nil {
				return nil, fmt.Errorf("member %q: %w", k, err)
			}
			out[k] = n
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			n, err := normalize(e)
			if err != nil {
				return nil, fmt.Errorf("element [%d]: %w", i, err)
			}
			out[i] = n
		}
		return out, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("not a JSON value: %w", err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var out any
	if err := d.Decode(&out); err != nil {
		return nil, fmt.Errorf("not a JSON value: %w", err)
	}
	return normalize(out)
}

func normalizeUint(u uint64) any {
	if u <= math.MaxInt64 {
		return int64(u)
	}
	return float64(u)
}

func numberValue(s string) (any, error) {
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fmt.Errorf("invalid number %q", s)
	}
	return f, nil
}

// scalarText is the canonical JSON text of a number or bool.
func scalarText(v any) (string, bool) {
	switch x := v.(type) {
	case bool:
		return strconv.FormatBool(x), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case int:
		return strconv.Itoa(x), true
	case float64:
		// encoding/json's formatting: 3.0 is "3", 1e21 is "1e+21".
		b, err := json.Marshal(x)
		if err != nil { // NaN or ±Inf: no JSON text
			return "", false
		}
		return string(b), true
	}
	return "", false
}
