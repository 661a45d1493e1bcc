package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Lead time, natively: every step knows when it took an input set and when
// that set succeeded (its provenance in status), so the time in between,
// and the sets that failed or were superseded, are counted as they happen.
// Labels are chain and step only: both come from the chains the platform
// team writes, so their number is bounded by them; a namespace label would
// multiply each histogram by the number of tenants.
var (
	stepLeadTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "kontinue_step_lead_time_seconds",
		Help: "Time from a step taking an input set to that set's success, by chain and step.",
		// One second to about four and a half hours.
		Buckets: prometheus.ExponentialBuckets(1, 2, 15),
	}, []string{"chain", "step"})
	chainLeadTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "kontinue_chain_lead_time_seconds",
		Help: "Time from a source revision appearing at a chain's first steps to the success of the last step built from it, by chain.",
		// Ten seconds to about eleven hours.
		Buckets: prometheus.ExponentialBuckets(10, 2, 13),
	}, []string{"chain"})
	stepInputSets = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kontinue_step_input_sets_total",
		Help: "Input sets a step finished with, by chain, step and outcome (succeeded, failed, superseded: replaced by a newer set before it succeeded or failed).",
	}, []string{"chain", "step", "outcome"})
)

func init() { Registry.MustRegister(stepLeadTime, chainLeadTime, stepInputSets) }

// Outcomes of an input set, as the outcome label gives them.
const (
	InputSetSucceeded  = "succeeded"
	InputSetFailed     = "failed"
	InputSetSuperseded = "superseded"
)

// InputSetEnded counts an input set of step in chain that ended with
// outcome; a success whose start is known (lead >= 0) is observed in the
// lead time histogram.
func InputSetEnded(chain, step, outcome string, lead time.Duration) {
	stepInputSets.WithLabelValues(chain, step, outcome).Inc()
	if outcome == InputSetSucceeded && lead >= 0 {
		stepLeadTime.WithLabelValues(chain, step).Observe(lead.Seconds())
	}
}

// ChainDelivered observes an end-to-end lead time of chain: from a source
// revision to the success of the last step built from it.
func ChainDelivered(chain string, lead time.Duration) {
	chainLeadTime.WithLabelValues(chain).Observe(lead.Seconds())
}
