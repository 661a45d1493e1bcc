package paths

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/tidwall/gjson"
)

// Path is a compiled path expression. It is immutable and safe for concurrent use.
type Path struct {
	expr     string
	steps    []step
	multi    bool // some step can yield several values ([*] or a filter)
	notFound *NotFoundError
	// fallback evaluates expressions outside the compiled subset (see
	// fallback.go); steps is then empty.
	fallback *fallback
}

// maxCached bounds the compile cache; when it is full the cache is emptied
// and starts over, so expressions built at run time cannot grow it forever.
const maxCached = 8192

var (
	cache     sync.Map // expr -> *Path
	cacheSize atomic.Int64
)

// Compile parses expr and returns its compiled form. Successful results are
// cached in a concurrency-safe cache keyed by expr, so compiling the same
// string twice is a map lookup and returns the same *Path.
// A malformed expression returns a *SyntaxError.
func Compile(expr string) (*Path, error) {
	if v, ok := cache.Load(expr); ok {
		return v.(*Path), nil
	}
	p, err := compile(expr)
	if err != nil {
		f := compileFallback(expr, err)
		if f == nil {
			return nil, err
		}
		p = &Path{expr: expr, fallback: f, notFound: &NotFoundError{Path: expr}}
	}
	if cacheSize.Add(1) > maxCached {
		cache.Clear()
		cacheSize.Store(1)
	}
	v, loaded := cache.LoadOrStore(expr, p)
	if loaded {
		cacheSize.Add(-1)
	}
	return v.(*Path), nil
}

// MustCompile is Compile that panics on error. For expressions fixed in code.
func MustCompile(expr string) *Path {
	p, err := Compile(expr)
	if err != nil {
		panic(err)
	}
	return p
}

// String returns the original expression.
func (p *Path) String() string { return p.expr }

// Get evaluates p on the JSON document doc and returns exactly one value.
// No value is a *NotFoundError, several values an *AmbiguousError. A present
// JSON null is found (Type gjson.Null).
//
// The result is not copied: its Raw and Str point into doc, so doc must not
// be modified while the result is in use (use Value, or strings.Clone, to
// keep a detached copy).
func (p *Path) Get(doc []byte) (gjson.Result, error) {
	return p.get(unsafe.String(unsafe.SliceData(doc), len(doc)))
}

// GetString is Get on a string document (no copy).
func (p *Path) GetString(doc string) (gjson.Result, error) {
	return p.get(doc)
}

// Value is Get, then the result converted to plain Go values as
// encoding/json decodes them into an any (map[string]any, []any, string,
// bool, nil), except numbers: integers that fit an int64 become int64, other
// numbers float64, as in Kubernetes unstructured objects. The value shares
// no memory with doc.
func (p *Path) Value(doc []byte) (any, error) {
	if p.fallback != nil {
		return p.valueFallback(string(doc))
	}
	r, err := p.Get(doc)
	if err != nil {
		return nil, err
	}
	return toValue(r), nil
}

// Exists reports whether p resolves to at least one value in doc. Several
// values are not an error here. Only an expression outside the compiled
// subset can fail (its document must be decoded).
func (p *Path) Exists(doc []byte) (bool, error) {
	if p.fallback != nil {
		return p.existsFallback(doc)
	}
	root := rootOf(unsafe.String(unsafe.SliceData(doc), len(doc)))
	if !p.multi {
		_, ok := evalSingle(p.steps, root)
		return ok, nil
	}
	acc := accum{limit: 1}
	walk(p.steps, root, &acc)
	return acc.count > 0, nil
}

func (p *Path) get(doc string) (gjson.Result, error) {
	if p.fallback != nil {
		return p.getFallback(doc)
	}
	root := rootOf(doc)
	if !p.multi {
		r, ok := evalSingle(p.steps, root)
		if !ok {
			return gjson.Result{}, p.notFound
		}
		return r, nil
	}
	var acc accum
	walk(p.steps, root, &acc)
	switch acc.count {
	case 0:
		return gjson.Result{}, p.notFound
	case 1:
		return acc.first, nil
	default:
		return gjson.Result{}, &AmbiguousError{Path: p.expr, Count: acc.count}
	}
}

// SyntaxError reports a malformed expression. Pos is the byte offset in Path.
type SyntaxError struct {
	Path string
	Pos  int
	Msg  string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid path %q: %s at position %d", e.Path, e.Msg, e.Pos)
}

// NotFoundError reports that a path resolves to no value.
type NotFoundError struct {
	Path string
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("no value at path %q", e.Path)
}

// AmbiguousError reports that a path resolves to several values where
// exactly one is expected.
type AmbiguousError struct {
	Path  string
	Count int
}

func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("path %q yields %d values, expected exactly one", e.Path, e.Count)
}

// IsNotFound reports whether err is, or wraps, a *NotFoundError.
func IsNotFound(err error) bool {
	var nf *NotFoundError
	return errors.As(err, &nf)
}
