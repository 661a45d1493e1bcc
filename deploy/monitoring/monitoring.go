// Package monitoring reads the PromQL that Kontinue ships (the alerts of
// prometheusrule.yaml and the panels of grafana-dashboard.json) so that
// tests can check it against the metrics Kontinue really exports: the unit
// test of reconciler/metrics against the registry, the e2e suite against a
// running controller's /metrics. Nothing in the binary imports it.
package monitoring

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// Job is the job label of Kontinue's targets under the chart's
// ServiceMonitor (prometheus-operator names the job after the Service).
const Job = "kontinue-metrics"

// TargetLabels are added by the scrape, not exported by Kontinue.
var TargetLabels = map[string]bool{"job": true, "instance": true, "namespace": true, "pod": true, "service": true, "endpoint": true, "container": true}

// Dir is this folder.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

// Expr is one shipped PromQL expression.
type Expr struct {
	Where string // "alert X" or "panel Y"
	Text  string
	Expr  parser.Expr
}

// Rule is one rule of a group, as prometheus-operator and promtool read it.
type Rule struct {
	Alert  string `json:"alert,omitempty"`
	Record string `json:"record,omitempty"`
	Expr   string `json:"expr"`
}

// RuleFile returns the spec of prometheusrule.yaml as a plain Prometheus
// rule file (what promtool reads).
func RuleFile(dir string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(dir, "prometheusrule.yaml"))
	if err != nil {
		return nil, err
	}
	var pr struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &pr); err != nil {
		return nil, err
	}
	return yaml.JSONToYAML(pr.Spec)
}

// Exprs parses every expression of the rules and the dashboard. The
// dashboard's $job variable is replaced by its default, Job.
func Exprs(dir string) ([]Expr, error) {
	b, err := RuleFile(dir)
	if err != nil {
		return nil, err
	}
	var groups struct {
		Groups []struct {
			Rules []Rule `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(b, &groups); err != nil {
		return nil, err
	}
	var out []Expr
	add := func(where, text string) error {
		if strings.TrimSpace(text) == "" {
			return fmt.Errorf("%s: no expression", where)
		}
		e, err := parser.NewParser(parser.Options{}).ParseExpr(strings.ReplaceAll(text, "$job", Job))
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		out = append(out, Expr{Where: where, Text: text, Expr: e})
		return nil
	}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			where := "alert " + r.Alert
			if r.Record != "" {
				where = "record " + r.Record
			}
			if err := add(where, r.Expr); err != nil {
				return nil, err
			}
		}
	}
	b, err = os.ReadFile(filepath.Join(dir, "grafana-dashboard.json"))
	if err != nil {
		return nil, err
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		return nil, err
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			return nil, fmt.Errorf("panel %q: no query", p.Title)
		}
		for _, t := range p.Targets {
			if err := add("panel "+p.Title, t.Expr); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// Selector is one series selector of an expression: the metric and the
// labels it matches on or groups by.
type Selector struct {
	Metric   string
	Matchers []*labels.Matcher // without the metric name
	// Grouping: labels the enclosing aggregations keep (by) or drop
	// (without); they must exist on the metric.
	Grouping []string
}

// Job returns the value the selector's job matcher requires, "" if it has none.
func (s Selector) Job() string {
	for _, m := range s.Matchers {
		if m.Name == "job" && m.Type == labels.MatchEqual {
			return m.Value
		}
	}
	return ""
}

// Selectors returns the series selectors of e.
func Selectors(e parser.Expr) []Selector {
	var out []Selector
	parser.Inspect(e, func(n parser.Node, path []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		s := Selector{Metric: vs.Name}
		for _, m := range vs.LabelMatchers {
			if m.Name != model.MetricNameLabel {
				s.Matchers = append(s.Matchers, m)
			}
		}
		for _, p := range path {
			if a, ok := p.(*parser.AggregateExpr); ok {
				s.Grouping = append(s.Grouping, a.Grouping...)
			}
		}
		out = append(out, s)
		return nil
	})
	return out
}
