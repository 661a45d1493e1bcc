package spans

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/version"
)

// Exporter sends spans to an OTLP/HTTP endpoint, batched by one
// goroutine, off the reconciles' path: a full queue drops spans rather
// than slow a reconcile. It is written here rather than with
// OpenTelemetry's SDK and exporter, whose packages add about 8 MiB of
// resident executable pages to every Kontinue, traced or not (make
// bench); what Kontinue sends is a few finished spans with IDs of its
// own, which needs none of the SDK. It behaves as the SDK's exporter does
// all the same: the standard environment (otlpenv.go), gzip, and retries
// as the OTLP specification asks (retry.go).
type Exporter struct {
	cfg    Config
	client *http.Client
	queue  chan item
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
	// Now is the clock (tests).
	Now func() time.Time
	// Dropped counts spans dropped: queue full, or the endpoint refused
	// them (or kept failing past the retries).
	Dropped atomic.Int64
	// Retry bounds retries (tests shorten it).
	Retry RetryPolicy
}

type item struct {
	o Owner
	s Span
}

const (
	queueSize = 4096
	batchSize = 512
	batchWait = time.Second
)

// New sends spans to endpoint, an OTLP/HTTP URL (http://collector:4318;
// /v1/traces is added when it has no path), as JSON.
func New(ctx context.Context, endpoint string) (*Exporter, error) {
	u, err := endpointURL(endpoint, false)
	if err != nil {
		return nil, err
	}
	res, _ := resourceOf(func(string) string { return "" })
	return NewWith(ctx, Config{URL: u, Timeout: 10 * time.Second, Resource: res})
}

// NewWith sends spans as c says (ConfigFromEnv).
func NewWith(_ context.Context, c Config) (*Exporter, error) {
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	if len(c.Resource) == 0 {
		c.Resource, _ = resourceOf(func(string) string { return "" })
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if c.TLS != nil {
		tr.TLSClientConfig = c.TLS
	}
	x := &Exporter{cfg: c, client: &http.Client{Timeout: c.Timeout, Transport: tr}, queue: make(chan item, queueSize),
		stop: make(chan struct{}), done: make(chan struct{}), Now: time.Now, Retry: DefaultRetry}
	go x.run()
	return x, nil
}

// StatusWritten queues the spans of what ended between prev and next.
func (x *Exporter) StatusWritten(o Owner, prev, next []st.Resource) {
	for _, s := range Of(o, prev, next, x.Now()) {
		select {
		case x.queue <- item{o, s}:
		default:
			x.Dropped.Add(1)
		}
	}
}

// Shutdown sends what is queued (until ctx ends) and stops.
func (x *Exporter) Shutdown(ctx context.Context) error {
	x.once.Do(func() { close(x.stop) })
	select {
	case <-x.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (x *Exporter) run() {
	defer close(x.done)
	tick := time.NewTicker(batchWait)
	defer tick.Stop()
	var batch []item
	flush := func() {
		if len(batch) > 0 {
			x.send(batch)
			batch = nil
		}
	}
	for {
		select {
		case it := <-x.queue:
			if batch = append(batch, it); len(batch) >= batchSize {
				flush()
			}
		case <-tick.C:
			flush()
		case <-x.stop:
			for {
				select {
				case it := <-x.queue:
					batch = append(batch, it)
				default:
					flush()
					return
				}
			}
		}
	}
}

func (x *Exporter) send(batch []item) {
	body, ctype, err := x.encode(batch)
	if err == nil {
		err = x.Retry.Do(x.stop, func() (time.Duration, bool, error) { return x.post(body, ctype) })
	}
	if err != nil {
		x.Dropped.Add(int64(len(batch)))
		klog.V(1).InfoS("spans not sent", "spans", len(batch), "err", err)
	}
}

func (x *Exporter) encode(batch []item) ([]byte, string, error) {
	req := request(batch, x.cfg.Resource)
	var body []byte
	ctype := "application/json"
	if x.cfg.Protobuf {
		body, ctype = req.protobuf(), "application/x-protobuf"
	} else {
		var err error
		if body, err = json.Marshal(req); err != nil {
			return nil, "", err
		}
	}
	if x.cfg.Gzip {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(body); err != nil {
			return nil, "", err
		}
		if err := zw.Close(); err != nil {
			return nil, "", err
		}
		body = buf.Bytes()
	}
	return body, ctype, nil
}

// post sends one request: retry says whether the failure is one the OTLP
// specification retries (429, 502, 503, 504, or no answer), after (when
// positive) what the server's Retry-After asked.
func (x *Exporter) post(body []byte, ctype string) (after time.Duration, retry bool, err error) {
	req, err := http.NewRequest(http.MethodPost, x.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return 0, false, err
	}
	for k, v := range x.cfg.Headers {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", ctype)
	req.Header.Set("User-Agent", "kontinue/"+version.Version)
	if x.cfg.Gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	res, err := x.client.Do(req)
	if err != nil {
		return 0, true, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	res.Body.Close()
	if res.StatusCode/100 == 2 {
		return 0, false, nil
	}
	err = fmt.Errorf("%s answered %s", x.cfg.URL, res.Status)
	if !Retryable(res.StatusCode) {
		return 0, false, err
	}
	return RetryAfter(res.Header.Get("Retry-After"), x.Now()), true, err
}

// The OTLP/HTTP JSON encoding of an ExportTraceServiceRequest
// (opentelemetry-proto, with the specification's JSON rules: IDs as hex,
// 64-bit integers as strings, enums as numbers).
type (
	otlpRequest struct {
		ResourceSpans []otlpResourceSpans `json:"resourceSpans"`
	}
	otlpResourceSpans struct {
		Resource   otlpResource     `json:"resource"`
		ScopeSpans []otlpScopeSpans `json:"scopeSpans"`
	}
	otlpResource struct {
		Attributes []otlpAttr `json:"attributes"`
	}
	otlpScopeSpans struct {
		Scope otlpScope  `json:"scope"`
		Spans []otlpSpan `json:"spans"`
	}
	otlpScope struct {
		Name    string `json:"name"`
		Version string `json:"version,omitempty"`
	}
	otlpSpan struct {
		TraceID      string     `json:"traceId"`
		SpanID       string     `json:"spanId"`
		ParentSpanID string     `json:"parentSpanId,omitempty"`
		Name         string     `json:"name"`
		Kind         int        `json:"kind"`
		Start        string     `json:"startTimeUnixNano"`
		End          string     `json:"endTimeUnixNano"`
		Attributes   []otlpAttr `json:"attributes"`
		Links        []otlpLink `json:"links,omitempty"`
		Status       otlpStatus `json:"status"`
	}
	otlpLink struct {
		TraceID    string     `json:"traceId"`
		SpanID     string     `json:"spanId"`
		Attributes []otlpAttr `json:"attributes,omitempty"`
	}
	otlpAttr struct {
		Key   string    `json:"key"`
		Value otlpValue `json:"value"`
	}
	otlpValue struct {
		String string `json:"stringValue"`
	}
	otlpStatus struct {
		Code    int    `json:"code,omitempty"` // 1 ok, 2 error
		Message string `json:"message,omitempty"`
	}
)

const (
	spanKindInternal = 1
	statusOK         = 1
	statusError      = 2
)

// Encode is the OTLP/HTTP JSON body of spans, with Kontinue's default
// resource.
func Encode(items []item) ([]byte, error) {
	res, _ := resourceOf(func(string) string { return "" })
	return json.Marshal(request(items, res))
}

// request is the ExportTraceServiceRequest of spans under resource.
func request(items []item, resource [][2]string) otlpRequest {
	attr := func(k, v string) otlpAttr { return otlpAttr{Key: k, Value: otlpValue{String: v}} }
	var spans []otlpSpan
	for _, it := range items {
		o, s := it.o, it.s
		sp := otlpSpan{TraceID: hex.EncodeToString(s.TraceID[:]), SpanID: hex.EncodeToString(s.SpanID[:]), Name: s.Name,
			Kind: spanKindInternal, Start: strconv.FormatInt(s.Start.UnixNano(), 10), End: strconv.FormatInt(s.End.UnixNano(), 10),
			Attributes: []otlpAttr{attr("kontinue.owner.kind", o.Kind), attr("kontinue.owner.namespace", o.Namespace),
				attr("kontinue.owner.name", o.Name), attr("kontinue.chain", o.Chain), attr("kontinue.step", s.Name),
				attr("kontinue.revision", s.Revision), attr("kontinue.input_digest", s.Digest), attr("kontinue.outcome", s.Outcome)}}
		for _, l := range s.Links {
			sp.Links = append(sp.Links, otlpLink{TraceID: hex.EncodeToString(l.TraceID[:]), SpanID: hex.EncodeToString(l.SpanID[:]),
				Attributes: []otlpAttr{attr("kontinue.owner.kind", l.Owner.Kind), attr("kontinue.owner.namespace", l.Owner.Namespace),
					attr("kontinue.owner.name", l.Owner.Name), attr("kontinue.step", l.Step)}})
		}
		if s.Parent != ([8]byte{}) {
			sp.ParentSpanID = hex.EncodeToString(s.Parent[:])
		}
		switch s.Outcome {
		case st.OutcomeFailed:
			sp.Status = otlpStatus{Code: statusError, Message: s.Reason + ": " + s.Message}
		case st.OutcomeSucceeded:
			sp.Status = otlpStatus{Code: statusOK}
		}
		spans = append(spans, sp)
	}
	var res []otlpAttr
	for _, kv := range resource {
		res = append(res, attr(kv[0], kv[1]))
	}
	return otlpRequest{ResourceSpans: []otlpResourceSpans{{
		Resource:   otlpResource{Attributes: res},
		ScopeSpans: []otlpScopeSpans{{Scope: otlpScope{Name: "kontinue.dev/kontinue/reconciler/spans", Version: version.Version}, Spans: spans}},
	}}}
}

func versionString() string { return version.Version }
