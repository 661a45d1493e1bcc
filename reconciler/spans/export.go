package spans

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/version"
)

// Exporter sends spans over OTLP/HTTP, batched, off the reconcile's path.
type Exporter struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	// Now is the clock (tests).
	Now func() time.Time
}

// New sends spans to endpoint, an OTLP/HTTP URL (http://collector:4318;
// /v1/traces is added when it has no path).
func New(ctx context.Context, endpoint string) (*Exporter, error) {
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint))
	if err != nil {
		return nil, err
	}
	res := resource.NewSchemaless(attribute.String("service.name", "kontinue"), attribute.String("service.version", version.Version))
	p := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Second)),
		sdktrace.WithResource(res), sdktrace.WithIDGenerator(givenIDs{}), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	return &Exporter{provider: p, tracer: p.Tracer("kontinue.dev/kontinue/reconciler/spans"), Now: time.Now}, nil
}

// StatusWritten exports the spans of what ended between prev and next.
func (x *Exporter) StatusWritten(o Owner, prev, next []st.Resource) {
	for _, s := range Of(o, prev, next, x.Now()) {
		x.export(o, s)
	}
}

func (x *Exporter) export(o Owner, s Span) {
	ctx := context.WithValue(context.Background(), idsKey{}, s)
	if s.Parent != ([8]byte{}) {
		ctx = trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: s.TraceID, SpanID: s.Parent, TraceFlags: trace.FlagsSampled, Remote: true}))
	}
	_, span := x.tracer.Start(ctx, s.Name, trace.WithTimestamp(s.Start), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			attribute.String("kontinue.owner.kind", o.Kind), attribute.String("kontinue.owner.namespace", o.Namespace),
			attribute.String("kontinue.owner.name", o.Name), attribute.String("kontinue.chain", o.Chain),
			attribute.String("kontinue.step", s.Name), attribute.String("kontinue.revision", s.Revision),
			attribute.String("kontinue.input_digest", s.Digest), attribute.String("kontinue.outcome", s.Outcome)))
	switch s.Outcome {
	case st.OutcomeFailed:
		span.SetStatus(codes.Error, s.Reason+": "+s.Message)
	case st.OutcomeSucceeded:
		span.SetStatus(codes.Ok, "")
	}
	span.End(trace.WithTimestamp(s.End))
}

// Shutdown sends what is batched.
func (x *Exporter) Shutdown(ctx context.Context) error { return x.provider.Shutdown(ctx) }

type idsKey struct{}

// givenIDs gives each span the IDs Of derived (carried in its context):
// a revision's spans share a trace whoever writes them, and when.
type givenIDs struct{}

func (givenIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	s, _ := ctx.Value(idsKey{}).(Span)
	return s.TraceID, s.SpanID
}

func (givenIDs) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	s, _ := ctx.Value(idsKey{}).(Span)
	return s.SpanID
}
