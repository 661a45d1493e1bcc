package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The four DORA metrics (reconciler/dora, docs/dora.md), per chain and
// namespace: deployments by outcome (frequency, change failure rate), the
// lead time for changes and the time to restore as histograms (their
// _sum / _count is the exact mean; the recording rules of
// deploy/monitoring divide them over windows). The namespace label is
// what the metrics are asked for (a team's numbers): its cardinality is
// the namespaces that deploy through a chain, times the chains. An owner
// opted in (the kontinue.dev/dora-owner annotation) also gets series of
// its own, for at most MaxDORAOwners owners.
var (
	doraDeployments = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kontinue_dora_deployments_total",
		Help: "Deployments (a revision that every deployment step of its owner succeeded with, or one of them failed with) by chain, namespace and outcome (succeeded, failed), and whether a shadow served while it failed.",
	}, []string{"chain", "namespace", "outcome", "shadowed"})
	doraLeadTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "kontinue_dora_lead_time_seconds",
		Help: "Lead time for changes: from a source revision first seen to its successful deployment, by chain and namespace.",
		// Ten seconds to about a week.
		Buckets: prometheus.ExponentialBuckets(10, 2, 16),
	}, []string{"chain", "namespace"})
	doraRestore = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kontinue_dora_time_to_restore_seconds",
		Help:    "Time to restore: from a failed deployment to the next successful one, by chain and namespace.",
		Buckets: prometheus.ExponentialBuckets(10, 2, 16),
	}, []string{"chain", "namespace"})
	doraOwnerDeployments = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kontinue_dora_owner_deployments_total",
		Help: "Deployments of owners opted in with the kontinue.dev/dora-owner annotation (at most 200 owners), by kind, namespace, owner and outcome.",
	}, []string{"kind", "namespace", "owner", "outcome"})
	doraOwnerLeadTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kontinue_dora_owner_lead_time_seconds",
		Help:    "Lead time for changes of owners opted in with the kontinue.dev/dora-owner annotation.",
		Buckets: prometheus.ExponentialBuckets(10, 2, 16),
	}, []string{"kind", "namespace", "owner"})
	doraOwnerRestore = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kontinue_dora_owner_time_to_restore_seconds",
		Help:    "Time to restore of owners opted in with the kontinue.dev/dora-owner annotation.",
		Buckets: prometheus.ExponentialBuckets(10, 2, 16),
	}, []string{"kind", "namespace", "owner"})
	doraOwnersRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kontinue_dora_owner_series_refused_total",
		Help: "Deployments of opted-in owners past the bound of owners with series of their own (counted in the chain's series only).",
	})
)

// MaxDORAOwners bounds the owners with DORA series of their own.
const MaxDORAOwners = 200

var doraOwners = struct {
	sync.Mutex
	seen map[string]bool
}{seen: map[string]bool{}}

func init() {
	Registry.MustRegister(doraDeployments, doraLeadTime, doraRestore, doraOwnerDeployments, doraOwnerLeadTime, doraOwnerRestore, doraOwnersRefused)
}

// DORADeployment is one deployment of an owner on chain in namespace
// (owner, kind: "" unless the owner opted in to series of its own):
// failed, shadowed, its lead time (negative: unknown) and time to restore
// (0: none).
func DORADeployment(chain, namespace, kind, owner string, failed, shadowed bool, lead, restore time.Duration) {
	outcome := InputSetSucceeded
	if failed {
		outcome = InputSetFailed
	}
	sh := "false"
	if shadowed {
		sh = "true"
	}
	doraDeployments.WithLabelValues(chain, namespace, outcome, sh).Inc()
	if !failed && lead >= 0 {
		doraLeadTime.WithLabelValues(chain, namespace).Observe(lead.Seconds())
	}
	if !failed && restore > 0 {
		doraRestore.WithLabelValues(chain, namespace).Observe(restore.Seconds())
	}
	if owner == "" || !ownerSeries(kind+"/"+namespace+"/"+owner) {
		return
	}
	doraOwnerDeployments.WithLabelValues(kind, namespace, owner, outcome).Inc()
	if !failed && lead >= 0 {
		doraOwnerLeadTime.WithLabelValues(kind, namespace, owner).Observe(lead.Seconds())
	}
	if !failed && restore > 0 {
		doraOwnerRestore.WithLabelValues(kind, namespace, owner).Observe(restore.Seconds())
	}
}

func ownerSeries(key string) bool {
	doraOwners.Lock()
	defer doraOwners.Unlock()
	if doraOwners.seen[key] {
		return true
	}
	if len(doraOwners.seen) >= MaxDORAOwners {
		doraOwnersRefused.Inc()
		return false
	}
	doraOwners.seen[key] = true
	return true
}
