package shard

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// TestServed: which shards count as served, from their Leases: the
// caller's own always; another while its Lease was renewed (or released)
// within its duration and UnservedAfter; and when the first of them
// stops counting.
func TestServed(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	lease := func(name string, ago time.Duration, d time.Duration) Lease {
		return Lease{Name: name, Renewed: now.Add(-ago), Duration: d}
	}
	for _, tc := range []struct {
		name   string
		own    string
		leases []Lease
		want   map[string]bool
		until  time.Time
	}{
		{name: "alone: its own shard", own: "a", want: map[string]bool{"a": true}},
		{name: "the default shard's Lease is the id", own: "a", leases: []Lease{lease("kl", time.Second, 15*time.Second)},
			want: map[string]bool{"a": true, "": true}, until: now.Add(-time.Second + 15*time.Second + UnservedAfter)},
		{name: "fresh, and expired but within the grace (a failover, a restart)", own: "",
			leases: []Lease{lease("kl-shard-b", 2*time.Second, 15*time.Second), lease("kl-shard-c", time.Minute, 15*time.Second)},
			want:   map[string]bool{"": true, "b": true, "c": true}, until: now.Add(-time.Minute + 15*time.Second + UnservedAfter)},
		{name: "released a moment ago (duration 1s): served for the grace", own: "",
			leases: []Lease{lease("kl-shard-b", 10*time.Second, time.Second)},
			want:   map[string]bool{"": true, "b": true}, until: now.Add(-10*time.Second + time.Second + UnservedAfter)},
		{name: "not renewed for longer: unserved", own: "",
			leases: []Lease{lease("kl-shard-b", 15*time.Second+UnservedAfter, 15*time.Second)},
			want:   map[string]bool{"": true}},
		{name: "never renewed", own: "", leases: []Lease{{Name: "kl-shard-b", Duration: 15 * time.Second}}, want: map[string]bool{"": true}},
		{name: "other Leases, and names no shard has", own: "",
			leases: []Lease{lease("other", 0, time.Hour), lease("kl-shard-Bad_Name", 0, time.Hour), lease("kl-shard-", 0, time.Hour)},
			want:   map[string]bool{"": true}},
		{name: "its own Lease does not bound until", own: "a", leases: []Lease{lease("kl-shard-a", 0, 15*time.Second)},
			want: map[string]bool{"a": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, until := Served("kl", tc.own, tc.leases, now)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.until, until)
		})
	}
}

func TestReadLease(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "kl-shard-a"},
		"spec": map[string]any{"holderIdentity": "p", "renewTime": "2026-01-02T03:04:05.123456Z", "leaseDurationSeconds": int64(15)}}}
	require.Equal(t, Lease{Name: "kl-shard-a", Renewed: time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC), Duration: 15 * time.Second}, ReadLease(u))
	require.Equal(t, Lease{Name: "x"}, ReadLease(&unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "x"},
		"spec": map[string]any{"renewTime": "yesterday", "leaseDurationSeconds": "15"}}}), "what does not parse counts as never renewed")
}

// TestAnnounce: a replica without leader election keeps its shard's Lease
// fresh, leaves one that another identity renews alone until it expires,
// and releases its own when it stops.
func TestAnnounce(t *testing.T) {
	ctx := context.Background()
	c, _ := fakeLeases(t)
	read := func() *resourcelock.LeaderElectionRecord {
		rec, _, err := NewLeaseLock(c, "ns", "kl-shard-a", "reader").Get(ctx)
		require.NoError(t, err)
		return rec
	}
	old := NewLeaseLock(c, "ns", "kl-shard-a", "old_1")
	require.NoError(t, renew(ctx, old, 15), "created")
	require.Equal(t, "old_1", read().HolderIdentity)

	cur := NewLeaseLock(c, "ns", "kl-shard-a", "new_2")
	require.NoError(t, renew(ctx, cur, 15))
	require.Equal(t, "old_1", read().HolderIdentity, "a Lease another identity renewed is left to it")

	rec := read()
	rec.RenewTime.Time = time.Now().Add(-20 * time.Second) // old_1 stopped renewing
	require.NoError(t, old.Update(ctx, *rec))
	require.NoError(t, renew(ctx, cur, 15))
	got := read()
	require.Equal(t, "new_2", got.HolderIdentity, "an expired Lease is taken")
	require.Equal(t, 15, got.LeaseDurationSeconds)
	require.WithinDuration(t, time.Now(), got.RenewTime.Time, 5*time.Second)

	stop, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); Announce(stop, cur, 15*time.Second, time.Hour) }()
	cancel()
	<-done
	got = read()
	require.Empty(t, got.HolderIdentity, "released on stop")
	require.Equal(t, 1, got.LeaseDurationSeconds)
}
