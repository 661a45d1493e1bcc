package spans

// The W3C trace context of what Kontinue stamps (api.AnnotationTraceParent):
// the span of the step, in the trace of the revision whose input set the
// object was stamped for, as a traceparent (W3C Trace Context, version
// 00). Derived like the spans' IDs, from the owner's UID, the revision and
// the step, so the same input set always gets the same value, and no state
// is kept.

import (
	"encoding/hex"
	"errors"

	"kontinue.dev/kontinue/reconciler/history"
	st "kontinue.dev/kontinue/reconciler/status"
)

// TraceParent is a traceparent's IDs and flags.
type TraceParent struct {
	TraceID [16]byte
	SpanID  [8]byte
	Flags   byte
}

// FlagSampled is the trace flag that says the span is recorded: every
// span Kontinue derives is exported (unless a full queue drops it).
const FlagSampled = 0x01

// traceParentLen is the length of a version-00 traceparent.
const traceParentLen = 55

// Format is the version-00 traceparent of span in trace, sampled.
func Format(trace [16]byte, span [8]byte) string {
	return TraceParent{TraceID: trace, SpanID: span, Flags: FlagSampled}.String()
}

// String is tp as a version-00 traceparent (what a receiver of a later
// version passes on, as the specification asks).
func (tp TraceParent) String() string {
	return "00-" + hex.EncodeToString(tp.TraceID[:]) + "-" + hex.EncodeToString(tp.SpanID[:]) + "-" + hex.EncodeToString([]byte{tp.Flags})
}

// ErrTraceParent is why a traceparent is refused: the value is not one
// W3C Trace Context lets a receiver use.
var ErrTraceParent = errors.New("not a W3C traceparent")

// Parse reads a traceparent written by anyone (an annotation is untrusted
// input): version-00 exactly (55 characters), or a later version's first
// four fields when a '-' or nothing follows them, as the specification
// asks of a receiver; lowercase hex only; version ff and all-zero IDs are
// invalid. It never reads past the 56th byte, however long s is.
func Parse(s string) (TraceParent, error) {
	var tp TraceParent
	if len(s) < traceParentLen {
		return tp, ErrTraceParent
	}
	version, ok := hexByte(s[0:2])
	switch {
	case !ok || version == 0xff:
		return tp, ErrTraceParent
	case version == 0 && len(s) != traceParentLen:
		return tp, ErrTraceParent
	case len(s) > traceParentLen && s[traceParentLen] != '-':
		return tp, ErrTraceParent
	}
	if s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return tp, ErrTraceParent
	}
	if !lowerHex(s[3:35], tp.TraceID[:]) || !lowerHex(s[36:52], tp.SpanID[:]) {
		return tp, ErrTraceParent
	}
	if tp.TraceID == ([16]byte{}) || tp.SpanID == ([8]byte{}) {
		return tp, ErrTraceParent
	}
	if tp.Flags, ok = hexByte(s[53:55]); !ok {
		return tp, ErrTraceParent
	}
	return tp, nil
}

func hexByte(s string) (byte, bool) {
	var b [1]byte
	return b[0], lowerHex(s, b[:])
}

// lowerHex decodes s, lowercase hex of exactly len(dst) bytes, into dst.
func lowerHex(s string, dst []byte) bool {
	if len(s) != 2*len(dst) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	_, err := hex.Decode(dst, []byte(s))
	return err == nil
}

// ForSet is the traceparent of step's span for its input set set (the
// values it takes now), in the trace of the revision set comes from,
// traced through in (the statuses of the steps before it, as this
// reconcile made them), for the owner of UID ownerUID. ok is false when
// that revision is not known for sure: a first step (its input is the
// owner's spec; the revision, a commit, is what it publishes later, not
// what it was stamped for), or an input whose step has moved on or was
// never traced.
func ForSet(ownerUID string, in []st.Resource, step string, set *st.InputSet) (string, bool) {
	if set == nil || (len(set.Sources) == 0 && len(set.Images) == 0 && len(set.Configs) == 0 && set.Deployment == nil) {
		return "", false
	}
	rev := history.RevisionOf(in, step, set)
	if !rev.Proven() {
		return "", false
	}
	tid := TraceID(ownerUID, rev.Key())
	return Format(tid, SpanID(tid, step)), true
}
