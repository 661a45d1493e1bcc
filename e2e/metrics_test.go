package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"kontinue.dev/kontinue/deploy/monitoring"
)

// TestMetricsAndProbes runs the binary (no leader election, as locally),
// lets it reconcile a workload and checks that /metrics reports it with sane
// values, and that the probes answer.
func TestMetricsAndProbes(t *testing.T) {
	p := startKontinueProc(t, "metrics")
	eventually(t, 30*time.Second, func() string {
		code, body, err := httpGet(p.probes + "/readyz")
		if err != nil || code != http.StatusOK {
			return fmt.Sprintf("/readyz: %d %s %v", code, body, err)
		}
		return ""
	})
	code, _, err := httpGet(p.probes + "/healthz")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)

	ns := newNamespace(t)
	chain := uniq(ns, "ops")
	apply(t, ns, opsChain(ns, chain))
	apply(t, ns, opsWorkload("app", chain))
	waitOwner(t, workloadGVR, ns, "app", "Ready", "True", "")

	var samples []sample
	eventually(t, 30*time.Second, func() string {
		samples, err = p.scrape()
		if err != nil {
			return err.Error()
		}
		if n, _ := sum(samples, "kontinue_reconcile_duration_seconds_count", map[string]string{"controller": "Workload"}); n == 0 {
			return "no Workload reconcile recorded yet"
		}
		if n, _ := sum(samples, "kontinue_stamped_applies_total", nil); n == 0 {
			return "no apply (or skipped apply) recorded yet"
		}
		return ""
	})

	get := func(name string, labels map[string]string) float64 {
		t.Helper()
		v, ok := sum(samples, name, labels)
		require.True(t, ok, "series %s%v missing", name, labels)
		return v
	}
	require.Equal(t, 1.0, get("kontinue_leader", nil), "without leader election the process always leads")
	for _, s := range samples {
		if s.name == "kontinue_leader" {
			require.Equal(t, map[string]string{"shard": ""}, s.labels, "the default shard's is empty, which Prometheus stores as no label")
		}
	}

	// Reconciles: counted per controller and result, durations positive
	// and bounded (the histogram's sum over its count is a mean).
	for _, ctrl := range []string{"Workload", "Chain"} {
		n := get("kontinue_reconcile_duration_seconds_count", map[string]string{"controller": ctrl})
		s := get("kontinue_reconcile_duration_seconds_sum", map[string]string{"controller": ctrl})
		require.Positive(t, n, ctrl)
		require.Greater(t, s, 0.0, ctrl)
		require.Less(t, s/n, 10.0, "mean %s reconcile duration in seconds", ctrl)
	}
	for _, s := range samples {
		if s.name == "kontinue_reconcile_duration_seconds_count" {
			require.Contains(t, []string{"success", "error", "requeue", "terminal"}, s.labels["result"])
		}
	}

	// Workqueues, per queue name.
	for _, q := range []string{"Workload", "Deliverable", "Chain"} {
		depth := get("kontinue_workqueue_depth", map[string]string{"name": q})
		require.GreaterOrEqual(t, depth, 0.0)
		require.Less(t, depth, 10000.0)
		get("kontinue_workqueue_retries_total", map[string]string{"name": q})
	}
	require.Positive(t, get("kontinue_workqueue_adds_total", map[string]string{"name": "Workload"}))
	require.Positive(t, get("kontinue_workqueue_queue_duration_seconds_count", map[string]string{"name": "Workload"}))

	// API requests by verb (HTTP method: LISTs and watches are GETs) and code.
	require.Positive(t, get("kontinue_api_requests_total", map[string]string{"verb": "GET", "code": "200"}))
	for _, s := range samples {
		if s.name == "kontinue_api_requests_total" {
			require.Regexp(t, `^(GET|POST|PUT|PATCH|DELETE)$`, s.labels["verb"])
			require.Regexp(t, `^([1-5][0-9][0-9]|<error>)$`, s.labels["code"])
		}
	}
	require.Positive(t, get("kontinue_api_request_duration_seconds_count", map[string]string{"verb": "GET"}))

	// Informers: Kontinue's own kinds plus the ConfigMaps it stamped.
	informers := get("kontinue_active_informers", nil)
	require.GreaterOrEqual(t, informers, 11.0, "at least the permanent watches")
	require.Less(t, informers, 200.0)
	require.Positive(t, get("kontinue_cached_objects", nil))

	// Applies: the suite's own Kontinue runs too, so this process either
	// applied the ConfigMap or found it up to date and skipped the call.
	applied, _ := sum(samples, "kontinue_stamped_applies_total", map[string]string{"result": "applied"})
	skipped, _ := sum(samples, "kontinue_stamped_applies_total", map[string]string{"result": "skipped"})
	require.Positive(t, applied+skipped)

	// Process metrics come from the standard collectors.
	require.Positive(t, get("process_resident_memory_bytes", nil))
	require.Positive(t, get("go_goroutines", nil))

	// controller-runtime's names and labels, so its dashboards work: the
	// queues by name and controller, depth by priority too, workers busy,
	// panics counted from zero.
	for _, ctrl := range []string{"Workload", "Deliverable", "Chain", "Runnable"} {
		get("workqueue_depth", map[string]string{"name": ctrl, "controller": ctrl, "priority": ""})
		get("workqueue_retries_total", map[string]string{"name": ctrl, "controller": ctrl})
		require.Equal(t, 0.0, get("controller_runtime_reconcile_panics_total", map[string]string{"controller": ctrl}))
		busy := get("controller_runtime_active_workers", map[string]string{"controller": ctrl})
		require.GreaterOrEqual(t, busy, 0.0)
		require.LessOrEqual(t, busy, get("controller_runtime_max_concurrent_reconciles", map[string]string{"controller": ctrl}))
	}
	require.Positive(t, get("workqueue_adds_total", map[string]string{"name": "Workload", "controller": "Workload"}))
	require.Positive(t, get("controller_runtime_reconcile_total", map[string]string{"controller": "Workload", "result": "success"}))

	// Every selector of the shipped alerts and panels finds its metric on
	// this real /metrics, with every label it matches or groups on.
	exprs, err := monitoring.Exprs(monitoring.Dir())
	require.NoError(t, err)
	for _, e := range exprs {
		for _, sel := range monitoring.Selectors(e.Expr) {
			if strings.HasPrefix(sel.Metric, "kontinue_dora_") {
				// Series only once a deployment (a restore) was seen, which
				// this test does not script; reconciler/metrics'
				// TestMonitoringUsesExportedMetrics checks their names and
				// labels against the registry.
				continue
			}
			have := map[string]bool{}
			if monitoring.ScrapeMetrics[sel.Metric] {
				have[""] = true // made by Prometheus, with target labels only
			}
			for _, s := range samples {
				if s.name == sel.Metric {
					for l := range s.labels {
						have[l] = true
					}
					have[""] = true
				}
			}
			require.True(t, have[""], "%s: no series %s on /metrics", e.Where, sel.Metric)
			for _, m := range sel.Matchers {
				require.True(t, have[m.Name] || monitoring.TargetLabels[m.Name], "%s: %s has no label %s on /metrics", e.Where, sel.Metric, m.Name)
			}
			for _, l := range sel.Grouping {
				require.True(t, have[l] || monitoring.TargetLabels[l], "%s: %s has no label %s on /metrics", e.Where, sel.Metric, l)
			}
		}
	}

	var names []string
	for _, s := range samples {
		if strings.HasPrefix(s.name, "kontinue_") {
			names = append(names, s.name)
		}
	}
	t.Logf("%d kontinue_ series", len(names))
}
