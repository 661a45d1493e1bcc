package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// sample is one line of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// metrics is a scrape. The bench needs a handful of counters and gauges, so
// it reads the text format itself instead of depending on a parser whose
// API changes between versions.
type metrics []sample

// parseMetrics reads the Prometheus text exposition format (comments and
// timestamps ignored).
func parseMetrics(r io.Reader) (metrics, error) {
	var out metrics
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' {
			continue
		}
		smp, err := parseSample(s)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d: %w", line, err)
		}
		out = append(out, smp)
	}
	return out, sc.Err()
}

func parseSample(s string) (sample, error) {
	smp := sample{labels: map[string]string{}}
	i := strings.IndexAny(s, "{ ")
	if i < 0 {
		return smp, fmt.Errorf("no value in %q", s)
	}
	smp.name = s[:i]
	rest := s[i:]
	if rest[0] == '{' {
		var err error
		if rest, err = parseLabels(rest[1:], smp.labels); err != nil {
			return smp, fmt.Errorf("%w in %q", err, s)
		}
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return smp, fmt.Errorf("no value in %q", s)
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return smp, fmt.Errorf("bad value in %q: %w", s, err)
	}
	smp.value = v
	return smp, nil
}

// parseLabels reads `a="x",b="y"}` and returns what follows the brace.
func parseLabels(s string, into map[string]string) (string, error) {
	for {
		s = strings.TrimLeft(s, " ,")
		if s == "" {
			return "", fmt.Errorf("unterminated labels")
		}
		if s[0] == '}' {
			return s[1:], nil
		}
		eq := strings.IndexByte(s, '=')
		if eq < 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			return "", fmt.Errorf("bad label")
		}
		name := strings.TrimSpace(s[:eq])
		var val strings.Builder
		j := eq + 2
		for ; j < len(s) && s[j] != '"'; j++ {
			if s[j] == '\\' && j+1 < len(s) {
				j++
				switch s[j] {
				case 'n':
					val.WriteByte('\n')
				default:
					val.WriteByte(s[j])
				}
				continue
			}
			val.WriteByte(s[j])
		}
		if j >= len(s) {
			return "", fmt.Errorf("unterminated label value")
		}
		into[name] = val.String()
		s = s[j+1:]
	}
}

// sum adds the samples of a metric whose labels satisfy keep (nil: all).
func (m metrics) sum(name string, keep func(map[string]string) bool) float64 {
	t := 0.0
	for _, s := range m {
		if s.name == name && (keep == nil || keep(s.labels)) {
			t += s.value
		}
	}
	return t
}

// by sums a metric per value of one or more labels (joined by " ").
func (m metrics) by(name string, labels ...string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range m {
		if s.name != name {
			continue
		}
		parts := make([]string, 0, len(labels))
		for _, l := range labels {
			if v := s.labels[l]; v != "" {
				parts = append(parts, v)
			}
		}
		out[strings.Join(parts, " ")] += s.value
	}
	return out
}

// Kontinue's API request counter. client-go labels it with the HTTP method:
// GET covers get, list and watch; every other method writes.
const apiRequests = "kontinue_api_requests_total"

func isWriteMethod(m string) bool {
	switch strings.ToUpper(m) {
	case "POST", "PUT", "PATCH", "DELETE":
		return true
	}
	return false
}

// apiCalls is Kontinue's API calls by method between two scrapes.
func apiCalls(before, after metrics) map[string]int {
	b, a := before.by(apiRequests, "verb"), after.by(apiRequests, "verb")
	out := map[string]int{}
	for verb, v := range a {
		if d := int(math.Round(v - b[verb])); d != 0 {
			out[verb] = d
		}
	}
	return out
}

// apiErrors is Kontinue's failed calls by "METHOD code" between two scrapes
// (conflicts show as PUT 409).
func apiErrors(before, after metrics) map[string]int {
	b, a := before.by(apiRequests, "verb", "code"), after.by(apiRequests, "verb", "code")
	out := map[string]int{}
	for k, v := range a {
		f := strings.Fields(k)
		if len(f) == 2 && strings.HasPrefix(f[1], "2") {
			continue
		}
		if d := int(math.Round(v - b[k])); d != 0 {
			out[k] = d
		}
	}
	return out
}

func writesOf(calls map[string]int) int {
	n := 0
	for verb, c := range calls {
		if isWriteMethod(verb) {
			n += c
		}
	}
	return n
}

func total(calls map[string]int) int {
	n := 0
	for _, c := range calls {
		n += c
	}
	return n
}

// apiserverWrites is the API server's write requests by "VERB resource[/sub]"
// between two scrapes of its /metrics (all clients).
func apiserverWrites(before, after metrics) map[string]int {
	key := func(l map[string]string) string {
		r := l["resource"]
		if l["subresource"] != "" {
			r += "/" + l["subresource"]
		}
		return l["verb"] + " " + r
	}
	isWrite := func(l map[string]string) bool {
		switch l["verb"] {
		case "GET", "LIST", "WATCH", "CONNECT":
			return false
		}
		return true
	}
	sumBy := func(m metrics) map[string]float64 {
		out := map[string]float64{}
		for _, s := range m {
			if s.name == "apiserver_request_total" && isWrite(s.labels) {
				out[key(s.labels)] += s.value
			}
		}
		return out
	}
	b, a := sumBy(before), sumBy(after)
	out := map[string]int{}
	for k, v := range a {
		if d := int(math.Round(v - b[k])); d != 0 {
			out[k] = d
		}
	}
	return out
}

// histogramMeans is the mean of a histogram's observations between two
// scrapes, in milliseconds, per value of label ("" when label is empty).
func histogramMeans(before, after metrics, name, label string) map[string]float64 {
	var labels []string
	if label != "" {
		labels = []string{label}
	}
	sb, cb := before.by(name+"_sum", labels...), before.by(name+"_count", labels...)
	sa, ca := after.by(name+"_sum", labels...), after.by(name+"_count", labels...)
	out := map[string]float64{}
	for k, c := range ca {
		if n := c - cb[k]; n > 0 {
			out[k] = math.Round((sa[k]-sb[k])/n*1000*10) / 10
		}
	}
	return out
}

// formatCounts prints counts as "A 1, B 2" ordered by count, largest first.
func formatCounts(c map[string]int) string {
	if len(c) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if c[keys[i]] != c[keys[j]] {
			return c[keys[i]] > c[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, c[k])
	}
	return strings.Join(parts, ", ")
}

// percentile returns the p-th percentile (0–100) of sorted values, by the
// nearest-rank method: a value that was actually observed.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	if rank < 1 {
		rank = 1
	}
	if rank > len(sorted) {
		rank = len(sorted)
	}
	return sorted[rank-1]
}

// phaseDiag explains where a phase's time went, from Kontinue's metrics.
type phaseDiag struct {
	// QueueWaitMs and WorkMs: mean time a key waited in a controller's
	// queue, and mean time its reconcile took, by controller.
	QueueWaitMs map[string]float64 `json:"queueWaitMs"`
	WorkMs      map[string]float64 `json:"workMs"`
	// APILatencyMs: mean API call latency by method, including the wait for
	// the client-side rate limiter.
	APILatencyMs map[string]float64 `json:"apiLatencyMs"`
	// Reconciles by "controller result"; Applies by result (applied, or
	// skipped because the cache showed the object up to date).
	Reconciles map[string]int `json:"reconciles"`
	Applies    map[string]int `json:"applies"`
	// Verifications: decisions about inputs by outcome (-verify), and the
	// mean time each took to fetch and decide.
	Verifications map[string]int     `json:"verifications,omitempty"`
	VerifyMs      map[string]float64 `json:"verifyMs,omitempty"`
}

func diagnose(before, after metrics) *phaseDiag {
	counts := func(name string, labels ...string) map[string]int {
		b, a := before.by(name, labels...), after.by(name, labels...)
		out := map[string]int{}
		for k, v := range a {
			if d := int(math.Round(v - b[k])); d != 0 {
				out[k] = d
			}
		}
		return out
	}
	return &phaseDiag{
		QueueWaitMs:   histogramMeans(before, after, "kontinue_workqueue_queue_duration_seconds", "name"),
		WorkMs:        histogramMeans(before, after, "kontinue_workqueue_work_duration_seconds", "name"),
		APILatencyMs:  histogramMeans(before, after, "kontinue_api_request_duration_seconds", "verb"),
		Reconciles:    counts("kontinue_reconcile_duration_seconds_count", "controller", "result"),
		Applies:       counts("kontinue_stamped_applies_total", "result"),
		Verifications: counts("kontinue_verify_decision_duration_seconds_count", "outcome"),
		VerifyMs:      histogramMeans(before, after, "kontinue_verify_decision_duration_seconds", "outcome"),
	}
}

func (d *phaseDiag) String() string {
	if d == nil {
		return ""
	}
	f := func(m map[string]float64) string {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%s %g", k, m[k])
		}
		return strings.Join(parts, ", ")
	}
	s := fmt.Sprintf("reconciles: %s; applies: %s; queue wait ms: %s; reconcile ms: %s; API call ms: %s",
		formatCounts(d.Reconciles), formatCounts(d.Applies), f(d.QueueWaitMs), f(d.WorkMs), f(d.APILatencyMs))
	if len(d.Verifications) > 0 {
		s += fmt.Sprintf("; verifications: %s; verification ms: %s", formatCounts(d.Verifications), f(d.VerifyMs))
	}
	return s
}
