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
	"regexp"
	"runtime"
	"slices"
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

// ScrapeMetrics are series Prometheus makes for each target itself (not on
// /metrics); they carry only TargetLabels. The no-leader alert reads up to
// tell a shard whose replicas are down from one that is not deployed.
var ScrapeMetrics = map[string]bool{"up": true}

// DashboardVars are the dashboard's variables and the value the tests give
// each: its default. $shard's All is the regex .*, which also matches the
// default shard's series (they have no shard label).
var DashboardVars = map[string]string{"$job": Job, "$shard": ".*"}

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

var labelValues = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// Exprs parses every expression of the rules and the dashboard. The
// dashboard's variables are replaced by their defaults (DashboardVars).
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
		expanded := text
		for v, def := range DashboardVars {
			expanded = strings.ReplaceAll(expanded, v, def)
		}
		e, err := parser.NewParser(parser.Options{}).ParseExpr(expanded)
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
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"` // a string, or {"query": string}
			} `json:"list"`
		} `json:"templating"`
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
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		// label_values(selector, label) lists what group by (label)
		// (selector) would: checked as that.
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q.Query); err != nil {
			if err := json.Unmarshal(v.Query, &q); err != nil {
				return nil, fmt.Errorf("variable %s: %w", v.Name, err)
			}
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			return nil, fmt.Errorf("variable %s: %q is not label_values(selector, label)", v.Name, q.Query)
		}
		if err := add("variable "+v.Name, "group by ("+m[2]+") ("+m[1]+")"); err != nil {
			return nil, err
		}
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
// labels it matches on or needs.
type Selector struct {
	Metric   string
	Matchers []*labels.Matcher // without the metric name
	// Grouping: labels the series must have for the expression around it
	// to mean what it says: those the enclosing aggregations keep (by) or
	// drop (without), as far as they reach this side of a join, and those
	// a vector match joins on (on) or copies from this side (group_left).
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
		s.Grouping = needed(append(slices.Clip(path), n)) // Clip: path is the walk's own slice
		out = append(out, s)
		return nil
	})
	return out
}

// needed walks path (from the root to a selector) and returns the labels
// the selector must have: aggregations ask for theirs, and a vector match
// decides which of them reach each side. The side whose labels the result
// keeps (the left of one-to-one and of and/unless, the "many" side of
// group_left/group_right, both sides of or) must have what the enclosing
// aggregations ask for, less what the other side copies in; the other side
// must have only what it copies and what the match is on.
func needed(path []parser.Node) []string {
	var need []string
	for i, p := range path[:len(path)-1] {
		child := path[i+1]
		switch x := p.(type) {
		case *parser.AggregateExpr:
			need = append(need, x.Grouping...)
		case *parser.BinaryExpr:
			vm := x.VectorMatching
			if vm == nil {
				continue // an operand is a scalar: labels pass through
			}
			left := child == parser.Node(x.LHS)
			var on []string
			if vm.On {
				on = vm.MatchingLabels
			}
			switch {
			case x.Op == parser.LOR:
				// Both sides' series end up in the result.
			case vm.Card == parser.CardManyToOne && left, vm.Card == parser.CardOneToMany && !left:
				need = without(need, vm.Include)
			case vm.Card == parser.CardManyToOne, vm.Card == parser.CardOneToMany:
				need = append([]string(nil), vm.Include...)
			case !left && (vm.On || x.Op.IsSetOperator()):
				// Only matched against: the result keeps the left's labels.
				need = nil
			}
			need = append(need, on...)
		}
	}
	return need
}

func without(ls, drop []string) []string {
	var out []string
	for _, l := range ls {
		if !slices.Contains(drop, l) {
			out = append(out, l)
		}
	}
	return out
}
