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
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

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

// maxDepth bounds the walk back (steps read only earlier steps: no cycle,
// but a status is input).
const maxDepth = 64

// walk traces input sets back to their roots (roots) through the statuses
// next and the history h. memo keeps each step's set once traced: steps
// that share upstream steps (each reading the two before it) would walk
// them again and again, exponential in the chain's length. One walk lives
// for one event, as h may gain rows between events.
type walk struct {
	h      *History
	next   []st.Resource
	memo   map[string][]Root
	visits int // sets traced (tests)
}

func (h *History) walk(next []st.Resource) *walk {
	return &walk{h: h, next: next, memo: map[string][]Root{}}
}

// roots traces a step's input set back to what the chain's first steps
// published: through each input's step while it still publishes what the
// set took, else through the history's record of who published it.
func (w *walk) roots(step string, set *st.InputSet, depth int) []Root {
	key := step + "\x00" + set.Digest
	if r, ok := w.memo[key]; ok {
		return r
	}
	r := w.trace(step, set, depth)
	w.memo[key] = r
	return r
}

func (w *walk) trace(step string, set *st.InputSet, depth int) []Root {
	w.visits++
	links := linksOf(set)
	if r := w.h.rowOf(step, set.Digest); r != nil && len(links) > 0 {
		return r.Roots
	}
	r := find(w.next, step)
	if len(links) == 0 {
		// A first step: its outputs, once this set is what it publishes.
		if c := current(r); c != nil && c.Digest == set.Digest && outHash(r.Outputs) != "" {
			return []Root{{Key: step + "@" + outHash(r.Outputs), Label: outLabel(r.Outputs)}}
		}
		return []Root{{Key: step + "#" + strconv.FormatInt(set.OwnerGeneration, 10) + ":" + short(set.Digest),
			Label: "generation " + strconv.FormatInt(set.OwnerGeneration, 10)}}
	}
	var out []Root
	for _, l := range links {
		u := find(w.next, l.step)
		switch {
		case depth < maxDepth && u != nil && len(u.Inputs) == 0:
			out = append(out, Root{Key: l.step + "@" + l.hash, Label: l.label})
		case depth < maxDepth && current(u) != nil && outHash(u.Outputs) == l.hash:
			out = append(out, w.roots(l.step, current(u), depth+1)...)
		default:
			if row := w.h.rowOut(l.step, l.hash); row != nil {
				out = append(out, row.Roots...)
			} else {
				out = append(out, Root{Key: l.step + "?" + l.hash, Label: l.label})
			}
		}
	}
	return dedupe(out)
}

type link struct{ step, hash, label string }

// linksOf are a set's inputs: the step each came from, a hash of the
// output digests it took (as outHash of that step's outputs), a label.
func linksOf(s *st.InputSet) []link {
	var out []link
	src := func(v st.SourceValue) {
		out = append(out, link{v.Resource, hashOf(digest(v.URL), digest(v.Revision)), sourceLabel(v.URL, v.Revision)})
	}
	for _, v := range s.Sources {
		src(v)
	}
	if s.Deployment != nil {
		src(*s.Deployment)
	}
	for _, v := range s.Images {
		out = append(out, link{v.Resource, hashOf(digest(v.Image)), v.Image})
	}
	for _, v := range s.Configs {
		out = append(out, link{v.Resource, hashOf(v.Digest), "config " + short(v.Digest)})
	}
	return out
}

func sourceLabel(url, revision string) string {
	switch {
	case revision == "":
		return url
	case url == "":
		return revision
	}
	return url + "@" + revision
}

func digest(v string) string {
	_, d := st.Preview(v)
	return d
}

// hashOf is a short hash of output digests, in Cartographer's output order.
func hashOf(digests ...string) string {
	h := sha256.Sum256([]byte(strings.Join(digests, ",")))
	return hex.EncodeToString(h[:6])
}

// outHash is hashOf a step's outputs ("" when it has none).
func outHash(outs []st.Output) string {
	if len(outs) == 0 {
		return ""
	}
	ds := make([]string, len(outs))
	for i, o := range outs {
		ds[i] = o.Digest
	}
	return hashOf(ds...)
}

// outLabel names a first step's outputs: url@revision, an image, a config.
func outLabel(outs []st.Output) string {
	vals := map[string]string{}
	for _, o := range outs {
		vals[o.Name] = firstLine(o.Preview)
	}
	switch {
	case vals["url"] != "" || vals["revision"] != "":
		return sourceLabel(vals["url"], vals["revision"])
	case vals["image"] != "":
		return vals["image"]
	}
	for _, o := range outs {
		if o.Name == "config" {
			return "config " + short(o.Digest)
		}
	}
	var parts []string
	for _, o := range outs {
		parts = append(parts, o.Name+"="+firstLine(o.Preview))
	}
	return strings.Join(parts, " ")
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// short is a digest's first 12 hex characters.
func short(d string) string {
	d = strings.TrimPrefix(d, "sha256:")
	if len(d) > 12 {
		return d[:12]
	}
	return d
}

func dedupe(roots []Root) []Root {
	sort.Slice(roots, func(i, j int) bool { return roots[i].Key < roots[j].Key })
	out := roots[:0]
	for i, r := range roots {
		if i == 0 || r.Key != roots[i-1].Key {
			out = append(out, r)
		}
	}
	return out
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

// RevisionOf is the revision a step's input set came from, traced through
// the steps' statuses in (without a history: a set whose upstream step has
// moved on is named by the values it took).
func RevisionOf(in []st.Resource, step string, set *st.InputSet) Revision {
	return Revision{Roots: (&History{}).walk(in).roots(step, set, 0)}
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
