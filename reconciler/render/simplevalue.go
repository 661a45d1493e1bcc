package render

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// JSON values as Kubernetes unstructured objects hold them: integers
// as int64, other numbers as float64.

// toValue converts a result to the Go value unstructured objects hold, with
// integral numbers as int64. Strings are copied so that the rendered object
// does not keep the whole context JSON alive.
func toValue(r gjson.Result) any {
	switch r.Type {
	case gjson.String:
		return strings.Clone(r.Str)
	case gjson.JSON:
		return plainValue(gjson.Parse(strings.Clone(r.Raw)))
	}
	return plainValue(r)
}

func plainValue(r gjson.Result) any {
	switch r.Type {
	case gjson.Null:
		return nil
	case gjson.False:
		return false
	case gjson.True:
		return true
	case gjson.String:
		return r.Str
	case gjson.Number:
		// As apimachinery decodes the same text (jsonvalue.Unmarshal):
		// int64 when it parses as one, else float64.
		if n, err := strconv.ParseInt(r.Raw, 10, 64); err == nil {
			return n
		}
		if f, err := strconv.ParseFloat(r.Raw, 64); err == nil {
			return f
		}
		return r.Num
	}
	if r.IsArray() {
		out := []any{}
		r.ForEach(func(_, v gjson.Result) bool {
			out = append(out, plainValue(v))
			return true
		})
		return out
	}
	if r.IsObject() {
		out := map[string]any{}
		r.ForEach(func(k, v gjson.Result) bool {
			out[k.Str] = plainValue(v)
			return true
		})
		return out
	}
	return nil
}

// scalar normalizes a JSON scalar the way Kubernetes unstructured objects
// hold it: integers as int64, other numbers as float64.
func scalar(v any) (any, bool) {
	switch n := v.(type) {
	case nil, bool, int64:
		return v, true
	case float64:
		return normFloat(n), true
	case float32:
		return normFloat(float64(n)), true
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
		return normUint(uint64(n)), true
	case uint64:
		return normUint(n), true
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return i, true
		}
		if f, err := n.Float64(); err == nil {
			return normFloat(f), true
		}
	}
	return nil, false
}

func normFloat(f float64) any {
	if f == math.Trunc(f) && f >= math.MinInt64 && f < math.MaxInt64 {
		return int64(f)
	}
	return f
}

func normUint(u uint64) any {
	if u <= math.MaxInt64 {
		return int64(u)
	}
	return float64(u)
}
