package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

func TestInputSetEnded(t *testing.T) {
	InputSetEnded("lt-chain", "build", InputSetSucceeded, 90*time.Second)
	InputSetEnded("lt-chain", "build", InputSetSucceeded, -1) // start unknown: counted, not observed
	InputSetEnded("lt-chain", "build", InputSetFailed, 0)
	InputSetEnded("lt-chain", "build", InputSetSuperseded, 0)
	InputSetEnded("lt-chain", "build", InputSetSuperseded, 0)
	require.Equal(t, 2.0, testutil.ToFloat64(stepInputSets.WithLabelValues("lt-chain", "build", InputSetSucceeded)))
	require.Equal(t, 1.0, testutil.ToFloat64(stepInputSets.WithLabelValues("lt-chain", "build", InputSetFailed)))
	require.Equal(t, 2.0, testutil.ToFloat64(stepInputSets.WithLabelValues("lt-chain", "build", InputSetSuperseded)))

	families, err := Registry.Gather()
	require.NoError(t, err)
	found := false
	for _, f := range families {
		if f.GetName() != "kontinue_step_lead_time_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			require.Equal(t, map[string]string{"chain": "lt-chain", "step": "build"}, labels, "chain and step only: bounded")
			require.Equal(t, uint64(1), m.GetHistogram().GetSampleCount())
			require.Equal(t, 90.0, m.GetHistogram().GetSampleSum())
			found = true
		}
	}
	require.True(t, found)
}

func TestChainDelivered(t *testing.T) {
	ChainDelivered("cd-chain", 3*time.Minute)
	families, err := Registry.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "kontinue_chain_lead_time_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			if m.GetLabel()[0].GetValue() == "cd-chain" {
				require.Len(t, m.GetLabel(), 1, "chain only")
				require.Equal(t, 180.0, m.GetHistogram().GetSampleSum())
				return
			}
		}
	}
	t.Fatal("no kontinue_chain_lead_time_seconds{chain=cd-chain}")
}
