package dora

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kontinue.dev/kontinue/reconciler/history"
	st "kontinue.dev/kontinue/reconciler/status"
)

// Observer finds the deployments an owner's status write shows (for the
// metrics, as they happen). It remembers, per owner, when its
// deployments began to fail, so that a time to restore spans failures
// whose sets have left the status since; an owner it knows nothing of (a
// restart) starts its failures at the failed sets its last status shows.
// At most Max owners are remembered (the oldest failures go first).
type Observer struct {
	mu      sync.Mutex
	failing map[string]time.Time
	// Max bounds the owners remembered as failing (DefaultMaxFailing).
	Max int
}

// DefaultMaxFailing is how many failing owners an Observer remembers.
const DefaultMaxFailing = 100000

// NewObserver remembers up to DefaultMaxFailing failing owners.
func NewObserver() *Observer {
	return &Observer{failing: map[string]time.Time{}, Max: DefaultMaxFailing}
}

// Observe is the deployments of the owner uid that ended between prev and
// next (its steps' statuses before and after a write), steps being its
// deployment steps; now is when, for sets superseded.
func (o *Observer) Observe(uid string, prev, next []st.Resource, steps map[string]bool, now time.Time) []Deployment {
	var out []Deployment
	seen := map[string]bool{}
	for _, e := range history.Ended(prev, next, now) {
		if !steps[e.Step] || e.Outcome != "" || e.EndedAt == nil {
			continue
		}
		rev := history.RevisionOf(e.In, e.Step, &e.Set)
		key := rev.Key()
		if seen[key] {
			continue
		}
		switch e.Set.Outcome {
		case st.OutcomeFailed:
			if failedBefore(prev, steps, key) {
				continue
			}
			seen[key] = true
			d := Deployment{Revision: key, Label: rev.Label(), At: e.EndedAt.Time, Failed: true, Shadowed: e.Shadowed, Step: e.Step}
			o.fail(uid, d.At)
			out = append(out, d)
		case st.OutcomeSucceeded:
			at, last, ok := deployed(next, steps, key)
			if !ok {
				continue
			}
			seen[key] = true
			d := Deployment{Revision: key, Label: rev.Label(), At: at, Step: last, Lead: -1}
			if t, ok := st.Origin(next, last); ok && !at.Before(t) {
				d.Lead = at.Sub(t)
			}
			if start, ok := o.restored(uid, prev, steps); ok && !at.Before(start) {
				d.Restore = at.Sub(start)
			}
			out = append(out, d)
		}
	}
	return out
}

// Forget drops what is remembered of an owner (deleted).
func (o *Observer) Forget(uid string) {
	o.mu.Lock()
	delete(o.failing, uid)
	o.mu.Unlock()
}

func (o *Observer) fail(uid string, at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.failing[uid]; ok {
		return
	}
	if o.Max > 0 && len(o.failing) >= o.Max {
		oldest, first := "", time.Time{}
		for k, t := range o.failing {
			if oldest == "" || t.Before(first) {
				oldest, first = k, t
			}
		}
		delete(o.failing, oldest)
	}
	o.failing[uid] = at
}

// restored is when the owner's failures began, if it was failing: what
// the Observer remembers, else the earliest failed set of a deployment
// step its previous status shows, or the step's Ready False since.
func (o *Observer) restored(uid string, prev []st.Resource, steps map[string]bool) (time.Time, bool) {
	o.mu.Lock()
	t, ok := o.failing[uid]
	delete(o.failing, uid)
	o.mu.Unlock()
	if ok {
		return t, true
	}
	for i := range prev {
		r := &prev[i]
		if !steps[r.Name] || r.Provenance == nil {
			continue
		}
		if l := r.Provenance.Latest; l != nil && l.Outcome == st.OutcomeFailed && l.EndedAt != nil && (!ok || l.EndedAt.Time.Before(t)) {
			t, ok = l.EndedAt.Time, true
		}
		// A failed set replaced by a newer one in flight leaves the step
		// not Ready since it failed.
		if c := st.Find(r.Conditions, "Ready"); c != nil && c.Status == metav1.ConditionFalse && !c.LastTransitionTime.IsZero() &&
			(!ok || c.LastTransitionTime.Time.Before(t)) {
			t, ok = c.LastTransitionTime.Time, true
		}
	}
	return t, ok
}

// failedBefore reports whether a deployment step of prev shows a failed
// set of the revision key: its deployment failed already.
func failedBefore(prev []st.Resource, steps map[string]bool, key string) bool {
	for i := range prev {
		r := &prev[i]
		if !steps[r.Name] || r.Provenance == nil {
			continue
		}
		if l := r.Provenance.Latest; l != nil && l.Outcome == st.OutcomeFailed && revKey(prev, r.Name, l) == key {
			return true
		}
	}
	return false
}

// deployed reports whether every deployment step of next succeeded with
// revision key, when the last did, and which.
func deployed(next []st.Resource, steps map[string]bool, key string) (time.Time, string, bool) {
	var at time.Time
	last, found := "", 0
	for i := range next {
		r := &next[i]
		if !steps[r.Name] {
			continue
		}
		found++
		c := (*st.InputSet)(nil)
		if r.Provenance != nil {
			c = r.Provenance.Current
		}
		if c == nil || c.Outcome != st.OutcomeSucceeded || c.EndedAt == nil || revKey(next, r.Name, c) != key {
			return at, "", false
		}
		if last == "" || c.EndedAt.Time.After(at) {
			at, last = c.EndedAt.Time, r.Name
		}
	}
	return at, last, found == len(steps) && found > 0
}

func revKey(in []st.Resource, step string, set *st.InputSet) string {
	r := history.RevisionOf(in, step, set)
	return r.Key()
}
