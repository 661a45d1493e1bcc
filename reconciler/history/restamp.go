package history

import (
	"reflect"

	st "kontinue.dev/kontinue/reconciler/status"
)

// A step's set that succeeded and was replaced by a set of the very same
// input values for the same owner generation was not replaced by a new
// revision: only the definitions changed (a template or chain edit, a
// roll-out's wave). The history is of input revisions, so such a restamp
// is not written: a template edit reaching 5,000 owners would otherwise
// write (and first read) 5,000 history ConfigMaps, doubling the wave's
// writes (make bench -fairness). What the restamp does is still seen: the
// new set's own end is written when it fails or is replaced, and View
// shows the live status.

// restamped reports whether e, a set that left step e.Step, was replaced
// there by a set of the same input values and owner generation.
func restamped(e Event, next []st.Resource) bool {
	if e.Outcome != "" || e.Set.Outcome != st.OutcomeSucceeded {
		return false // superseded before its end, or failed: the revision's story
	}
	r := find(next, e.Step)
	if r == nil {
		return false
	}
	for _, s := range r.Provenance.Sets() {
		if s.Digest != e.Set.Digest && s.OwnerGeneration == e.Set.OwnerGeneration && sameValues(s, &e.Set) {
			return true
		}
	}
	return false
}

// sameValues reports whether a and b took the same input values.
func sameValues(a, b *st.InputSet) bool {
	return reflect.DeepEqual(a.Sources, b.Sources) && reflect.DeepEqual(a.Images, b.Images) &&
		reflect.DeepEqual(a.Configs, b.Configs) && reflect.DeepEqual(a.Deployment, b.Deployment)
}

// withoutRestamps are events less those that only restamped a revision.
func withoutRestamps(events []Event, next []st.Resource) []Event {
	out := events[:0:0]
	for _, e := range events {
		if !restamped(e, next) {
			out = append(out, e)
		}
	}
	return out
}
