package step

import (
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/health"
	st "kontinue.dev/kontinue/reconciler/status"
)

// Provenance: which input values a step's outputs came from, which newer
// ones its object works on, and which it holds (st.Provenance). The values
// are known only while the set is rendered (Observed.Inputs): the status
// keeps them from then on, and each reconcile moves them between Current,
// Latest and Held as the step's decision says.

// A set's id (its Digest in the status) is the applied digest of its first
// render. A re-render with the same input values and owner generation is the
// same set: only the template or chain changed (an edit, a roll-out's wave),
// which is the platform's, not a new revision of the owner's. So a
// template-wide re-render leaves every step's provenance, and the owner's
// status, as they were; the objects it writes name their set
// (AnnotationInputSet), since their applied digest has moved on.

// noteApplied notes, on an Observation, the input set on the step's object
// (the live primary, or the newest run): digest is its applied digest, said
// the set it names (AnnotationInputSet; "": none), outcome what the object
// has come to with it.
func (ob *Observation) noteApplied(digest, said string, outcome health.Outcome) {
	ob.applied, ob.appliedSaid, ob.appliedOutcome = digest, said, outcome
}

// saidSet is the input set an object names (AnnotationInputSet).
func saidSet(u *unstructured.Unstructured) string {
	return u.GetAnnotations()[AnnotationInputSet]
}

// SetID is the provenance id of the set o renders now, the first of:
//  1. the render itself, when the step's provenance knows a set by it;
//  2. a set of the same values and owner generation that has not failed
//     (a restamp; a failed set stays failed and the fix is a new set),
//     Current first;
//  3. the set the live object of this very render names (o.LiveSet), when
//     the step records it with these values: the owner's generation moved
//     on without changing what this step renders;
//  4. o.Digest, a new set.
//
// Values longer than st.ValueLimit compare as recorded, cut.
func SetID(o Observed) string {
	id, _ := setID(o)
	return id
}

// setID is SetID, and whether it is a new set (rule 4).
func setID(o Observed) (string, bool) {
	sets := o.PrevProvenance.Sets()
	for _, s := range sets {
		if s.Digest == o.Digest {
			return o.Digest, false
		}
	}
	for _, s := range sets {
		if s.Outcome != st.OutcomeFailed && s.OwnerGeneration != 0 && s.OwnerGeneration == o.Inputs.OwnerGeneration && sameValues(s, &o.Inputs) {
			return s.Digest, false
		}
	}
	for _, s := range sets {
		if o.LiveSet != "" && s.Digest == o.LiveSet && sameValues(s, &o.Inputs) {
			return s.Digest, false
		}
	}
	return o.Digest, true
}

// NeedsLiveSet reports whether SetID needs o.LiveSet (rule 3): the step
// records sets, and neither its render nor its values and generation name
// one. Only then is the live object read for it, so that a restamped step
// reads nothing more per reconcile.
func NeedsLiveSet(o Observed) bool {
	o.LiveSet = ""
	_, fresh := setID(o)
	return fresh && len(o.PrevProvenance.Sets()) > 0
}

// LiveSetOf is Observed.LiveSet from the live object (nil: none): the set
// it names when it is o's render.
func LiveSetOf(o Observed, live *unstructured.Unstructured) string {
	if live == nil || live.GetAnnotations()[AnnotationDigest] != o.Digest {
		return ""
	}
	return saidSet(live)
}

// sameValues reports whether a and b took the same input values. A set
// recorded before Kontinue kept values (no generation) took none known.
func sameValues(a, b *st.InputSet) bool {
	return a.OwnerGeneration != 0 && reflect.DeepEqual(a.Sources, b.Sources) && reflect.DeepEqual(a.Images, b.Images) &&
		reflect.DeepEqual(a.Configs, b.Configs) && reflect.DeepEqual(a.Deployment, b.Deployment)
}

// setOf is the provenance id of the set of an object rendered as digest
// that names said: SetID for the render of now; else the set it names, if
// it is one an object can be on (Current or Latest: a name edited to
// another set is not taken); else its digest (written before objects
// named their set, when ids were digests).
func setOf(o Observed, digest, said string) string {
	switch {
	case digest == "":
		return ""
	case digest == o.Digest:
		return SetID(o)
	case said != "" && (isCurrent(o.PrevProvenance, said) || isLatest(o.PrevProvenance, said)):
		return said
	}
	return digest
}

// isLatest reports whether set id is p's Latest.
func isLatest(p *st.Provenance, id string) bool {
	return p != nil && p.Latest != nil && p.Latest.Digest == id
}

// isCurrent reports whether set id is p's Current.
func isCurrent(p *st.Provenance, id string) bool {
	return p != nil && p.Current != nil && p.Current.Digest == id
}

// goodDigest is the applied digest the step's published outputs came from
// ("": none succeeded that the step knows of).
func (ob Observation) goodDigest(o Observed) string {
	switch {
	case ob.Gated:
		return ob.State.GoodDigest
	case LifecycleOf(o.Spec).Runs:
		return ob.runDigest
	case ob.appliedOutcome == health.Succeeded && ob.out != nil:
		return ob.applied
	}
	return ""
}

// goodSet is the provenance id of goodDigest's set.
func (ob Observation) goodSet(o Observed) string {
	good := ob.goodDigest(o)
	switch {
	case good == "":
		return ""
	case good == ob.applied:
		return setOf(o, good, ob.appliedSaid)
	case good == ob.runDigest:
		return setOf(o, good, ob.runSaid)
	case good == o.State.GoodDigest && o.PrevProvenance != nil && o.PrevProvenance.Current != nil:
		// An older render whose outputs still stand (a gated step's, while
		// its object works on a newer set): Current already records it.
		return o.PrevProvenance.Current.Digest
	}
	return setOf(o, good, "")
}

// NextProvenance is the step's provenance after this decision, from the
// previous one (o.PrevProvenance; nil: none yet). A set the step no longer knows the values
// of (it was taken before provenance was recorded) keeps its id only.
// Current, Latest and Held are distinct sets.
func NextProvenance(o Observed, ob Observation) *st.Provenance {
	prev, now := o.PrevProvenance, metav1.NewTime(o.Now)
	rendered := SetID(o)
	known := func(id string) st.InputSet {
		for _, s := range prev.Sets() {
			if s.Digest == id {
				return *s
			}
		}
		if id == rendered {
			in := o.Inputs
			in.Digest, in.TakenAt, in.EndedAt, in.Outcome = id, &now, nil, ""
			return in
		}
		return st.InputSet{Digest: id}
	}
	end := func(s st.InputSet, outcome string) *st.InputSet {
		if s.Outcome != outcome || s.EndedAt == nil {
			s.Outcome, s.EndedAt = outcome, &now
		}
		return &s
	}
	next := &st.Provenance{}
	good := ob.goodDigest(o)
	switch id := ob.goodSet(o); {
	case id != "":
		next.Current = end(known(id), st.OutcomeSucceeded)
	case prev != nil && prev.Current != nil:
		c := *prev.Current // outputs still the last success's (or none)
		next.Current = &c
	}
	// A set that succeeded stays so: its object turning unhealthy later
	// (an ungated step's Healthy flapping, a gated one's external state),
	// or a re-render of it failing, is the step's condition, not a new end
	// of the set.
	if a := ob.applied; a != "" && a != good {
		if id := setOf(o, a, ob.appliedSaid); !isCurrent(next, id) {
			s := known(id)
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
	}
	if ob.Held && ob.HeldDigest != "" && ob.HeldDigest != ob.applied && ob.HeldDigest != good {
		if id := setOf(o, ob.HeldDigest, ""); !isCurrent(next, id) && (next.Latest == nil || next.Latest.Digest != id) {
			s := known(id)
			s.Outcome, s.EndedAt = st.OutcomeHeld, nil
			next.Held = &s
		}
	}
	if next.Current == nil && next.Latest == nil && next.Held == nil {
		return nil
	}
	return next
}

// RecordProvenance writes the step's provenance after decision ob into res,
// from the step's previous status.
func RecordProvenance(o Observed, ob Observation, res *st.Resource) {
	res.Provenance = NextProvenance(o, ob)
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
