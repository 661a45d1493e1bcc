// Package check runs verification off the reconcile workers: a reconcile
// asks (Check) and gets a cached decision or Unknown at once; the evidence
// is fetched by a few workers, at most PerNamespace at a time for one
// namespace, served in turn (the fair queue's spirit), and the owner that
// asked is woken when the decision is in. Decisions are cached by
// (namespace, value, policy): one fetch per new digest; a registry that
// fails (a timeout, a 5xx) is retried with backoff and delays only the
// inputs that need it.
//
// The decision itself is reconciler/verify's (pure); the fetching is a
// Fetcher's (fetch.go: the registry as the workload's service account, the
// policy's keys and roots).
package check

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/verify"
)

// Owner is who asked: woken when the decision is in.
type Owner struct{ Kind, Namespace, Name string }

// Request asks for the decision about one input value of a step.
type Request struct {
	Owner Owner
	// Account is the service account the evidence is read as.
	Account api.ServiceAccountRef
	Type    string // verify.TypeImage, …
	Input   string
	Value   any
	Policy  api.InputVerify
	// Producers are the owners (in Owner.Namespace) whose histories'
	// statements count for the kontinue rule, each only about itself:
	// the owner, and the Workload that stamped a Deliverable.
	Producers []verify.Producer
}

// Fetcher does the I/O of one decision.
type Fetcher interface {
	// Material reads the keys and trusted roots a policy names (and
	// Kontinue's own key), as Kontinue.
	Material(ctx context.Context, refs []verify.Ref) (verify.Material, error)
	// Evidence reads what the policy needs about t (resolving its tag to a
	// digest when it names none), as the request's service account.
	Evidence(ctx context.Context, req Request, t verify.Target, registry bool) (verify.Evidence, error)
}

// Options bound a Runner.
type Options struct {
	Workers int // fetches at once (default 8)
	// PerNamespace bounds one namespace's fetches while another namespace
	// waits (default 2); while none waits, one namespace may use every
	// worker but PerNamespace, kept free for the next namespace to ask.
	PerNamespace int
	Timeout      time.Duration // of one fetch (default 30s)
	// Verified is how long a decision that passed is kept before it is
	// checked again (default 1h); a refusal is checked again after 5s,
	// doubling to RefusedMax (default 5m): a statement may be written a
	// moment after the output it names, a key may be added.
	Verified, RefusedMax time.Duration
	// RetryMax bounds the backoff of a failed fetch (default 5m).
	RetryMax time.Duration
	// MaxEntries bounds the cache (default 10000).
	MaxEntries int
	// Grace is how long after a value is first asked about its owner may
	// wait for the decision before it says the step is verifying
	// (Decision.GraceUntil; default 1s): a fetch that takes a few milliseconds
	// then costs no status write of its own.
	Grace time.Duration
	// StartupGrace is the grace of the values first asked about within it
	// after the Runner was made (default 10s). A restart empties the
	// cache, and every owner with a policy asks at once about values its
	// status shows decided already: hundreds of fetches, more than Grace
	// covers, each missed grace two status writes (InputVerifying, then
	// back) where nothing changed. A step takes no input before it is
	// verified, so the wait holds back only the status.
	StartupGrace time.Duration
	// Wait bounds how long Wait holds a reconcile for a decision being
	// fetched (default 150ms), WaitSlots how many reconciles it holds at
	// once (default 4): see Wait.
	Wait      time.Duration
	WaitSlots int
	// OnDecision, when set, is told of each decision made (its outcome,
	// how long the fetch and decision took) and each failed fetch
	// (outcome "Error").
	OnDecision func(outcome string, took time.Duration)
	// Now is the clock (tests).
	Now func() time.Time
}

// Runner decides asynchronously, with a cache.
type Runner struct {
	f    Fetcher
	wake func(Owner)
	o    Options

	mu      sync.Mutex
	cond    *sync.Cond
	entries map[string]*entry
	queues  map[string][]string // namespace → keys waiting to be fetched
	order   []string            // namespaces with a queue, in turn
	running map[string]int      // namespace → fetches running
	fetches map[string]*entry   // key → entry being fetched
	busy    int                 // fetches running in all
	closed  bool
	started time.Time
	waiting int // reconciles held in Wait
	// took: namespace → its recent fetches' time (a moving mean); one
	// duration per namespace that ever asked, kept (Wait).
	took map[string]time.Duration
}

type entry struct {
	req      Request
	result   verify.Result
	decided  bool      // result holds a decision (possibly stale)
	until    time.Time // a decision is fresh until then; a failure retried then
	pending  bool      // queued or being fetched
	failures int       // in a row
	refusals int       // in a row
	err      error     // the last fetch's failure
	waiters  map[Owner]bool
	used     time.Time
	first    time.Time   // asked first
	grace    *time.Timer // wakes the waiters when the grace ends undecided
	fetching time.Time   // the running fetch's start (zero: none running)
	// done is closed when the fetch ends (Wait); held counts the
	// reconciles waiting in Wait by owner: those are not woken, they take
	// the decision themselves.
	done chan struct{}
	held map[Owner]int
}

// StatementWait is how long after a value is first checked a missing
// statement of Kontinue's is waited for (InputVerifying) before the value
// is refused: the statement of a step's outputs is written just after
// the status write that publishes them, and the step that checks it may
// look in between (verify.Result.Awaited).
const StatementWait = 30 * time.Second

// New returns a Runner fetching with f and waking owners with wake. Start
// its workers with Run.
func New(f Fetcher, wake func(Owner), o Options) *Runner {
	if o.Workers <= 0 {
		o.Workers = 8
	}
	if o.PerNamespace <= 0 {
		o.PerNamespace = 2
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Verified <= 0 {
		o.Verified = time.Hour
	}
	if o.RefusedMax <= 0 {
		o.RefusedMax = 5 * time.Minute
	}
	if o.RetryMax <= 0 {
		o.RetryMax = 5 * time.Minute
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = 10000
	}
	if o.Grace <= 0 {
		o.Grace = time.Second
	}
	if o.StartupGrace <= 0 {
		o.StartupGrace = 10 * time.Second
	}
	if o.Wait <= 0 {
		o.Wait = 150 * time.Millisecond
	}
	if o.WaitSlots <= 0 {
		o.WaitSlots = 4
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	r := &Runner{f: f, wake: wake, o: o, entries: map[string]*entry{}, queues: map[string][]string{}, running: map[string]int{}, fetches: map[string]*entry{}, started: o.Now(), took: map[string]time.Duration{}}
	r.cond = sync.NewCond(&r.mu)
	return r
}

// key is what a decision is cached by: the namespace (evidence is read as
// its accounts, statements from its ConfigMaps), the value as given (a tag
// is resolved once per entry), the policy's spec and the histories read.
func key(req Request, t verify.Target) string {
	ref := t.Ref
	if ref == "" || t.Type == verify.TypeConfig {
		ref = t.ValueDigest
	}
	return fmt.Sprintf("%s|%s/%s|%s|%s|%v", req.Owner.Namespace, t.Type, ref, t.Digest, verify.SpecHash(req.Policy), req.Producers)
}

// Decision is Check's answer: the result, and when asking again may give
// another (0: the owner is woken when it can).
type Decision struct {
	verify.Result
	Recheck time.Duration
	// GraceUntil, when set (with Unknown): the value was first asked about
	// less than Options.Grace ago and its fetch has not failed; the owner
	// may wait until then for the decision before it says the step is
	// verifying. It is woken when the decision is in, or then, whichever
	// comes first.
	GraceUntil time.Time
}

// Check returns the decision about req's value: cached, or Unknown while
// it is fetched (req.Owner is woken when it is in). A decision past its
// time is returned while it is checked again. It never blocks on I/O.
func (r *Runner) Check(req Request) Decision {
	d, _ := r.check(req, true)
	return d
}

// Prefetch has req's value fetched, when it is not decided, without
// making its owner a waiter: a reconcile asks about a value it will need
// later in the same walk (the output of a step it is applying), and takes
// the decision then with Check or Wait; woken for it, its owner would be
// reconciled again for nothing.
func (r *Runner) Prefetch(req Request) { r.check(req, false) }

// check is Check, and the cache key of req's value ("": not a reference).
func (r *Runner) check(req Request, waiter bool) (Decision, string) {
	t, err := verify.TargetOf(req.Type, req.Input, req.Value)
	if err != nil {
		return Decision{Result: verify.Result{Outcome: verify.Refused, Rule: verify.RuleDigest, Why: err.Error()}}, ""
	}
	k := key(req, t)
	now := r.o.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[k]
	if e == nil {
		r.evict()
		e = &entry{req: req, waiters: map[Owner]bool{}, first: now}
		r.entries[k] = e
	}
	e.used = now
	if e.decided && now.Before(e.until) {
		d := Decision{Result: e.result}
		if e.result.Outcome != verify.Verified {
			d.Recheck = e.until.Sub(now)
		}
		return d, k
	}
	if waiter {
		e.waiters[req.Owner] = true
	}
	if !e.pending && !now.Before(e.until) {
		e.req = req
		r.enqueue(k, req.Owner.Namespace)
	}
	if e.decided {
		return Decision{Result: e.result}, k // checked again meanwhile
	}
	res := verify.Result{Outcome: verify.Unknown, Digest: t.Digest, Why: "verifying"}
	if e.err != nil {
		res.Why = fmt.Sprintf("verifying: %v (attempt %d, next at %s)", e.err, e.failures, e.until.Format(time.TimeOnly))
		return Decision{Result: res}, k
	}
	d := Decision{Result: res}
	if g := r.grace(e.first, now); g > 0 {
		d.GraceUntil = now.Add(g)
		if e.grace == nil {
			e.grace = time.AfterFunc(g, func() { r.graceOver(k, e) })
		}
	}
	return d, k
}

// graceOver wakes who waits for e when its grace ended with no decision
// (Decision.GraceUntil): their statuses say it is being verified now.
func (r *Runner) graceOver(k string, e *entry) {
	r.mu.Lock()
	if r.entries[k] != e || e.decided || e.err != nil || r.closed {
		r.mu.Unlock()
		return // decided or failed: its waiters were woken then
	}
	var wake []Owner
	for o := range e.waiters {
		if e.held[o] == 0 { // held in Wait: it looks again itself
			wake = append(wake, o)
		}
	}
	r.mu.Unlock()
	for _, o := range wake {
		r.wake(o)
	}
}

// Wait is Check, except that a reconcile may wait a moment for a decision
// being fetched, when the fetches of its namespace take less than that
// lately: it takes the input in the same reconcile instead of a second
// one when woken (a whole walk again, its reads and renders: most of a
// policy's cost in a creation burst, bench/README.md 5d). It waits at
// most Options.Wait, only for a value whose fetch runs or will start
// soon, while no running fetch of the namespace is older than that (a
// registry that hangs holds no reconcile more than once), and in at most
// Options.WaitSlots reconciles at once, so that a slow or busy registry
// costs other owners a few workers' milliseconds at most. It is not the
// owner's own timer: ctx ends it too.
func (r *Runner) Wait(ctx context.Context, req Request) Decision {
	d, k := r.check(req, true)
	if d.Outcome != verify.Unknown || d.GraceUntil.IsZero() {
		return d
	}
	r.mu.Lock()
	e := r.entries[k]
	if e == nil || !r.worthWaiting(k, e, r.o.Now()) {
		r.mu.Unlock()
		return d
	}
	if e.done == nil {
		e.done = make(chan struct{})
	}
	if e.held == nil {
		e.held = map[Owner]int{}
	}
	done := e.done
	e.held[req.Owner]++
	r.waiting++
	r.mu.Unlock()

	timer := time.NewTimer(r.o.Wait)
	select {
	case <-done:
	case <-timer.C:
	case <-ctx.Done():
	}
	timer.Stop()
	r.mu.Lock()
	r.waiting--
	if e.held[req.Owner]--; e.held[req.Owner] <= 0 {
		delete(e.held, req.Owner)
	}
	r.mu.Unlock()
	// Decided meanwhile: the answer, not a wake. Not yet: a waiter again,
	// woken when it is in (done wakes those not held any more).
	return r.Check(req)
}

// worthWaiting says whether Wait holds a reconcile for e (pending): a slot
// is free, the namespace's recent fetches took at most half the wait, none
// of its running fetches is older than the wait, and e's fetch runs or is
// among the next its namespace starts; mu held.
func (r *Runner) worthWaiting(k string, e *entry, now time.Time) bool {
	ns := e.req.Owner.Namespace
	took, known := r.took[ns]
	if !e.pending || e.err != nil || r.waiting >= r.o.WaitSlots || !known || took > r.o.Wait/2 {
		return false
	}
	for _, o := range r.fetches {
		if o.req.Owner.Namespace == ns && now.Sub(o.fetching) > r.o.Wait {
			return false
		}
	}
	if !e.fetching.IsZero() {
		return true
	}
	// Queued: worth it when its turn comes within the wait, with the
	// workers a lone namespace may use.
	free := max(1, r.o.Workers-r.o.PerNamespace)
	within := free * int(r.o.Wait/max(took, time.Microsecond))
	for i, q := range r.queues[ns] {
		if i >= within {
			return false
		}
		if q == k {
			return true
		}
	}
	return false
}

// grace is how long more the owner of a value first asked about at first
// may wait for its decision (Decision.GraceUntil).
func (r *Runner) grace(first, now time.Time) time.Duration {
	g := r.o.Grace - now.Sub(first)
	if first.Sub(r.started) < r.o.StartupGrace {
		g = max(g, r.o.StartupGrace-now.Sub(r.started))
	}
	return max(0, g)
}

// enqueue queues k for a fetch; mu held.
func (r *Runner) enqueue(k, ns string) {
	r.entries[k].pending = true
	if len(r.queues[ns]) == 0 {
		r.order = append(r.order, ns)
	}
	r.queues[ns] = append(r.queues[ns], k)
	r.cond.Signal()
}

// evict makes room for one more entry; mu held. Expired entries go first,
// then the least recently used that nobody waits for.
func (r *Runner) evict() {
	if len(r.entries) < r.o.MaxEntries {
		return
	}
	now := r.o.Now()
	var oldest string
	for k, e := range r.entries {
		if e.pending {
			continue
		}
		if !now.Before(e.until) {
			delete(r.entries, k)
			continue
		}
		if oldest == "" || e.used.Before(r.entries[oldest].used) {
			oldest = k
		}
	}
	if len(r.entries) >= r.o.MaxEntries && oldest != "" {
		delete(r.entries, oldest)
	}
}

// next takes the next key to fetch (pick's namespace). It waits for one;
// "" when closed.
func (r *Runner) next() (string, string) {
	for {
		if r.closed {
			return "", ""
		}
		if i := pick(r.order, r.running, r.o.Workers-r.busy, r.o.PerNamespace); i >= 0 {
			ns := r.order[i]
			q := r.queues[ns]
			k := q[0]
			r.order = append(r.order[:i:i], r.order[i+1:]...)
			if len(q) > 1 {
				r.queues[ns] = q[1:]
				r.order = append(r.order, ns) // its turn again after the others
			} else {
				delete(r.queues, ns)
			}
			r.running[ns]++
			r.busy++
			r.entries[k].fetching = r.o.Now()
			r.fetches[k] = r.entries[k]
			return k, ns
		}
		r.cond.Wait()
	}
}

// pick is the fair queue's choice of whose fetch starts next, by index in
// order (the namespaces with fetches queued, in turn; -1: none now), with
// idle workers free (the asking one included) and running fetches per
// namespace. The first namespace in turn below per goes; when every
// namespace queued is at per and only one is queued, it may take one more
// worker as long as per stay idle for a namespace that asks next: work
// conserving, yet a registry that hangs for one namespace never holds the
// workers another would need.
func pick(order []string, running map[string]int, idle, per int) int {
	for i, ns := range order {
		if running[ns] < per {
			return i
		}
	}
	if len(order) == 1 && idle-1 >= per {
		return 0
	}
	return -1
}

// Run starts the workers; they stop with ctx.
func (r *Runner) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for i := 0; i < r.o.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.work(ctx)
		}()
	}
	<-ctx.Done()
	r.mu.Lock()
	r.closed = true
	r.cond.Broadcast()
	r.mu.Unlock()
	wg.Wait()
}

func (r *Runner) work(ctx context.Context) {
	for {
		r.mu.Lock()
		k, ns := r.next()
		var req Request
		if k != "" {
			req = r.entries[k].req
		}
		r.mu.Unlock()
		if k == "" {
			return
		}
		start := r.o.Now()
		res, err := r.decide(ctx, req)
		took := r.o.Now().Sub(start)
		if r.o.OnDecision != nil {
			if err != nil {
				r.o.OnDecision("Error", took)
			} else {
				r.o.OnDecision(string(res.Outcome), took)
			}
		}
		r.done(k, ns, res, err, took)
	}
}

// decide fetches and decides one request (Once), within the timeout.
func (r *Runner) decide(ctx context.Context, req Request) (verify.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	defer cancel()
	res, _, err := Once(ctx, r.f, req, false)
	return res, err
}

// done records a fetch's outcome and wakes who waited.
func (r *Runner) done(k, ns string, res verify.Result, err error, took time.Duration) {
	now := r.o.Now()
	r.mu.Lock()
	if m, ok := r.took[ns]; ok {
		r.took[ns] = (3*m + took) / 4
	} else {
		r.took[ns] = took
	}
	r.running[ns]--
	if r.running[ns] == 0 {
		delete(r.running, ns)
	}
	r.busy--
	r.cond.Signal()
	delete(r.fetches, k)
	e := r.entries[k]
	if e == nil {
		r.mu.Unlock()
		return
	}
	e.pending, e.fetching = false, time.Time{}
	if e.done != nil {
		close(e.done) // Wait's reconciles take it
		e.done = nil
	}
	waiters := e.waiters
	if err != nil {
		e.failures++
		e.err = err
		wait := backoff(time.Second, e.failures, r.o.RetryMax)
		e.until = now.Add(wait)
		klog.V(2).InfoS("verification fetch failed", "namespace", ns, "input", e.req.Input, "attempt", e.failures, "err", err)
		// Tried again by itself; who waits is told now (the step says
		// why it waits) and again when it is decided.
		waiters = maps.Clone(e.waiters)
		time.AfterFunc(wait, func() { r.retry(k) })
	} else {
		e.failures, e.err = 0, nil
		e.result, e.decided = res, true
		switch {
		case res.Outcome == verify.Refused && res.Awaited && now.Sub(e.first) < StatementWait:
			// Not refused yet: looked at again in a second.
			e.result.Outcome = verify.Unknown
			e.result.Why = "waiting for Kontinue's statement of it (written just after the step that made it succeeds): " + res.Why
			e.until = now.Add(time.Second)
		case res.Outcome == verify.Verified:
			e.refusals = 0
			e.until = now.Add(r.o.Verified)
		default:
			e.refusals++
			e.until = now.Add(backoff(5*time.Second, e.refusals, r.o.RefusedMax))
		}
		e.waiters = map[Owner]bool{}
	}
	var wake []Owner
	for o := range waiters {
		if e.held[o] == 0 {
			wake = append(wake, o)
		}
	}
	r.mu.Unlock()
	for _, o := range wake {
		r.wake(o)
	}
}

// retry queues again a fetch that failed.
func (r *Runner) retry(k string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[k]
	if e == nil || e.pending || r.closed {
		return
	}
	if r.o.Now().Sub(e.used) > 2*r.o.RetryMax {
		delete(r.entries, k) // nobody asks any more
		return
	}
	r.enqueue(k, e.req.Owner.Namespace)
}

// backoff is base doubled n-1 times, at most max.
func backoff(base time.Duration, n int, max time.Duration) time.Duration {
	d := base
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	return d
}
