package shard

// Which shards running replicas serve. A roll-out must not wait for an
// owner no replica will reconcile (docs/rollouts.md#owners-nothing-moves),
// and `kontinue check` reports those owners: both read the same signal,
// each shard's Lease (api.ShardLease(id, shard), in the controller's
// namespace). The replicas of a shard with leader election keep it fresh by
// electing; a replica without leader election keeps it fresh itself
// (Announce), while its controllers run.

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/reconciler/api"
)

// UnservedAfter is how long past its duration a shard's Lease may go
// without a renewal (or since it was released) before the shard counts as
// served by no running replica. A leader's failover to its standby, or a
// single replica's restart, takes less: their owners keep holding a wave
// meanwhile, as a canary must. As long as the shipped KontinueNoLeader
// alert waits: a shard down for longer no longer holds roll-outs, and its
// owners move when it is back.
const UnservedAfter = 5 * time.Minute

// Lease is what presence reads of a Lease.
type Lease struct {
	Name     string
	Renewed  time.Time // spec.renewTime; zero: none
	Duration time.Duration
}

// ReadLease reads a Lease object (as the API server sends it).
func ReadLease(u *unstructured.Unstructured) Lease {
	l := Lease{Name: u.GetName()}
	if rt, _, _ := unstructured.NestedString(u.Object, "spec", "renewTime"); rt != "" {
		if t, err := time.Parse(time.RFC3339Nano, rt); err == nil {
			l.Renewed = t
		}
	}
	secs, _, _ := unstructured.NestedInt64(u.Object, "spec", "leaseDurationSeconds")
	l.Duration = time.Duration(secs) * time.Second
	return l
}

// Served is the shards that running replicas serve at now ("" the default
// shard): own (the caller's, which runs), and each shard whose Lease
// (api.ShardLease(id, shard)) was renewed, or released, within its
// duration and UnservedAfter. until is when the first of those stops
// counting, unless renewed (zero: none will).
func Served(id, own string, leases []Lease, now time.Time) (served map[string]bool, until time.Time) {
	served = map[string]bool{own: true}
	for _, l := range leases {
		shard, ok := api.LeaseShard(id, l.Name)
		if !ok || l.Renewed.IsZero() {
			continue
		}
		end := l.Renewed.Add(l.Duration + UnservedAfter)
		if !now.Before(end) {
			continue
		}
		served[shard] = true
		if shard != own && (until.IsZero() || end.Before(until)) {
			until = end
		}
	}
	return served, until
}

// Announce keeps the Lease of lock fresh until ctx ends, renewing it every
// period for duration, and then releases it: what leader election does for
// an elected replica, for one that runs its shard's controllers without.
// A Lease another identity holds and renews is left to it (this replica's
// previous run, until it expires; or a second replica of the shard, which
// should not run without leader election). Failures are logged and tried
// again at the next period.
func Announce(ctx context.Context, lock resourcelock.Interface, duration, period time.Duration) {
	secs := int(duration / time.Second)
	var last string
	report := func(err error) {
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if msg != last {
			if err != nil {
				klog.ErrorS(err, "cannot keep the shard's Lease fresh: other replicas count the shard as served by none once it expires", "lease", lock.Describe())
			} else {
				klog.InfoS("keeping the shard's Lease fresh", "lease", lock.Describe(), "identity", lock.Identity())
			}
			last = msg
		}
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		report(renew(ctx, lock, secs))
		select {
		case <-ctx.Done():
			release(lock)
			return
		case <-t.C:
		}
	}
}

// renew writes lock's Lease as held by its identity now, unless another
// identity holds it and renewed it within its duration.
func renew(ctx context.Context, lock resourcelock.Interface, secs int) error {
	now := metav1.NewTime(time.Now())
	id := lock.Identity()
	rec, _, err := lock.Get(ctx)
	switch {
	case apierrors.IsNotFound(err):
		return lock.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: id, LeaseDurationSeconds: secs, AcquireTime: now, RenewTime: now})
	case err != nil:
		return err
	case rec.HolderIdentity != id && rec.HolderIdentity != "" &&
		now.Time.Before(rec.RenewTime.Add(time.Duration(rec.LeaseDurationSeconds)*time.Second)):
		return nil // the shard is served by the holder
	}
	next := *rec
	if rec.HolderIdentity != id {
		next.AcquireTime = now
		next.LeaderTransitions++
	}
	next.HolderIdentity, next.LeaseDurationSeconds, next.RenewTime = id, secs, now
	return lock.Update(ctx, next)
}

// release marks the Lease held by nobody, as leader election does on a
// clean stop, if this identity still holds it.
func release(lock resourcelock.Interface) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rec, _, err := lock.Get(ctx)
	if err != nil || rec.HolderIdentity != lock.Identity() {
		return
	}
	now := metav1.NewTime(time.Now())
	if err := lock.Update(ctx, resourcelock.LeaderElectionRecord{LeaderTransitions: rec.LeaderTransitions, LeaseDurationSeconds: 1,
		RenewTime: now, AcquireTime: now}); err != nil {
		klog.V(1).InfoS("cannot release the shard's Lease", "lease", lock.Describe(), "err", err.Error())
	}
}
