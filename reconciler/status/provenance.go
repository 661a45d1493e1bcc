package status

import (
	"encoding/json"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Provenance (Kontinue) says, for one step, which input values produced its
// outputs and which newer ones it works on or holds, with when it took each
// set and when that set succeeded or failed. Digests alone cannot answer
// "which commit made what is running"; values can, and they are small: a
// config is recorded by its digest (the one its step's outputs[].digest
// shows), every other value is cut to ValueLimit.
type Provenance struct {
	// The input set that produced the step's outputs (its last success).
	Current *InputSet `json:"current,omitempty"`
	// The input set on the stamped object (or its newest run) that has not
	// succeeded: Processing or Failed.
	Latest *InputSet `json:"latest,omitempty"` // absent when it is Current
	// The newer input set the step holds until its object finished with
	// latest.
	Held *InputSet `json:"held,omitempty"` // InputsHeld
}

// Outcomes of an input set.
const (
	OutcomeHeld       = "Held"
	OutcomeProcessing = "Processing"
	OutcomeSucceeded  = "Succeeded"
	OutcomeFailed     = "Failed"
)

// One input set of a step: the values it was rendered from and its times.
type InputSet struct {
	// The input set's digest (the step's inputDigest when it produced the
	// outputs).
	Digest string `json:"digest"` // the applied digest of its first render: a re-render of the same values for the same owner generation is the same set
	// The owner's metadata.generation when the step took the set.
	OwnerGeneration int64 `json:"ownerGeneration,omitempty"` // what the owner's spec (its source, its params) was
	// Source inputs, by their name in the step and the earlier step
	// (resource) they came from.
	Sources []SourceValue `json:"sources,omitempty"`
	// Image inputs.
	Images []ImageValue `json:"images,omitempty"`
	// Config inputs, by the digest their step's outputs show.
	Configs []ConfigValue `json:"configs,omitempty"`
	// A delivery step's deployment input (url, revision); its name is
	// always deployment.
	Deployment *SourceValue `json:"deployment,omitempty"`
	// When the step first rendered the set.
	TakenAt *metav1.Time `json:"takenAt,omitempty"` // nil: before Kontinue recorded provenance
	// When the step saw the set succeed or fail.
	EndedAt *metav1.Time `json:"endedAt,omitempty"`
	// What became of the set.
	// +kubebuilder:validation:Enum=Held;Processing;Succeeded;Failed
	Outcome string `json:"outcome"`
}

// A source (or deployment) input: the earlier step it came from (resource)
// under its name in this step.
type SourceValue struct {
	// The input's name in the step.
	Name string `json:"name"`
	// The earlier step it came from.
	Resource string `json:"resource"`
	// The source's url (cut to 512 characters).
	URL string `json:"url,omitempty"`
	// The source's revision (cut to 512 characters).
	Revision string `json:"revision,omitempty"`
}

// An image input.
type ImageValue struct {
	// The input's name in the step.
	Name string `json:"name"`
	// The earlier step it came from.
	Resource string `json:"resource"`
	// The image (cut to 512 characters).
	Image string `json:"image,omitempty"`
}

// A config input by its digest. Configs are whole manifests, too large to
// repeat per step, and the digest is the one the earlier step's
// outputs[config].digest shows (Preview), which proves the link.
type ConfigValue struct {
	// The input's name in the step.
	Name string `json:"name"`
	// The earlier step it came from.
	Resource string `json:"resource"`
	// SHA-256 of the config as YAML.
	Digest string `json:"digest"`
}

// ValueLimit bounds one recorded value (a URL, a revision, an image).
const ValueLimit = 512

// Value renders an input value for provenance: a string as it is, anything
// else as compact JSON; cut to ValueLimit with TruncatedMarker.
func Value(v any) string {
	s, ok := v.(string)
	if !ok {
		if v == nil {
			return ""
		}
		b, err := json.Marshal(v)
		if err != nil {
			return "<unprintable>"
		}
		s = string(b)
	}
	if len(s) <= ValueLimit {
		return s
	}
	cut := ValueLimit - len(TruncatedMarker)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + TruncatedMarker
}

// ConfigDigest is the digest of a config value, as its step's outputs show it.
func ConfigDigest(v any) string {
	_, d := Preview(v)
	return d
}

// Sets are the input sets of p, Current first.
func (p *Provenance) Sets() []*InputSet {
	if p == nil {
		return nil
	}
	var out []*InputSet
	for _, s := range []*InputSet{p.Current, p.Latest, p.Held} {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

// Transition is something that happened to one input set of a step between
// two statuses: what lead time metrics count.
type Transition struct {
	Step    string
	Outcome string // Succeeded, Failed, or Superseded
	// LeadTime is from TakenAt to EndedAt (Succeeded only), in whole
	// seconds as status times are; negative when TakenAt is unknown.
	LeadTime time.Duration
}

// OutcomeSuperseded: a set that neither succeeded nor failed was replaced
// by a newer one.
const OutcomeSuperseded = "Superseded"

// Transitions compares the provenance of each step in prev and next (the
// status before and after a write) and says which input sets succeeded,
// failed or were superseded in between. A status written again unchanged
// yields none, so counting after each write counts each set once.
func Transitions(prev, next []Resource) []Transition {
	var out []Transition
	for _, r := range next {
		var before *Provenance
		for i := range prev {
			if prev[i].Name == r.Name {
				before = prev[i].Provenance
			}
		}
		out = append(out, stepTransitions(r.Name, before, r.Provenance)...)
	}
	return out
}

func stepTransitions(step string, prev, next *Provenance) []Transition {
	if next == nil {
		return nil
	}
	var out []Transition
	was := map[string]*InputSet{}
	for _, s := range prev.Sets() {
		was[s.Digest] = s
	}
	now := map[string]bool{}
	for _, s := range next.Sets() {
		now[s.Digest] = true
		old := was[s.Digest]
		if s.EndedAt == nil || (old != nil && old.Outcome == s.Outcome) {
			continue
		}
		switch s.Outcome {
		case OutcomeSucceeded:
			t := Transition{Step: step, Outcome: OutcomeSucceeded, LeadTime: -1}
			if s.TakenAt != nil && !s.EndedAt.Before(s.TakenAt) {
				t.LeadTime = s.EndedAt.Sub(s.TakenAt.Time)
			}
			out = append(out, t)
		case OutcomeFailed:
			out = append(out, Transition{Step: step, Outcome: OutcomeFailed})
		}
	}
	for _, s := range prev.Sets() {
		if !now[s.Digest] && (s.Outcome == OutcomeHeld || s.Outcome == OutcomeProcessing) {
			out = append(out, Transition{Step: step, Outcome: OutcomeSuperseded})
		}
	}
	return out
}

// Publishes reports whether step r publishes value as its output name now:
// by the output's digest (Preview), exact for string values (a value
// recorded as JSON, not a string, never matches).
func (r *Resource) Publishes(name, value string) bool {
	for _, o := range r.Outputs {
		if o.Name == name {
			_, d := Preview(value)
			return o.Digest == d
		}
	}
	return false
}

// ChainLeadTimes are, for each step no later step reads whose current
// input set succeeded between prev and next, the time from its source to
// that success: from when the chain's first steps published the outputs
// it was made from (their outputs' lastTransitionTime: a source step's new
// revision) to the end of the set. Only chains whose every link is proven
// count: each input of each current set is what its step publishes now; a
// chain where an earlier step has moved on already says nothing.
func ChainLeadTimes(prev, next []Resource) []time.Duration {
	read := map[string]bool{}
	byName := map[string]*Resource{}
	for i := range next {
		byName[next[i].Name] = &next[i]
		for _, in := range next[i].Inputs {
			read[in.Name] = true
		}
	}
	succeeded := map[string]bool{}
	for _, t := range Transitions(prev, next) {
		if t.Outcome == OutcomeSucceeded {
			succeeded[t.Step] = true
		}
	}
	var out []time.Duration
	for i := range next {
		r := &next[i]
		if read[r.Name] || !succeeded[r.Name] || len(r.Inputs) == 0 || r.Provenance == nil || r.Provenance.Current == nil {
			continue
		}
		c := r.Provenance.Current
		start, ok := origin(byName, r.Name)
		if ok && c.EndedAt != nil && !c.EndedAt.Time.Before(start) {
			out = append(out, c.EndedAt.Sub(start))
		}
	}
	return out
}

// origin is when the outputs step's current set was made from appeared at
// the chain's first steps (the earliest of them), if every link is proven.
// Steps read only earlier steps (prepare refuses others): no cycle.
func origin(steps map[string]*Resource, step string) (time.Time, bool) {
	r := steps[step]
	if r == nil || r.Provenance == nil || r.Provenance.Current == nil {
		return time.Time{}, false
	}
	c := r.Provenance.Current
	type link struct{ step, name, value string }
	var links []link
	for _, s := range c.Sources {
		links = append(links, link{s.Resource, "url", s.URL}, link{s.Resource, "revision", s.Revision})
	}
	for _, i := range c.Images {
		links = append(links, link{i.Resource, "image", i.Image})
	}
	if d := c.Deployment; d != nil {
		links = append(links, link{d.Resource, "url", d.URL}, link{d.Resource, "revision", d.Revision})
	}
	if len(links) == 0 && len(c.Configs) == 0 {
		// A first step: its outputs appeared when the last of them changed.
		var at time.Time
		for _, o := range r.Outputs {
			if o.LastTransitionTime.After(at) {
				at = o.LastTransitionTime.Time
			}
		}
		if at.IsZero() && c.TakenAt != nil {
			at = c.TakenAt.Time
		}
		return at, !at.IsZero()
	}
	var start time.Time
	earliest := func(t time.Time) {
		if start.IsZero() || t.Before(start) {
			start = t
		}
	}
	for _, l := range links {
		u := steps[l.step]
		if u == nil || !u.Publishes(l.name, l.value) {
			return time.Time{}, false
		}
		t, ok := origin(steps, l.step)
		if !ok {
			return time.Time{}, false
		}
		earliest(t)
	}
	for _, cf := range c.Configs {
		u := steps[cf.Resource]
		if u == nil {
			return time.Time{}, false
		}
		found := false
		for _, o := range u.Outputs {
			found = found || (o.Name == "config" && o.Digest == cf.Digest)
		}
		if !found {
			return time.Time{}, false
		}
		t, ok := origin(steps, cf.Resource)
		if !ok {
			return time.Time{}, false
		}
		earliest(t)
	}
	return start, true
}
