package main

import (
	"strings"
	"testing"
)

const scrapeText = `# HELP kontinue_api_requests_total Requests Kontinue made.
# TYPE kontinue_api_requests_total counter
kontinue_api_requests_total{code="200",verb="GET"} 12
kontinue_api_requests_total{code="201",verb="POST"} 30
kontinue_api_requests_total{code="409",verb="PUT"} 2
kontinue_api_requests_total{code="200",verb="PUT"} 10
kontinue_api_requests_total{code="200",verb="PATCH"} 30
go_memstats_heap_alloc_bytes 1.048576e+07
apiserver_request_total{code="201",component="apiserver",resource="configmaps",subresource="",verb="APPLY"} 30
apiserver_request_total{code="200",component="apiserver",resource="workloads",subresource="status",verb="UPDATE"} 10
apiserver_request_total{code="200",component="apiserver",resource="workloads",subresource="",verb="WATCH"} 4
odd_label{msg="a \"quoted\", comma} and\\backslash"} 1 1700000000000
`

func TestParseAndDiff(t *testing.T) {
	after, err := parseMetrics(strings.NewReader(scrapeText))
	if err != nil {
		t.Fatal(err)
	}
	if got := after.sum("go_memstats_heap_alloc_bytes", nil); got != 10485760 {
		t.Errorf("heap = %g", got)
	}
	for _, s := range after {
		if s.name == "odd_label" && s.labels["msg"] != `a "quoted", comma} and\backslash` {
			t.Errorf("escaped label read as %q", s.labels["msg"])
		}
	}
	before, err := parseMetrics(strings.NewReader(`kontinue_api_requests_total{code="200",verb="GET"} 10
kontinue_api_requests_total{code="200",verb="PATCH"} 30`))
	if err != nil {
		t.Fatal(err)
	}
	calls := apiCalls(before, after)
	want := map[string]int{"GET": 2, "POST": 30, "PUT": 12}
	if len(calls) != len(want) {
		t.Fatalf("calls = %v, want %v", calls, want)
	}
	for k, v := range want {
		if calls[k] != v {
			t.Errorf("calls[%s] = %d, want %d", k, calls[k], v)
		}
	}
	if w := writesOf(calls); w != 42 {
		t.Errorf("writes = %d, want 42 (reads are GET only)", w)
	}
	if w := writesOf(apiCalls(nil, after)); w != 72 {
		t.Errorf("writes from a fresh process = %d, want 72", w)
	}
	aw := apiserverWrites(nil, after)
	if aw["APPLY configmaps"] != 30 || aw["UPDATE workloads/status"] != 10 || len(aw) != 2 {
		t.Errorf("apiserver writes = %v", aw)
	}
	if got := formatCounts(calls); got != "POST 30, PUT 12, GET 2" {
		t.Errorf("formatCounts = %q", got)
	}
}

func TestParseRejectsGarbage(t *testing.T) {
	for _, s := range []string{`m{a="x"`, `m{a=x} 1`, `m`, `m{a="x"} notanumber`} {
		if _, err := parseMetrics(strings.NewReader(s)); err == nil {
			t.Errorf("%q parsed", s)
		}
	}
}

func TestPercentileNearestRank(t *testing.T) {
	v := make([]float64, 200)
	for i := range v {
		v[i] = float64(i + 1)
	}
	for p, want := range map[float64]float64{50: 100, 95: 190, 99: 198, 100: 200, 0: 1} {
		if got := percentile(v, p); got != want {
			t.Errorf("p%g = %g, want %g", p, got, want)
		}
	}
	s := summarize([]float64{0.3, 0.1, 0.2}, 1000)
	if s.Min != 100 || s.Max != 300 || s.P50 != 200 || s.Mean != 200 {
		t.Errorf("summary = %+v", s)
	}
}

func TestHistogramMeans(t *testing.T) {
	before, _ := parseMetrics(strings.NewReader(`lat_sum{verb="PUT"} 1
lat_count{verb="PUT"} 10
`))
	after, _ := parseMetrics(strings.NewReader(`lat_sum{verb="PUT"} 3
lat_count{verb="PUT"} 20
lat_sum{verb="GET"} 0.5
lat_count{verb="GET"} 5
lat_bucket{verb="GET",le="+Inf"} 5
`))
	got := histogramMeans(before, after, "lat", "verb")
	if got["PUT"] != 200 || got["GET"] != 100 || len(got) != 2 {
		t.Errorf("means = %v, want PUT 200 ms, GET 100 ms", got)
	}
}
