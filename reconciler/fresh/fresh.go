// Package fresh keeps a reconcile from deciding twice on a cached copy it
// knows is stale.
package fresh

import (
	"sync"
	"time"
)

// staleWait bounds how long a key waits for its cache to show a newer copy
// than the one a status write conflicted on: normally milliseconds; past
// it the cache is used as it is.
const staleWait = 5 * time.Second

// Reads remembers, per key, the resourceVersion of a cached copy known
// to be stale: one a status write was refused on (409 Conflict: the cache
// is behind), or one a status write of this controller just replaced. The
// key is reconciled again only once its cache shows a newer copy, instead
// of computing and writing on the same stale copy again and again with
// backoff: a status write is made from a fresh read. A status-only change
// of an owner or a Runnable does not enqueue it, so the key looks again
// on its own (a wait, backed off).
type Reads struct {
	mu sync.Mutex
	m  map[string]staleRead
}

type staleRead struct {
	rv string
	at time.Time
}

// Note records that key's cached copy at resourceVersion rv is stale.
func (s *Reads) Note(key, rv string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]staleRead{}
	}
	s.m[key] = staleRead{rv: rv, at: time.Now()}
}

// Behind reports whether the cached copy of key (at resourceVersion rv) is
// still the one a write conflicted on, within staleWait.
func (s *Reads) Behind(key, rv string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[key]
	if !ok {
		return false
	}
	if r.rv == rv && time.Since(r.at) < staleWait {
		return true
	}
	delete(s.m, key)
	return false
}

// Forget drops key (deleted).
func (s *Reads) Forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
}
