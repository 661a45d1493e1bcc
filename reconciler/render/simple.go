package render

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tidwall/gjson"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/paths"
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
		if n, err := strconv.ParseInt(r.Raw, 10, 64); err == nil {
			return n
		}
		return normFloat(r.Num)
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

// A compiled string leaf: literal text and tags.
type leaf struct {
	segs      []segment
	whole     bool   // exactly one tag and nothing else: keep the value's type
	errMsg    string // a syntax error, cached like a success
	errDetail string
	errCause  error
}

type segment struct {
	lit  string      // literal text, when path is nil
	tag  string      // the tag as written, `$(…)$`
	path *paths.Path // nil for literal text
}

// nextTag finds the first tag of s at or after i: start is the index of
// its "$(" (-1: none), end the index of the ')' of its ")$" (-1: the tag is
// not closed). A tag runs to the first ")$".
func nextTag(s string, i int) (start, end int) {
	j := strings.Index(s[i:], "$(")
	if j < 0 {
		return -1, -1
	}
	start = i + j
	rel := strings.Index(s[start+2:], ")$")
	if rel < 0 {
		return start, -1
	}
	return start, start + 2 + rel
}

// RewriteTags replaces every closed tag $(expr)$ of s with $(f(expr))$ and
// keeps everything else; it finds tags exactly as the $(…)$ engine does.
func RewriteTags(s string, f func(expr string) string) string {
	var b strings.Builder
	i := 0
	for {
		start, end := nextTag(s, i)
		if start < 0 || end < 0 {
			break
		}
		b.WriteString(s[i:start])
		b.WriteString("$(" + f(s[start+2:end]) + ")$")
		i = end + 2
	}
	if i == 0 {
		return s
	}
	b.WriteString(s[i:])
	return b.String()
}

// compileLeaf splits s into literal text and tags. A tag runs from `$(` to
// the first `)$`, as in Cartographer; `$(` without a closing `)$`, or with
// another `$(` before it, is an error rather than silently kept text, so a
// misspelt tag is never stamped literally. The scan is linear in len(s).
func compileLeaf(s string) *leaf {
	var segs []segment
	i, litStart := 0, 0
	for {
		start, end := nextTag(s, i)
		if start < 0 {
			break
		}
		if end < 0 {
			return syntaxLeaf(fmt.Sprintf("unterminated tag at position %d", start), `"$(" has no closing ")$"`, nil)
		}
		expr := s[start+2 : end]
		if k := strings.Index(expr, "$("); k >= 0 {
			return syntaxLeaf(fmt.Sprintf("unterminated tag at position %d", start), fmt.Sprintf(`a new "$(" at position %d begins before it is closed`, start+2+k), nil)
		}
		tag := s[start : end+2]
		if strings.TrimSpace(expr) == "" {
			return syntaxLeaf(fmt.Sprintf("empty tag %s at position %d", tag, start), "", nil)
		}
		p, err := paths.Compile(expr)
		if err != nil {
			return syntaxLeaf(fmt.Sprintf("invalid tag %s at position %d", tag, start), "", err)
		}
		if start > litStart {
			segs = append(segs, segment{lit: s[litStart:start]})
		}
		segs = append(segs, segment{tag: tag, path: p})
		i = end + 2
		litStart = i
	}
	if litStart < len(s) {
		segs = append(segs, segment{lit: s[litStart:]})
	}
	return &leaf{segs: segs, whole: len(segs) == 1 && segs[0].path != nil}
}

func syntaxLeaf(msg, detail string, err error) *leaf {
	return &leaf{errMsg: msg, errDetail: detail, errCause: err}
}

// Compiled leaves are cached by their text: templates are shared, so the
// same strings come back on every reconcile. Only strings with a tag are
// cached, and the cache is emptied when it grows past its bounds, so
// templates that change over time cannot grow it forever.
const (
	maxCachedLeaves     = 8192
	maxCachedLeafBytes  = 8 << 20
	maxCacheableLeafLen = 64 << 10
)

var (
	leafCache      sync.Map // string -> *leaf
	leafCacheCount atomic.Int64
	leafCacheBytes atomic.Int64
)

func compiledLeaf(s string) *leaf {
	if v, ok := leafCache.Load(s); ok {
		return v.(*leaf)
	}
	l := compileLeaf(s)
	if len(s) > maxCacheableLeafLen {
		return l
	}
	if leafCacheCount.Add(1) > maxCachedLeaves || leafCacheBytes.Add(int64(len(s))) > maxCachedLeafBytes {
		leafCache.Clear()
		leafCacheCount.Store(1)
		leafCacheBytes.Store(int64(len(s)))
	}
	if _, loaded := leafCache.LoadOrStore(s, l); loaded {
		leafCacheCount.Add(-1)
		leafCacheBytes.Add(-int64(len(s)))
	}
	return l
}

// maxContextDepth bounds the nesting of the context while encoding it, as
// encoding/json does to detect cycles.
const maxContextDepth = 1000

// appendJSON appends v as compact JSON with sorted keys and no HTML escaping,
// like encoding/json with SetEscapeHTML(false). The JSON-like types of
// unstructured objects are encoded directly, since reflection made encoding
// the context most of the cost of a render; other types go to encoding/json.
func appendJSON(b []byte, v any, depth int) ([]byte, error) {
	if depth > maxContextDepth {
		return b, fmt.Errorf("nested deeper than %d levels (a cycle?)", maxContextDepth)
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
