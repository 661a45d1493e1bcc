package fairq

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/util/workqueue"
)

// model is what the queue must do, kept as plain facts: which keys wait at
// which priority and since when (push order), which are processed and
// added again meanwhile.
type model struct {
	seq        int
	waiting    map[string]Priority
	since      map[string]int // push order of a waiting key
	processing map[string]bool
	again      map[string]againAdd
	// passed[p]: keys served from levels above p in a row while p had
	// keys waiting.
	passed [numPriorities]int
	// passed[p][b][a]: keys of tenant a served at p since tenant b began
	// waiting at p or was last served there. Round-robin: at most 1.
	turns [numPriorities]map[string]map[string]int
}

func (m *model) waitingIn(t string, p Priority) int {
	n := 0
	for k, kp := range m.waiting {
		if kp == p && tenantOf(k) == t {
			n++
		}
	}
	return n
}

// push queues k at p: behind its tenant's keys there, or ahead of them
// (first: the newest first key is the frontmost).
func (m *model) push(k string, p Priority, first bool) {
	if m.waitingIn(tenantOf(k), p) == 0 {
		m.turns[p][tenantOf(k)] = map[string]int{}
	}
	m.seq++
	m.waiting[k], m.since[k] = p, m.seq
	if first {
		m.since[k] = -m.seq
	}
}

func (m *model) add(k string, p Priority, first bool) {
	if m.processing[k] {
		a, ok := m.again[k]
		if !ok {
			a.prio = p
		}
		m.again[k] = againAdd{prio: min(p, a.prio), first: a.first || first}
		return
	}
	if cur, ok := m.waiting[k]; ok && cur <= p && !first {
		return
	}
	delete(m.waiting, k)
	m.push(k, p, first)
}

// FuzzQueue drives the queue with adds at the three priorities and first
// adds (AddFirst), gets and
// dones of a few keys in a few tenants, and checks after every step: a key
// is never handed out while processed, a level is served while a higher
// one waits only when it was passed over aboveBeforeBelow times in a row
// (and then it must be: the lowest such level goes),
// a tenant's keys come in the order they were queued, no tenant is served
// twice at a priority while another waits there, Len counts what waits,
// and at the end everything queued is handed out (no key lost).
func FuzzQueue(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	f.Add([]byte{0x10, 0x21, 0x32, 0x43, 0xf0, 0xf1, 0xe0, 0x10, 0xf0, 0xe1})
	f.Add([]byte{0x88, 0x99, 0xaa, 0x01, 0x02, 0xf0, 0xf0, 0xf0, 0xe0, 0xe1, 0xe2})
	f.Fuzz(func(t *testing.T, ops []byte) {
		q := New[string]("", tenantOf, workqueue.NewTypedItemExponentialFailureRateLimiter[string](0, 0))
		m := &model{waiting: map[string]Priority{}, since: map[string]int{}, processing: map[string]bool{}, again: map[string]againAdd{}}
		for p := range m.turns {
			m.turns[p] = map[string]map[string]int{}
		}
		get := func() {
			k, shut := q.Get()
			require.False(t, shut)
			require.False(t, m.processing[k], "%s handed out twice at once", k)
			p, ok := m.waiting[k]
			require.True(t, ok, "%s handed out but not waiting", k)
			var waits [numPriorities]bool
			for _, wp := range m.waiting {
				waits[wp] = true
			}
			due := Priority(-1) // the lowest level passed over too often
			for l := numPriorities - 1; l > High; l-- {
				if waits[l] && m.passed[l] >= aboveBeforeBelow {
					due = l
					break
				}
			}
			if due >= 0 {
				require.Equal(t, due, p, "%s served at %d: a key at %d was due after %d passed over", k, p, due, m.passed[due])
			} else {
				for above := High; above < p; above++ {
					require.False(t, waits[above], "%s served at %d while keys wait at %d", k, p, above)
				}
			}
			m.passed[p] = 0
			for below := p + 1; below < numPriorities; below++ {
				if waits[below] {
					m.passed[below]++
				} else {
					m.passed[below] = 0
				}
			}
			for w, wp := range m.waiting {
				if wp == p && tenantOf(w) == tenantOf(k) {
					require.False(t, m.since[w] < m.since[k], "%s served before %s of its tenant, queued earlier", k, w)
				}
			}
			a := tenantOf(k)
			for b, byA := range m.turns[p] {
				if b == a || m.waitingIn(b, p) == 0 {
					continue
				}
				byA[a]++
				require.LessOrEqual(t, byA[a], 1, "tenant %s served twice at %d while %s waited", a, p, b)
			}
			m.turns[p][a] = map[string]int{}
			delete(m.waiting, k)
			m.processing[k] = true
		}
		done := func(k string) {
			q.Done(k)
			delete(m.processing, k)
			if a, ok := m.again[k]; ok {
				delete(m.again, k)
				m.push(k, a.prio, a.first)
			}
		}
		for _, b := range ops {
			switch {
			case b >= 0xf0: // get
				if len(m.waiting) > 0 {
					get()
				}
			case b >= 0xe0: // done of the n-th processed key (sorted)
				var keys []string
				for k := range m.processing {
					keys = append(keys, k)
				}
				if len(keys) > 0 {
					slices.Sort(keys)
					done(keys[int(b&0x0f)%len(keys)])
				}
			default: // add: 3 tenants × 4 names, High, Normal, Low or first
				k := fmt.Sprintf("%s/%d", []string{"a", "b", ""}[int(b>>4)%3], b&0x03)
				if b>>2&0x03 == 3 {
					q.AddFirst(k)
					m.add(k, High, true)
					break
				}
				p := Priority(int(b >> 2 & 0x03))
				q.AddPriority(k, p)
				m.add(k, p, false)
			}
			require.Equal(t, len(m.waiting), q.Len())
		}
		// No key lost: end every key in flight and drain.
		for len(m.processing) > 0 || len(m.waiting) > 0 {
			for k := range m.processing {
				done(k)
			}
			for len(m.waiting) > 0 {
				get()
			}
		}
		require.Equal(t, 0, q.Len())
		q.ShutDown()
		_, shut := q.Get()
		require.True(t, shut)
	})
}
