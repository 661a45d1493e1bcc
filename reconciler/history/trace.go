package history

// Tracing an input set back to the revision it came from: the roots its
// chain's first steps published, through the steps it read from.

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strconv"
	"strings"

	st "kontinue.dev/kontinue/reconciler/status"
)

// RevisionOf is the revision a step's input set came from, traced through
// the steps' statuses in (without a history: a set whose upstream step has
// moved on is named by the values it took).
func RevisionOf(in []st.Resource, step string, set *st.InputSet) Revision {
	return Revision{Roots: (&History{}).walk(in).roots(step, set, 0)}
}

// Proven reports whether every root of r is what a first step published
// (step@hash): not a first step's set that published nothing (step#...),
// nor an input traced no further than its own values (step?hash).
func (r *Revision) Proven() bool {
	if len(r.Roots) == 0 {
		return false
	}
	for _, x := range r.Roots {
		n := len(x.Key)
		if n < hashLen+1 || x.Key[n-hashLen-1] != '@' || !isLowerHex(x.Key[n-hashLen:]) {
			return false
		}
	}
	return true
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
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
	return hex.EncodeToString(h[:hashLen/2])
}

// hashLen is the length of hashOf's hex.
const hashLen = 12

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
