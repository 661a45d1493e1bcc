package stamp

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// Echoes are, per stamped object, the version its owner's latest
// reconcile decided on (the one it wrote, or the cached copy it found up
// to date), whose watch event has not come back yet. That version's event
// tells the owner nothing new: the key it wakes is not reconciled once
// more (after a template edit, that second reconcile was half of a wave's
// work, and it ran ahead of people's own edits). Any other version of the
// object (its controller's status, a hand edit, an earlier write the
// latest reconcile did not see) is news as before.
//
// One version per object is kept; it goes when its event comes, when the
// object is deleted, or when a reconcile decides again. A version whose event never comes (a relist that skipped it, a
// watch stopped just after the write) is replaced by the object's next
// write, forgotten with the object, or dropped once it is older than
// echoMaxAge: then its event, should it still come, is taken for news (one
// reconcile more, nothing lost).
type Echoes struct {
	mu    sync.Mutex
	rv    map[types.UID]echo
	swept time.Time
	now   func() time.Time
}

type echo struct {
	rv string
	at time.Time
}

// echoMaxAge is how long a version waits for its event; echoSweepAt is the
// size past which old ones are looked for (at most once per echoMaxAge).
const (
	echoMaxAge  = 5 * time.Minute
	echoSweepAt = 4096
)

// NewEchoes returns an empty set.
func NewEchoes() *Echoes { return &Echoes{rv: map[types.UID]echo{}, now: time.Now} }

// Wrote records that Kontinue wrote version rv of the object uid.
func (e *Echoes) Wrote(uid types.UID, rv string) {
	if e == nil || uid == "" || rv == "" {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	e.rv[uid] = echo{rv: rv, at: now}
	if len(e.rv) > echoSweepAt && now.Sub(e.swept) > echoMaxAge {
		e.swept = now
		for u, x := range e.rv {
			if now.Sub(x.at) > echoMaxAge {
				delete(e.rv, u)
			}
		}
	}
}

// Decided records what a Put's caller decides on: live, the version it
// wrote, or the cached copy it found up to date (then live is cached). That
// version's event is no news to it; any other is, an earlier write's echo
// included: a reconcile that decided on an older cached copy (the stamped
// watch lagging behind the owner's) must be woken by the newer version,
// or the object would keep what an earlier reconcile wrote. A caller that
// looks again (LooksAgain), or a failed put, leaves no version: every
// event of the object is news.
func (e *Echoes) Decided(cached, live *unstructured.Unstructured, err error, looksAgain bool) {
	if e == nil {
		return
	}
	switch {
	case err == nil && live != nil && !looksAgain:
		e.Wrote(live.GetUID(), live.GetResourceVersion())
	case live != nil:
		e.Gone(live.GetUID())
	case cached != nil:
		e.Gone(cached.GetUID())
	}
}

// Back reports whether version rv of uid is the last one Kontinue wrote,
// coming back as a watch event, and forgets it: each write's event is
// dropped once.
func (e *Echoes) Back(uid types.UID, rv string) bool {
	if e == nil || uid == "" {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if want, ok := e.rv[uid]; ok && want.rv == rv {
		delete(e.rv, uid)
		return true
	}
	return false
}

// Gone forgets the object uid (deleted).
func (e *Echoes) Gone(uid types.UID) {
	if e == nil {
		return
	}
	e.mu.Lock()
	delete(e.rv, uid)
	e.mu.Unlock()
}

// Len is the number of versions waiting for their event (metrics, tests).
func (e *Echoes) Len() int {
	if e == nil {
		return 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.rv)
}
