package fairq

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/util/workqueue"
)

// tenantOf is the part of "tenant/name" before the slash.
func tenantOf(k string) string { t, _, _ := strings.Cut(k, "/"); return t }

func newQ() *Queue[string] {
	return New[string]("", tenantOf, workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, time.Second))
}

// op is one step of a table test: "+key" adds at High, "~key" at Normal,
// "-key" at Low, "^key" first (AddFirst), "get" takes the next key,
// "done key" ends it.
func run(t *testing.T, q *Queue[string], ops []string) []string {
	t.Helper()
	var got []string
	for _, op := range ops {
		switch {
		case op == "get":
			require.Positive(t, q.Len(), "get on an empty queue would block")
			k, shut := q.Get()
			require.False(t, shut)
			got = append(got, k)
		case strings.HasPrefix(op, "done "):
			q.Done(strings.TrimPrefix(op, "done "))
		case op[0] == '+':
			q.Add(op[1:])
		case op[0] == '~':
			q.AddPriority(op[1:], Normal)
		case op[0] == '-':
			q.AddPriority(op[1:], Low)
		case op[0] == '^':
			q.AddFirst(op[1:])
		default:
			t.Fatalf("bad op %q", op)
		}
	}
	return got
}

func TestOrder(t *testing.T) {
	for _, tt := range []struct {
		name string
		ops  []string
		want []string
	}{
		{"fifo within a tenant",
			[]string{"+a/1", "+a/2", "+a/3", "get", "get", "get"},
			[]string{"a/1", "a/2", "a/3"}},
		{"round-robin across tenants: a wave does not hold a lone key",
			[]string{"+noisy/1", "+noisy/2", "+noisy/3", "+noisy/4", "+quiet/1", "get", "get", "get", "get", "get"},
			[]string{"noisy/1", "quiet/1", "noisy/2", "noisy/3", "noisy/4"}},
		{"three tenants take turns",
			[]string{"+a/1", "+a/2", "+b/1", "+b/2", "+c/1", "get", "get", "get", "get", "get"},
			[]string{"a/1", "b/1", "c/1", "a/2", "b/2"}},
		{"cluster-scoped keys are a tenant of their own",
			[]string{"+a/1", "+a/2", "+/chain", "get", "get", "get"},
			[]string{"a/1", "/chain", "a/2"}},
		{"high before low, whatever the tenant",
			[]string{"-noisy/1", "-noisy/2", "+quiet/1", "get", "get", "get"},
			[]string{"quiet/1", "noisy/1", "noisy/2"}},
		{"a key added twice is queued once",
			[]string{"+a/1", "+a/1", "-a/1", "+a/2", "get", "get"},
			[]string{"a/1", "a/2"}},
		{"after 8 high keys in a row while low ones wait, one low key goes",
			[]string{"-b/1", "-b/2", "+a/1", "+a/2", "+a/3", "+a/4", "+a/5", "+a/6", "+a/7", "+a/8", "+a/9", "+a/10",
				"get", "get", "get", "get", "get", "get", "get", "get", "get", "get", "get", "get"},
			[]string{"a/1", "a/2", "a/3", "a/4", "a/5", "a/6", "a/7", "a/8", "b/1", "a/9", "a/10", "b/2"}},
		{"a low key added at high moves up",
			[]string{"-a/1", "-a/2", "+a/2", "get", "get"},
			[]string{"a/2", "a/1"}},
		{"a high key added at low stays high",
			[]string{"-b/1", "+a/1", "-a/1", "get", "get"},
			[]string{"a/1", "b/1"}},
		{"added while processed: once more after Done, not before",
			[]string{"+a/1", "get", "+a/1", "+a/1", "+a/2", "get", "done a/1", "get"},
			[]string{"a/1", "a/2", "a/1"}},
		{"added while processed at low and high: queued at high after Done",
			[]string{"+a/1", "get", "-a/1", "+a/1", "-b/1", "done a/1", "get", "get"},
			[]string{"a/1", "a/1", "b/1"}},
		{"high, then normal, then low, in the wave's own namespace too",
			[]string{"-a/1", "~a/2", "-a/3", "+a/4", "~b/1", "get", "get", "get", "get", "get"},
			[]string{"a/4", "a/2", "b/1", "a/1", "a/3"}},
		{"normal keys wait behind high ones, and are not starved by them",
			[]string{"~b/1", "+a/1", "+a/2", "+a/3", "+a/4", "+a/5", "+a/6", "+a/7", "+a/8", "+a/9",
				"get", "get", "get", "get", "get", "get", "get", "get", "get", "get"},
			[]string{"a/1", "a/2", "a/3", "a/4", "a/5", "a/6", "a/7", "a/8", "b/1", "a/9"}},
		{"normal keys count as passing over low ones",
			[]string{"-b/1", "~a/1", "~a/2", "~a/3", "~a/4", "+a/5", "+a/6", "+a/7", "+a/8", "~a/9",
				"get", "get", "get", "get", "get", "get", "get", "get", "get", "get"},
			[]string{"a/5", "a/6", "a/7", "a/8", "a/1", "a/2", "a/3", "a/4", "b/1", "a/9"}},
		{"the lowest level passed over goes first, then the next",
			[]string{"-c/1", "~b/1", "+a/1", "+a/2", "+a/3", "+a/4", "+a/5", "+a/6", "+a/7", "+a/8", "+a/9", "+a/10",
				"get", "get", "get", "get", "get", "get", "get", "get", "get", "get", "get", "get"},
			[]string{"a/1", "a/2", "a/3", "a/4", "a/5", "a/6", "a/7", "a/8", "c/1", "b/1", "a/9", "a/10"}},
		{"a normal key added at high moves up; added at low stays normal",
			[]string{"~a/1", "~a/2", "+a/2", "-a/1", "get", "get"},
			[]string{"a/2", "a/1"}},
		{"a first key goes ahead of its tenant's keys, in the tenant's turn",
			[]string{"+a/1", "+a/2", "+b/1", "get", "^a/3", "get", "get", "get"},
			[]string{"a/1", "b/1", "a/3", "a/2"}},
		{"a first key waiting low moves up to the front",
			[]string{"+a/1", "-a/2", "^a/2", "get", "get"},
			[]string{"a/2", "a/1"}},
		{"a first key waiting high moves to the front",
			[]string{"+a/1", "+a/2", "^a/2", "get", "get"},
			[]string{"a/2", "a/1"}},
		{"added first while processed: at the front after Done",
			[]string{"+a/1", "+a/2", "get", "^a/1", "+a/1", "done a/1", "get", "get"},
			[]string{"a/1", "a/1", "a/2"}},
		{"a tenant's next key waits for its turn again",
			[]string{"+a/1", "+b/1", "get", "+a/2", "get", "+b/2", "get", "get"},
			[]string{"a/1", "b/1", "a/2", "b/2"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := newQ()
			assert.Equal(t, tt.want, run(t, q, tt.ops))
			assert.Equal(t, 0, q.Len())
		})
	}
}

func TestLen(t *testing.T) {
	q := newQ()
	run(t, q, []string{"-a/1", "+a/1", "+b/1", "get"})
	assert.Equal(t, 1, q.Len(), "a key that moved up counts once")
	run(t, q, []string{"+a/1"})
	assert.Equal(t, 1, q.Len(), "a key added while processed is not waiting yet")
}

// A timed look again comes back at Normal: after a person's edit, before
// a fan-out.
func TestAddAfterIsNormal(t *testing.T) {
	q := newQ()
	q.AddPriority("c/1", Low)
	q.AddAfter("a/1", 0)
	q.Add("b/1")
	assert.Equal(t, []string{"b/1", "a/1", "c/1"}, run(t, q, []string{"get", "get", "get"}))
}

func TestAddAfter(t *testing.T) {
	q := newQ()
	q.AddAfter("a/1", time.Hour)
	q.AddAfter("a/1", 20*time.Millisecond) // earlier wins
	q.AddAfter("a/1", time.Hour)           // later is dropped
	assert.Equal(t, 0, q.Len())
	start := time.Now()
	k, _ := q.Get()
	assert.Equal(t, "a/1", k)
	assert.Less(t, time.Since(start), 10*time.Second, "the earlier AddAfter won")
	q.Done(k)
	q.AddAfter("a/2", 0)
	assert.Equal(t, 1, q.Len(), "no delay: added at once")
}

// A retry backs off and comes back at Low: an edit elsewhere goes first.
func TestAddRateLimitedIsLow(t *testing.T) {
	q := New[string]("", tenantOf, workqueue.NewTypedItemExponentialFailureRateLimiter[string](0, 0))
	q.AddRateLimited("a/1")
	q.Add("b/1")
	assert.Equal(t, []string{"b/1", "a/1"}, run(t, q, []string{"get", "get"}))
	assert.Equal(t, 1, q.NumRequeues("a/1"))
	q.Forget("a/1")
	assert.Equal(t, 0, q.NumRequeues("a/1"))
}

func TestShutDown(t *testing.T) {
	q := newQ()
	q.Add("a/1")
	q.Add("a/2")
	k, _ := q.Get()
	q.Add(k)
	q.ShutDown()
	assert.True(t, q.ShuttingDown())
	q.Add("b/1")
	q.AddAfter("b/2", time.Millisecond)
	// what was queued before is handed out; then the shutdown
	k2, shut := q.Get()
	assert.False(t, shut)
	assert.Equal(t, "a/2", k2)
	q.Done(k)
	k3, shut := q.Get()
	assert.False(t, shut)
	assert.Equal(t, "a/1", k3, "added while processed, before the shutdown")
	q.Done(k2)
	q.Done(k3)
	_, shut = q.Get()
	assert.True(t, shut)
}

func TestShutDownWithDrainWaitsForDone(t *testing.T) {
	q := newQ()
	q.Add("a/1")
	k, _ := q.Get()
	drained := make(chan struct{})
	go func() { q.ShutDownWithDrain(); close(drained) }()
	select {
	case <-drained:
		t.Fatal("drained while a key was processed")
	case <-time.After(50 * time.Millisecond):
	}
	q.Done(k)
	<-drained
}

// Workers blocked in Get are woken by adds and by the shutdown.
func TestConcurrentWorkers(t *testing.T) {
	q := newQ()
	var mu sync.Mutex
	busy := map[string]bool{}
	seen := map[string]int{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k, shut := q.Get()
				if shut {
					return
				}
				mu.Lock()
				assert.False(t, busy[k], "%s handed to two workers", k)
				busy[k] = true
				seen[k]++
				mu.Unlock()
				time.Sleep(time.Microsecond)
				mu.Lock()
				busy[k] = false
				mu.Unlock()
				q.Done(k)
			}
		}()
	}
	for i := range 2000 {
		q.Add([]string{"a/1", "a/2", "b/1", "c/1"}[i%4])
	}
	for q.Len() > 0 {
		time.Sleep(time.Millisecond)
	}
	q.ShutDownWithDrain()
	wg.Wait()
	assert.Len(t, seen, 4)
}

type fakeMetric struct {
	mu sync.Mutex
	n  float64
	k  int
}

func (m *fakeMetric) Inc()              { m.mu.Lock(); m.n++; m.mu.Unlock() }
func (m *fakeMetric) Dec()              { m.mu.Lock(); m.n--; m.mu.Unlock() }
func (m *fakeMetric) Set(v float64)     { m.mu.Lock(); m.n = v; m.mu.Unlock() }
func (m *fakeMetric) Observe(v float64) { m.mu.Lock(); m.k++; m.mu.Unlock() }
func (m *fakeMetric) get() (float64, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n, m.k
}

type fakeProvider struct{ depth, adds, latency, work, unfinished, longest, retries fakeMetric }

func (p *fakeProvider) NewDepthMetric(string) workqueue.GaugeMetric       { return &p.depth }
func (p *fakeProvider) NewAddsMetric(string) workqueue.CounterMetric      { return &p.adds }
func (p *fakeProvider) NewLatencyMetric(string) workqueue.HistogramMetric { return &p.latency }
func (p *fakeProvider) NewWorkDurationMetric(string) workqueue.HistogramMetric {
	return &p.work
}
func (p *fakeProvider) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return &p.unfinished
}
func (p *fakeProvider) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return &p.longest
}
func (p *fakeProvider) NewRetriesMetric(string) workqueue.CounterMetric { return &p.retries }

func TestMetrics(t *testing.T) {
	p := &fakeProvider{}
	SetProvider(p)
	defer SetProvider(nil)
	q := New[string]("test", tenantOf, workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Hour, time.Hour))
	defer q.ShutDown()
	run(t, q, []string{"-a/1", "+a/1", "+a/2", "get"})
	d, _ := p.depth.get()
	assert.Equal(t, 1.0, d, "depth: a/2 waits")
	a, _ := p.adds.get()
	assert.Equal(t, 2.0, a, "adds: a key moved up is not a new add")
	_, lat := p.latency.get()
	assert.Equal(t, 1, lat)
	// The gauge is set by a ticker every 500 ms: wait for its first tick
	// (a fixed sleep lost the race on a loaded machine).
	assert.Eventually(t, func() bool { u, _ := p.unfinished.get(); return u > 0 }, 30*time.Second, 20*time.Millisecond, "a/1 is being processed")
	q.Done("a/1")
	_, w := p.work.get()
	assert.Equal(t, 1, w)
	q.AddRateLimited("b/1")
	r, _ := p.retries.get()
	assert.Equal(t, 1.0, r)
}
