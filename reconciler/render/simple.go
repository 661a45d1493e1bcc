package render

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
)

// SimpleName is the name of the `$(…)$` engine.
const SimpleName = "simple"

// Limits that keep a hostile template from stalling or bloating the controller.
const (
	maxDepth       = 64      // nesting of maps and lists in the template
	maxOutputBytes = 1 << 20 // approximate JSON size of the rendered object
)

func init() { Register(FieldTemplate, Simple()) }

// Simple returns the Cartographer-compatible `$(…)$` engine. It is also what
// renders ClusterRunTemplates: wrap the template in an api.TemplateSpec.
func Simple() Engine { return simpleEngine{} }

type simpleEngine struct{}

func (simpleEngine) Name() string { return SimpleName }

// Render replaces the `$(path)$` tags in the string leaves of spec.Template
// with values from tc. A leaf that is exactly one tag takes the value's own
// type; otherwise tags are interpolated, non-strings as compact JSON. The
// template is never modified: the result is a fresh tree.
func (simpleEngine) Render(ctx context.Context, spec *api.TemplateSpec, tc Context) ([]*unstructured.Unstructured, error) {
	if err := ctx.Err(); err != nil {
		return nil, &StampError{Engine: SimpleName, Message: "rendering canceled", Err: err}
	}
	if spec == nil || spec.Template == nil {
		return nil, &StampError{Engine: SimpleName, Message: "template is empty"}
	}
	r := &renderer{tc: tc}
	out, werr := r.walk(spec.Template, 1)
	if werr != nil {
		// Map order is random; walk again in key order so that the same
		// template always reports the same error (conditions must not flap).
		r = &renderer{tc: tc, sorted: true, doc: r.doc, docErr: r.docErr, marshaled: r.marshaled}
		if _, again := r.walk(spec.Template, 1); again != nil {
			werr = again
		}
		return nil, werr.stampError()
	}
	obj := out.(map[string]any)
	if err := checkTypeMeta(obj); err != nil {
		return nil, err
	}
	return []*unstructured.Unstructured{{Object: obj}}, nil
}

func checkTypeMeta(obj map[string]any) error {
	for _, f := range []string{"apiVersion", "kind"} {
		s, ok := obj[f].(string)
		if !ok || s == "" {
			return &StampError{Engine: SimpleName, Message: "template has no apiVersion/kind: " + f + " must be a non-empty string"}
		}
	}
	return nil
}

// renderer holds the state of one Render call.
type renderer struct {
	tc        Context
	sorted    bool // iterate map keys in order (error reporting)
	size      int  // approximate JSON size rendered so far
	marshaled bool
	doc       []byte // tc as JSON, made on the first tag
	docErr    error
}

// context returns the context as JSON, marshaled once per Render and only if
// the template has a tag.
func (r *renderer) context() ([]byte, error) {
	if !r.marshaled {
		r.marshaled = true
		// Interpolated objects should read `<` as `<`, not `\u003c`, hence
		// no HTML escaping.
		r.doc, r.docErr = appendJSON(make([]byte, 0, 4096), map[string]any(r.tc), 0)
	}
	return r.doc, r.docErr
}

func (r *renderer) spend(n int) *walkError {
	r.size += n
	if r.size > maxOutputBytes {
		return &walkError{msg: fmt.Sprintf("rendered object is larger than %d bytes", maxOutputBytes)}
	}
	return nil
}

func (r *renderer) walk(v any, depth int) (any, *walkError) {
	switch t := v.(type) {
	case string:
		return r.leaf(t)
	case map[string]any:
		if depth > maxDepth {
			return nil, &walkError{msg: fmt.Sprintf("template is nested deeper than %d levels", maxDepth)}
		}
		out := make(map[string]any, len(t))
		visit := func(k string, e any) *walkError {
			if err := r.spend(len(k) + 4); err != nil {
				return err
			}
			nv, err := r.walk(e, depth+1)
			if err != nil {
				return err.in(keyPart(k))
			}
			out[k] = nv
			return nil
		}
		if r.sorted {
			keys := make([]string, 0, len(t))
			for k := range t {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if err := visit(k, t[k]); err != nil {
					return nil, err
				}
			}
		} else {
			for k, e := range t {
				if err := visit(k, e); err != nil {
					return nil, err
				}
			}
		}
		return out, nil
	case []any:
		if depth > maxDepth {
			return nil, &walkError{msg: fmt.Sprintf("template is nested deeper than %d levels", maxDepth)}
		}
		out := make([]any, len(t))
		for i, e := range t {
			if err := r.spend(1); err != nil {
				return nil, err
			}
			nv, err := r.walk(e, depth+1)
			if err != nil {
				return nil, err.in("[" + strconv.Itoa(i) + "]")
			}
			out[i] = nv
		}
		return out, nil
	}
	if err := r.spend(8); err != nil {
		return nil, err
	}
	if s, ok := scalar(v); ok {
		return s, nil
	}
	// A template built in Go may hold other types (map[string]string,
	// []string, structs): bring them to JSON values, then render those.
	b, err := json.Marshal(v)
	if err != nil {
		return nil, &walkError{msg: fmt.Sprintf("template value of type %T is not JSON", v), err: err}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var plain any
	if err := dec.Decode(&plain); err != nil {
		return nil, &walkError{msg: fmt.Sprintf("template value of type %T is not JSON", v), err: err}
	}
	return r.walk(plain, depth)
}

// leaf renders one string leaf.
func (r *renderer) leaf(s string) (any, *walkError) {
	if !strings.Contains(s, "$(") {
		if err := r.spend(len(s) + 2); err != nil {
			return nil, err
		}
		return s, nil
	}
	l := compiledLeaf(s)
	if l.errMsg != "" {
		// A fresh error: the cached leaf is shared and in() appends.
		return nil, &walkError{msg: l.errMsg, detail: l.errDetail, err: l.errCause}
	}
	doc, err := r.context()
	if err != nil {
		if se := contextError(SimpleName, "template context", err); se.Err == nil {
			return nil, &walkError{msg: se.Message}
		}
		return nil, &walkError{msg: "template context is not JSON", err: err}
	}
	if l.whole {
		seg := &l.segs[0]
		res, err := seg.path.Get(doc)
		if err != nil {
			return nil, resolveError(seg, err)
		}
		if err := r.spend(len(res.Raw)); err != nil {
			return nil, err
		}
		return toValue(res), nil
	}
	var b strings.Builder
	for i := range l.segs {
		seg := &l.segs[i]
		piece := seg.lit
		if seg.path != nil {
			res, err := seg.path.Get(doc)
			if err != nil {
				return nil, resolveError(seg, err)
			}
			if res.Type == gjson.String {
				piece = res.Str
			} else {
				piece = res.Raw // compact: doc was marshaled compact
			}
		}
		if err := r.spend(len(piece)); err != nil {
			return nil, err
		}
		b.WriteString(piece)
	}
	r.size += 2
	return b.String(), nil
}

func resolveError(seg *segment, err error) *walkError {
	return &walkError{msg: "unable to resolve " + seg.tag, err: err}
}

// walkError is an error found while walking; it collects the field path on
// the way back up, so the success path builds no path strings.
type walkError struct {
	rev    []string // path parts, innermost first
	msg    string
	detail string // said after the field
	err    error
}

func (e *walkError) in(part string) *walkError {
	e.rev = append(e.rev, part)
	return e
}

func (e *walkError) field() string {
	var b strings.Builder
	for i := len(e.rev) - 1; i >= 0; i-- {
		p := e.rev[i]
		if b.Len() > 0 && p[0] != '[' {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

func (e *walkError) stampError() *StampError {
	where := "the template root"
	if len(e.rev) > 0 {
		where = e.field()
	}
	msg := e.msg + " in " + where
	if e.detail != "" {
		msg += ": " + e.detail
	}
	return &StampError{Engine: SimpleName, Message: msg, Err: e.err}
}

// keyPart renders a map key as a path part: plain keys as is, others quoted
// in brackets, so the field can be pasted into a path.
func keyPart(k string) string {
	plain := k != ""
	for i := 0; i < len(k) && plain; i++ {
		c := k[i]
		plain = c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	if plain {
		return k
	}
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`)
	return "['" + r.Replace(k) + "']"
}
