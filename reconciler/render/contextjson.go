package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"kontinue.dev/kontinue/reconciler/jsonvalue"
)

// The template context encoded as JSON, directly for the types
// unstructured objects hold.

// maxContextDepth bounds the nesting of the context while encoding it (a
// cycle, or an owner, param or input nested deeper than anything Kontinue
// writes: jsonvalue.MaxDepth).
const maxContextDepth = jsonvalue.MaxDepth

// errContextTooDeep is appendJSON's error past maxContextDepth.
var errContextTooDeep = fmt.Errorf("nested deeper than %d levels (the owner, a param or an input)", maxContextDepth)

// contextError is the StampError of a context that does not encode.
func contextError(engine, what string, err error) *StampError {
	if errors.Is(err, errContextTooDeep) {
		return &StampError{Engine: engine, Message: what + " is " + errContextTooDeep.Error()}
	}
	return &StampError{Engine: engine, Message: what + " is not JSON", Err: err}
}

// appendJSON appends v as compact JSON with sorted keys and no HTML escaping,
// like encoding/json with SetEscapeHTML(false). The JSON-like types of
// unstructured objects are encoded directly, since reflection made encoding
// the context most of the cost of a render; other types go to encoding/json.
func appendJSON(b []byte, v any, depth int) ([]byte, error) {
	if depth > maxContextDepth {
		return b, errContextTooDeep
	}
	var err error
	switch t := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		return strconv.AppendBool(b, t), nil
	case string:
		return appendString(b, t), nil
	case int64:
		return strconv.AppendInt(b, t, 10), nil
	case int:
		return strconv.AppendInt(b, int64(t), 10), nil
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			if b, err = appendJSON(b, t[k], depth+1); err != nil {
				return b, err
			}
		}
		return append(b, '}'), nil
	case []any:
		b = append(b, '[')
		for i, e := range t {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendJSON(b, e, depth+1); err != nil {
				return b, err
			}
		}
		return append(b, ']'), nil
	case Context:
		return appendJSON(b, map[string]any(t), depth)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return b, err
	}
	return append(b, bytes.TrimRight(buf.Bytes(), "\n")...), nil
}

// appendString appends s as a JSON string. Plain printable ASCII is copied;
// anything else (escapes, control characters, non-ASCII and invalid UTF-8)
// is left to encoding/json so the result is exactly what it would produce.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(s) // a string always encodes
			return append(b, bytes.TrimRight(buf.Bytes(), "\n")...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
