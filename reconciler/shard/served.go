package shard

// Which shards running replicas serve, as this replica sees it, for
// roll-outs: a wave does not wait for an owner no running replica serves
// (rollout.Stand). The Leases are watched in the controller's namespace;
// the set is worked out again when one changes, and when a shard's Lease is
// due to stop counting (a timer, not a poll: it moves with each renewal).
// The Manager looks at every chain again when the set changes. A replica
// without leader election keeps its own shard's Lease fresh while its
// controllers run (Announce).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/reconciler/api"
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

// Presence is the shards served, as the Leases in the cache say.
type Presence struct {
	tracker *tracking.Tracker
	opts    LeaseOptions
	shard   string // this replica's
	changed func() // told when the shards served change
	key     tracking.Key
	timer   *time.Timer
	leases  coordinationv1client.LeasesGetter // Keep: this replica's Lease is written through it

	mu     sync.Mutex
	served map[string]bool // nil: not known (the Leases not listed yet); never changed in place
	dirty  bool            // a Lease changed since the last look
}

// NewPresence watches, through tracker, the Leases o names, for replica
// of shard; changed is told when the shards served change (nil: o names
// no namespace, nothing is known). With o.Keep, this replica's Lease is
// written with a client of cfg.
func NewPresence(tracker *tracking.Tracker, cfg *rest.Config, o LeaseOptions, shard string, changed func()) (*Presence, error) {
	if o.Namespace == "" {
		return nil, nil
	}
	if o.ID == "" {
		o.ID = "kontinue-leader"
	}
	if o.Duration <= 0 {
		o.Duration = 15 * time.Second
	}
	p := &Presence{tracker: tracker, opts: o, shard: shard, changed: changed, key: tracking.Key{GVR: LeaseGVR, Namespace: o.Namespace}}
	if o.Keep {
		c, err := coordinationv1client.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		p.leases = c
	}
	return p, nil
}

// Served is the shards running replicas serve ("" the default); nil when
// not known (no Lease namespace, or the Leases not listed yet). Read only.
func (p *Presence) Served() map[string]bool {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.served
}

// Start watches the Leases (not waited for: a replica that may not list
// them decides as if every shard were served), and, with Keep, keeps this
// replica's Lease fresh until ctx ends. done is closed once it has
// released it; Stop ends the timer.
func (p *Presence) Start(ctx context.Context) (done <-chan struct{}) {
	p.timer = time.AfterFunc(time.Hour, p.look)
	p.timer.Stop()
	p.tracker.Ensure(p.key, tracking.Permanent)
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
	lock := NewLeaseLock(p.leases, p.opts.Namespace, api.ShardLease(p.opts.ID, p.shard), id)
	go func() {
		defer close(stopped)
		Announce(ctx, lock, p.opts.Duration, p.opts.Duration/3)
	}()
	return stopped
}

// Stop stops the timer.
func (p *Presence) Stop() { p.timer.Stop() }

// Changed is told of a Lease's event (the Manager's routing: on an
// informer goroutine, so the look is left to the timer's).
func (p *Presence) Changed() {
	p.mu.Lock()
	p.dirty = true
	p.mu.Unlock()
	p.timer.Reset(0)
}

// look works the served shards out again, and sets the timer for when
// the first of them stops counting.
func (p *Presence) look() {
	p.mu.Lock()
	p.dirty = false
	p.mu.Unlock()
	objs, synced := p.tracker.List(p.key, p.opts.Namespace)
	var served map[string]bool
	var until time.Time
	if synced {
		leases := make([]Lease, 0, len(objs))
		for _, o := range objs {
			leases = append(leases, ReadLease(o))
		}
		served, until = Served(p.opts.ID, p.shard, leases, time.Now())
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
		p.changed() // a wave may wait for an owner no replica serves now, or the other way round
	}
}
