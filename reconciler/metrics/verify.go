package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Verification of steps' inputs (reconciler/verify, docs/verification.md).
// Decisions are counted by outcome only: each is cached by namespace, value
// and policy, so their number is that of new digests, not of reconciles.
// Refusals carry chain and step (the platform team's names, bounded) and
// the rule's kind, never a digest or a namespace.
var (
	verifyDecisions = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "kontinue_verify_decision_duration_seconds",
		Help: "Time to fetch the evidence of one input value and decide about it, by outcome (Verified, Refused; Error: the fetch failed and is retried with backoff).",
		// 10 ms to about 80 s.
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
	}, []string{"outcome"})
	inputsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kontinue_step_inputs_refused_total",
		Help: "Inputs a step newly refused because they did not pass the chain's verify policy, by chain, step and rule (signature, attestation, kontinue, digest, policy).",
	}, []string{"chain", "step", "rule"})
)

func init() { Registry.MustRegister(verifyDecisions, inputsRefused) }

// VerifyDecided observes one decision (reconciler.VerifyOptions.OnDecision).
func VerifyDecided(outcome string, took time.Duration) {
	verifyDecisions.WithLabelValues(outcome).Observe(took.Seconds())
}

// InputRefused counts an input a step newly refused
// (reconciler.VerifyOptions.OnRefused).
func InputRefused(chain, step, rule string) {
	inputsRefused.WithLabelValues(chain, step, rule).Inc()
}
