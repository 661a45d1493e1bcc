// Package rollout decides how a change of a chain's own definitions (the
// chain, or a template it uses) reaches its owners when the chain declares
// a roll-out policy (spec.rollout): which revision of the definitions an
// owner renders with, which owners a wave admits, when a wave is done or
// has failed. Everything here is pure; the chain reconciler
// (reconciler/chain/rollout.go) feeds it the cache and writes the status it
// returns, and the owner walk (reconciler/owner/revision.go) only asks
// Choose "which revision do I render with".
//
// The definitions of each revision an owner may still render with are kept
// in the chain's status (Status.Revisions): a content hash names them, and
// they are read back through the same prepare path as the live ones.
package rollout

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kontinue.dev/kontinue/reconciler/api"
)

// Phases of a roll-out.
const (
	PhaseComplete    = "Complete"    // every owner renders with Stable
	PhaseProgressing = "Progressing" // waves admit owners to Target
	PhasePaused      = "Paused"      // kontinue.dev/rollout-paused: no wave advances
	PhaseHalted      = "Halted"      // an admitted owner failed on Target
	PhaseInvalid     = "Invalid"     // the policy or the definitions cannot be used
)

// Status is a chain's status.rollout.
type Status struct {
	// Stable is the revision every owner not admitted renders with; Target
	// the revision being rolled out ("": none).
	Stable string `json:"stable,omitempty"`
	Target string `json:"target,omitempty"`
	// Previous is the stable revision before the last roll-out completed:
	// kept so that `kontinue rollout undo` can restore it.
	Previous string `json:"previous,omitempty"`
	// Wave is the wave being rolled out (0-based): owners of waves
	// 0..Wave are admitted to Target. Waves counts them.
	Wave  int    `json:"wave"`
	Waves int    `json:"waves,omitempty"`
	Phase string `json:"phase,omitempty"`
	// Admitted, Updated: owners admitted to Target, and of them those that
	// render with it and are Ready; Owners: the chain's owners.
	Admitted int `json:"admitted,omitempty"`
	Updated  int `json:"updated,omitempty"`
	Owners   int `json:"owners,omitempty"`
	// Failing names (namespace/name) the admitted owners that failed on
	// Target, at most MaxFailingNames of them.
	Failing []string `json:"failing,omitempty"`
	// PassedOver names (sorted, at most MaxFailingNames) the admitted
	// owners the roll-out does not wait for, since nothing will move them
	// to Target (Stand: their shard is served by no running replica, they
	// are being deleted, or no chain renders them any more); PassedOverCount
	// counts them all. They move to Target when they can. A completed
	// roll-out keeps those of its last wave, until the next begins.
	PassedOver      []PassedOwner `json:"passedOver,omitempty"`
	PassedOverCount int           `json:"passedOverCount,omitempty"`
	// ResumeHandled is the last kontinue.dev/rollout-resume token acted on.
	ResumeHandled string `json:"resumeHandled,omitempty"`
	// Revisions are the definitions of every revision an owner may still
	// render with (Stable, Target, and those owners recorded).
	Revisions []Revision `json:"revisions,omitempty"`
}

// Revision is the chain's spec (less spec.rollout) and the specs of the
// templates it names, under their content hash.
type Revision struct {
	Name      string         `json:"name"`
	Chain     map[string]any `json:"chain"`
	Templates []Template     `json:"templates,omitempty"`
}

// Template is one template of a revision.
type Template struct {
	Kind string         `json:"kind"`
	Name string         `json:"name"`
	Spec map[string]any `json:"spec"`
}

// Find is the revision named name, or nil.
func (s *Status) Find(name string) *Revision {
	if s == nil || name == "" {
		return nil
	}
	for i := range s.Revisions {
		if s.Revisions[i].Name == name {
			return &s.Revisions[i]
		}
	}
	return nil
}

// Snapshot is a revision of the chain spec chain (spec.rollout dropped: the
// policy is not a definition owners render with) and the templates, named
// by its content hash.
func Snapshot(chain map[string]any, templates []Template) Revision {
	c := make(map[string]any, len(chain))
	for k, v := range chain {
		if k != "rollout" {
			c[k] = v
		}
	}
	ts := slices.Clone(templates)
	sort.Slice(ts, func(i, j int) bool {
		return ts[i].Kind+"/"+ts[i].Name < ts[j].Kind+"/"+ts[j].Name
	})
	// encoding/json sorts map keys: the same definitions hash alike.
	b, _ := json.Marshal(struct {
		Chain     map[string]any `json:"chain"`
		Templates []Template     `json:"templates"`
	}{c, ts})
	sum := sha256.Sum256(b)
	return Revision{Name: hex.EncodeToString(sum[:])[:12], Chain: c, Templates: ts}
}

// Choose is the revision an owner renders with: "" for the live
// definitions (no roll-out state yet), else a revision of st. Owners the
// current wave admits render with Target; the others keep the revision
// they recorded while st still holds it, else Stable.
func Choose(c *Compiled, st *Status, o Owner) string {
	if c == nil || st == nil || st.Stable == "" {
		return ""
	}
	if st.Target == "" {
		return st.Stable
	}
	if c.Admitted(st.Wave, o) {
		return st.Target
	}
	if st.Find(o.Revision) != nil {
		return o.Revision
	}
	return st.Stable
}

// Input is what the chain reconciler knows of a chain's roll-out.
type Input struct {
	Policy *Compiled
	Prev   Status
	// Live is the revision of the live definitions; nil when it cannot be
	// taken (a template is missing): the roll-out stays where it is.
	Live   *Revision
	Owners []Owner
	// Paused: kontinue.dev/rollout-paused; Resume: the
	// kontinue.dev/rollout-resume token.
	Paused bool
	Resume string
	// Shard is the shard the deciding replica serves: Owners are every
	// shard's (the decision is the same whoever takes it), Due only this
	// one's (each replica wakes its own).
	Shard string
	// Served are the shards running replicas serve ("" the default shard;
	// Shard among them); nil: not known, every shard name counts as served.
	Served map[string]bool
}

// Output is the next status and what the chain reconciler does with it.
type Output struct {
	Status Status
	// Condition is the chain's RolledOut condition (type, status, reason,
	// message).
	Condition metav1.Condition
	// Due are the owners of Input.Shard that should render with another
	// revision than the one they recorded, under Prev (what the cache
	// shows owners): waking them moves them.
	Due []string
}

// MaxFailingNames bounds the failing owners a status and condition name.
const MaxFailingNames = 10

// ConditionRolledOut is the chain's condition type for its roll-out.
const ConditionRolledOut = "RolledOut"

// Moves reports whether the live definitions (live; nil: unknown) move the
// roll-out prev describes: a first revision adopted, a new target, or the
// stable one live again (an undo). Every replica of every shard decides a
// chain's roll-out, each from its own cache of the templates: a replica
// whose cache is behind the others' would take an older revision for a
// new one and move the roll-out back. So such a move is made only once the
// API server confirms the live revision (reconciler/chain/rollout.go); the
// rest of a decision never moves backward from prev (a wave only grows,
// a halt stays until resumed).
func Moves(prev Status, live *Revision) bool {
	switch {
	case live == nil:
		return false
	case prev.Stable == "":
		return true
	case prev.Stable == live.Name:
		return prev.Target != ""
	}
	return prev.Target != live.Name
}

// Next decides a chain's roll-out from the input.
func Next(in Input) Output {
	s := in.Prev
	s.Waves = in.Policy.Waves()
	s.Failing = nil
	resumed := in.Resume != "" && in.Resume != s.ResumeHandled
	s.ResumeHandled = in.Resume
	out := Output{Due: due(in)}
	switch {
	case in.Live == nil:
		// Nothing to compare with: keep what was decided.
	case s.Stable == "" || s.Stable == in.Live.Name:
		// First sight of the policy (adopt the live definitions), or the
		// live definitions are the stable ones again (an undo): no roll-out.
		if s.Target != "" || s.Stable == "" {
			s.PassedOver, s.PassedOverCount = nil, 0
		}
		s.Stable, s.Target, s.Wave, s.Phase = in.Live.Name, "", 0, PhaseComplete
	case s.Target != in.Live.Name:
		// A new revision: from wave 0, whatever the last one reached.
		s.Target, s.Wave, s.Phase = in.Live.Name, 0, PhaseProgressing
	}
	if in.Live != nil && s.Find(in.Live.Name) == nil {
		s.Revisions = append(s.Revisions, *in.Live)
	}
	s.Owners = len(in.Owners)
	s.Admitted, s.Updated = 0, 0
	if s.Target != "" {
		advance(in, &s, resumed)
	}
	s.Revisions = keep(s, in.Owners)
	out.Status = s
	out.Condition = condition(s)
	return out
}

// advance moves a roll-out in progress on: the current wave's tally, a
// halt, the next wave.
func advance(in Input, s *Status, resumed bool) {
	for {
		var failing []string
		var passed []PassedOwner
		done := true
		s.Admitted, s.Updated = 0, 0
		for _, o := range in.Owners {
			if !in.Policy.Admitted(s.Wave, o) {
				continue
			}
			s.Admitted++
			switch st, why := Stand(o, s.Target, in.Served); st {
			case Updated:
				s.Updated++
			case Failed:
				failing = append(failing, o.Key())
				if in.Policy.pauseOnFailure {
					done = false
				}
			case PassedOver:
				// Nothing will move it: the wave goes on without it.
				passed = append(passed, PassedOwner{Owner: o.Key(), Reason: why})
			default:
				done = false
			}
		}
		sort.Strings(failing)
		s.Failing = failing
		if len(s.Failing) > MaxFailingNames {
			s.Failing = s.Failing[:MaxFailingNames]
		}
		sort.Slice(passed, func(i, j int) bool { return passed[i].Owner < passed[j].Owner })
		s.PassedOverCount = len(passed)
		s.PassedOver = passed[:min(len(passed), MaxFailingNames)]
		if len(s.PassedOver) == 0 {
			s.PassedOver = nil
		}
		if s.Phase == PhaseHalted && !resumed {
			// Halted until resumed (or a new revision): an owner that
			// recovered on its own does not take the next wave along.
			if len(s.Failing) == 0 {
				s.Failing = in.Prev.Failing
			}
			return
		}
		if len(failing) > 0 && in.Policy.pauseOnFailure {
			s.Phase = PhaseHalted
			return
		}
		s.Phase = PhaseProgressing
		if in.Paused {
			s.Phase = PhasePaused
			return
		}
		if !done {
			return
		}
		if s.Wave+1 >= s.Waves {
			s.Previous = s.Stable
			s.Stable, s.Target, s.Wave, s.Phase = s.Target, "", 0, PhaseComplete
			s.Failing = nil
			s.Admitted, s.Updated = 0, 0
			return
		}
		// The next wave: its owners are woken once the cache shows it
		// (Due, from the status the owners read).
		s.Wave++
		resumed = false
	}
}

// due are the owners of in.Shard that render (by the status they read,
// in.Prev) with another revision than the one they recorded. An owner that
// recorded none renders like Stable already (the live definitions when the
// policy was adopted): it is not woken for that.
func due(in Input) []string {
	var out []string
	for _, o := range in.Owners {
		if !served(o.Labels, in.Shard) {
			continue // another replica's to wake, or no replica's
		}
		want := Choose(in.Policy, &in.Prev, o)
		if want != "" && want != o.Revision && (o.Revision != "" || want != in.Prev.Stable) {
			out = append(out, o.Key())
		}
	}
	sort.Strings(out)
	return out
}

// served reports whether the replicas of shard serve an owner with labels
// (api.ShardSelector): the default shard's, those without the label.
func served(labels map[string]string, shard string) bool {
	v, ok := labels[api.ShardLabel]
	if shard == "" {
		return !ok
	}
	return v == shard
}

// keep are the revisions an owner may still render with (Stable, Target,
// and those owners recorded) and Previous, for an undo; the others are
// dropped.
func keep(s Status, owners []Owner) []Revision {
	used := map[string]bool{s.Stable: true, s.Target: true, s.Previous: true}
	for _, o := range owners {
		used[o.Revision] = true
	}
	var out []Revision
	for _, r := range s.Revisions {
		if used[r.Name] {
			out = append(out, r)
		}
	}
	return out
}

func condition(s Status) metav1.Condition {
	c := metav1.Condition{Type: ConditionRolledOut}
	wave := fmt.Sprintf("wave %d of %d", s.Wave+1, s.Waves)
	tally := fmt.Sprintf("%d of %d admitted owner(s) Ready on revision %s", s.Updated, s.Admitted, s.Target) + passedOver(s)
	switch s.Phase {
	case PhaseComplete:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, PhaseComplete, "every owner renders with revision "+s.Stable
		if s.PassedOverCount > 0 {
			c.Message = "revision " + s.Stable + " rolled out" + passedOver(s) + "; each moves to it once it can"
		}
	case PhaseHalted:
		more := ""
		if s.Admitted-s.Updated-s.PassedOverCount > len(s.Failing) && len(s.Failing) == MaxFailingNames {
			more = " and more"
		}
		c.Status, c.Reason = metav1.ConditionFalse, PhaseHalted
		c.Message = fmt.Sprintf("%s halted: owner(s) failed on revision %s: %s%s (kontinue rollout resume, or undo)%s",
			wave, s.Target, strings.Join(s.Failing, ", "), more, passedOver(s))
	case PhasePaused:
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, PhasePaused, wave+" paused: "+tally
	case "":
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, "Pending", "no revision of the definitions taken yet: a template the chain names is missing"
		if s.Stable != "" {
			c.Message = "revision " + s.Stable
		}
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, PhaseProgressing, wave+": "+tally
	}
	return c
}

// passedOver says which owners a roll-out passed over ("" none).
func passedOver(s Status) string {
	if s.PassedOverCount == 0 {
		return ""
	}
	names := make([]string, 0, len(s.PassedOver))
	for _, p := range s.PassedOver {
		names = append(names, p.Owner+" ("+p.Reason+")")
	}
	more := ""
	if s.PassedOverCount > len(s.PassedOver) {
		more = fmt.Sprintf(" and %d more", s.PassedOverCount-len(s.PassedOver))
	}
	return fmt.Sprintf("; %d owner(s) passed over, which nothing can move now: %s%s", s.PassedOverCount, strings.Join(names, ", "), more)
}

// Invalid is the condition of a chain whose policy cannot be used.
func Invalid(err error) metav1.Condition {
	return metav1.Condition{Type: ConditionRolledOut, Status: metav1.ConditionFalse, Reason: "InvalidRollout", Message: err.Error()}
}
