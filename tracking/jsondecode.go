package tracking

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// decodeObject parses data, one JSON object, into the values an
// unstructured object holds, as apimachinery's decoder does
// (sigs.k8s.io/json with its integers kept): objects are map[string]any,
// arrays []any (empty, not nil), integers without a '.' that fit an int64
// are int64, other numbers float64, a repeated key keeps its last value.
//
// It reads the document once. apimachinery's JSON path reads each one
// five times (the kind, two validations, the value, and a detector for
// lists): decoding was a fifth of Kontinue's CPU while converging
// (bench/README.md). ok is false for anything else, invalid JSON
// included: the caller then decodes with apimachinery, which gives the
// error its users know.
func decodeObject(data []byte) (obj map[string]any, ok bool) {
	d := jsonDecoder{data: data}
	d.space()
	if d.i >= len(d.data) || d.data[d.i] != '{' {
		return nil, false
	}
	v, ok := d.value(0)
	if !ok {
		return nil, false
	}
	d.space()
	if d.i != len(d.data) {
		return nil, false // something after the object
	}
	return v.(map[string]any), true
}

// maxDepth is the nesting the standard decoder accepts, and so the deepest
// object the API server reads (from a request or from etcd) and sends.
// It counts from the object's own top, wherever the object sits: the API
// server sends an object 10,000 levels deep (managedFields included) in a
// watch event, one level more, which apimachinery's decoder refuses for
// the whole event, so that one object would stop the watch of its kind
// for every object (splitEvent).
const maxDepth = 10000

type jsonDecoder struct {
	data []byte
	i    int
}

func (d *jsonDecoder) space() {
	for d.i < len(d.data) {
		switch d.data[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// value parses the value at d.i (no space before it).
func (d *jsonDecoder) value(depth int) (any, bool) {
	if d.i >= len(d.data) {
		return nil, false
	}
	switch c := d.data[d.i]; {
	case c == '{':
		if depth >= maxDepth {
			return nil, false
		}
		return d.object(depth + 1)
	case c == '[':
		if depth >= maxDepth {
			return nil, false
		}
		return d.array(depth + 1)
	case c == '"':
		s, ok := d.str(false)
		return s, ok
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	}
	return nil, false
}

func (d *jsonDecoder) literal(lit string) bool {
	if len(d.data)-d.i < len(lit) || string(d.data[d.i:d.i+len(lit)]) != lit {
		return false
	}
	d.i += len(lit)
	return true
}

func (d *jsonDecoder) object(depth int) (any, bool) {
	d.i++ // {
	m := make(map[string]any)
	d.space()
	if d.i < len(d.data) && d.data[d.i] == '}' {
		d.i++
		return m, true
	}
	for {
		if d.i >= len(d.data) || d.data[d.i] != '"' {
			return nil, false
		}
		k, ok := d.str(true)
		if !ok || !d.colon() {
			return nil, false
		}
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		m[k] = v
		if more, ok := d.next('}'); !ok {
			return nil, false
		} else if !more {
			return m, true
		}
	}
}

// colon reads the colon after an object's key and the space around it.
func (d *jsonDecoder) colon() bool {
	d.space()
	if d.i >= len(d.data) || d.data[d.i] != ':' {
		return false
	}
	d.i++
	d.space()
	return true
}

// next reads what follows an item of an object or array: a comma (more
// items) or end (the last one).
func (d *jsonDecoder) next(end byte) (more, ok bool) {
	d.space()
	if d.i >= len(d.data) {
		return false, false
	}
	switch d.data[d.i] {
	case ',':
		d.i++
		d.space()
		return true, true
	case end:
		d.i++
		return false, true
	}
	return false, false
}

func (d *jsonDecoder) array(depth int) (any, bool) {
	d.i++ // [
	a := make([]any, 0)
	d.space()
	if d.i < len(d.data) && d.data[d.i] == ']' {
		d.i++
		return a, true
	}
	for {
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		a = append(a, v)
		if more, ok := d.next(']'); !ok {
			return nil, false
		} else if !more {
			return a, true
		}
	}
}

// str parses a string. Plain ASCII (most strings of an object) is copied
// as it is, the short escapes are undone here, and \u escapes and invalid
// UTF-8 go through encoding/json, so that they decode exactly as the
// standard decoder's (lone surrogates and bad bytes become U+FFFD).
//
// A key is taken from commonStrings when it is there, without allocating.
func (d *jsonDecoder) str(key bool) (string, bool) {
	start := d.i
	d.i++ // "
	escaped, nonASCII := false, false
	for d.i < len(d.data) {
		c := d.data[d.i]
		switch {
		case c == '"':
			d.i++
			raw := d.data[start+1 : d.i-1]
			switch {
			case !escaped && !nonASCII:
				if key && len(raw) <= 24 {
					if s, ok := commonStrings[string(raw)]; ok {
						return s, true
					}
				}
				return string(raw), true
			case nonASCII && !utf8.Valid(raw):
				return d.std(start)
			}
			return unescape(raw, d, start)
		case c == '\\':
			escaped = true
			d.i += 2 // the escaped byte cannot end the string
		case c < 0x20:
			return "", false // control characters must be escaped
		case c >= utf8.RuneSelf:
			nonASCII = true
			d.i++
		default:
			d.i++
		}
	}
	return "", false
}

// std decodes the string from start to d.i with encoding/json.
func (d *jsonDecoder) std(start int) (string, bool) {
	var s string
	if json.Unmarshal(d.data[start:d.i], &s) != nil {
		return "", false
	}
	return s, true
}

// unescape undoes the short escapes of valid UTF-8 raw; a \u escape goes
// to encoding/json.
func unescape(raw []byte, d *jsonDecoder, start int) (string, bool) {
	b := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' {
			b = append(b, c)
			continue
		}
		i++
		switch raw[i] {
		case '"', '\\', '/':
			b = append(b, raw[i])
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			return d.std(start)
		default:
			return "", false
		}
	}
	return string(b), true
}

// commonStrings are keys most objects repeat: one copy each instead of
// one per object.
var commonStrings = func() map[string]string {
	m := map[string]string{}
	for _, s := range []string{
		"apiVersion", "kind", "metadata", "name", "namespace", "uid", "resourceVersion", "generation",
		"creationTimestamp", "labels", "annotations", "ownerReferences", "controller", "blockOwnerDeletion",
		"managedFields", "manager", "operation", "fieldsType", "fieldsV1", "time", "subresource",
		"status", "spec", "data", "items", "type", "object",
		"conditions", "lastTransitionTime", "message", "reason", "observedGeneration", ".",
	} {
		m[s] = s
	}
	return m
}()

// number parses a number by JSON's grammar, then converts it as the
// standard decoder does with integers kept.
func (d *jsonDecoder) number() (any, bool) {
	start := d.i
	float, ok := d.numberLit()
	if !ok {
		return nil, false
	}
	lit := d.data[start:d.i]
	if !float {
		if n, ok := smallInt(lit); ok {
			return n, true
		}
		if n, err := strconv.ParseInt(string(lit), 10, 64); err == nil {
			return n, true
		}
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return nil, false // out of range: the standard decoder fails too
	}
	return f, true
}

// numberLit skips a number by JSON's grammar; float: it has a fraction.
func (d *jsonDecoder) numberLit() (float, ok bool) {
	if d.data[d.i] == '-' {
		d.i++
	}
	if d.i >= len(d.data) {
		return false, false
	}
	switch c := d.data[d.i]; {
	case c == '0':
		d.i++
	case c >= '1' && c <= '9':
		d.digits()
	default:
		return false, false
	}
	if d.i < len(d.data) && d.data[d.i] == '.' {
		float = true
		d.i++
		if !d.digits() {
			return false, false
		}
	}
	if d.i < len(d.data) && (d.data[d.i] == 'e' || d.data[d.i] == 'E') {
		d.i++
		if d.i < len(d.data) && (d.data[d.i] == '+' || d.data[d.i] == '-') {
			d.i++
		}
		if !d.digits() {
			return false, false
		}
	}
	return float, true
}

// digits skips one or more digits.
func (d *jsonDecoder) digits() bool {
	start := d.i
	for d.i < len(d.data) && d.data[d.i] >= '0' && d.data[d.i] <= '9' {
		d.i++
	}
	return d.i > start
}

// smallInt converts an integer literal of at most 18 digits, which cannot
// overflow, without strconv's copy of it.
func smallInt(lit []byte) (int64, bool) {
	neg := lit[0] == '-'
	if neg {
		lit = lit[1:]
	}
	if len(lit) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range lit {
		if c < '0' || c > '9' {
			return 0, false // an exponent
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// splitEvent reads a watch event, {"type": ..., "object": {...}}, without
// decoding its object: object is its JSON within data. ok is false for
// anything else.
func splitEvent(data []byte) (typ string, object []byte, ok bool) {
	d := jsonDecoder{data: data}
	d.space()
	if d.i >= len(d.data) || d.data[d.i] != '{' {
		return "", nil, false
	}
	d.i++
	d.space()
	for d.i < len(d.data) && d.data[d.i] == '"' {
		k, ok := d.str(true)
		if !ok || !d.colon() {
			return "", nil, false
		}
		start := d.i
		switch {
		case k == "type" && d.i < len(d.data) && d.data[d.i] == '"':
			if typ, ok = d.str(false); !ok {
				return "", nil, false
			}
		case k == "object" && d.i < len(d.data) && d.data[d.i] == '{':
			if !d.skip(0) { // as deep as an object on its own (maxDepth)
				return "", nil, false
			}
			object = d.data[start:d.i]
		default:
			return "", nil, false // not an event as the API server writes it
		}
		d.space()
		if d.i < len(d.data) && d.data[d.i] == ',' {
			d.i++
			d.space()
			if d.i >= len(d.data) || d.data[d.i] != '"' {
				return "", nil, false // a comma before the end
			}
			continue
		}
		break
	}
	if d.i >= len(d.data) || d.data[d.i] != '}' || typ == "" || object == nil {
		return "", nil, false
	}
	d.i++
	d.space()
	return typ, object, d.i == len(d.data)
}

// skip passes over the value at d.i, checking its grammar as the standard
// decoder does, building nothing.
func (d *jsonDecoder) skip(depth int) bool {
	if d.i >= len(d.data) {
		return false
	}
	switch c := d.data[d.i]; {
	case c == '{' || c == '[':
		if depth >= maxDepth {
			return false
		}
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		d.i++
		d.space()
		if d.i < len(d.data) && d.data[d.i] == end {
			d.i++
			return true
		}
		for {
			if end == '}' && (d.i >= len(d.data) || d.data[d.i] != '"' || !d.skipString() || !d.colon()) {
				return false
			}
			if !d.skip(depth + 1) {
				return false
			}
			if more, ok := d.next(end); !ok || !more {
				return ok
			}
		}
	case c == '"':
		return d.skipString()
	case c == '-' || (c >= '0' && c <= '9'):
		_, ok := d.numberLit()
		return ok
	case c == 't':
		return d.literal("true")
	case c == 'f':
		return d.literal("false")
	case c == 'n':
		return d.literal("null")
	}
	return false
}

// skipString passes over a string, checking its escapes.
func (d *jsonDecoder) skipString() bool {
	d.i++ // "
	for d.i < len(d.data) {
		switch c := d.data[d.i]; {
		case c == '"':
			d.i++
			return true
		case c == '\\':
			if d.i+1 >= len(d.data) {
				return false
			}
			switch d.data[d.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.i += 2
			case 'u':
				if d.i+6 > len(d.data) {
					return false
				}
				for _, h := range d.data[d.i+2 : d.i+6] {
					if !isHex(h) {
						return false
					}
				}
				d.i += 6
			default:
				return false
			}
		case c < 0x20:
			return false
		default:
			d.i++
		}
	}
	return false
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}
