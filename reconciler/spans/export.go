package spans

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/version"
)

// Exporter sends spans to an OTLP/HTTP endpoint in the protocol's JSON
// encoding, batched by one goroutine, off the reconciles' path: a full
// queue drops spans rather than slow a reconcile. It is written here
// rather than with OpenTelemetry's SDK and exporter, whose packages add
// about 8 MiB of resident executable pages to every Kontinue, traced or
// not (make bench); what Kontinue sends is a few finished spans with IDs
// of its own, which needs none of the SDK.
type Exporter struct {
	url    string
	client *http.Client
	queue  chan item
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
	// Now is the clock (tests).
	Now func() time.Time
	// Dropped counts spans dropped: queue full, or the endpoint refused
	// them.
	Dropped atomic.Int64
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
// /v1/traces is added when it has no path).
func New(_ context.Context, endpoint string) (*Exporter, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("want an http or https URL, got %q", endpoint)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	x := &Exporter{url: u.String(), client: &http.Client{Timeout: 10 * time.Second}, queue: make(chan item, queueSize),
		stop: make(chan struct{}), done: make(chan struct{}), Now: time.Now}
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
	body, err := Encode(batch)
	if err == nil {
		var res *http.Response
		res, err = x.client.Post(x.url, "application/json", bytes.NewReader(body))
		if err == nil {
			res.Body.Close()
			if res.StatusCode/100 != 2 {
				err = fmt.Errorf("%s answered %s", x.url, res.Status)
			}
		}
	}
	if err != nil {
		x.Dropped.Add(int64(len(batch)))
		klog.V(1).InfoS("spans not sent", "spans", len(batch), "err", err)
	}
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

// Encode is the OTLP/HTTP JSON body of spans.
func Encode(items []item) ([]byte, error) {
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
	return json.Marshal(otlpRequest{ResourceSpans: []otlpResourceSpans{{
		Resource:   otlpResource{Attributes: []otlpAttr{attr("service.name", "kontinue"), attr("service.version", version.Version)}},
		ScopeSpans: []otlpScopeSpans{{Scope: otlpScope{Name: "kontinue.dev/kontinue/reconciler/spans", Version: version.Version}, Spans: spans}},
	}}})
}
