package shard

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// fakeLeases is a dynamic fake whose leases behave like the API server's:
// every write bumps resourceVersion and an update carrying a stale one is
// refused with Conflict (the fake alone accepts any update).
func fakeLeases(t *testing.T) (*dynamicfake.FakeDynamicClient, *[]string) {
	t.Helper()
	c := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{LeaseGVR: "LeaseList"})
	var (
		mu   sync.Mutex
		rv   int
		sent []string // resourceVersions the lock sent on update
	)
	c.PrependReactor("create", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		rv++
		a.(clienttesting.CreateAction).GetObject().(*unstructured.Unstructured).SetResourceVersion(strconv.Itoa(rv))
		return false, nil, nil
	})
	c.PrependReactor("update", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		u := a.(clienttesting.UpdateAction).GetObject().(*unstructured.Unstructured)
		sent = append(sent, u.GetResourceVersion())
		cur, err := c.Tracker().Get(LeaseGVR, u.GetNamespace(), u.GetName())
		if err != nil {
			return true, nil, err
		}
		if cur.(*unstructured.Unstructured).GetResourceVersion() != u.GetResourceVersion() {
			return true, nil, apierrors.NewConflict(LeaseGVR.GroupResource(), u.GetName(), nil)
		}
		rv++
		u.SetResourceVersion(strconv.Itoa(rv))
		return false, nil, nil
	})
	return c, &sent
}

func TestLeaseLockRoundTrip(t *testing.T) {
	ctx := context.Background()
	c, sent := fakeLeases(t)
	l := NewLeaseLock(c, "kontinue-system", "kontinue-leader", "pod-a_1")
	require.Equal(t, "kontinue-system/kontinue-leader", l.Describe())
	require.Equal(t, "pod-a_1", l.Identity())

	_, _, err := l.Get(ctx)
	require.True(t, apierrors.IsNotFound(err), "the elector creates the Lease only on NotFound; got %v", err)
	require.Error(t, l.Update(ctx, resourcelock.LeaderElectionRecord{}), "update before any read has no resourceVersion to send")

	acquired := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	rec := resourcelock.LeaderElectionRecord{HolderIdentity: "pod-a_1", LeaseDurationSeconds: 15,
		AcquireTime: acquired, RenewTime: acquired, LeaderTransitions: 3}
	require.NoError(t, l.Create(ctx, rec))

	// A second candidate reads what the first wrote, field by field.
	other := NewLeaseLock(c, "kontinue-system", "kontinue-leader", "pod-b_2")
	got, raw, err := other.Get(ctx)
	require.NoError(t, err)
	require.Equal(t, "pod-a_1", got.HolderIdentity)
	require.Equal(t, 15, got.LeaseDurationSeconds)
	require.Equal(t, 3, got.LeaderTransitions)
	require.True(t, got.RenewTime.Equal(&acquired), "renewTime %v", got.RenewTime)
	require.Contains(t, string(raw), `"holderIdentity":"pod-a_1"`)

	u, err := c.Resource(LeaseGVR).Namespace("kontinue-system").Get(ctx, "kontinue-leader", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "Lease", u.GetKind())
	holder, _, _ := unstructured.NestedString(u.Object, "spec", "holderIdentity")
	require.Equal(t, "pod-a_1", holder)

	// Renewal by the holder succeeds; the stale view of the other candidate
	// is refused, which is what keeps two leaders from both winning.
	rec.RenewTime = metav1.NewTime(acquired.Add(2 * time.Second))
	require.NoError(t, l.Update(ctx, rec))
	err = other.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "pod-b_2", LeaseDurationSeconds: 15})
	require.True(t, apierrors.IsConflict(err), "stale update must conflict, got %v", err)

	got, _, err = other.Get(ctx)
	require.NoError(t, err)
	require.Equal(t, "pod-a_1", got.HolderIdentity)
	require.NoError(t, other.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "pod-b_2", LeaseDurationSeconds: 15}))
	// a's renewal sent its create's version, b first its stale read, then its fresh one.
	require.Equal(t, []string{"1", "1", "2"}, *sent, "updates carry the resourceVersion last read or written")
}

// TestLeaseLockElection runs client-go's elector on two locks: one leads,
// and when it stops (ReleaseOnCancel) the other takes over well before the
// lease would have expired.
func TestLeaseLockElection(t *testing.T) {
	c, _ := fakeLeases(t)
	type candidate struct {
		cancel  context.CancelFunc
		leading chan struct{}
		done    chan struct{}
	}
	start := func(id string) *candidate {
		ctx, cancel := context.WithCancel(context.Background())
		cd := &candidate{cancel: cancel, leading: make(chan struct{}), done: make(chan struct{})}
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:          NewLeaseLock(c, "ns", "lease", id),
			LeaseDuration: 30 * time.Second, RenewDeadline: 20 * time.Second, RetryPeriod: 50 * time.Millisecond,
			ReleaseOnCancel: true,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) { close(cd.leading) },
				OnStoppedLeading: func() {},
			},
		})
		require.NoError(t, err)
		go func() { defer close(cd.done); le.Run(ctx) }()
		return cd
	}
	a := start("a")
	select {
	case <-a.leading:
	case <-time.After(5 * time.Second):
		t.Fatal("the only candidate did not lead")
	}
	b := start("b")
	defer func() { b.cancel(); <-b.done }()
	select {
	case <-b.leading:
		t.Fatal("two leaders")
	case <-time.After(500 * time.Millisecond): // proving that nothing happens
	}
	a.cancel()
	<-a.done
	select {
	case <-b.leading:
	case <-time.After(5 * time.Second): // far below the 30s lease: it was released
		t.Fatal("the standby did not take over a released lease")
	}
}
