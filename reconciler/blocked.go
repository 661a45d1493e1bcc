package reconciler

import (
	"sync"
	"time"

	"kontinue.dev/kontinue/reconciler/failure"
	"kontinue.dev/kontinue/reconciler/stamp"
)

type blockCause int

const (
	blockedRBAC blockCause = iota + 1
	blockedDiscovery
)

// blockCauseOf is the one place a reconcile's key is found blocked: from
// the class of the failures its stamp Session saw (0: not blocked).
func blockCauseOf(s *stamp.Session) blockCause {
	switch f, ok := s.Blocked(); {
	case !ok:
		return 0
	case f == failure.Forbidden:
		return blockedRBAC
	case f == failure.NotServed:
		return blockedDiscovery
	}
	return 0
}

// blocker remembers the owners and Runnables that wait for RBAC or
// discovery news: they are reconciled again when it comes, not retried on
// a timer, which would only repeat the failure.
type blocker struct {
	enqueue func(Key)

	mu   sync.Mutex
	keys map[Key]blockCause
	// lastNews is when RBAC or discovery last changed, by cause; recheck is
	// set while a delayed second look for that cause is pending.
	lastNews map[blockCause]time.Time
	recheck  map[blockCause]bool
}

func newBlocker(enqueue func(Key)) *blocker {
	return &blocker{enqueue: enqueue, keys: map[Key]blockCause{}}
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

// block remembers that the owner or Runnable user waits for cause.
func (b *blocker) block(user Key, cause blockCause) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.keys[user] = cause
	if b.recheck == nil {
		b.recheck = map[blockCause]bool{}
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

func (b *blocker) unblockOne(user Key) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.keys, user)
}

// unblock is news of cause: the owners waiting for it are reconciled.
func (b *blocker) unblock(cause blockCause) {
	b.mu.Lock()
	if b.lastNews == nil {
		b.lastNews = map[blockCause]time.Time{}
	}
	b.lastNews[cause] = time.Now()
	b.mu.Unlock()
	b.release(cause)
}

// release enqueues the owners blocked on cause.
func (b *blocker) release(cause blockCause) {
	b.mu.Lock()
	var users []Key
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
