package monitoring

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// TestPromtool runs `promtool test rules` on prometheusrule_test.yaml
// against the PrometheusRule's spec. `make promtool` installs Debian's
// promtool (the prometheus package) when it is missing; PROMTOOL names
// another binary.
func TestPromtool(t *testing.T) {
	promtool := os.Getenv("PROMTOOL")
	if promtool == "" {
		p, err := exec.LookPath("promtool")
		require.NoError(t, err, "promtool is missing: run `make promtool` (as root) or set PROMTOOL")
		promtool = p
	}
	rules, err := RuleFile(Dir())
	require.NoError(t, err)
	tests, err := os.ReadFile(filepath.Join(Dir(), "prometheusrule_test.yaml"))
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "prometheusrule_test.yaml"), tests, 0o644))

	out, err := exec.Command(promtool, "check", "rules", filepath.Join(dir, "rules.yaml")).CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command(promtool, "test", "rules", filepath.Join(dir, "prometheusrule_test.yaml")).CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Logf("%s", out)
}

// TestEveryAlertTested: an alert without a promtool case is an alert nobody
// has seen fire.
func TestEveryAlertTested(t *testing.T) {
	rules, err := RuleFile(Dir())
	require.NoError(t, err)
	var groups struct {
		Groups []struct {
			Rules []Rule `json:"rules"`
		} `json:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(rules, &groups))
	b, err := os.ReadFile(filepath.Join(Dir(), "prometheusrule_test.yaml"))
	require.NoError(t, err)
	var tests struct {
		Tests []struct {
			Alerts []struct {
				Alertname string           `json:"alertname"`
				ExpAlerts []map[string]any `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	require.NoError(t, yaml.Unmarshal(b, &tests))
	fires := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.Alerts {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			}
		}
	}
	n := 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				n++
				require.True(t, fires[r.Alert], "no promtool case sees %s fire", r.Alert)
			}
		}
	}
	require.GreaterOrEqual(t, n, 5)
}

// TestScopedToKontinue: every selector of every alert and panel names
// Kontinue's job, since other operators export the same metric names.
func TestScopedToKontinue(t *testing.T) {
	exprs, err := Exprs(Dir())
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(exprs), 15)
	for _, e := range exprs {
		sels := Selectors(e.Expr)
		require.NotEmpty(t, sels, "%s: %s reads no metric", e.Where, e.Text)
		for _, s := range sels {
			require.Equal(t, Job, s.Job(), "%s: %s has no job=%q matcher in %s", e.Where, s.Metric, Job, e.Text)
		}
	}
}

func TestSelectors(t *testing.T) {
	exprs, err := Exprs(Dir())
	require.NoError(t, err)
	require.NotEmpty(t, exprs)
	require.Equal(t, "alert KontinueNoLeader", exprs[0].Where)
	var metrics []string
	for _, s := range Selectors(exprs[0].Expr) {
		metrics = append(metrics, s.Metric)
		require.Equal(t, Job, s.Job())
	}
	require.Equal(t, []string{"kontinue_leader", "kontinue_leader", "up", "kontinue_leader"}, metrics)
	for _, e := range exprs {
		if e.Where == "panel Reconcile time p99" {
			s := Selectors(e.Expr)
			require.Len(t, s, 2)
			require.Equal(t, "controller_runtime_reconcile_time_seconds_bucket", s[0].Metric)
			require.Equal(t, []string{"controller", "le", "instance", "pod"}, s[0].Grouping, "shard comes from kontinue_leader")
			require.Equal(t, "kontinue_leader", s[1].Metric)
			require.Equal(t, []string{"shard", "instance", "pod", "instance", "pod", "shard"}, s[1].Grouping)
			require.Equal(t, ".*", s[1].Matchers[1].Value, "$shard is replaced by All")
			return
		}
	}
	t.Fatal("panel Reconcile time p99 not found")
}

// TestSelectorsGrouping: the labels a selector must have follow the
// aggregations above it as far as they reach its side of a join.
func TestSelectorsGrouping(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want map[string][]string // metric: grouping
	}{
		{`sum by (a) (x)`, map[string][]string{"x": {"a"}}},
		{`sum without (a) (rate(x[5m]))`, map[string][]string{"x": {"a"}}},
		{`histogram_quantile(0.9, sum by (a, le) (x))`, map[string][]string{"x": {"a", "le"}}},
		{`max by (a) (x > 0)`, map[string][]string{"x": {"a"}}},
		// group_left: the many side has what the outer sum asks for, less
		// what the one side copies in; the one side has that and the match.
		{`sum by (a, s) (x * on (i) group_left (s) y)`, map[string][]string{"x": {"a", "i"}, "y": {"s", "i"}}},
		{`sum by (a, s) (y * on (i) group_right (s) x)`, map[string][]string{"x": {"a", "i"}, "y": {"s", "i"}}},
		{`sum by (a, s) (x * on (i) group_left (s) group by (i, s) (y))`, map[string][]string{"x": {"a", "i"}, "y": {"s", "i", "i", "s"}}},
		// and/unless: the right side only filters.
		{`max by (a) (x and on (i) y)`, map[string][]string{"x": {"a", "i"}, "y": {"i"}}},
		{`max by (a) (x unless y)`, map[string][]string{"x": {"a"}, "y": nil}},
		{`max by (a) (x) unless on () absent(y)`, map[string][]string{"x": {"a"}, "y": nil}},
		// or: both sides' series are in the result.
		{`max by (a) (x or y)`, map[string][]string{"x": {"a"}, "y": {"a"}}},
		// one-to-one on (...): the result keeps the left's labels.
		{`sum by (a) (x / on (i) y)`, map[string][]string{"x": {"a", "i"}, "y": {"i"}}},
		{`sum by (a) (x / y)`, map[string][]string{"x": {"a"}, "y": {"a"}}},
	} {
		e, err := parser.NewParser(parser.Options{}).ParseExpr(tc.expr)
		require.NoError(t, err, tc.expr)
		got := map[string][]string{}
		for _, s := range Selectors(e) {
			got[s.Metric] = s.Grouping
		}
		require.Equal(t, tc.want, got, tc.expr)
	}
}
