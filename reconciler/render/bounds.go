package render

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
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
// taken: the template may be fine, and a later attempt can succeed. ns is
// the namespace whose share of the slots was taken (nsBusyError), if so.
type slowError struct {
	*StampError
	ns string
}

// BusyNamespace is the namespace whose share of the render slots err found
// taken by renders that had not finished ("" when err is not that): its
// owner can be woken when one of them ends (OnNamespaceSlotFreed) instead
// of waiting for a backoff grown to minutes.
func BusyNamespace(err error) string {
	var s slowError
	if errors.As(err, &s) {
		return s.ns
	}
	return ""
}

// slotFreed are the functions told when a render gives its namespace's
// slot back (one per running Manager).
var slotFreed struct {
	sync.Mutex
	next int
	fs   map[int]func(ns string)
}

// OnNamespaceSlotFreed has f called, on the render's goroutine (f must not
// block), each time a render of namespace ns gives back its namespace's
// share; the returned function stops it.
func OnNamespaceSlotFreed(f func(ns string)) (stop func()) {
	slotFreed.Lock()
	defer slotFreed.Unlock()
	if slotFreed.fs == nil {
		slotFreed.fs = map[int]func(string){}
	}
	id := slotFreed.next
	slotFreed.next++
	slotFreed.fs[id] = f
	return func() {
		slotFreed.Lock()
		defer slotFreed.Unlock()
		delete(slotFreed.fs, id)
	}
}

func tellSlotFreed(ns string) {
	slotFreed.Lock()
	fs := make([]func(string), 0, len(slotFreed.fs))
	for _, f := range slotFreed.fs {
		fs = append(fs, f)
	}
	slotFreed.Unlock()
	for _, f := range fs {
		f(ns)
	}
}

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
	tellSlotFreed(ns)
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
