package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/util/workqueue"

	"kontinue.dev/kontinue/reconciler/fairq"
)

// The controllers' fair queues report as workqueues do, under both names
// (kontinue_workqueue_* and workqueue_*): dashboards, alerts and the bench's
// quiet detection read them.
func TestFairQueueMetrics(t *testing.T) {
	q := fairq.New[string]("FairTest", func(string) string { return "" }, workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Hour, time.Hour))
	defer q.ShutDown()
	q.Add("a")
	q.AddPriority("b", fairq.Low)
	require.Equal(t, 2.0, testutil.ToFloat64(wqDepth.WithLabelValues("FairTest")))
	k, _ := q.Get()
	q.Done(k)
	q.AddRateLimited("c")
	require.Equal(t, 1.0, testutil.ToFloat64(wqDepth.WithLabelValues("FairTest")))
	require.Equal(t, 2.0, testutil.ToFloat64(wqAdds.WithLabelValues("FairTest")))
	require.Equal(t, 2.0, testutil.ToFloat64(wqStdAdds.WithLabelValues("FairTest", "FairTest")))
	require.Equal(t, 1.0, testutil.ToFloat64(wqRetries.WithLabelValues("FairTest")))
}
