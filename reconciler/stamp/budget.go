package stamp

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Normal events are bounded per namespace. When a chain change or a cold
// start touches a thousand owners at once, their Normal events
// (StampedObjectApplied, ResourceOutputChanged, ResourceHealthyStatusChanged)
// would be a third of all writes and nobody reads them; the owner's status
// says the same. At a human pace (a developer's push, one workload at a
// time) every one still gets through. Warning events are never dropped here
// (client-go's correlator still bounds each object's).
const (
	// NormalEventBurst is how many Normal events a namespace may record at
	// once.
	NormalEventBurst = 30
	// NormalEventRate is how fast a namespace's budget refills, per second.
	NormalEventRate = 1.0
	// budgetNamespaces bounds the budget's memory: past it, the budgets
	// that are full again (idle namespaces) are forgotten.
	budgetNamespaces = 4096
)

type eventBudget struct {
	mu    sync.Mutex
	limit rate.Limit
	burst int
	ns    map[string]*rate.Limiter
}

func newEventBudget(perSecond float64, burst int) *eventBudget {
	return &eventBudget{limit: rate.Limit(perSecond), burst: burst, ns: map[string]*rate.Limiter{}}
}

// allow takes one token of namespace's budget if there is one.
func (b *eventBudget) allow(namespace string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.ns[namespace]
	if l == nil {
		if len(b.ns) >= budgetNamespaces {
			b.forgetIdle(now)
		}
		l = rate.NewLimiter(b.limit, b.burst)
		b.ns[namespace] = l
	}
	return l.AllowN(now, 1)
}

// forgetIdle drops budgets that have refilled: a fresh one is the same.
func (b *eventBudget) forgetIdle(now time.Time) {
	for ns, l := range b.ns {
		if l.TokensAt(now) >= float64(b.burst) {
			delete(b.ns, ns)
		}
	}
}

func (b *eventBudget) size() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.ns)
}
