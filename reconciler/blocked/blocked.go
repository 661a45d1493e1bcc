// Package blocked remembers the keys that wait for RBAC or discovery news,
// and decides, in one place, whether a reconcile's key waits for it.
package blocked

import (
	"sync"
	"time"

	"kontinue.dev/kontinue/reconciler/failure"
	"kontinue.dev/kontinue/reconciler/stamp"
)

// Cause is the news a key waits for (0: none).
type Cause int

// The news a key can wait for.
const (
	RBAC Cause = iota + 1
	Discovery
)

// CauseOf is the one place a reconcile's key is found blocked: from
// the class of the failures its stamp Session saw (0: not blocked).
func CauseOf(s *stamp.Session) Cause {
	switch f, ok := s.Blocked(); {
	case !ok:
		return 0
	case f == failure.Forbidden:
		return RBAC
	case f == failure.NotServed:
		return Discovery
	}
	return 0
}

// Keys remembers the owners and Runnables that wait for RBAC or
// discovery news: they are reconciled again when it comes, not retried on
// a timer, which would only repeat the failure.
type Keys[K comparable] struct {
	enqueue func(K)

	mu   sync.Mutex
	keys map[K]Cause
	// lastNews is when RBAC or discovery last changed, by cause; recheck is
	// set while a delayed second look for that cause is pending.
	lastNews map[Cause]time.Time
	recheck  map[Cause]bool
}

// New returns Keys that enqueue a released key.
func New[K comparable](enqueue func(K)) *Keys[K] {
	return &Keys[K]{enqueue: enqueue, keys: map[K]Cause{}}
}

// An owner that blocks soon after news of its cause may have raced the
// news: it came while the owner was being reconciled (the unblock found
// nothing to release), or the API server had not acted on it yet (its RBAC
// cache and discovery lag the watch). Such owners get a second look after
// recheckDelay. Only real news opens the window, so this is bounded: at most
// a few extra reconciles per burst of news, never a timer loop.
const (
	newsWindow   = 5 * time.Second
	recheckDelay = 2 * time.Second // the mapper refreshes discovery at most this often
)

// Block remembers that the owner or Runnable user waits for cause.
func (b *Keys[K]) Block(user K, cause Cause) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.keys[user] = cause
	if b.recheck == nil {
		b.recheck = map[Cause]bool{}
	}
	if time.Since(b.lastNews[cause]) < newsWindow && !b.recheck[cause] {
		b.recheck[cause] = true
		time.AfterFunc(recheckDelay, func() {
			b.mu.Lock()
			b.recheck[cause] = false
			b.mu.Unlock()
			b.release(cause)
		})
	}
}

// Unblock forgets user: it was reconciled without the failure.
func (b *Keys[K]) Unblock(user K) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.keys, user)
}

// News is news of cause: the owners waiting for it are reconciled.
func (b *Keys[K]) News(cause Cause) {
	b.mu.Lock()
	if b.lastNews == nil {
		b.lastNews = map[Cause]time.Time{}
	}
	b.lastNews[cause] = time.Now()
	b.mu.Unlock()
	b.release(cause)
}

// release enqueues the owners blocked on cause.
func (b *Keys[K]) release(cause Cause) {
	b.mu.Lock()
	var users []K
	for u, c := range b.keys {
		if c == cause {
			users = append(users, u)
			delete(b.keys, u)
		}
	}
	b.mu.Unlock()
	for _, u := range users {
		b.enqueue(u)
	}
}
