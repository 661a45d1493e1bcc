package check

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kontinue.dev/kontinue/attest"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/verify"
	vt "kontinue.dev/kontinue/reconciler/verify/verifytest"
)

const digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

// fetcher is the Fetcher port played by the test: evidence by namespace,
// a gate per namespace that holds its fetches, and a count of fetches.
type fetcher struct {
	mu      sync.Mutex
	fetches map[string]int
	ev      verify.Evidence
	err     error
	gate    map[string]chan struct{}
	// kontinue is Kontinue's statement key.
	kontinue *attest.Key
}

func (f *fetcher) Material(context.Context, []verify.Ref) (verify.Material, error) {
	return verify.Material{Kontinue: f.kontinue}, nil
}

func (f *fetcher) Evidence(ctx context.Context, req Request, t verify.Target, registry bool) (verify.Evidence, error) {
	f.mu.Lock()
	f.fetches[req.Owner.Namespace]++
	g := f.gate[req.Owner.Namespace]
	ev, err := f.ev, f.err
	f.mu.Unlock()
	if g != nil {
		select {
		case <-g:
		case <-ctx.Done():
			return ev, ctx.Err()
		}
	}
	return ev, err
}

func (f *fetcher) count(ns string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fetches[ns]
}

type woken chan Owner

func start(t *testing.T, f Fetcher, o Options) (*Runner, woken) {
	w := make(woken, 100)
	r := New(f, func(o Owner) { w <- o }, o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return r, w
}

func (w woken) wait(t *testing.T) Owner {
	select {
	case o := <-w:
		return o
	case <-time.After(30 * time.Second):
		t.Fatal("no owner woken")
	}
	return Owner{}
}

func request(ns, name string, key *vt.Key) Request {
	return Request{Owner: Owner{Kind: "Workload", Namespace: ns, Name: name}, Type: verify.TypeImage, Input: "image",
		Value: "registry.example/app@" + digestA, Policy: api.InputVerify{Name: "image", Keys: []api.VerifyKey{{PublicKey: key.PublicPEM()}}}}
}

func TestCheckFetchesOnceAndWakes(t *testing.T) {
	key := vt.NewKey("ecdsa")
	f := &fetcher{fetches: map[string]int{}, ev: verify.Evidence{Signatures: []verify.Layer{key.Sign("registry.example/app", digestA)}}}
	r, w := start(t, f, Options{})
	req := request("team-a", "app", key)
	assert.Equal(t, verify.Unknown, r.Check(req).Outcome, "nothing fetched yet: the step waits")
	assert.Equal(t, req.Owner, w.wait(t))
	for i := 0; i < 3; i++ {
		other := req
		other.Owner.Name = "other" // another owner of the namespace, same value and policy
		d := r.Check(other)
		assert.Equal(t, verify.Verified, d.Outcome, d.Why)
	}
	assert.Equal(t, 1, f.count("team-a"), "one fetch per new digest")
	req.Policy.Keys = append(req.Policy.Keys, api.VerifyKey{PublicKey: vt.NewKey("ed25519").PublicPEM()})
	assert.Equal(t, verify.Unknown, r.Check(req).Outcome, "another policy is decided anew")
	w.wait(t)
	assert.Equal(t, 2, f.count("team-a"))
}

func TestOneNamespaceDoesNotHoldAnother(t *testing.T) {
	key := vt.NewKey("ecdsa")
	stuck := make(chan struct{})
	f := &fetcher{fetches: map[string]int{}, ev: verify.Evidence{Signatures: []verify.Layer{key.Sign("registry.example/app", digestA)}},
		gate: map[string]chan struct{}{"slow": stuck}}
	r, w := start(t, f, Options{Workers: 3, PerNamespace: 2})
	for _, n := range []string{"a", "b", "c", "d"} {
		req := request("slow", n, key)
		req.Value = "registry.example/app-" + n + "@" + digestA
		r.Check(req)
	}
	req := request("fast", "app", key)
	assert.Equal(t, verify.Unknown, r.Check(req).Outcome)
	assert.Equal(t, Owner{Kind: "Workload", Namespace: "fast", Name: "app"}, w.wait(t), "a registry that hangs for one namespace delays only its own inputs")
	assert.Equal(t, verify.Verified, r.Check(req).Outcome)
	require.Eventually(t, func() bool { return f.count("slow") == 2 }, 10*time.Second, 10*time.Millisecond, "fetches: %d", f.count("slow"))
	r.mu.Lock()
	assert.Equal(t, 2, r.running["slow"], "at most PerNamespace fetches of one namespace at a time")
	assert.Len(t, r.queues["slow"], 2, "the others wait their turn")
	r.mu.Unlock()
	close(stuck)
}

func TestPick(t *testing.T) {
	for _, tt := range []struct {
		name      string
		order     []string
		running   map[string]int
		idle, per int
		want      int
	}{
		{"nothing queued", nil, nil, 4, 2, -1},
		{"the first in turn below the bound", []string{"a", "b"}, map[string]int{"a": 1}, 3, 2, 0},
		{"one at the bound waits its turn", []string{"a", "b"}, map[string]int{"a": 2, "b": 1}, 1, 2, 1},
		{"alone: more than the bound while per workers stay idle", []string{"a"}, map[string]int{"a": 2}, 6, 2, 0},
		{"alone: the last per workers are kept for another namespace", []string{"a"}, map[string]int{"a": 6}, 2, 2, -1},
		{"alone, far over the bound", []string{"a"}, map[string]int{"a": 5}, 3, 2, 0},
		{"another waits: the bound holds for both", []string{"a", "b"}, map[string]int{"a": 5, "b": 2}, 1, 2, -1},
		{"another waits below the bound: it goes first", []string{"a", "b"}, map[string]int{"a": 5}, 3, 2, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, pick(tt.order, tt.running, tt.idle, tt.per))
		})
	}
}

// One namespace alone uses more than PerNamespace workers (work
// conserving); a second namespace that asks meanwhile is served at once by
// the workers kept for it, even while the first one's fetches hang.
func TestOneNamespaceAloneUsesTheIdleWorkers(t *testing.T) {
	key := vt.NewKey("ecdsa")
	stuck := make(chan struct{})
	f := &fetcher{fetches: map[string]int{}, ev: verify.Evidence{Signatures: []verify.Layer{key.Sign("registry.example/app", digestA)}},
		gate: map[string]chan struct{}{"busy": stuck}}
	r, w := start(t, f, Options{Workers: 4, PerNamespace: 1})
	for i := range 6 {
		req := request("busy", fmt.Sprint("app-", i), key)
		req.Value = fmt.Sprintf("registry.example/app-%d@%s", i, digestA)
		r.Check(req)
	}
	require.Eventually(t, func() bool { return f.count("busy") == 3 }, 10*time.Second, 10*time.Millisecond,
		"alone, one namespace uses every worker but PerNamespace: fetches %d", f.count("busy"))
	req := request("other", "app", key)
	assert.Equal(t, verify.Unknown, r.Check(req).Outcome)
	assert.Equal(t, req.Owner, w.wait(t), "the second namespace is served while the first one's fetches hang")
	assert.Equal(t, verify.Verified, r.Check(req).Outcome)
	r.mu.Lock()
	assert.Equal(t, 3, r.running["busy"])
	assert.Len(t, r.queues["busy"], 3)
	r.mu.Unlock()
	close(stuck)
}

// A value first asked about gives its owner a grace to wait for the
// decision (less as time goes), none once its fetch failed.
// graceOf is how long after now d's grace ends (0: none).
func graceOf(d Decision, now time.Time) time.Duration {
	if d.GraceUntil.IsZero() {
		return 0
	}
	return d.GraceUntil.Sub(now)
}

func TestCheckGrace(t *testing.T) {
	for _, tt := range []struct {
		name    string
		up      time.Duration // since the Runner was made (default: a minute)
		elapsed time.Duration
		failed  bool
		first   time.Duration // the grace when first asked (default: 1s)
		want    time.Duration
	}{
		{name: "just asked", want: time.Second},
		{name: "asked a moment ago", elapsed: 400 * time.Millisecond, want: 600 * time.Millisecond},
		{name: "past the grace", elapsed: 1500 * time.Millisecond},
		{name: "the fetch failed", failed: true},
		// A restart: every owner asks at once about what it had decided.
		{name: "just after the start", up: time.Nanosecond, first: 10 * time.Second, elapsed: 4 * time.Second, want: 6 * time.Second},
		{name: "past the start's grace", up: time.Nanosecond, first: 10 * time.Second, elapsed: 11 * time.Second},
		{name: "late in the start's grace", up: 9500 * time.Millisecond, first: time.Second, elapsed: 200 * time.Millisecond, want: 800 * time.Millisecond},
		{name: "the fetch failed just after the start", up: time.Nanosecond, first: 10 * time.Second, failed: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			key := vt.NewKey("ecdsa")
			now := time.Now()
			var mu sync.Mutex
			clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			gate := make(chan struct{})
			f := &fetcher{fetches: map[string]int{}, gate: map[string]chan struct{}{}}
			if tt.failed {
				f.err = errors.New("registry: 503 Service Unavailable")
			} else {
				f.gate["team-a"] = gate
			}
			r, w := start(t, f, Options{Now: clock, Grace: time.Second, RetryMax: time.Hour})
			t.Cleanup(func() { close(gate) })
			if tt.up == 0 {
				tt.up = time.Minute
			}
			if tt.first == 0 {
				tt.first = time.Second
			}
			mu.Lock()
			now = now.Add(tt.up - time.Nanosecond)
			mu.Unlock()
			req := request("team-a", "app", key)
			d := r.Check(req)
			assert.Equal(t, verify.Unknown, d.Outcome)
			assert.Equal(t, tt.first, graceOf(d, clock()))
			if tt.failed {
				w.wait(t)
			}
			mu.Lock()
			now = now.Add(tt.elapsed)
			mu.Unlock()
			d = r.Check(req)
			assert.Equal(t, verify.Unknown, d.Outcome)
			assert.Equal(t, tt.want, graceOf(d, clock()), d.Why)
		})
	}
}

func TestAFailedFetchIsRetriedWithBackoff(t *testing.T) {
	key := vt.NewKey("ecdsa")
	f := &fetcher{fetches: map[string]int{}, err: errors.New("registry: 503 Service Unavailable")}
	r, w := start(t, f, Options{})
	req := request("team-a", "app", key)
	r.Check(req)
	w.wait(t) // told of the failure
	d := r.Check(req)
	assert.Equal(t, verify.Unknown, d.Outcome, "a failing registry holds the input: fail closed")
	assert.Contains(t, d.Why, "503")
	f.mu.Lock()
	f.err, f.ev = nil, verify.Evidence{Signatures: []verify.Layer{key.Sign("registry.example/app", digestA)}}
	f.mu.Unlock()
	w.wait(t) // the retry, by itself
	require.Eventually(t, func() bool { return r.Check(req).Outcome == verify.Verified }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, 2, f.count("team-a"))
}

func TestARefusalIsCheckedAgainLater(t *testing.T) {
	key := vt.NewKey("ecdsa")
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	f := &fetcher{fetches: map[string]int{}}
	r, w := start(t, f, Options{Now: clock})
	req := request("team-a", "app", key)
	r.Check(req)
	w.wait(t)
	d := r.Check(req)
	assert.Equal(t, verify.Refused, d.Outcome)
	assert.Equal(t, 5*time.Second, d.Recheck, "the step looks again after the refusal's time")
	mu.Lock()
	now = now.Add(6 * time.Second)
	mu.Unlock()
	f.mu.Lock()
	f.ev = verify.Evidence{Signatures: []verify.Layer{key.Sign("registry.example/app", digestA)}}
	f.mu.Unlock()
	assert.Equal(t, verify.Refused, r.Check(req).Outcome, "the old decision while it is checked again")
	w.wait(t)
	assert.Equal(t, verify.Verified, r.Check(req).Outcome, "a signature added since passes")
}

// A value checked against rule kontinue before its statement is written
// (just after the status write that published it) waits for it
// (Unknown, looked at again in a second) for StatementWait, then is
// refused; a statement written meanwhile lets it pass.
func TestAStatementIsWaitedForThenRefused(t *testing.T) {
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	f := &fetcher{fetches: map[string]int{}, kontinue: vt.NewKontinueKey()}
	r, w := start(t, f, Options{Now: clock})
	req := Request{Owner: Owner{Kind: "Workload", Namespace: "team-a", Name: "app"}, Type: verify.TypeImage, Input: "image",
		Value: "registry.example/app@" + digestA, Policy: api.InputVerify{Name: "image", Kontinue: &api.KontinueRule{}}}
	r.Check(req)
	w.wait(t)
	d := r.Check(req)
	assert.Equal(t, verify.Unknown, d.Outcome, d.Why)
	assert.Contains(t, d.Why, "waiting for Kontinue's statement")
	assert.Equal(t, time.Second, d.Recheck)

	// The statement comes: verified.
	advance(2 * time.Second)
	f.mu.Lock()
	f.ev = verify.Evidence{Statements: [][]byte{vt.KontinueStatement(f.kontinue, digestA)}, Producers: []verify.Producer{vt.Producer}}
	f.mu.Unlock()
	r.Check(req)
	w.wait(t)
	assert.Equal(t, verify.Verified, r.Check(req).Outcome)

	// Another value whose statement never comes: refused once the wait is over.
	other := req
	other.Value = "registry.example/app@sha256:" + strings.Repeat("c", 64)
	r.Check(other)
	w.wait(t)
	assert.Equal(t, verify.Unknown, r.Check(other).Outcome)
	advance(StatementWait)
	r.Check(other)
	w.wait(t)
	d = r.Check(other)
	assert.Equal(t, verify.Refused, d.Outcome, d.Why)
	assert.Equal(t, verify.RuleKontinue, d.Rule)
}

func TestCheckRefusesAValueThatIsNoReference(t *testing.T) {
	r, _ := start(t, &fetcher{fetches: map[string]int{}}, Options{})
	req := request("team-a", "app", vt.NewKey("ecdsa"))
	req.Value = "NOT A REFERENCE"
	d := r.Check(req)
	assert.Equal(t, verify.Refused, d.Outcome)
	assert.Equal(t, verify.RuleDigest, d.Rule)
}

// BenchmarkCheckCached is the cost a reconcile pays per verified input
// once its decision is cached.
func BenchmarkCheckCached(b *testing.B) {
	key := vt.NewKey("ecdsa")
	f := &fetcher{fetches: map[string]int{}, ev: verify.Evidence{Signatures: []verify.Layer{key.Sign("registry.example/app", digestA)}}}
	w := make(woken, 1)
	r := New(f, func(o Owner) { w <- o }, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Run(ctx)
	req := request("team-a", "app", key)
	r.Check(req)
	<-w
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r.Check(req).Outcome != verify.Verified {
			b.Fatal("not verified")
		}
	}
}

// BenchmarkDecide is the cost of one decision (a key signature), paid once
// per new digest on a verification worker.
func BenchmarkDecide(b *testing.B) {
	key := vt.NewKey("ecdsa")
	req := request("team-a", "app", key)
	p, err := verify.Compile(verify.TypeImage, req.Policy, verify.Material{})
	require.NoError(b, err)
	t, err := verify.TargetOf(verify.TypeImage, "image", req.Value)
	require.NoError(b, err)
	ev := verify.Evidence{Signatures: []verify.Layer{key.Sign("registry.example/app", digestA)}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if verify.Decide(p, t, ev).Outcome != verify.Verified {
			b.Fatal("not verified")
		}
	}
}

// An owner that waits for a decision is woken when its grace ends
// undecided (its status then says the step is verifying), and again when
// the decision is in; a decision within the grace wakes it once.
func TestGraceEndWakesTheWaiters(t *testing.T) {
	key := vt.NewKey("ecdsa")
	gate := make(chan struct{})
	f := &fetcher{fetches: map[string]int{}, gate: map[string]chan struct{}{"team-a": gate},
		ev: verify.Evidence{Signatures: []verify.Layer{key.Sign("registry.example/app", digestA)}}}
	r, w := start(t, f, Options{Grace: 100 * time.Millisecond, StartupGrace: time.Nanosecond})
	req := request("team-a", "app", key)
	d := r.Check(req)
	require.Equal(t, verify.Unknown, d.Outcome)
	require.False(t, d.GraceUntil.IsZero())
	assert.Equal(t, req.Owner, w.wait(t), "woken at the grace's end, undecided")
	assert.False(t, time.Now().Before(d.GraceUntil), "not before it")
	d = r.Check(req)
	assert.True(t, d.GraceUntil.IsZero(), "past the grace")
	close(gate)
	assert.Equal(t, req.Owner, w.wait(t), "woken by the decision")
	assert.Equal(t, verify.Verified, r.Check(req).Outcome)

	// Decided within the grace: one wake.
	other := request("team-b", "app", key)
	d = r.Check(other)
	require.False(t, d.GraceUntil.IsZero())
	assert.Equal(t, other.Owner, w.wait(t), "woken by the decision")
	select {
	case o := <-w:
		t.Fatalf("%v woken again at the end of a grace whose decision was in", o)
	case <-time.After(time.Until(d.GraceUntil) + 200*time.Millisecond):
	}
}

// primed is a Runner whose namespace team-a has one decision made (so its
// fetches' time is known), then team-a's fetches held at gate.
func primed(t *testing.T, o Options) (*Runner, woken, *fetcher, chan struct{}, *vt.Key) {
	key := vt.NewKey("ecdsa")
	f := &fetcher{fetches: map[string]int{}, ev: verify.Evidence{Signatures: []verify.Layer{key.Sign("registry.example/app", digestA)}}}
	r, w := start(t, f, o)
	first := request("team-a", "first", key)
	first.Policy.Keys = append(first.Policy.Keys, api.VerifyKey{PublicKey: vt.NewKey("ed25519").PublicPEM()})
	r.Check(first)
	require.Equal(t, first.Owner, w.wait(t))
	gate := make(chan struct{})
	f.mu.Lock()
	f.gate = map[string]chan struct{}{"team-a": gate}
	f.mu.Unlock()
	return r, w, f, gate, key
}

// waitAsync runs Wait in the background.
func waitAsync(r *Runner, req Request) chan Decision {
	out := make(chan Decision, 1)
	go func() { out <- r.Wait(context.Background(), req) }()
	return out
}

func took(t *testing.T, c chan Decision) Decision {
	select {
	case d := <-c:
		return d
	case <-time.After(30 * time.Second):
		t.Fatal("Wait did not return")
	}
	return Decision{}
}

// A reconcile that waits for a decision being fetched takes it: the owner
// is not woken for it afterwards (a second reconcile for nothing).
func TestWaitTakesTheDecision(t *testing.T) {
	r, w, f, gate, key := primed(t, Options{Workers: 1, Wait: time.Hour})
	req := request("team-a", "app", key)
	c := waitAsync(r, req)
	require.Eventually(t, func() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.waiting == 1 }, 10*time.Second, time.Millisecond)
	close(gate)
	d := took(t, c)
	assert.Equal(t, verify.Verified, d.Outcome, d.Why)
	// One worker: a wake of app's would come before the next fetch's.
	next := request("team-a", "next", key)
	next.Value = "registry.example/app-next@" + digestA
	r.Check(next)
	assert.Equal(t, next.Owner, w.wait(t), "the owner that waited is not woken")
	assert.Equal(t, 3, f.count("team-a"))
}

// Wait gives up at its bound; the owner is woken when the decision is in.
func TestWaitEndsThenWakes(t *testing.T) {
	r, w, _, gate, key := primed(t, Options{Wait: 30 * time.Millisecond})
	req := request("team-a", "app", key)
	d := took(t, waitAsync(r, req))
	assert.Equal(t, verify.Unknown, d.Outcome)
	close(gate)
	assert.Equal(t, req.Owner, w.wait(t), "woken by the decision")
	assert.Equal(t, verify.Verified, r.Check(req).Outcome)
}

// Wait holds no reconcile where it would not pay: a namespace whose
// fetches' time is not known yet, or one with a fetch running longer than
// the wait (a registry that hangs), and no more reconciles than its slots.
func TestWaitHoldsNothingItShouldNot(t *testing.T) {
	t.Run("unknown namespace", func(t *testing.T) {
		key := vt.NewKey("ecdsa")
		gate := make(chan struct{})
		defer close(gate)
		f := &fetcher{fetches: map[string]int{}, gate: map[string]chan struct{}{"team-a": gate}}
		r, _ := start(t, f, Options{Wait: time.Hour})
		assert.Equal(t, verify.Unknown, took(t, waitAsync(r, request("team-a", "app", key))).Outcome)
	})
	t.Run("a fetch running longer than the wait", func(t *testing.T) {
		now := time.Now()
		var mu sync.Mutex
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		r, _, f, gate, key := primed(t, Options{Wait: time.Hour, Now: clock})
		defer close(gate)
		stuck := request("team-a", "stuck", key)
		stuck.Value = "registry.example/app-stuck@" + digestA
		r.Check(stuck)
		require.Eventually(t, func() bool { return f.count("team-a") == 2 }, 10*time.Second, time.Millisecond)
		mu.Lock()
		now = now.Add(2 * time.Hour)
		mu.Unlock()
		assert.Equal(t, verify.Unknown, took(t, waitAsync(r, request("team-a", "app", key))).Outcome)
	})
	t.Run("slots", func(t *testing.T) {
		r, _, _, gate, key := primed(t, Options{Wait: time.Hour, WaitSlots: 1})
		held := waitAsync(r, request("team-a", "app", key))
		require.Eventually(t, func() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.waiting == 1 }, 10*time.Second, time.Millisecond)
		other := request("team-a", "other", key)
		other.Value = "registry.example/app-other@" + digestA
		assert.Equal(t, verify.Unknown, took(t, waitAsync(r, other)).Outcome, "no slot free: not held")
		close(gate)
		assert.Equal(t, verify.Verified, took(t, held).Outcome)
	})
	t.Run("ctx", func(t *testing.T) {
		r, _, _, gate, key := primed(t, Options{Wait: time.Hour})
		defer close(gate)
		ctx, cancel := context.WithCancel(context.Background())
		out := make(chan Decision, 1)
		go func() { out <- r.Wait(ctx, request("team-a", "app", key)) }()
		require.Eventually(t, func() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.waiting == 1 }, 10*time.Second, time.Millisecond)
		cancel()
		assert.Equal(t, verify.Unknown, took(t, out).Outcome)
	})
}

// A value asked about ahead (Prefetch) is fetched, and its owner is not
// woken for it: the walk that asked takes the decision when it reaches
// the step; one that asks with Check before it is in is woken.
func TestPrefetchWakesNobody(t *testing.T) {
	key := vt.NewKey("ecdsa")
	f := &fetcher{fetches: map[string]int{}, ev: verify.Evidence{Signatures: []verify.Layer{key.Sign("registry.example/app", digestA)}}}
	r, w := start(t, f, Options{Workers: 1})
	req := request("team-a", "app", key)
	r.Prefetch(req)
	require.Eventually(t, func() bool { // looked at without asking: Check would make app a waiter
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, e := range r.entries {
			return e.decided
		}
		return false
	}, 10*time.Second, time.Millisecond)
	assert.Equal(t, verify.Verified, r.Check(req).Outcome)
	// One worker: a wake for app's value would come before the next one's.
	next := request("team-a", "next", key)
	next.Value = "registry.example/app-next@" + digestA
	r.Check(next)
	assert.Equal(t, next.Owner, w.wait(t), "the owner that prefetched is not woken")
	assert.Equal(t, 2, f.count("team-a"))
}
