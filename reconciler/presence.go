package reconciler

// Which shards running replicas serve (reconciler/shard: Served, from each
// shard's Lease), for roll-outs: a wave does not wait for an owner no
// running replica serves (rollout.Stand). The Leases are watched in the
// controller's namespace; the set is worked out again when one changes,
// and when a shard's Lease is due to stop counting (a timer, not a poll:
// it moves with each renewal). A change of the set looks at every chain
// again. A replica without leader election keeps its own shard's Lease
// fresh while its controllers run (shard.Announce).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/shard"
	"kontinue.dev/kontinue/tracking"
)

// LeaseOptions say where the shards' Leases are (docs/operations.md#sharding).
type LeaseOptions struct {
	// Namespace and ID: each shard's Lease is api.ShardLease(ID, shard) in
	// Namespace (the leader-election namespace and id). Namespace "": not
	// known; every shard name counts as served.
	Namespace, ID string
	// Keep: this replica keeps its own shard's Lease fresh while its
	// controllers run, for Duration (renewed every third of it): it runs
	// without leader election, which would. Identity names it in the
	// Lease (default: the host name and a random suffix).
	Keep     bool
	Duration time.Duration
	Identity string
}

// presence is the shards served, as the Leases in the cache say.
type presence struct {
	m     *Manager
	opts  LeaseOptions
	key   tracking.Key
	timer *time.Timer

	mu     sync.Mutex
	served map[string]bool // nil: not known (the Leases not listed yet); never changed in place
	dirty  bool            // a Lease changed since the last look
}

func newPresence(m *Manager, o LeaseOptions) *presence {
	if o.Namespace == "" {
		return nil
	}
	if o.ID == "" {
		o.ID = "kontinue-leader"
	}
	if o.Duration <= 0 {
		o.Duration = 15 * time.Second
	}
	return &presence{m: m, opts: o, key: tracking.Key{GVR: shard.LeaseGVR, Namespace: o.Namespace}}
}

// Served is the shards running replicas serve ("" the default); nil when
// not known (no Lease namespace, or the Leases not listed yet). Read only.
func (p *presence) Served() map[string]bool {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.served
}

// start watches the Leases (not waited for: a replica that may not list
// them decides as if every shard were served), and, with Keep, keeps this
// replica's Lease fresh until ctx ends. done is closed once it has
// released it.
func (p *presence) start(ctx context.Context, dyn dynamic.Interface) (done <-chan struct{}) {
	p.timer = time.AfterFunc(time.Hour, p.look)
	p.timer.Stop()
	p.m.tracker.Ensure(p.key, tracking.Permanent)
	klog.InfoS("roll-outs count the shards whose Lease is live as served", "namespace", p.opts.Namespace,
		"leases", api.ShardLease(p.opts.ID, "NAME")+", "+p.opts.ID)
	stopped := make(chan struct{})
	if !p.opts.Keep {
		close(stopped)
		return stopped
	}
	id := p.opts.Identity
	if id == "" {
		host, _ := os.Hostname()
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		id = host + "_" + hex.EncodeToString(b)
	}
	lock := shard.NewLeaseLock(dyn, p.opts.Namespace, api.ShardLease(p.opts.ID, p.m.opts.Shard), id)
	go func() {
		defer close(stopped)
		shard.Announce(ctx, lock, p.opts.Duration, p.opts.Duration/3)
	}()
	return stopped
}

// changed is told of a Lease's event (route: on an informer goroutine,
// so the look is left to the timer's).
func (p *presence) changed() {
	p.mu.Lock()
	p.dirty = true
	p.mu.Unlock()
	p.timer.Reset(0)
}

// look works the served shards out again, and sets the timer for when
// the first of them stops counting.
func (p *presence) look() {
	p.mu.Lock()
	p.dirty = false
	p.mu.Unlock()
	objs, synced := p.m.tracker.List(p.key, p.opts.Namespace)
	var served map[string]bool
	var until time.Time
	if synced {
		leases := make([]shard.Lease, 0, len(objs))
		for _, o := range objs {
			leases = append(leases, shard.ReadLease(o))
		}
		served, until = shard.Served(p.opts.ID, p.m.opts.Shard, leases, time.Now())
	}
	p.mu.Lock()
	old := p.served
	moved := (old == nil) != (served == nil) || !maps.Equal(old, served)
	p.served = served
	switch {
	case p.dirty:
		p.timer.Reset(0)
	case !synced:
		p.timer.Reset(time.Second) // the first list: its last event may come before the cache says so
	case !until.IsZero():
		p.timer.Reset(time.Until(until) + 10*time.Millisecond)
	}
	p.mu.Unlock()
	if moved {
		klog.InfoS("shards served by a running replica", "shards", slices.Sorted(maps.Keys(served)), "known", served != nil)
		p.m.chains.enqueueAll() // a wave may wait for an owner no replica serves now, or the other way round
	}
}
