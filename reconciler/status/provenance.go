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
	// Current produced the step's outputs now (its last success).
	Current *InputSet `json:"current,omitempty"`
	// Latest is on the stamped object (or its newest run) and has not
	// succeeded: Processing or Failed. Absent when it is Current.
	Latest *InputSet `json:"latest,omitempty"`
	// Held waits until the object finished with Latest (InputsHeld).
	Held *InputSet `json:"held,omitempty"`
}

// Outcomes of an input set.
const (
	OutcomeHeld       = "Held"
	OutcomeProcessing = "Processing"
	OutcomeSucceeded  = "Succeeded"
	OutcomeFailed     = "Failed"
)

// InputSet is one input set of a step: its digest (the step's inputDigest
// when it is Current), the values it was rendered from, and its times.
type InputSet struct {
	Digest string `json:"digest"`
	// OwnerGeneration is the owner's generation when the step took the
	// set: what the owner's spec (its source, its params) was.
	OwnerGeneration int64         `json:"ownerGeneration,omitempty"`
	Sources         []SourceValue `json:"sources,omitempty"`
	Images          []ImageValue  `json:"images,omitempty"`
	Configs         []ConfigValue `json:"configs,omitempty"`
	Deployment      *SourceValue  `json:"deployment,omitempty"`
	// TakenAt is when the step first rendered this set (nil: before
	// Kontinue recorded provenance).
	TakenAt *metav1.Time `json:"takenAt,omitempty"`
	// EndedAt is when the step saw it succeed or fail.
	EndedAt *metav1.Time `json:"endedAt,omitempty"`
	Outcome string       `json:"outcome"`
}

// SourceValue is a source (or deployment) input: the earlier step it came
// from (resource) under its name in this step.
type SourceValue struct {
	Name     string `json:"name"`
	Resource string `json:"resource"`
	URL      string `json:"url,omitempty"`
	Revision string `json:"revision,omitempty"`
}

// ImageValue is an image input.
type ImageValue struct {
	Name     string `json:"name"`
	Resource string `json:"resource"`
	Image    string `json:"image,omitempty"`
}

// ConfigValue is a config input by its digest: configs are whole manifests,
// too large to repeat per step, and the digest is the one the earlier
// step's outputs[config].digest shows (Preview), which proves the link.
type ConfigValue struct {
	Name     string `json:"name"`
	Resource string `json:"resource"`
	Digest   string `json:"digest"`
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
