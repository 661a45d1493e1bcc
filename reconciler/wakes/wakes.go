// Package wakes keeps why each queued key of a controller was added.
// Kontinue's own writes coming back as watch events are no news to the
// owner that made them (stamp.Echoes), but the event can reach routing
// before the write's answer reaches the reconcile that sent it. So an event
// of a stamped object is not judged when it arrives: its version is kept
// with the key, and judged when a worker takes the key. A key is never
// taken while it is reconciled, so by then the reconcile that wrote has
// recorded what it wrote. A key woken only by versions Kontinue wrote is
// not reconciled; any other reason (an edit, a fan-out, a timed look
// again, a retry) reconciles it.
package wakes

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// MaxVersions bounds what one key keeps: a key woken by more versions than
// that is reconciled (a busy object is news enough).
const MaxVersions = 8

// Book is why each key was added since a worker last took it.
type Book[K comparable] struct {
	mu    sync.Mutex
	wakes map[K]*wake
}

// version is one version of a stamped object.
type version struct {
	uid types.UID
	rv  string
}

// wake is why a key was added since a worker last took it.
type wake struct {
	other    bool      // anything but a stamped object's version
	versions []version // the versions of its stamped objects seen
}

// of is key's wake, made if needed; mu is held.
func (b *Book[K]) of(key K) *wake {
	if b.wakes == nil {
		b.wakes = map[K]*wake{}
	}
	w := b.wakes[key]
	if w == nil {
		w = &wake{}
		b.wakes[key] = w
	}
	return w
}

// Woke records that key was added for a reason other than a stamped
// object's version.
func (b *Book[K]) Woke(key K) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.of(key)
	w.other, w.versions = true, nil
}

// WokeBy records that key was added because its stamped object uid reached
// version rv.
func (b *Book[K]) WokeBy(key K, uid types.UID, rv string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.of(key)
	if w.other {
		return
	}
	if len(w.versions) == MaxVersions {
		w.other, w.versions = true, nil
		return
	}
	w.versions = append(w.versions, version{uid, rv})
}

// OnlyEchoes takes key's reasons (a worker took it) and reports whether
// every one is a version echo says Kontinue wrote (stamp.Echoes.Back): then
// it is not reconciled. A key with no reason recorded (a timed look again,
// a retry after backoff, added to the queue directly), or no echo to ask,
// is reconciled.
func (b *Book[K]) OnlyEchoes(key K, echo func(uid types.UID, rv string) bool) bool {
	b.mu.Lock()
	w := b.wakes[key]
	delete(b.wakes, key)
	b.mu.Unlock()
	if w == nil || w.other || len(w.versions) == 0 || echo == nil {
		return false
	}
	echoes := true
	for _, v := range w.versions {
		// Every version is looked at (and forgotten when it was Kontinue's).
		echoes = echo(v.uid, v.rv) && echoes
	}
	return echoes
}
