package render

import (
	"bufio"
	"bytes"
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Bounds of one render by the goTemplate, helm and ytt engines, so that a
// hostile template or chart cannot stall or bloat the controller. A var so
// tests can shrink them.
var limits = struct {
	timeout time.Duration // wall time of a render, fetching a chart included
	bytes   int           // rendered text (YAML) of one render
	objects int           // objects one render may produce
	running int           // renders executing at once, abandoned ones included
}{timeout: 10 * time.Second, bytes: 4 << 20, objects: 64, running: 4}

var renderSlots = make(chan struct{}, limits.running)

// withTimeout bounds a render by limits.timeout (or the caller's earlier
// deadline).
func withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, limits.timeout)
}

// timeoutError is the StampError of a render that did not finish in time.
func timeoutError(engine string, ctx context.Context) *StampError {
	if errors.Is(ctx.Err(), context.Canceled) {
		return &StampError{Engine: engine, Message: "rendering canceled", Err: ctx.Err()}
	}
	return &StampError{Engine: engine, Message: fmt.Sprintf("%s rendering did not finish within %s", engine, limits.timeout)}
}

// slowError is a render that ran out of time or found every render slot
// taken: the template may be fine, and a later attempt can succeed.
type slowError struct{ *StampError }

func (e slowError) Unwrap() error { return e.StampError }

// Retryable reports whether a render failed for lack of time or of a
// render slot (as opposed to a template that is wrong until someone
// changes it): the caller retries it with backoff.
func Retryable(err error) bool {
	var s slowError
	return errors.As(err, &s)
}

// errBusy: every render slot is held by renders that have not finished.
var errBusy = errors.New("too many renders are still running")

// A flight is one execution of a render function, shared by every caller
// that asks for the same key while it runs.
type flight struct {
	done    chan struct{}
	started atomic.Bool // holds a render slot
	val     any
	err     error
}

var flights = struct {
	sync.Mutex
	m map[string]*flight
}{m: map[string]*flight{}}

// bounded runs fn in its own goroutine and waits for it at most until ctx
// ends. Text templates (Go's, Helm's) cannot be interrupted, so a render
// that runs past its deadline is abandoned, not stopped: fn gets a context
// that is canceled at the deadline so that whatever can stop does (writers,
// HTTP requests). Two bounds keep abandoned renders from piling up: callers
// asking for the same key while it runs join it instead of starting it
// again, and at most limits.running renders execute at once.
func bounded(ctx context.Context, key string, fn func(context.Context) (any, error)) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	flights.Lock()
	f, joined := flights.m[key]
	if !joined {
		f = &flight{done: make(chan struct{})}
		flights.m[key] = f
	}
	flights.Unlock()
	if !joined {
		go func() {
			runCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), limits.timeout)
			defer cancel()
			select {
			case renderSlots <- struct{}{}:
				f.started.Store(true)
				f.val, f.err = runRecovered(runCtx, fn)
				<-renderSlots
			case <-runCtx.Done():
				f.err = errBusy
			}
			flights.Lock()
			delete(flights.m, key)
			flights.Unlock()
			close(f.done)
		}()
	}
	select {
	case <-f.done:
		return f.val, f.err
	case <-ctx.Done():
		if !f.started.Load() && ctx.Err() == context.DeadlineExceeded {
			return nil, errBusy
		}
		return nil, ctx.Err()
	}
}

// runRecovered turns a panic of fn into an error: a panic in a goroutine
// would end the whole controller.
func runRecovered(ctx context.Context, fn func(context.Context) (any, error)) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, fmt.Errorf("render panicked: %v", r)
		}
	}()
	return fn(ctx)
}

// limitWriter collects rendered text up to limits.bytes and fails the
// write past it, or once ctx has ended: a template that writes stops there.
type limitWriter struct {
	ctx context.Context
	buf bytes.Buffer
	max int
}

var errTooLarge = errors.New("rendered output is too large")

func (w *limitWriter) Write(p []byte) (int, error) {
	if err := w.ctx.Err(); err != nil {
		return 0, err
	}
	if w.buf.Len()+len(p) > w.max {
		return 0, errTooLarge
	}
	return w.buf.Write(p)
}

func tooLarge(engine string) *StampError {
	return &StampError{Engine: engine, Message: fmt.Sprintf("%s rendered more than %d bytes", engine, limits.bytes)}
}

// objectDecoder turns rendered YAML documents into objects, counting them
// against limits.objects.
type objectDecoder struct {
	engine string
	objs   []*unstructured.Unstructured
}

// decode adds the objects of a YAML stream; source names it in messages
// (a template file of a chart, "goTemplate", ...). Empty documents are
// skipped; a `kind: List` adds its items.
func (d *objectDecoder) decode(source string, text []byte) error {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(text)))
	for n := 1; ; n++ {
		doc, err := r.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &StampError{Engine: d.engine, Message: fmt.Sprintf("%s: cannot split the rendered YAML", source), Err: err}
		}
		where := source
		if n > 1 {
			where = fmt.Sprintf("%s (document %d)", source, n)
		}
		if err := d.decodeDoc(where, doc); err != nil {
			return err
		}
	}
}

func (d *objectDecoder) decodeDoc(where string, doc []byte) error {
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return &StampError{Engine: d.engine, Message: fmt.Sprintf("%s is not valid YAML", where), Err: err}
	}
	if s := string(bytes.TrimSpace(j)); s == "null" || s == "" {
		return nil
	}
	var obj map[string]any
	// utiljson keeps integers as int64, as unstructured objects hold them.
	if err := utiljson.Unmarshal(j, &obj); err != nil {
		return &StampError{Engine: d.engine, Message: fmt.Sprintf("%s does not render an object (a YAML mapping)", where), Err: err}
	}
	if obj["kind"] == "List" && obj["apiVersion"] == "v1" {
		items, _ := obj["items"].([]any)
		for i, it := range items {
			m, ok := it.(map[string]any)
			if !ok {
				return &StampError{Engine: d.engine, Message: fmt.Sprintf("%s: List item %d is not an object", where, i)}
			}
			if err := d.add(fmt.Sprintf("%s (List item %d)", where, i), m); err != nil {
				return err
			}
		}
		return nil
	}
	return d.add(where, obj)
}

func (d *objectDecoder) add(where string, obj map[string]any) error {
	for _, f := range []string{"apiVersion", "kind"} {
		if s, ok := obj[f].(string); !ok || s == "" {
			return &StampError{Engine: d.engine, Message: fmt.Sprintf("%s renders an object without apiVersion/kind: %s must be a non-empty string", where, f)}
		}
	}
	if len(d.objs) >= limits.objects {
		return &StampError{Engine: d.engine, Message: fmt.Sprintf("%s rendered more than %d objects", d.engine, limits.objects)}
	}
	d.objs = append(d.objs, &unstructured.Unstructured{Object: obj})
	return nil
}

// copyObjects deep-copies shared render results: the caller modifies what
// it gets (namespace, labels).
func copyObjects(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		out[i] = o.DeepCopy()
	}
	return out
}

// lru is a small cache bounded by entries and bytes, with optional expiry.
type lru struct {
	mu         sync.Mutex
	maxEntries int
	maxBytes   int64
	bytes      int64
	ll         *list.List
	m          map[string]*list.Element
}

type lruEntry struct {
	key     string
	val     any
	size    int64
	expires time.Time // zero: never
}

func newLRU(maxEntries int, maxBytes int64) *lru {
	return &lru{maxEntries: maxEntries, maxBytes: maxBytes, ll: list.New(), m: map[string]*list.Element{}}
}

func (c *lru) get(key string) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.m[key]
	if !ok {
		return nil, false
	}
	e := el.Value.(*lruEntry)
	if !e.expires.IsZero() && time.Now().After(e.expires) {
		c.remove(el)
		return nil, false
	}
	c.ll.MoveToFront(el)
	return e.val, true
}

// add stores val; a value larger than the whole cache is not kept.
func (c *lru) add(key string, val any, size int64, ttl time.Duration) {
	if size > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[key]; ok {
		c.remove(el)
	}
	e := &lruEntry{key: key, val: val, size: size}
	if ttl > 0 {
		e.expires = time.Now().Add(ttl)
	}
	c.m[key] = c.ll.PushFront(e)
	c.bytes += size
	for c.ll.Len() > c.maxEntries || c.bytes > c.maxBytes {
		c.remove(c.ll.Back())
	}
}

func (c *lru) remove(el *list.Element) {
	e := el.Value.(*lruEntry)
	c.ll.Remove(el)
	delete(c.m, e.key)
	c.bytes -= e.size
}
