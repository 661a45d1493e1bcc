package render

import (
	"bufio"
	"bytes"
	"container/list"
	"context"
	"encoding/json"
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
// hostile template or chart cannot stall or bloat the controller. All three
// render in child processes of Kontinue's own executable (gotemplatechild.go,
// helmchild.go, yttchild.go), killed at the deadline and capped in memory
// there. A var so tests can shrink them.
var limits = struct {
	timeout time.Duration // wall time of a render, fetching a chart and waiting for a slot included
	bytes   int           // rendered text (YAML) of one render
	objects int           // objects one render may produce
	running int           // renders executing at once
}{timeout: 10 * time.Second, bytes: 4 << 20, objects: 64, running: 4}

var renderSlots = make(chan struct{}, limits.running)

// nsShare is how many render slots the renders of one namespace may hold
// at once: half of them, so that one namespace's slow templates or charts
// leave the other half to everyone else.
var nsShare = max(1, limits.running/2)

// queueWait bounds how long a render waits for its namespace's share and a
// slot. The reconcile waiting for it holds a worker: renders that hold the
// slots until their deadline must not hold the workers too. Renders that
// finish take milliseconds, so a burst of them passes well within it.
var queueWait = time.Second

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

// timeoutMemo is how long a render that ran out of time is remembered, so
// that retrying it does not hold a render slot until the deadline again
// and again.
const timeoutMemo = time.Minute

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

// nsBusyError: the namespace's renders hold its share of the render slots
// until the deadline.
type nsBusyError struct{ ns string }

func (e nsBusyError) Error() string {
	return fmt.Sprintf("namespace [%s] already has %d renders running", e.ns, nsShare)
}

// Stages of a flight, for what a caller whose deadline passed is told.
const (
	waitingNamespace int32 = iota
	waitingSlot
	started
)

// A flight is one execution of a render function, shared by every caller
// that asks for the same key while it runs.
type flight struct {
	done  chan struct{}
	stage atomic.Int32
	val   any
	err   error
}

var flights = struct {
	sync.Mutex
	m map[string]*flight
}{m: map[string]*flight{}}

// bounded runs fn in its own goroutine and waits for it at most until ctx
// ends. fn gets a context that ends at the deadline; the engines' child
// processes are killed then, so fn returns then and its slot is free
// again. Callers asking for the same key while it runs join it instead of
// starting it again; at most limits.running renders execute at once, at
// most nsShare of them for namespace ns. A render waits for its namespace's
// share and then for a slot, for at most queueWait in all.
func bounded(ctx context.Context, ns, key string, fn func(context.Context) (any, error)) (any, error) {
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
			f.val, f.err = runFlight(runCtx, f, ns, fn)
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
		if ctx.Err() == context.DeadlineExceeded {
			switch f.stage.Load() {
			case waitingNamespace:
				return nil, nsBusyError{ns}
			case waitingSlot:
				return nil, errBusy
			}
		}
		return nil, ctx.Err()
	}
}

// runFlight takes the namespace's share and a slot, then runs fn.
func runFlight(ctx context.Context, f *flight, ns string, fn func(context.Context) (any, error)) (any, error) {
	queued, cancel := context.WithTimeout(ctx, queueWait)
	defer cancel()
	if !namespaceSlots.take(queued, ns) {
		return nil, nsBusyError{ns}
	}
	defer namespaceSlots.give(ns)
	f.stage.Store(waitingSlot)
	select {
	case renderSlots <- struct{}{}:
	case <-queued.Done():
		return nil, errBusy
	}
	defer func() { <-renderSlots }()
	f.stage.Store(started)
	return runRecovered(ctx, fn)
}

// nsSlots bounds the renders of one namespace running at once. A
// namespace's semaphore exists while someone holds or waits for it.
type nsSlots struct {
	mu  sync.Mutex
	max int
	m   map[string]*nsSem
}

type nsSem struct {
	ch   chan struct{}
	refs int // holders and waiters
}

var namespaceSlots = &nsSlots{max: nsShare, m: map[string]*nsSem{}}

// take waits until ns holds fewer than max slots and takes one, or until
// ctx ends (false).
func (s *nsSlots) take(ctx context.Context, ns string) bool {
	s.mu.Lock()
	sem := s.m[ns]
	if sem == nil {
		sem = &nsSem{ch: make(chan struct{}, s.max)}
		s.m[ns] = sem
	}
	sem.refs++
	s.mu.Unlock()
	select {
	case sem.ch <- struct{}{}:
		return true
	case <-ctx.Done():
		s.release(ns, sem)
		return false
	}
}

// give returns a slot that take gave.
func (s *nsSlots) give(ns string) {
	s.mu.Lock()
	sem := s.m[ns]
	s.mu.Unlock()
	<-sem.ch
	s.release(ns, sem)
}

func (s *nsSlots) release(ns string, sem *nsSem) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sem.refs--; sem.refs == 0 {
		delete(s.m, ns)
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
	// keep: docs collects each document as JSON, for a child renderer to
	// hand the parent (which decodes them with decodeJSON).
	keep bool
	docs []jsonDoc
}

// jsonDoc is one rendered document as JSON, and where it comes from.
type jsonDoc struct {
	Where string          `json:"where"`
	JSON  json.RawMessage `json:"json"`
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
	if d.keep {
		d.docs = append(d.docs, jsonDoc{Where: where, JSON: j})
	}
	return d.decodeJSON(where, j)
}

// decodeJSON adds the objects of one document given as JSON.
func (d *objectDecoder) decodeJSON(where string, j []byte) error {
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
