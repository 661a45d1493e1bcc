package history

// What ended: the input sets that left the steps' provenance between two
// statuses of an owner, read from the status alone.

import (
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	st "kontinue.dev/kontinue/reconciler/status"
)

// Event is an input set of a step as it left the status (or, for View,
// as the status shows it now), with the statuses it is traced in.
type Event struct {
	Step string
	Set  st.InputSet
	// Outcome overrides Set.Outcome: Superseded.
	Outcome  string
	EndedAt  *metav1.Time
	Reason   string
	Message  string
	Shadowed bool
	Out      string
	// In are the steps' statuses the set was part of: where its inputs
	// are traced back to the revision.
	In []st.Resource
}

// Events are the input sets that left the steps' provenance between prev
// and next (the statuses before and after a write), as prev last showed
// them: a success replaced by a newer one, a failure, a held or
// processing set replaced (superseded, at now); and the revision a first
// step published before its outputs changed without a new set (a source
// controller's new commit). What the status still shows is not written:
// View reads it from there. The same status twice yields none, and so
// does the first status of an owner.
func Events(prev, next []st.Resource, now time.Time) []Event {
	var out []Event
	at := metav1.NewTime(now.Truncate(time.Second))
	for i := range prev {
		r := &prev[i]
		after := find(next, r.Name)
		if after != nil && after.Provenance == nil && r.Provenance != nil {
			// Dropped to fit the status (StatusTruncated): nothing is
			// known to have left.
			continue
		}
		var is *st.Provenance
		if after != nil {
			is = after.Provenance
		}
		still := map[string]bool{}
		for _, s := range is.Sets() {
			still[s.Digest] = true
		}
		for _, s := range r.Provenance.Sets() {
			if still[s.Digest] {
				continue
			}
			e := eventOf(r, s, prev)
			if e.EndedAt == nil {
				e.Outcome, e.EndedAt = st.OutcomeSuperseded, &at
			}
			out = append(out, e)
		}
		// A first step's outputs changed from the same set: the revision
		// it published before is over.
		if c := current(r); c != nil && len(r.Inputs) == 0 && still[c.Digest] && outHash(r.Outputs) != "" &&
			after != nil && outHash(after.Outputs) != outHash(r.Outputs) {
			out = append(out, eventOf(r, c, prev))
		}
	}
	return out
}

// Live are the input sets next's provenance shows, as events for View.
func Live(next []st.Resource) []Event {
	var out []Event
	for i := range next {
		for _, s := range next[i].Provenance.Sets() {
			out = append(out, eventOf(&next[i], s, next))
		}
	}
	return out
}

// eventOf is set s of step r, as the statuses in show it.
func eventOf(r *st.Resource, s *st.InputSet, in []st.Resource) Event {
	e := Event{Step: r.Name, Set: *s, EndedAt: s.EndedAt, In: in}
	if c := current(r); c != nil && c.Digest == s.Digest {
		e.Out = outHash(r.Outputs)
		if len(linksOf(s)) == 0 {
			// A first step's set may publish many revisions: this one is
			// as new as its outputs.
			if t := lastOutput(r.Outputs); t != nil {
				e.Set.TakenAt = t
			}
		}
	}
	if s.Outcome == st.OutcomeFailed {
		e.Reason, e.Message = failure(r)
		e.Shadowed = r.ServedBy == "shadow" && r.Provenance.Latest != nil && r.Provenance.Latest.Digest == s.Digest
	}
	return e
}

func find(rs []st.Resource, name string) *st.Resource {
	for i := range rs {
		if rs[i].Name == name {
			return &rs[i]
		}
	}
	return nil
}

func current(r *st.Resource) *st.InputSet {
	if r == nil || r.Provenance == nil {
		return nil
	}
	return r.Provenance.Current
}

// lastOutput is when the step's outputs last changed.
func lastOutput(outs []st.Output) *metav1.Time {
	var at *metav1.Time
	for i := range outs {
		if t := outs[i].LastTransitionTime; !t.IsZero() && (at == nil || at.Before(&t)) {
			at = t.DeepCopy()
		}
	}
	return at
}

// failure is the step's reason for failing: its Ready condition, else
// Healthy, when False.
func failure(r *st.Resource) (string, string) {
	for _, typ := range []string{"Ready", "Healthy"} {
		if c := st.Find(r.Conditions, typ); c != nil && c.Status == metav1.ConditionFalse {
			return c.Reason, c.Message
		}
	}
	return "", ""
}

func cut(s string) string {
	if len(s) <= MessageLimit {
		return s
	}
	n := MessageLimit
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + st.TruncatedMarker
}

// Ended are the input sets that ended between prev and next (succeeded
// or failed, as next shows them; superseded, as prev did, at now), and a
// first step's new outputs from the same set: what spans are made of.
// The same status twice yields none.
func Ended(prev, next []st.Resource, now time.Time) []Event {
	var out []Event
	at := metav1.NewTime(now.Truncate(time.Second))
	for i := range next {
		r := &next[i]
		before := find(prev, r.Name)
		var was *st.Provenance
		if before != nil {
			was = before.Provenance
		}
		wasSet := map[string]*st.InputSet{}
		for _, s := range was.Sets() {
			wasSet[s.Digest] = s
		}
		still := map[string]bool{}
		ended := false
		for _, s := range r.Provenance.Sets() {
			still[s.Digest] = true
			old := wasSet[s.Digest]
			if s.EndedAt == nil || (s.Outcome != st.OutcomeSucceeded && s.Outcome != st.OutcomeFailed) ||
				(old != nil && old.Outcome == s.Outcome && old.EndedAt != nil) {
				continue
			}
			ended = ended || s.Outcome == st.OutcomeSucceeded
			out = append(out, eventOf(r, s, next))
		}
		for _, s := range was.Sets() {
			if r.Provenance != nil && !still[s.Digest] && s.EndedAt == nil {
				e := eventOf(before, s, prev)
				e.Outcome, e.EndedAt = st.OutcomeSuperseded, &at
				out = append(out, e)
			}
		}
		if c := current(r); !ended && c != nil && len(r.Inputs) == 0 && before != nil && outHash(r.Outputs) != "" &&
			outHash(before.Outputs) != outHash(r.Outputs) {
			out = append(out, eventOf(r, c, next))
		}
	}
	return out
}
