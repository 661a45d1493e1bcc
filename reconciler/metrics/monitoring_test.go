package metrics

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/util/workqueue"

	"kontinue.dev/kontinue/deploy/monitoring"
)

// exported exercises every metric once and returns the series names the
// registry exposes (histograms with their _bucket, _sum and _count), each
// with its label names.
func exported(t *testing.T) map[string]map[string]bool {
	t.Helper()
	Observer{}.Reconciled("Workload", time.Millisecond, "error")
	Observer{}.Working("Workload", 1)
	Observer{}.Working("Workload", -1)
	Observer{}.Panicked("Workload")
	Applied(true)
	DORADeployment("c", "ns", "Workload", "app", false, false, time.Minute, time.Minute)
	NotificationDropped("ns", "slack", "queue-full", 1)
	NotificationSent("ns", "slack", 1)
	SetInformers(1, 1)
	SetWorkers("Workload", 4)
	SetLeader("kontinue-leader", true)
	SetLeading("", true)
	SetLeading("a", false)
	leaderMetric{}.SlowpathExercised("kontinue-leader")
	requestResult{}.Increment(context.Background(), "200", "GET", "h")
	requestLatency{}.Observe(context.Background(), "GET", url.URL{Host: "h"}, time.Millisecond)
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedRateLimitingQueueConfig[string]{Name: "test"})
	q.Add("a")
	k, _ := q.Get()
	q.AddRateLimited("b")
	q.Done(k)
	q.ShutDown()

	families, err := Registry.Gather()
	require.NoError(t, err)
	out := map[string]map[string]bool{}
	add := func(name string, labels map[string]bool) {
		if out[name] == nil {
			out[name] = map[string]bool{}
		}
		for l := range labels {
			out[name][l] = true
		}
	}
	for _, f := range families {
		n := f.GetName()
		labels := map[string]bool{}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = true
			}
		}
		if f.GetType().String() == "HISTOGRAM" {
			add(n+"_sum", labels)
			add(n+"_count", labels)
			labels["le"] = true
			add(n+"_bucket", labels)
			continue
		}
		add(n, labels)
	}
	return out
}

// TestMonitoringUsesExportedMetrics: every selector of the shipped alerts
// and Grafana panels names a metric Kontinue exports, matches and groups
// only on labels that metric has (or that the scrape adds), so no alert
// or panel is silently empty.
func TestMonitoringUsesExportedMetrics(t *testing.T) {
	names := exported(t)
	exprs, err := monitoring.Exprs(monitoring.Dir())
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(exprs), 15)
	seen := 0
	for _, e := range exprs {
		for _, s := range monitoring.Selectors(e.Expr) {
			seen++
			labels, ok := names[s.Metric]
			if monitoring.ScrapeMetrics[s.Metric] {
				labels, ok = map[string]bool{}, true // target labels only
			}
			require.True(t, ok, "%s: %s (in %q) is not a metric Kontinue exports", e.Where, s.Metric, e.Text)
			for _, m := range s.Matchers {
				require.True(t, labels[m.Name] || monitoring.TargetLabels[m.Name], "%s: %s has no label %q (in %q)", e.Where, s.Metric, m.Name, e.Text)
			}
			for _, l := range s.Grouping {
				require.True(t, labels[l] || monitoring.TargetLabels[l], "%s: %s has no label %q to group by (in %q)", e.Where, s.Metric, l, e.Text)
			}
		}
	}
	t.Logf("%d expressions, %d selectors", len(exprs), seen)
}

func TestStandardNames(t *testing.T) {
	names := exported(t)
	for _, n := range []string{
		"workqueue_depth", "workqueue_adds_total", "workqueue_queue_duration_seconds_bucket", "workqueue_work_duration_seconds_bucket",
		"workqueue_retries_total", "workqueue_unfinished_work_seconds", "workqueue_longest_running_processor_seconds",
		"rest_client_requests_total", "rest_client_request_duration_seconds_bucket",
		"controller_runtime_reconcile_total", "controller_runtime_reconcile_errors_total", "controller_runtime_reconcile_time_seconds_bucket",
		"leader_election_master_status", "kontinue_leader", "kontinue_reconcile_duration_seconds_count", "kontinue_workqueue_depth",
	} {
		require.NotNil(t, names[n], n)
	}
}

// TestControllerRuntimeLabels: the series carry controller-runtime's label
// names, so its dashboards' queries (by controller) find them.
func TestControllerRuntimeLabels(t *testing.T) {
	names := exported(t)
	for _, n := range []string{"workqueue_adds_total", "workqueue_queue_duration_seconds_count", "workqueue_work_duration_seconds_count",
		"workqueue_retries_total", "workqueue_unfinished_work_seconds", "workqueue_longest_running_processor_seconds"} {
		require.Equal(t, map[string]bool{"name": true, "controller": true}, names[n], n)
	}
	require.Equal(t, map[string]bool{"name": true, "controller": true, "le": true}, names["workqueue_queue_duration_seconds_bucket"])
	require.Equal(t, map[string]bool{"name": true, "controller": true, "priority": true}, names["workqueue_depth"])
	for _, n := range []string{"controller_runtime_reconcile_errors_total", "controller_runtime_terminal_reconcile_errors_total",
		"controller_runtime_reconcile_panics_total", "controller_runtime_max_concurrent_reconciles", "controller_runtime_active_workers"} {
		require.Equal(t, map[string]bool{"controller": true}, names[n], n)
	}
	require.Equal(t, map[string]bool{"controller": true, "result": true}, names["controller_runtime_reconcile_total"])
	require.Equal(t, map[string]bool{"code": true, "method": true, "host": true}, names["rest_client_requests_total"])
}

// TestWorkersAndPanics: a panicking reconcile counts as a panic and an
// error, and the busy-worker gauge returns to zero.
func TestWorkersAndPanics(t *testing.T) {
	before := testutil.ToFloat64(crPanics.WithLabelValues("PanicTest"))
	Observer{}.Working("PanicTest", 1)
	require.Equal(t, 1.0, testutil.ToFloat64(crActiveWorkers.WithLabelValues("PanicTest")))
	Observer{}.Panicked("PanicTest")
	Observer{}.Reconciled("PanicTest", time.Millisecond, "error")
	Observer{}.Working("PanicTest", -1)
	require.Equal(t, 0.0, testutil.ToFloat64(crActiveWorkers.WithLabelValues("PanicTest")))
	require.Equal(t, before+1, testutil.ToFloat64(crPanics.WithLabelValues("PanicTest")))
	require.Equal(t, 1.0, testutil.ToFloat64(crReconcileErrors.WithLabelValues("PanicTest")))
}
