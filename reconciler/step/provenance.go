package step

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kontinue.dev/kontinue/reconciler/health"
	st "kontinue.dev/kontinue/reconciler/status"
)

// Provenance: which input values a step's outputs came from, which newer
// ones its object works on, and which it holds (st.Provenance). The values
// are known only while the set is rendered (Observed.Inputs): the status
// keeps them from then on, and each reconcile moves them between Current,
// Latest and Held as the step's decision says.

// applied notes, on an Observation, the input set on the step's object (the
// live primary, or the newest run) and what the object has come to with it.
func (ob *Observation) noteApplied(digest string, outcome health.Outcome) {
	ob.applied, ob.appliedOutcome = digest, outcome
}

// goodDigest is the input set the step's published outputs came from ("":
// none succeeded that the step knows of).
func (ob Observation) goodDigest(o Observed) string {
	switch {
	case ob.Gated:
		return ob.State.GoodDigest
	case LifecycleOf(o.Spec) == Immutable:
		return ob.runDigest
	case ob.appliedOutcome == health.Succeeded && ob.out != nil:
		return ob.applied
	}
	return ""
}

// NextProvenance is the step's provenance after this decision, from the
// previous one (nil: none yet). A set the step no longer knows the values
// of (it was taken before provenance was recorded) keeps its digest only.
func NextProvenance(prev *st.Provenance, o Observed, ob Observation) *st.Provenance {
	now := metav1.NewTime(o.Now)
	known := func(digest string) st.InputSet {
		for _, s := range prev.Sets() {
			if s.Digest == digest {
				return *s
			}
		}
		if digest == o.Digest {
			in := o.Inputs
			in.Digest, in.TakenAt, in.EndedAt, in.Outcome = digest, &now, nil, ""
			return in
		}
		return st.InputSet{Digest: digest}
	}
	end := func(s st.InputSet, outcome string) *st.InputSet {
		if s.Outcome != outcome || s.EndedAt == nil {
			s.Outcome, s.EndedAt = outcome, &now
		}
		return &s
	}
	next := &st.Provenance{}
	good := ob.goodDigest(o)
	switch {
	case good != "":
		next.Current = end(known(good), st.OutcomeSucceeded)
	case prev != nil && prev.Current != nil:
		c := *prev.Current // outputs still the last success's (or none)
		next.Current = &c
	}
	// A set that succeeded stays so: its object turning unhealthy later
	// (an ungated step's Healthy flapping, a gated one's external state)
	// is the step's condition, not a new end of the set.
	if a := ob.applied; a != "" && a != good && (next.Current == nil || a != next.Current.Digest) {
		s := known(a)
		switch ob.appliedOutcome {
		case health.Failed:
			next.Latest = end(s, st.OutcomeFailed)
		default:
			// Succeeded but not published (outputs unreadable yet) is
			// still processing for whoever waits for its outputs.
			s.Outcome, s.EndedAt = st.OutcomeProcessing, nil
			next.Latest = &s
		}
	}
	if ob.Held && ob.HeldDigest != "" && ob.HeldDigest != ob.applied && ob.HeldDigest != good {
		s := known(ob.HeldDigest)
		s.Outcome, s.EndedAt = st.OutcomeHeld, nil
		next.Held = &s
	}
	if next.Current == nil && next.Latest == nil && next.Held == nil {
		return nil
	}
	return next
}

// RecordProvenance writes the step's provenance after decision ob into res,
// from the step's previous status.
func RecordProvenance(o Observed, ob Observation, res *st.Resource) {
	res.Provenance = NextProvenance(o.PrevProvenance, o, ob)
}

// endedIn reports whether p records input set digest as ended with outcome.
func endedIn(p *st.Provenance, digest, outcome string) bool {
	for _, s := range p.Sets() {
		if s.Digest == digest {
			return s.Outcome == outcome
		}
	}
	return false
}
