// Package history keeps, per owner, how its last input revisions fared at
// each step: admitted (taken), succeeded, failed with the step's reason,
// superseded, served by a shadow. Each step's provenance (status) holds at
// most three input sets and forgets older ones; the history remembers the
// last N revisions, outside the owner (a ConfigMap next to it, store.go),
// so the owner does not grow.
//
// The deciding half is pure: Events says what ended between the status an
// owner had and the one written (nothing when nothing changed, so a
// restart writes nothing), Apply folds events into a History, View adds
// what is in flight for people to read.
package history

import (
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	st "kontinue.dev/kontinue/reconciler/status"
)

// DefaultRevisions is how many revisions are kept per owner unless
// configured.
const DefaultRevisions = 10

// MessageLimit bounds a failure's message in a cell.
const MessageLimit = 256

// History is the revisions of one owner, newest first.
type History struct {
	Revisions []Revision `json:"revisions"`
}

// Revision is one input revision of the owner: what the chain's first
// steps published (a source's url@revision, an image, a config), as every
// later step's provenance traces back to it.
type Revision struct {
	// Roots identify the revision: one per first step it came from.
	Roots []Root `json:"roots"`
	// Since is when the revision was first seen (the earliest takenAt).
	Since *metav1.Time `json:"since,omitempty"`
	// Generation is the owner's generation when a step first took the
	// revision: what orders revisions seen in the same second.
	Generation int64  `json:"generation,omitempty"`
	Steps      []Cell `json:"steps"`
}

// Root is what one first step published: Key is the step and a short hash
// of its output digests (stable across steps), Label what people read.
type Root struct {
	Key   string `json:"key"`
	Label string `json:"label"`
}

// Cell is how one step fared with the revision: the input set it took
// (digest), when it took it and when it ended, how.
type Cell struct {
	Step    string       `json:"step"`
	Digest  string       `json:"digest,omitempty"`
	Outcome string       `json:"outcome"` // Succeeded, Failed, Superseded; View adds Held, Processing
	TakenAt *metav1.Time `json:"takenAt,omitempty"`
	EndedAt *metav1.Time `json:"endedAt,omitempty"`
	// Reason and Message: the step's Ready (else Healthy) condition when
	// the set failed.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Shadowed: the step's outputs were served by the shadow of the last
	// good set while this one failed.
	Shadowed bool `json:"shadowed,omitempty"`
	// Out is a short hash of the outputs the set published (Succeeded):
	// how a later step's input is traced to this row once the step has
	// moved on.
	Out string `json:"out,omitempty"`
}

// Key is the revision's identity: its roots' keys.
func (r *Revision) Key() string {
	keys := make([]string, len(r.Roots))
	for i, x := range r.Roots {
		keys[i] = x.Key
	}
	return strings.Join(keys, ",")
}

// Label is the revision as people read it.
func (r *Revision) Label() string {
	labels := make([]string, len(r.Roots))
	for i, x := range r.Roots {
		labels[i] = x.Label
	}
	return strings.Join(labels, " + ")
}

// Cell is the step's cell, or nil.
func (r *Revision) Cell(step string) *Cell {
	for i := range r.Steps {
		if r.Steps[i].Step == step {
			return &r.Steps[i]
		}
	}
	return nil
}

// Apply folds events into h and keeps the newest limit revisions.
// changed is false when h is the same afterwards.
func Apply(h History, events []Event, limit int) (History, bool) {
	out := History{Revisions: make([]Revision, len(h.Revisions))}
	for i, r := range h.Revisions {
		out.Revisions[i] = Revision{Roots: r.Roots, Since: r.Since, Generation: r.Generation, Steps: append([]Cell(nil), r.Steps...)}
	}
	changed := false
	var order []st.Resource
	for _, e := range events {
		if len(e.In) > len(order) {
			order = e.In
		}
		// A first step's set may publish many revisions (a source
		// controller's commits): its row is its outputs, not its digest.
		var row *Revision
		if len(linksOf(&e.Set)) > 0 {
			row = out.rowOf(e.Step, e.Set.Digest)
		}
		if row == nil {
			roots := out.walk(e.In).roots(e.Step, &e.Set, 0)
			row = out.rowByKey(roots)
			if row == nil {
				out.Revisions = append(out.Revisions, Revision{Roots: roots})
				row = &out.Revisions[len(out.Revisions)-1]
				changed = true
			}
		}
		c := cellOf(e)
		if old := row.Cell(e.Step); old != nil {
			if old.Digest == c.Digest && old.Outcome == c.Outcome && old.Shadowed == c.Shadowed {
				continue
			}
			*old = c
		} else {
			row.Steps = append(row.Steps, c)
		}
		if g := e.Set.OwnerGeneration; g > 0 && (row.Generation == 0 || g < row.Generation) {
			row.Generation = g
		}
		if t := c.TakenAt; t != nil && (row.Since == nil || t.Before(row.Since)) {
			row.Since = t.DeepCopy()
		} else if row.Since == nil && c.EndedAt != nil {
			row.Since = c.EndedAt.DeepCopy()
		}
		changed = true
	}
	for i := range out.Revisions {
		sortCells(out.Revisions[i].Steps, order)
	}
	sort.SliceStable(out.Revisions, func(i, j int) bool {
		a, b := out.Revisions[i].Since, out.Revisions[j].Since
		if a == nil || b == nil {
			return a != nil
		}
		if a.Equal(b) {
			return out.Revisions[i].Generation > out.Revisions[j].Generation
		}
		return b.Before(a)
	})
	if limit > 0 && len(out.Revisions) > limit {
		out.Revisions = out.Revisions[:limit]
		changed = true
	}
	return out, changed
}

// View is h with what next's provenance shows now (the sets still there:
// current, failed, in flight): what people read. Nothing of it is
// written.
func View(h History, next []st.Resource, limit int) History {
	v, _ := Apply(h, Live(next), limit)
	return v
}

func cellOf(e Event) Cell {
	c := Cell{Step: e.Step, Digest: e.Set.Digest, Outcome: e.Set.Outcome, TakenAt: e.Set.TakenAt, EndedAt: e.EndedAt,
		Reason: e.Reason, Message: cut(e.Message), Shadowed: e.Shadowed, Out: e.Out}
	if e.Outcome != "" {
		c.Outcome = e.Outcome
	}
	return c
}

func (h *History) rowOf(step, digest string) *Revision {
	for i := range h.Revisions {
		if c := h.Revisions[i].Cell(step); c != nil && c.Digest == digest && digest != "" {
			return &h.Revisions[i]
		}
	}
	return nil
}

func (h *History) rowByKey(roots []Root) *Revision {
	key := (&Revision{Roots: roots}).Key()
	for i := range h.Revisions {
		if h.Revisions[i].Key() == key {
			return &h.Revisions[i]
		}
	}
	return nil
}

// rowOut is the row where step published outputs out.
func (h *History) rowOut(step, out string) *Revision {
	for i := range h.Revisions {
		if c := h.Revisions[i].Cell(step); c != nil && c.Out == out && out != "" {
			return &h.Revisions[i]
		}
	}
	return nil
}

// sortCells orders a row's cells as the chain's steps are (next), unknown
// steps last by name.
func sortCells(cells []Cell, next []st.Resource) {
	rank := map[string]int{}
	for i, r := range next {
		rank[r.Name] = i + 1
	}
	sort.SliceStable(cells, func(i, j int) bool {
		ri, rj := rank[cells[i].Step], rank[cells[j].Step]
		if ri == 0 || rj == 0 {
			if ri == rj {
				return cells[i].Step < cells[j].Step
			}
			return ri != 0
		}
		return ri < rj
	})
}
