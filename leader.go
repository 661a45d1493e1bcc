package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/metrics"
	"kontinue.dev/kontinue/reconciler/shard"
)

// leadership is what the probes and the gauge know about leader election
// of the shard this process serves.
type leadership struct {
	shard   string
	leading atomic.Bool
}

// newLeadership starts as a standby: kontinue_leader{shard} reads 0 until
// this process leads, so that a shard's standbys are seen without a leader.
func newLeadership(shard string) *leadership {
	l := &leadership{shard: shard}
	l.set(false)
	return l
}

func (l *leadership) set(v bool) {
	l.leading.Store(v)
	metrics.SetLeading(l.shard, v)
}

func (l *leadership) get() bool { return l.leading.Load() }

type electionOptions struct {
	namespace, id                             string
	leaseDuration, renewDeadline, retryPeriod time.Duration
}

// leaseName is the Lease of a shard: each shard elects its own leader, so
// its replicas (leader and standbys) exclude each other and no other
// shard's. The default shard keeps the Lease it always had.
func leaseName(id, shard string) string { return api.ShardLease(id, shard) }

// inClusterNamespaceFile holds the pod's namespace (service account mount).
const inClusterNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// electionNamespace is the flag, else the pod's own namespace.
func electionNamespace(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if b, err := os.ReadFile(inClusterNamespaceFile); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns, nil
		}
	}
	return "", fmt.Errorf("--leader-election-namespace is required outside a cluster")
}

// candidateIdentity is unique per process: the host (the pod name in a
// cluster) and a random suffix, so a restarted pod never mistakes the old
// holder's record for its own.
func candidateIdentity() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return host + "_" + hex.EncodeToString(b)
}

// runElected runs work only while this process holds the Lease.
//
//   - Lost lease (renewal failed): the process exits at once with status 1,
//     since another replica may already be reconciling; it restarts clean.
//   - Signal: work stops taking keys and drains (within its own grace), and
//     only then is the Lease released, so two replicas never reconcile at the
//     same time; the standby takes over within one retry period.
func runElected(sig context.Context, cfg *rest.Config, o electionOptions, lead *leadership, work func(context.Context) error) error {
	// Its own client, so that renewals never queue behind reconciles in the
	// manager's client-side rate limiter.
	lcfg := rest.CopyConfig(cfg)
	lcfg.QPS, lcfg.Burst = 5, 10
	lcfg.UserAgent = "kontinue-leader-election"
	dyn, err := dynamic.NewForConfig(lcfg)
	if err != nil {
		return err
	}
	id := candidateIdentity()
	lock := shard.NewLeaseLock(dyn, o.namespace, o.id, id)

	// The elector's context ends after the work has drained, not on the
	// signal itself: ReleaseOnCancel releases the Lease when it ends.
	electCtx, stopElection := context.WithCancel(context.WithoutCancel(sig))
	defer stopElection()
	var (
		mu      sync.Mutex
		started bool
		workErr error
	)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		Name:            o.id, // leader_election_master_status{name}
		LeaseDuration:   o.leaseDuration,
		RenewDeadline:   o.renewDeadline,
		RetryPeriod:     o.retryPeriod,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leadCtx context.Context) {
				mu.Lock()
				if sig.Err() != nil {
					mu.Unlock()
					return // stopping before we began: the signal watcher ends the election
				}
				started = true
				mu.Unlock()
				lead.set(true)
				klog.InfoS("became the leader; starting controllers", "lease", lock.Describe(), "identity", id)
				ctx, cancel := context.WithCancel(sig)
				stop := context.AfterFunc(leadCtx, cancel)
				err := work(ctx)
				stop()
				cancel()
				mu.Lock()
				workErr = err
				mu.Unlock()
				if sig.Err() == nil && leadCtx.Err() == nil {
					// The work ended on its own: give the Lease to a healthy replica.
					klog.ErrorS(err, "controllers stopped while leading; releasing the lease")
				}
				stopElection()
			},
			OnStoppedLeading: func() {
				lead.set(false)
				if sig.Err() != nil || electCtx.Err() != nil {
					klog.InfoS("leader election stopped", "lease", lock.Describe(), "identity", id)
					return
				}
				klog.ErrorS(nil, "lost the leader lease; exiting so that the process restarts clean", "lease", lock.Describe(), "identity", id)
				klog.Flush()
				os.Exit(1)
			},
			OnNewLeader: func(holder string) {
				if holder != id {
					klog.InfoS("waiting as a standby", "lease", lock.Describe(), "leader", holder, "identity", id)
				}
			},
		},
	})
	if err != nil {
		return err
	}
	go func() {
		<-sig.Done()
		mu.Lock()
		s := started
		mu.Unlock()
		if !s {
			stopElection() // a standby: nothing to drain
		}
	}()
	klog.InfoS("leader election: waiting for the lease", "lease", lock.Describe(), "identity", id)
	le.Run(electCtx)
	mu.Lock()
	defer mu.Unlock()
	return workErr
}
