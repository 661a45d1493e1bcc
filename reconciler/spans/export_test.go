package spans

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	st "kontinue.dev/kontinue/reconciler/status"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestConfigFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		flag string
		env  map[string]string
		off  bool
		err  string
		url  string
		chk  func(t *testing.T, c Config)
	}{
		{name: "nothing set: off", off: true},
		{name: "the flag adds /v1/traces to a bare host", flag: "http://c:4318", url: "http://c:4318/v1/traces"},
		{name: "the flag wins over the environment and over OTEL_SDK_DISABLED", flag: "http://flag:4318/x",
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318", "OTEL_SDK_DISABLED": "true"}, url: "http://flag:4318/x"},
		{name: "the generic endpoint is a base: /v1/traces appended to its path",
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c:4318/otlp/"}, url: "https://c:4318/otlp/v1/traces"},
		{name: "the signal's endpoint is used as it is, and wins",
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:9999/custom"},
			url: "http://b:9999/custom"},
		{name: "disabled SDK", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_SDK_DISABLED": "TRUE"}, off: true},
		{name: "no traces exporter", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_TRACES_EXPORTER": "none"}, off: true},
		{name: "not a URL", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "c:4318"}, err: "OTEL_EXPORTER_OTLP_ENDPOINT: want an http or https URL"},
		{name: "headers, percent-decoded, the signal's over the generic ones", env: map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT":       "http://a:4318",
			"OTEL_EXPORTER_OTLP_HEADERS":        "api-key=generic, x-tenant = team%20a",
			"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "api-key=traces%3Dsecret"},
			url: "http://a:4318/v1/traces", chk: func(t *testing.T, c Config) {
				assert.Equal(t, "traces=secret", c.Headers.Get("Api-Key"))
				assert.Equal(t, "team a", c.Headers.Get("X-Tenant"))
			}},
		{name: "a header without =", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_HEADERS": "oops"},
			err: "OTEL_EXPORTER_OTLP_HEADERS: want key=value pairs"},
		{name: "timeout in milliseconds, compression, protocol; the signal's win", env: map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TIMEOUT": "2500", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "1500",
			"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"},
			url: "http://a:4318/v1/traces", chk: func(t *testing.T, c Config) {
				assert.Equal(t, 1500*time.Millisecond, c.Timeout)
				assert.True(t, c.Gzip)
				assert.True(t, c.Protobuf)
			}},
		{name: "defaults", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318"}, url: "http://a:4318/v1/traces",
			chk: func(t *testing.T, c Config) {
				assert.Equal(t, 10*time.Second, c.Timeout)
				assert.False(t, c.Gzip)
				assert.False(t, c.Protobuf)
				assert.Equal(t, [2]string{"service.name", "kontinue"}, c.Resource[0])
			}},
		{name: "grpc is refused", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			err: "OTEL_EXPORTER_OTLP_PROTOCOL: Kontinue sends OTLP over HTTP"},
		{name: "a bad timeout", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TIMEOUT": "10s"},
			err: "OTEL_EXPORTER_OTLP_TIMEOUT: want a positive number of milliseconds"},
		{name: "unknown compression", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"},
			err: "want gzip or none"},
		{name: "resource attributes; OTEL_SERVICE_NAME wins over service.name", env: map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318",
			"OTEL_RESOURCE_ATTRIBUTES":    "service.name=ignored,k8s.cluster.name=prod%2Deu,deployment.environment=prod",
			"OTEL_SERVICE_NAME":           "kontinue-eu"},
			url: "http://a:4318/v1/traces", chk: func(t *testing.T, c Config) {
				assert.Equal(t, [2]string{"service.name", "kontinue-eu"}, c.Resource[0])
				assert.Contains(t, c.Resource, [2]string{"k8s.cluster.name", "prod-eu"})
				assert.Contains(t, c.Resource, [2]string{"deployment.environment", "prod"})
			}},
		{name: "a client certificate without its key", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318",
			"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": "/x.pem"}, err: "go together"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, on, err := ConfigFromEnv(tc.flag, env(tc.env))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, !tc.off, on)
			if tc.off {
				return
			}
			assert.Equal(t, tc.url, c.URL)
			if tc.chk != nil {
				tc.chk(t, c)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	assert.Equal(t, 7*time.Second, RetryAfter("7", now))
	assert.Equal(t, 30*time.Second, RetryAfter(now.Add(30*time.Second).Format(http.TimeFormat), now))
	assert.Zero(t, RetryAfter("", now))
	assert.Zero(t, RetryAfter("soon", now))
	assert.Zero(t, RetryAfter(now.Add(-time.Minute).Format(http.TimeFormat), now))
	for code, want := range map[int]bool{429: true, 502: true, 503: true, 504: true, 500: false, 400: false, 401: false, 404: false, 413: false} {
		assert.Equal(t, want, Retryable(code), code)
	}
}

// collector is an OTLP/HTTP receiver that answers the statuses it is
// scripted with, then 200, and decodes what it takes with the
// Collector's own decoders.
type collector struct {
	mu       sync.Mutex
	script   []int
	after    string
	requests []*http.Request
	got      []ptrace.Traces
	errs     []error
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests = append(c.requests, r)
	if len(c.script) > 0 {
		code := c.script[0]
		c.script = c.script[1:]
		if c.after != "" {
			w.Header().Set("Retry-After", c.after)
		}
		w.WriteHeader(code)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			c.errs = append(c.errs, err)
			w.WriteHeader(400)
			return
		}
		body = zr
	}
	b, _ := io.ReadAll(body)
	// An ExportTraceServiceRequest is a TracesData on the wire.
	var req ptrace.Traces
	var err error
	if r.Header.Get("Content-Type") == "application/x-protobuf" {
		req, err = (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(b)
	} else {
		req, err = (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(b)
	}
	if err != nil {
		c.errs = append(c.errs, err)
		w.WriteHeader(400)
		return
	}
	c.got = append(c.got, req)
}

func exportOne(t *testing.T, c Config, col *collector, sleeps *[]time.Duration) *Exporter {
	srv := httptest.NewServer(col)
	t.Cleanup(srv.Close)
	c.URL = srv.URL + "/v1/traces"
	x, err := NewWith(context.Background(), c)
	require.NoError(t, err)
	x.Retry.Sleep = func(d time.Duration, _ <-chan struct{}) bool { *sleeps = append(*sleeps, d); return true }
	o := Owner{Kind: "Workload", Namespace: "dev", Name: "app", UID: "u", Chain: "c"}
	tid := TraceID("u", "r")
	x.queue <- item{o, Span{TraceID: tid, SpanID: SpanID(tid, "build"), Parent: SpanID(tid, "source"), Name: "build",
		Start: at(1).Time, End: at(3).Time, Outcome: st.OutcomeFailed, Reason: "BuildFailed", Message: "tests failed"}}
	require.NoError(t, x.Shutdown(context.Background()))
	return x
}

// TestExportStandard: gzip, both encodings, headers and the resource as
// the environment says, each decoded by the Collector's own decoder.
func TestExportStandard(t *testing.T) {
	for _, proto := range []bool{false, true} {
		col := &collector{}
		var sleeps []time.Duration
		c, _, err := ConfigFromEnv("", env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
			"OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20t0k", "OTEL_SERVICE_NAME": "kontinue-eu", "OTEL_RESOURCE_ATTRIBUTES": "env=prod"}))
		require.NoError(t, err)
		c.Protobuf = proto
		x := exportOne(t, c, col, &sleeps)
		require.Empty(t, col.errs)
		require.Len(t, col.got, 1, "protobuf %v", proto)
		assert.Zero(t, x.Dropped.Load())
		assert.Equal(t, "Bearer t0k", col.requests[0].Header.Get("Authorization"))
		assert.Equal(t, "gzip", col.requests[0].Header.Get("Content-Encoding"))
		rs := col.got[0].ResourceSpans().At(0)
		name, _ := rs.Resource().Attributes().Get("service.name")
		assert.Equal(t, "kontinue-eu", name.Str())
		envv, _ := rs.Resource().Attributes().Get("env")
		assert.Equal(t, "prod", envv.Str())
		sp := rs.ScopeSpans().At(0).Spans().At(0)
		tid := TraceID("u", "r")
		assert.Equal(t, tid, [16]byte(sp.TraceID()))
		assert.Equal(t, "build", sp.Name())
		assert.Equal(t, SpanID(tid, "source"), [8]byte(sp.ParentSpanID()))
		assert.Equal(t, "BuildFailed: tests failed", sp.Status().Message())
		assert.EqualValues(t, 2, sp.Status().Code())
		assert.Equal(t, uint64(at(3).UnixNano()), uint64(sp.EndTimestamp()))
		step, _ := sp.Attributes().Get("kontinue.step")
		assert.Equal(t, "build", step.Str())
	}
}

// TestExportRetries: 429, 502, 503 and 504 are retried (a Retry-After
// honoured), other answers are not, and what is given up is counted.
func TestExportRetries(t *testing.T) {
	col := &collector{script: []int{503, 429, 502, 504}}
	var sleeps []time.Duration
	x := exportOne(t, Config{}, col, &sleeps)
	assert.Len(t, col.got, 1, "sent after four retryable answers")
	assert.Len(t, sleeps, 4)
	for i, d := range sleeps {
		base := time.Second << i
		assert.True(t, d >= base/2 && d < base*3/2, "wait %d: %s, backoff from %s with jitter", i, d, base)
	}
	assert.Zero(t, x.Dropped.Load())

	col = &collector{script: []int{503}, after: "12"}
	sleeps = nil
	exportOne(t, Config{}, col, &sleeps)
	assert.Equal(t, []time.Duration{12 * time.Second}, sleeps, "Retry-After, not the backoff")
	assert.Len(t, col.got, 1)

	col = &collector{script: []int{400}}
	sleeps = nil
	x = exportOne(t, Config{}, col, &sleeps)
	assert.Empty(t, sleeps, "400 is not retried")
	assert.Empty(t, col.got)
	assert.EqualValues(t, 1, x.Dropped.Load())

	col = &collector{script: make([]int, 100)}
	for i := range col.script {
		col.script[i] = 503
	}
	sleeps = nil
	x = exportOne(t, Config{}, col, &sleeps)
	var total time.Duration
	for _, d := range sleeps {
		total += d
	}
	assert.LessOrEqual(t, total, DefaultRetry.MaxElapsed, "gives up within the policy's time")
	assert.EqualValues(t, 1, x.Dropped.Load())
	for _, d := range sleeps {
		assert.LessOrEqual(t, d, DefaultRetry.Max*3/2)
	}
}
