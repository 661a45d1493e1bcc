package metrics

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/yaml"
)

// registered exercises every metric once and returns the names the
// registry exposes (histograms with their _bucket, _sum and _count).
func registered(t *testing.T) map[string]bool {
	t.Helper()
	Observer{}.Reconciled("Workload", time.Millisecond, "error")
	Applied(true)
	SetInformers(1, 1)
	SetWorkers("Workload", 4)
	SetLeader("kontinue-leader", true)
	SetLeading(true)
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
	names := map[string]bool{}
	for _, f := range families {
		n := f.GetName()
		names[n] = true
		if f.GetType().String() == "HISTOGRAM" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[n+s] = true
			}
		}
	}
	return names
}

var (
	labelMatchers = regexp.MustCompile(`\{[^}]*\}`)
	grouping      = regexp.MustCompile(`\b(by|without)\s*\([^)]*\)`)
	ranges        = regexp.MustCompile(`\[[^\]]*\]`)
	strs          = regexp.MustCompile(`"[^"]*"`)
	ident         = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promqlWords   = map[string]bool{"sum": true, "max": true, "min": true, "avg": true, "count": true, "rate": true, "irate": true,
		"increase": true, "histogram_quantile": true, "and": true, "or": true, "unless": true, "on": true, "ignoring": true, "offset": true}
)

// metricNames returns the metric names a PromQL expression reads.
func metricNames(expr string) []string {
	e := strs.ReplaceAllString(expr, "")
	e = labelMatchers.ReplaceAllString(e, " ")
	e = grouping.ReplaceAllString(e, " ")
	e = ranges.ReplaceAllString(e, " ")
	var out []string
	for _, w := range ident.FindAllString(e, -1) {
		if !promqlWords[w] {
			out = append(out, w)
		}
	}
	return out
}

func TestMonitoringUsesRegisteredMetrics(t *testing.T) {
	names := registered(t)
	dir := filepath.Join("..", "..", "deploy", "monitoring")
	var exprs []string

	b, err := os.ReadFile(filepath.Join(dir, "prometheusrule.yaml"))
	require.NoError(t, err)
	var rule struct {
		Spec struct {
			Groups []struct {
				Rules []struct {
					Alert string `json:"alert"`
					Expr  string `json:"expr"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(b, &rule))
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Expr, r.Alert)
			exprs = append(exprs, r.Expr)
		}
	}
	require.GreaterOrEqual(t, len(exprs), 3, "a few real alerts")

	b, err = os.ReadFile(filepath.Join(dir, "grafana-dashboard.json"))
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(b, &dash))
	for _, p := range dash.Panels {
		require.NotEmpty(t, p.Targets, p.Title)
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	seen := 0
	for _, e := range exprs {
		ms := metricNames(e)
		require.NotEmpty(t, ms, "no metric in %q", e)
		for _, m := range ms {
			seen++
			require.True(t, names[m], "%s (in %q) is not a metric Kontinue registers", m, e)
		}
	}
	t.Logf("%d expressions, %d metric references", len(exprs), seen)
}

func TestMetricNames(t *testing.T) {
	require.Equal(t, []string{"workqueue_depth"}, metricNames(`max by (name) (workqueue_depth{name="x"}) > 100`))
	require.Equal(t, []string{"a_bucket"}, metricNames(`histogram_quantile(0.99, sum by (le) (rate(a_bucket[5m])))`))
}

func TestStandardNames(t *testing.T) {
	names := registered(t)
	for _, n := range []string{
		"workqueue_depth", "workqueue_adds_total", "workqueue_queue_duration_seconds_bucket", "workqueue_work_duration_seconds_bucket",
		"workqueue_retries_total", "workqueue_unfinished_work_seconds", "workqueue_longest_running_processor_seconds",
		"rest_client_requests_total", "rest_client_request_duration_seconds_bucket",
		"controller_runtime_reconcile_total", "controller_runtime_reconcile_errors_total", "controller_runtime_reconcile_time_seconds_bucket",
		"leader_election_master_status", "kontinue_leader", "kontinue_reconcile_duration_seconds_count", "kontinue_workqueue_depth",
	} {
		require.True(t, names[n], n)
	}
}
