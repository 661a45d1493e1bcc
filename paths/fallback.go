package paths

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
	"k8s.io/client-go/util/jsonpath"
)

// The compiled gjson form covers what people write almost always. The rest
// of the JSONPath that Cartographer accepts (recursive descent `..`, unions,
// slices, compound filters, `.*`) is evaluated by client-go's jsonpath, which
// is what Cartographer itself uses: slower (it decodes the document), but
// with the same results.

// fallback is a client-go template that parsed where compile did not.
type fallback struct {
	template string // the expression wrapped as a template: "{.a..b}"
}

// beyondSubset are the syntax errors of constructs that are valid JSONPath,
// only outside the compiled subset. Other syntax errors stay errors: client-go
// is lenient with malformed text ("a b", "a.") that means nothing useful.
var beyondSubset = []string{
	"recursive descent '..' is not supported",
	"wildcard '.*' is not supported",
	"slices are not supported",
	"unions are not supported",
	"comparing two paths is not supported",
	"wildcards are not supported inside a filter",
	"nested filters are not supported",
}

// compileFallback parses expr with client-go's jsonpath, wrapped in braces
// the way Cartographer wraps it, when compile failed only because expr is
// beyond the subset; otherwise, or if client-go rejects it too, nil.
func compileFallback(expr string, compileErr error) *fallback {
	se, ok := compileErr.(*SyntaxError)
	if !ok || !slices.ContainsFunc(beyondSubset, func(m string) bool { return strings.HasPrefix(se.Msg, m) }) {
		return nil
	}
	t := strings.TrimSpace(expr)
	switch strings.Join(strings.Fields(t), "") {
	case "", "{}", ".", "{.}", "$", "{$}":
		return nil // the whole document is never one path's value
	}
	if !strings.HasPrefix(t, "{") {
		if !strings.HasPrefix(t, ".") && !strings.HasPrefix(t, "$") {
			t = "." + t
		}
		t = "{" + t + "}"
	}
	// A template with text outside the braces, or several of them, is not
	// one path: keep it a syntax error.
	if strings.Count(t, "{") != 1 || strings.Count(t, "}") != 1 || !strings.HasSuffix(t, "}") ||
		strings.HasSuffix(strings.TrimSpace(strings.TrimSuffix(t, "}")), ".") {
		return nil
	}
	if err := jsonpath.New("").Parse(t); err != nil {
		return nil
	}
	return &fallback{template: t}
}

// results evaluates the template on doc and returns every value found.
func (f *fallback) results(doc string) ([]any, error) {
	var obj any
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil {
		return nil, err
	}
	obj = unstructuredNumbers(obj)
	// A JSONPath holds parse state: one per evaluation keeps evaluations
	// concurrency-safe (this is the slow path anyway).
	jp := jsonpath.New("").AllowMissingKeys(true)
	if err := jp.Parse(f.template); err != nil {
		return nil, err
	}
	sets, err := jp.FindResults(obj)
	if err != nil {
		// An index out of range, a comparison of different types...: as
		// for the compiled subset, there is no value.
		return nil, nil
	}
	var out []any
	for _, set := range sets {
		for _, v := range set {
			if v.IsValid() && v.CanInterface() {
				out = append(out, v.Interface())
			} else {
				out = append(out, nil)
			}
		}
	}
	return out, nil
}

func (p *Path) getFallback(doc string) (gjson.Result, error) {
	v, err := p.valueFallback(doc)
	if err != nil {
		return gjson.Result{}, err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return gjson.Result{}, fmt.Errorf("path %q: %w", p.expr, err)
	}
	return gjson.ParseBytes(bytes.TrimSpace(b.Bytes())), nil
}

// valueFallback is the one value the template finds in doc, as decoded
// (numbers as apimachinery holds them: no JSON round trip, which would
// turn 1.0 into 1).
func (p *Path) valueFallback(doc string) (any, error) {
	vals, err := p.fallback.results(doc)
	if err != nil {
		return nil, fmt.Errorf("path %q: %w", p.expr, err)
	}
	switch len(vals) {
	case 0:
		return nil, p.notFound
	case 1:
		return deref(vals[0]), nil
	default:
		return nil, &AmbiguousError{Path: p.expr, Count: len(vals)}
	}
}

func (p *Path) existsFallback(doc []byte) (bool, error) {
	vals, err := p.fallback.results(string(doc))
	if err != nil {
		return false, fmt.Errorf("path %q: %w", p.expr, err)
	}
	return len(vals) > 0, nil
}

// deref unwraps the interface values jsonpath hands back.
func deref(v any) any {
	rv := reflect.ValueOf(v)
	for rv.IsValid() && (rv.Kind() == reflect.Interface || rv.Kind() == reflect.Pointer) {
		if rv.IsNil() {
			return nil
		}
		rv = rv.Elem()
	}
	if !rv.IsValid() {
		return nil
	}
	return rv.Interface()
}

// unstructuredNumbers turns json.Numbers into int64 (when integral) or
// float64, as Kubernetes unstructured objects hold them: client-go's filters
// compare those types, not strings.
func unstructuredNumbers(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = unstructuredNumbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = unstructuredNumbers(e)
		}
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		f, _ := v.Float64()
		return f
	}
	return v
}
