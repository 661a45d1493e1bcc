package stamp

// The write protocol of a stamped object, decided in one place. Put (in
// session.go) only carries out what Decide says, one step at a time, and
// comes back with what it found: Decide is pure, and table-tested with
// every case (decide_test.go).

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/failure"
)

// Seen is what is known of the object at desired's name when Put decides.
type Seen struct {
	// Live is the object of that name (nil: none known).
	Live *unstructured.Unstructured
	// Whole: Live was read from the API server as the writing account,
	// with its managedFields, not taken from the cache.
	Whole bool
	// Err: reading the object as the writing account failed (Live is nil
	// and says nothing).
	Err error
	// Taken: a create of the name failed because an object holds it.
	Taken bool
}

// Action is what Put does next.
type Action int

// Actions.
const (
	// Create the object: none is known at its name. A create cannot take
	// over anything: a name taken meanwhile fails (AlreadyExists), and the
	// object is read and decided on.
	Create Action = iota
	// Read the object as the writing account, whole, and decide again.
	Read
	// Apply desired over the object seen, which is proven the claimant's,
	// with its UID as a precondition: the API server refuses the apply if
	// the name now holds another object, or none.
	Apply
	// Keep: the object seen, proven the claimant's, holds desired already:
	// nothing is written.
	Keep
	// Refuse: nothing is written; Decision.Err says why.
	Refuse
)

func (a Action) String() string {
	return [...]string{"create", "read", "apply", "keep", "refuse"}[a]
}

// Decision is what Decide says.
type Decision struct {
	Action Action
	// HandOver (Apply): hand the fields of Kontinue's create to its apply
	// entry first (UpgradeFields), so that a field desired leaves out is
	// removed, not kept by the create's entry.
	HandOver bool
	// Quiet (Apply): the write only relabels the object into this
	// replica's shard (shard.go): no news to the step, no event.
	Quiet bool
	// Err (Refuse): a *failure.Error. NotOwned: the object is not the
	// claimant's, or cannot be read to prove it is; only its removal, a
	// hand over (AdoptBy) or a right to read it helps. Transient: reading
	// it failed for a passing reason; retried.
	Err error
}

// Decide decides the next step of writing desired as c, from what is seen
// at its name. An object is written only once it is read and proven c's:
// an object that could not be read is never written (a Forbidden read
// refuses, any other failure is retried), whatever the create said.
func Decide(desired *unstructured.Unstructured, seen Seen, c Claimant) Decision {
	what := fmt.Sprintf("%s [%s/%s]", desired.GetKind(), desired.GetNamespace(), desired.GetName())
	switch {
	case seen.Err != nil && failure.Classify(seen.Err) == failure.Forbidden:
		return Decision{Action: Refuse, Err: &failure.Error{Class: failure.NotOwned, Err: fmt.Errorf(
			"%s exists, and the service account may not read it: Kontinue cannot prove it is this %s's, so it does not write it (%w)",
			what, c.Kind, seen.Err)}}
	case seen.Err != nil:
		return Decision{Action: Refuse, Err: &failure.Error{Class: failure.Transient, Err: fmt.Errorf(
			"unable to read %s to prove it is this %s's; nothing was written, retrying: %w", what, c.Kind, seen.Err)}}
	case seen.Live == nil:
		// Nothing there, or gone since a create found the name taken.
		return Decision{Action: Create}
	}
	if err := claim(seen.Live, c); err != nil {
		var held *HeldByStep
		if !seen.Whole && !errors.As(err, &held) {
			// Refused on the cache's copy: confirm on the API server's. The
			// change that frees the name (a hand over, a controller
			// reference removed) wakes the owner through the watch of that
			// one object (owner/write.go, refused), which can deliver it
			// before the cache of stamped objects has it; a refusal decided
			// on that cache would stand with nothing left to wake the owner
			// (robustness seed 103). Another step's hold comes and goes
			// through the same cache it is read from.
			return Decision{Action: Read}
		}
		return Decision{Action: Refuse, Err: &failure.Error{Class: failure.NotOwned, Err: err}}
	}
	switch {
	case upToDate(desired, seen.Live):
		return Decision{Action: Keep}
	case HandOver(desired, seen.Live) && !seen.Whole:
		// The cache's copy has no managedFields to hand over.
		return Decision{Action: Read}
	}
	return Decision{Action: Apply, HandOver: HandOver(desired, seen.Live), Quiet: movedOnly(desired, seen.Live)}
}
