// Package fairq is a work queue that is fair across tenants: keys are
// grouped by tenant (for Kontinue, the namespace) and handed to workers
// round-robin across the tenants that have keys waiting, so one tenant's
// wave of thousands of keys never holds another tenant's one key behind it.
// Within that, keys are served by priority: High (an event on the object
// itself: a person's edit, a create), then Normal (the consequences of
// earlier work: an object it stamped changed, a timed look again), then
// Low (a fan-out: a template or chain edit that enqueues every owner on
// it, the initial list at start, a failure's retry). So a person's edit
// goes before the churn of a wave of re-renders even in the wave's own
// namespace. AddFirst puts a key at the front of its tenant's High list: a
// reconcile that stopped half way for something it asked for (a decision
// fetched off the workers) is finished before the tenant's next key
// starts, in the tenant's own turn. After 8 keys in a row from the levels above one that waits,
// one of its keys goes, so that no level is starved.
//
// It keeps client-go workqueue's contract (TypedRateLimitingInterface), so
// a controller's loop does not change: a key is never handed to two workers
// at once, and a key added while it is processed is queued once more after
// Done. A key queued at Low and added again at High moves up; the reverse
// keeps it High.
package fairq

import (
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// Priority of an add. High is served before Normal, Normal before Low.
type Priority int

// Priorities, highest first.
const (
	High Priority = iota
	Normal
	Low
	numPriorities
)

// Interface is the workqueue contract plus adds at a priority. Add adds
// at High, AddAfter (a timed look again) at Normal, AddRateLimited (a
// failure's retry) at Low.
type Interface[T comparable] interface {
	workqueue.TypedRateLimitingInterface[T]
	// AddPriority adds item at p.
	AddPriority(item T, p Priority)
	// AddFirst adds item at High, ahead of its tenant's other keys.
	AddFirst(item T)
}

// provider makes the queue's metrics; workqueue's own is private to it, so
// the process sets this one too (SetProvider).
var (
	providerMu sync.Mutex
	provider   workqueue.MetricsProvider
)

// SetProvider sets the metrics provider of queues created afterwards.
func SetProvider(p workqueue.MetricsProvider) {
	providerMu.Lock()
	defer providerMu.Unlock()
	provider = p
}

// entry is one place of a key in a tenant's list; seq tells a live entry
// from one left behind when the key moved up or was handed out.
type entry[T comparable] struct {
	item T
	seq  uint64
}

// queued is where a waiting key is: its priority and live entry.
type queued struct {
	prio  Priority
	seq   uint64
	added time.Time
}

// level is one priority: a FIFO of keys per tenant and the ring of tenants
// that have keys, served in turn.
type level[T comparable] struct {
	lists map[string][]entry[T]
	ring  []string // tenants in turn; each at most once
}

// againAdd is how a key added while it was processed is queued at Done.
type againAdd struct {
	prio  Priority
	first bool
}

type waiter struct {
	at    time.Time
	prio  Priority
	timer *time.Timer
}

// Queue is a fair, three-priority, rate-limiting work queue.
type Queue[T comparable] struct {
	tenant  func(T) string
	limiter workqueue.TypedRateLimiter[T]
	m       metrics
	// OnTimer, when set before the queue is used, is told of each
	// AddAfter (and AddRateLimited) as it comes due, just before the key
	// is added: a controller that keeps why keys were added records the
	// timed look then, not when it was asked for (reconciler/wakes), so
	// that what comes in between is judged on its own.
	OnTimer func(T)

	mu     sync.Mutex
	cond   *sync.Cond
	levels [numPriorities]level[T]
	queued map[T]queued
	counts [numPriorities]int // keys waiting by priority
	// passed[p]: keys served from levels above p in a row while p waited.
	passed     [numPriorities]int
	processing map[T]time.Time // handed out, not Done: since when
	again      map[T]againAdd  // added while processing: queued at Done
	waiting    map[T]*waiter   // AddAfter not yet due
	seq        uint64
	shutdown   bool
	stopTick   chan struct{}
}

// New returns a queue named name (metrics) that groups keys by tenant and
// backs off failures with limiter.
func New[T comparable](name string, tenant func(T) string, limiter workqueue.TypedRateLimiter[T]) *Queue[T] {
	providerMu.Lock()
	p := provider
	providerMu.Unlock()
	q := &Queue[T]{
		tenant: tenant, limiter: limiter, m: newMetrics(name, p),
		queued: map[T]queued{}, processing: map[T]time.Time{}, again: map[T]againAdd{}, waiting: map[T]*waiter{},
		stopTick: make(chan struct{}),
	}
	for i := range q.levels {
		q.levels[i].lists = map[string][]entry[T]{}
	}
	q.cond = sync.NewCond(&q.mu)
	if q.m.enabled {
		go q.tick()
	}
	return q
}

// Add adds item at High priority.
func (q *Queue[T]) Add(item T) { q.AddPriority(item, High) }

// AddPriority adds item at p: queued once; moved up if it waits at a lower
// priority; queued after Done if it is being processed.
func (q *Queue[T]) AddPriority(item T, p Priority) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.add(item, p, false)
}

// AddFirst adds item at High, at the front of its tenant's list (moved
// there if it waits already); queued so after Done if it is processed.
func (q *Queue[T]) AddFirst(item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.add(item, High, true)
}

func (q *Queue[T]) add(item T, p Priority, first bool) {
	if q.shutdown {
		return
	}
	if _, ok := q.processing[item]; ok {
		old, ok := q.again[item]
		if !ok {
			q.m.adds.Inc()
			old.prio = p
		}
		q.again[item] = againAdd{prio: min(p, old.prio), first: old.first || first}
		return
	}
	added := time.Now()
	if cur, ok := q.queued[item]; ok {
		if cur.prio <= p && !first {
			return // already waiting at this priority or a higher one
		}
		added = cur.added // moved up: its wait goes on
	} else {
		q.m.adds.Inc()
		q.m.depth.Inc()
	}
	q.push(item, p, added, first)
}

// push puts item at the back of its tenant's list at p (the front: first);
// an older entry of it (at a lower priority, or further back) is left
// behind, dead.
func (q *Queue[T]) push(item T, p Priority, added time.Time, first bool) {
	q.seq++
	if old, ok := q.queued[item]; ok {
		q.counts[old.prio]--
	}
	q.counts[p]++
	q.queued[item] = queued{prio: p, seq: q.seq, added: added}
	l := &q.levels[p]
	t := q.tenant(item)
	list, ok := l.lists[t]
	if !ok {
		l.ring = append(l.ring, t)
	}
	e := entry[T]{item: item, seq: q.seq}
	if first {
		// A copy of the tenant's list: front adds are one per decision
		// fetched, and a list is as long as one tenant's backlog.
		l.lists[t] = append([]entry[T]{e}, list...)
	} else {
		l.lists[t] = append(list, e)
	}
	q.cond.Signal()
}

// aboveBeforeBelow is how many keys in a row are served from the levels
// above one whose keys wait before one of them goes: a steady stream of
// events (owners whose stamped objects keep changing) must not starve a
// template edit forever.
const aboveBeforeBelow = 8

// pop takes the next live key: the highest priority that has one (but the
// lowest level passed over aboveBeforeBelow times in a row first), the
// tenant whose turn it is there.
func (q *Queue[T]) pop() (T, bool) {
	order := make([]Priority, 0, numPriorities+1)
	for p := numPriorities - 1; p > High; p-- {
		if q.counts[p] > 0 && q.passed[p] >= aboveBeforeBelow {
			order = append(order, p)
			break
		}
	}
	for p := High; p < numPriorities; p++ {
		order = append(order, p)
	}
	for _, p := range order {
		item, ok := q.popLevel(p)
		if !ok {
			continue
		}
		q.passed[p] = 0
		for below := p + 1; below < numPriorities; below++ {
			if q.counts[below] > 0 {
				q.passed[below]++
			} else {
				q.passed[below] = 0
			}
		}
		return item, true
	}
	var zero T
	return zero, false
}

// popLevel takes the next live key at p: of the tenant whose turn it is.
func (q *Queue[T]) popLevel(p Priority) (T, bool) {
	l := &q.levels[p]
	for len(l.ring) > 0 {
		t := l.ring[0]
		l.ring = l.ring[1:]
		list := l.lists[t]
		for len(list) > 0 {
			e := list[0]
			list[0] = entry[T]{}
			list = list[1:]
			cur, ok := q.queued[e.item]
			if !ok || cur.seq != e.seq {
				continue // moved up or handed out since
			}
			if len(list) > 0 {
				l.lists[t] = list
				l.ring = append(l.ring, t) // its next key waits for its turn
			} else {
				delete(l.lists, t)
			}
			delete(q.queued, e.item)
			q.counts[p]--
			q.m.latency.Observe(time.Since(cur.added).Seconds())
			return e.item, true
		}
		delete(l.lists, t)
	}
	var zero T
	return zero, false
}

// Get blocks until a key is there (or the queue is shut down and empty)
// and hands it to the caller, who must call Done with it.
func (q *Queue[T]) Get() (T, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.queued) == 0 && !q.shutdown {
		q.cond.Wait()
	}
	item, ok := q.pop()
	if !ok {
		return item, true
	}
	q.m.depth.Dec()
	q.processing[item] = time.Now()
	return item, false
}

// Done ends the processing of item; if it was added meanwhile it is queued
// again, at the highest priority it was added at.
func (q *Queue[T]) Done(item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if start, ok := q.processing[item]; ok {
		q.m.work.Observe(time.Since(start).Seconds())
	}
	delete(q.processing, item)
	if a, ok := q.again[item]; ok {
		delete(q.again, item)
		// Added before any shutdown: a draining queue hands it out too.
		q.m.depth.Inc()
		q.push(item, a.prio, time.Now(), a.first)
	}
	if len(q.processing) == 0 {
		q.cond.Broadcast() // ShutDownWithDrain waits for this
	}
}

// Len is the number of keys waiting (not those processed, nor AddAfter's
// not yet due).
func (q *Queue[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queued)
}

// AddAfter adds item at Normal priority after d: a key that asked to be
// looked at again is its own work going on, not news. Of two pending
// AddAfters of one key the earlier wins.
func (q *Queue[T]) AddAfter(item T, d time.Duration) { q.addAfter(item, d, Normal) }

// AddRateLimited adds item after its backoff, at Low priority: a retry is
// not news.
func (q *Queue[T]) AddRateLimited(item T) {
	q.m.retries.Inc()
	q.addAfter(item, q.limiter.When(item), Low)
}

func (q *Queue[T]) addAfter(item T, d time.Duration, p Priority) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutdown {
		return
	}
	if d <= 0 {
		q.add(item, p, false)
		return
	}
	at := time.Now().Add(d)
	if w, ok := q.waiting[item]; ok {
		if p < w.prio {
			w.prio = p
		}
		if !at.Before(w.at) {
			return
		}
		w.timer.Stop()
		p = w.prio
	}
	w := &waiter{at: at, prio: p}
	q.waiting[item] = w
	w.timer = time.AfterFunc(d, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if q.waiting[item] != w {
			return // replaced by an earlier one
		}
		delete(q.waiting, item)
		if q.OnTimer != nil {
			q.OnTimer(item)
		}
		q.add(item, w.prio, false)
	})
}

// Forget clears item's backoff.
func (q *Queue[T]) Forget(item T) { q.limiter.Forget(item) }

// NumRequeues is how many times item backed off since it was forgotten.
func (q *Queue[T]) NumRequeues(item T) int { return q.limiter.NumRequeues(item) }

// ShutDown stops new adds; Get hands out what is queued, then reports the
// shutdown.
func (q *Queue[T]) ShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.stop()
}

func (q *Queue[T]) stop() {
	if q.shutdown {
		return
	}
	q.shutdown = true
	for k, w := range q.waiting {
		w.timer.Stop()
		delete(q.waiting, k)
	}
	close(q.stopTick)
	q.cond.Broadcast()
}

// ShutDownWithDrain is ShutDown, then waits until every key handed out is
// Done.
func (q *Queue[T]) ShutDownWithDrain() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.stop()
	for len(q.processing) > 0 {
		q.cond.Wait()
	}
}

// ShuttingDown reports whether ShutDown was called.
func (q *Queue[T]) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shutdown
}

var _ Interface[string] = (*Queue[string])(nil)
