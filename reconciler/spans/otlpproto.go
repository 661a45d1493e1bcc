package spans

// The protobuf encoding of the same ExportTraceServiceRequest
// (opentelemetry-proto's trace/v1 and collector/trace/v1; field numbers
// from trace.proto), written with protowire: what an
// OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf collector reads. Checked
// against the Collector's own decoder (pdata) in export_test.go.

import (
	"encoding/hex"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
)

func (r otlpRequest) protobuf() []byte {
	var b []byte
	for _, rs := range r.ResourceSpans {
		b = protowire.AppendTag(b, 1, protowire.BytesType) // resource_spans
		b = protowire.AppendBytes(b, rs.protobuf())
	}
	return b
}

func (rs otlpResourceSpans) protobuf() []byte {
	var res []byte
	for _, a := range rs.Resource.Attributes {
		res = appendMessage(res, 1, a.protobuf()) // Resource.attributes
	}
	b := appendMessage(nil, 1, res) // ResourceSpans.resource
	for _, ss := range rs.ScopeSpans {
		var s []byte
		var scope []byte
		scope = appendString(scope, 1, ss.Scope.Name)
		scope = appendString(scope, 2, ss.Scope.Version)
		s = appendMessage(s, 1, scope) // ScopeSpans.scope
		for _, sp := range ss.Spans {
			s = appendMessage(s, 2, sp.protobuf()) // ScopeSpans.spans
		}
		b = appendMessage(b, 2, s) // ResourceSpans.scope_spans
	}
	return b
}

func (sp otlpSpan) protobuf() []byte {
	var b []byte
	b = appendHex(b, 1, sp.TraceID)
	b = appendHex(b, 2, sp.SpanID)
	b = appendHex(b, 4, sp.ParentSpanID)
	b = appendString(b, 5, sp.Name)
	b = protowire.AppendTag(b, 6, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(sp.Kind))
	b = appendNanos(b, 7, sp.Start)
	b = appendNanos(b, 8, sp.End)
	for _, a := range sp.Attributes {
		b = appendMessage(b, 9, a.protobuf())
	}
	for _, l := range sp.Links {
		var lb []byte
		lb = appendHex(lb, 1, l.TraceID)
		lb = appendHex(lb, 2, l.SpanID)
		for _, a := range l.Attributes {
			lb = appendMessage(lb, 4, a.protobuf())
		}
		b = appendMessage(b, 13, lb)
	}
	var st []byte
	st = appendString(st, 2, sp.Status.Message)
	if sp.Status.Code != 0 {
		st = protowire.AppendTag(st, 3, protowire.VarintType)
		st = protowire.AppendVarint(st, uint64(sp.Status.Code))
	}
	return appendMessage(b, 15, st)
}

func (a otlpAttr) protobuf() []byte {
	b := appendString(nil, 1, a.Key)
	v := appendString(nil, 1, a.Value.String) // AnyValue.string_value
	return appendMessage(b, 2, v)
}

func appendMessage(b []byte, num protowire.Number, m []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, m)
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// appendHex writes an ID kept as hex (the JSON encoding's) as its bytes.
func appendHex(b []byte, num protowire.Number, s string) []byte {
	raw, err := hex.DecodeString(s)
	if s == "" || err != nil {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, raw)
}

func appendNanos(b []byte, num protowire.Number, s string) []byte {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, n)
}
