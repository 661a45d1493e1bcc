// Package loop is the generic workqueue loop every controller of the
// Manager runs: keys, a fair rate-limited queue (reconciler/fairq), workers
// that reconcile them, and why each queued key was woken (reconciler/wakes:
// a key woken only by Kontinue's own writes coming back is not reconciled).
package loop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/reconciler/fairq"
	"kontinue.dev/kontinue/reconciler/gate"
	"kontinue.dev/kontinue/reconciler/wakes"
)

// Result tells the loop what to do after a reconcile that returned no error.
type Result struct {
	// RequeueAfter > 0 reconciles the key again after that delay (an
	// expected wait, e.g. for a cache to sync): not an error, no backoff.
	RequeueAfter time.Duration
	// Wait says that RequeueAfter waits for something to show up (a
	// cache to sync, a create to reach the cache): consecutive waits of a
	// key back off (waitDelay), so that something that never shows up (a
	// watch that never syncs) is not looked at five times a second forever.
	// Without it RequeueAfter is a timer (a deadline) and is kept.
	Wait bool
}

// maxWait caps the backoff of consecutive waits of one key.
const maxWait = time.Minute

// waitDelay is the delay of a key's wait after it waited waits times in a
// row: first, doubled for each, up to maxWait (a first delay above the cap
// is kept).
func waitDelay(first time.Duration, waits int) time.Duration {
	if first >= maxWait {
		return first
	}
	d := first
	for i := 0; i < waits && d < maxWait; i++ {
		d *= 2
	}
	return min(d, maxWait)
}

// Key is what a controller reconciles: an object of a kind. Every key
// carries its kind, so a Workload and a Deliverable (or a ClusterSupplyChain
// and a ClusterDelivery) of the same name never stand for each other.
type Key struct {
	Kind string
	types.NamespacedName
}

// String is "Kind/namespace/name" ("Kind//name" for cluster-scoped kinds):
// the key's name as a tracker user.
func (k Key) String() string { return k.Kind + "/" + k.Namespace + "/" + k.Name }

// ParseKey reads a Key back from its String form (tracker users).
func ParseKey(s string) (Key, bool) {
	parts := strings.SplitN(s, "/", 3)
	if len(parts) != 3 || parts[0] == "" || parts[2] == "" {
		return Key{}, false
	}
	return Key{Kind: parts[0], NamespacedName: types.NamespacedName{Namespace: parts[1], Name: parts[2]}}, true
}

// KeyOf is the key of an object of kind.
func KeyOf(kind string, obj metav1.Object) Key {
	return Key{Kind: kind, NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}}
}

// Reconciler reconciles one key.
type Reconciler interface {
	Reconcile(ctx context.Context, key Key) (Result, error)
}

// ReconcileFunc adapts a function to Reconciler.
type ReconcileFunc func(ctx context.Context, key Key) (Result, error)

// Reconcile calls f.
func (f ReconcileFunc) Reconcile(ctx context.Context, key Key) (Result, error) { return f(ctx, key) }

// ErrTerminal wraps errors that retrying cannot fix (the reconciler has
// already recorded them as a condition): the key is not requeued.
var ErrTerminal = errors.New("terminal")

// Terminal marks err as not worth retrying.
func Terminal(err error) error { return fmt.Errorf("%w: %w", ErrTerminal, err) }

// Observer sees every reconcile's outcome (metrics).
type Observer interface {
	Reconciled(controller string, d time.Duration, result string)
	// Working is told when a worker starts (+1) and ends (-1) a reconcile.
	Working(controller string, delta int)
	// Panicked is told of a reconcile that panicked (it also ends as an error).
	Panicked(controller string)
}

// Controller runs workers that take keys from a rate-limited queue.
type Controller struct {
	Name     string
	Queue    fairq.Interface[Key]
	R        Reconciler
	Observer Observer
	// Gate, when set, holds the workers while the API server is away
	// (shared by every controller of a Manager).
	Gate *gate.APIGate
	// OnReconcile, when set, is told of every key taken from the queue.
	OnReconcile func(Key)

	// Echo, when set, reports whether a version of a stamped object is
	// one Kontinue wrote coming back (stamp.Echoes.Back): a key woken only
	// by such versions is not reconciled (reconciler/wakes).
	Echo func(uid types.UID, rv string) bool
	// OnEcho, when set, is told of each key not reconciled for that.
	OnEcho func(controller string)

	waitsMu sync.Mutex
	waits   map[Key]int // consecutive waits (Result.Wait) by key

	wakes wakes.Book[Key] // why each queued key was added
	// timedWakes: the queue records a timed look in wakes as it comes due
	// (fairq.Queue.OnTimer); client-go's queue cannot, so a key that asks
	// to be looked at again is marked woken at once (--fair-queue=false).
	timedWakes bool
}

func (c *Controller) woke(key Key)                             { c.wakes.Woke(key) }
func (c *Controller) wokeBy(key Key, uid types.UID, rv string) { c.wakes.WokeBy(key, uid, rv) }
func (c *Controller) onlyEchoes(key Key) bool                  { return c.wakes.OnlyEchoes(key, c.Echo) }

// requeueDelay is when a key whose reconcile ended with res comes back
// (res.RequeueAfter > 0: its wait, backed off; else 0), and records the
// wait: any other outcome ends the key's run of waits.
func (c *Controller) requeueDelay(key Key, res Result) time.Duration {
	c.waitsMu.Lock()
	defer c.waitsMu.Unlock()
	if res.RequeueAfter <= 0 || !res.Wait {
		delete(c.waits, key)
		return res.RequeueAfter
	}
	if c.waits == nil {
		c.waits = map[Key]int{}
	}
	n := c.waits[key]
	c.waits[key] = n + 1
	return waitDelay(res.RequeueAfter, n)
}

// NewController returns a controller whose queue is fair across
// namespaces and serves an owner's own events before fan-out
// (reconciler/fairq), and backs off per key (exponential, 50 ms to 5 min)
// and overall (a token bucket).
func NewController(name string, r Reconciler) *Controller {
	q := fairq.New(name, tenantOf, newLimiter())
	c := &Controller{Name: name, Queue: q, R: r, timedWakes: true}
	q.OnTimer = c.woke
	return c
}

func newLimiter() workqueue.TypedRateLimiter[Key] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[Key](50*time.Millisecond, 5*time.Minute),
		&workqueue.TypedBucketRateLimiter[Key]{Limiter: rate.NewLimiter(rate.Limit(50), 300)},
	)
}

// tenantOf is a key's tenant for the fair queue: its namespace; the
// cluster-scoped keys (chains, templates) share one.
func tenantOf(k Key) string { return k.Namespace }

// UseFIFO replaces the controller's queue, before it runs, with client-go's
// single FIFO (--fair-queue=false: what Kontinue had before, to compare).
func (c *Controller) UseFIFO() {
	c.Queue.ShutDown()
	c.timedWakes = false
	c.Queue = fifo{workqueue.NewTypedRateLimitingQueueWithConfig(newLimiter(), workqueue.TypedRateLimitingQueueConfig[Key]{Name: c.Name})}
}

// fifo is client-go's queue, where every priority is one.
type fifo struct {
	workqueue.TypedRateLimitingInterface[Key]
}

func (f fifo) AddPriority(k Key, _ fairq.Priority) { f.Add(k) }
func (f fifo) AddFirst(k Key)                      { f.Add(k) }

// Enqueue adds a key for an event on the key's own object (a person's
// edit, a create, a delete, a reconcile asked for).
func (c *Controller) Enqueue(key Key) {
	c.woke(key)
	c.Queue.Add(key)
}

// EnqueueProgress adds a key for a change of something its earlier work
// watches (a run, a selected object): after people's own edits, before
// fan-out.
func (c *Controller) EnqueueProgress(key Key) {
	c.woke(key)
	c.Queue.AddPriority(key, fairq.Normal)
}

// EnqueueContinue adds a key whose last reconcile stopped half way for
// something it asked for, now there (a verification decision): ahead of
// its tenant's other keys, so that what it started is finished before
// they start (fairq.Queue.AddFirst).
func (c *Controller) EnqueueContinue(key Key) {
	c.woke(key)
	c.Queue.AddFirst(key)
}

// EnqueueStamped is EnqueueProgress for version rv of an object the key
// stamped: if every such version since the key was last taken is one
// Kontinue wrote, the key is not reconciled (reconciler/wakes). A version already
// known for Kontinue's own (the write's answer came first, as it mostly
// does) adds nothing: the key does not wait in the queue only to be found
// an echo, a wait longer than an echo is kept when the queue is long
// (50,000 owners: a third of them were then reconciled again for nothing).
func (c *Controller) EnqueueStamped(key Key, uid types.UID, rv string) {
	if c.Echo != nil && c.Echo(uid, rv) {
		if c.OnEcho != nil {
			c.OnEcho(c.Name)
		}
		return
	}
	c.wokeBy(key, uid, rv)
	c.Queue.AddPriority(key, fairq.Normal)
}

// EnqueueFanOut adds a key one change elsewhere enqueues with many others
// (a template or chain edit, the initial list, a permission granted): it
// waits behind every key added with Enqueue.
func (c *Controller) EnqueueFanOut(key Key) {
	c.woke(key)
	c.Queue.AddPriority(key, fairq.Low)
}

// EnqueueAfter adds a key after d, at most once per d: of two pending
// adds of a key the earlier wins, so a burst of events is one reconcile.
func (c *Controller) EnqueueAfter(key Key, d time.Duration) { c.Queue.AddAfter(key, d) }

// Forget resets key's backoff: its next failure is retried soon again.
func (c *Controller) Forget(key Key) { c.Queue.Forget(key) }

// Run starts workers and blocks until stop is done, then drains the queue:
// in-flight reconciles finish, nothing new starts. Reconciles run with ctx,
// which may outlive stop by a grace period.
func (c *Controller) Run(stop, ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c.processNext(ctx) {
			}
		}()
	}
	<-stop.Done()
	c.Queue.ShutDownWithDrain()
	wg.Wait()
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, shutdown := c.Queue.Get()
	if shutdown {
		return false
	}
	defer c.Queue.Done(key)
	if c.onlyEchoes(key) {
		if c.OnEcho != nil {
			c.OnEcho(c.Name)
		}
		return true
	}
	c.Gate.Wait(ctx)
	if c.OnReconcile != nil {
		c.OnReconcile(key)
	}
	start := time.Now()
	if c.Observer != nil {
		c.Observer.Working(c.Name, 1)
	}
	res, err := c.reconcile(ctx, key)
	if c.Observer != nil {
		c.Observer.Working(c.Name, -1)
	}
	if err != nil {
		res = Result{}
	}
	delay := c.requeueDelay(key, res)
	outcome := "success"
	switch {
	case err != nil && errors.Is(err, ErrTerminal):
		outcome = "terminal"
		c.Queue.Forget(key)
		klog.V(2).InfoS("reconcile ended on a recorded error", "controller", c.Name, "key", key.String(), "err", err.Error())
	case err != nil && c.Gate.Fail(err, start):
		// Not this key's fault: no backoff growing through the outage and
		// no line per key; the workers wait at the gate until the server
		// answers, then the key comes back at once.
		outcome = "error"
		c.Queue.Forget(key)
		c.woke(key) // come back whatever else wakes it first
		c.Queue.AddAfter(key, gatedRetry)
	case err != nil:
		outcome = "error"
		c.woke(key)
		c.Queue.AddRateLimited(key)
		klog.ErrorS(err, "reconcile failed, retrying with backoff", "controller", c.Name, "key", key.String())
	case res.RequeueAfter > 0:
		outcome = "requeue"
		c.Queue.Forget(key)
		if !c.timedWakes {
			c.woke(key)
		}
		// With timedWakes the look again is recorded when it comes due:
		// the echoes of what this reconcile wrote, come in meanwhile, are
		// no reason to reconcile again now.
		c.Queue.AddAfter(key, delay)
	default:
		c.Queue.Forget(key)
	}
	took := time.Since(start)
	if c.Observer != nil {
		c.Observer.Reconciled(c.Name, took, outcome)
	}
	// One line per reconcile at debug, so that a key reconciled again and
	// again while nothing changes shows by name (the metrics count by
	// controller only); the robustness suite counts them per owner.
	if v := klog.V(4); v.Enabled() {
		v.InfoS("reconciled", "controller", c.Name, "key", key.String(), "outcome", outcome, "took", took, "again", delay)
	}
	return true
}

// reconcile turns a panic in a reconciler into an error for that key, so one
// bad object cannot bring the controller down.
func (c *Controller) reconcile(ctx context.Context, key Key) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			klog.ErrorS(nil, "reconcile panicked", "controller", c.Name, "key", key.String(), "panic", r)
			err = fmt.Errorf("panic: %v", r)
			if c.Observer != nil {
				c.Observer.Panicked(c.Name)
			}
		}
	}()
	return c.R.Reconcile(ctx, key)
}

// gatedRetry is when a key that failed on an unreachable API server is
// tried again: short and fixed, since the gate (not the key) waits.
const gatedRetry = 100 * time.Millisecond
