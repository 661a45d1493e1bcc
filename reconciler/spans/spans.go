// Package spans turns what the steps' provenance says ended into
// OpenTelemetry spans: one trace per input revision of an owner, one span
// per step from when it took the revision's input set to when the set
// succeeded, failed or was superseded, the span of the step it read from
// as parent. IDs are derived from the owner and the revision, so spans of
// one revision written by different status writes (or by Kontinue before
// and after a restart) land in one trace, and no state is kept. Span makes
// them (pure); export.go sends them over OTLP when an endpoint is set.
package spans

import (
	"crypto/sha256"
	"time"

	"kontinue.dev/kontinue/reconciler/history"
	st "kontinue.dev/kontinue/reconciler/status"
)

// Owner is the owner a span's revision belongs to.
type Owner struct {
	Kind, Namespace, Name, UID string
	Chain                      string
	// Feed, when set, reads what links a Deliverable's revisions to the
	// Workload that stamped it (link.go); called at most once, and only
	// when a first step's set ended.
	Feed func() *Feed
}

// Span is one step's part in one revision.
type Span struct {
	TraceID [16]byte
	SpanID  [8]byte
	// Parent is the span of the step this one read its first input from
	// (zero: a first step, the trace's root).
	Parent   [8]byte
	Name     string // the step
	Start    time.Time
	End      time.Time
	Outcome  string // Succeeded, Failed, Superseded
	Reason   string
	Message  string
	Revision string // the revision's label
	Digest   string // the step's input set
	// Links: a Deliverable's first step's span, to the span of the
	// Workload's step whose revision made what it published (LinkOf).
	Links []Link
}

// Of are the spans of what ended between prev and next (the steps'
// statuses before and after a status write of o).
func Of(o Owner, prev, next []st.Resource, now time.Time) []Span {
	var out []Span
	var feed *Feed
	fed := false
	for _, e := range history.Ended(prev, next, now) {
		rev := history.RevisionOf(e.In, e.Step, &e.Set)
		tid := TraceID(o.UID, rev.Key())
		s := Span{TraceID: tid, SpanID: SpanID(tid, e.Step), Name: e.Step, Outcome: e.Set.Outcome,
			Reason: e.Reason, Message: e.Message, Revision: rev.Label(), Digest: e.Set.Digest}
		if e.Outcome != "" {
			s.Outcome = e.Outcome
		}
		r := find(e.In, e.Step)
		if r != nil && len(r.Inputs) > 0 {
			s.Parent = SpanID(tid, r.Inputs[0].Name)
		}
		if r != nil && len(r.Inputs) == 0 && o.Feed != nil {
			if !fed {
				feed, fed = o.Feed(), true
			}
			if l, why := LinkOf(feed, r, &e.Set); why == "" {
				s.Links = []Link{l}
			}
		}
		if e.EndedAt != nil {
			s.End = e.EndedAt.Time
		}
		s.Start = s.End
		if e.Set.TakenAt != nil && !e.Set.TakenAt.After(s.End) {
			s.Start = e.Set.TakenAt.Time
		}
		out = append(out, s)
	}
	return out
}

// TraceID is the trace of one revision of one owner.
func TraceID(ownerUID, revision string) [16]byte {
	sum := sha256.Sum256([]byte("kontinue/trace\x00" + ownerUID + "\x00" + revision))
	var id [16]byte
	copy(id[:], sum[:16])
	return id
}

// SpanID is the span of one step in a trace.
func SpanID(trace [16]byte, step string) [8]byte {
	sum := sha256.Sum256(append(append([]byte("kontinue/span\x00"), trace[:]...), step...))
	var id [8]byte
	copy(id[:], sum[:8])
	return id
}

func find(rs []st.Resource, name string) *st.Resource {
	for i := range rs {
		if rs[i].Name == name {
			return &rs[i]
		}
	}
	return nil
}
