package view

// A chain's roll-out of its own definitions in waves (spec.rollout,
// status.rollout: docs/rollouts.md), as the dashboard shows it: the phase
// and revisions the chain's status holds, and, while a roll-out is under
// way, each wave with the owners it admits, worked out from the owners
// (Count) with the controller's own decision (rollout.Compiled.Admitted).

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/rollout"
	st "kontinue.dev/kontinue/reconciler/status"
)

// Rollout is a chain's roll-out.
type Rollout struct {
	// Phase is status.rollout.phase (Complete, Progressing, Paused,
	// Halted); Invalid when the policy cannot be used (Error says why);
	// empty until the controller looked at the chain.
	Phase string `json:"phase"`
	Error string `json:"error,omitempty"`
	// Paused is the kontinue.dev/rollout-paused annotation.
	Paused bool `json:"paused,omitempty"`
	// Stable, Target and Previous are revisions (content hashes of the
	// definitions); Target is empty when no roll-out is under way.
	Stable   string `json:"stable,omitempty"`
	Target   string `json:"target,omitempty"`
	Previous string `json:"previous,omitempty"`
	// Wave is the wave being rolled out (0-based), of Waves.
	Wave  int `json:"wave"`
	Waves int `json:"waves"`
	// Admitted, Updated, Owners and Failing are the status's tally: owners
	// admitted to Target, of them those Ready on it, owners of the chain,
	// the admitted owners that failed on Target (namespace/name).
	Admitted int      `json:"admitted"`
	Updated  int      `json:"updated"`
	Owners   int      `json:"owners"`
	Failing  []string `json:"failing,omitempty"`
	// Condition is the chain's RolledOut condition, if any.
	Condition *Condition `json:"condition,omitempty"`
	// Plan is every wave of the policy, the implied last one included;
	// during a roll-out each with its owners (Count).
	Plan []RolloutWave `json:"plan,omitempty"`

	policy *rollout.Compiled
}

// RolloutWave is one wave.
type RolloutWave struct {
	// Rule is what the wave admits: "selector a=b", "10%", "100%".
	Rule    string `json:"rule"`
	Implied bool   `json:"implied,omitempty"`
	// Reached: the roll-out admitted the wave's owners (it is the current
	// wave or an earlier one).
	Reached bool `json:"reached,omitempty"`
	// Owners counts the owners this wave admits first (an earlier wave
	// admits none of them); Updated, those Ready on the target; Failing,
	// those that failed on it.
	Owners  int `json:"owners"`
	Updated int `json:"updated"`
	Failing int `json:"failing"`
	// Members are the wave's owners, failed first, at most MaxWaveMembers.
	Members []WaveMember `json:"members,omitempty"`
}

// MaxWaveMembers bounds the owners a wave names (its counts hold them all).
const MaxWaveMembers = 50

// Wave member states.
const (
	WaveWaiting = "waiting" // its wave is not reached: it keeps its revision
	WaveMoving  = "moving"  // admitted, not yet Ready on the target
	WaveReady   = "ready"   // Ready on the target
	WaveFailed  = "failed"  // failed on the target
)

// WaveMember is one owner of a wave.
type WaveMember struct {
	OwnerKind string `json:"ownerKind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	State     string `json:"state"`
}

// buildRollout reads a chain's roll-out; nil without a policy.
func buildRollout(u *unstructured.Unstructured, spec api.ChainSpec, conds []Condition) *Rollout {
	if spec.Rollout == nil {
		if _, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "rollout"); !ok {
			return nil
		}
	}
	r := &Rollout{Paused: u.GetAnnotations()[rollout.AnnotationPaused] == "true"}
	if c, ok := lookup(conds, rollout.ConditionRolledOut); ok {
		r.Condition = &c
	}
	policy, status, err := rollout.Read(u.Object)
	if err != nil || policy == nil {
		r.Phase = rollout.PhaseInvalid
		if err != nil {
			r.Error = err.Error()
		}
		return r
	}
	r.policy = policy
	s := *status
	r.Phase, r.Stable, r.Target, r.Previous = s.Phase, s.Stable, s.Target, s.Previous
	r.Wave, r.Waves = s.Wave, policy.Waves()
	r.Admitted, r.Updated, r.Owners, r.Failing = s.Admitted, s.Updated, s.Owners, s.Failing
	for i := 0; i < policy.Waves(); i++ {
		w := RolloutWave{Rule: "100%", Implied: true}
		if spec.Rollout != nil && i < len(spec.Rollout.Waves) {
			pw := spec.Rollout.Waves[i]
			w.Implied = false
			if pw.Percent != nil {
				w.Rule = fmt.Sprintf("%d%%", *pw.Percent)
			} else if pw.Selector != nil {
				w.Rule = "selector " + selectorText(pw.Selector.MatchLabels, pw.Selector.MatchExpressions, nil)
			}
		}
		w.Reached = r.Target != "" && i <= r.Wave
		r.Plan = append(r.Plan, w)
	}
	return r
}

// countWaves places the chain's owners in the waves of a roll-out under
// way: each in the first wave that admits it, with its state on Target.
func countWaves(r *Rollout, ownerKind string, owners []Owner) {
	for i := range r.Plan {
		r.Plan[i].Owners, r.Plan[i].Updated, r.Plan[i].Failing, r.Plan[i].Members = 0, 0, 0, nil
	}
	if r.policy == nil || r.Target == "" || len(r.Plan) == 0 {
		return
	}
	members := make([][]WaveMember, len(r.Plan))
	for _, o := range owners {
		ro := rollout.Owner{Namespace: o.Namespace, Name: o.Name, Labels: o.labels, Revision: o.ChainRevision,
			Ready: o.Ready.Status, Current: !o.Stale}
		i := 0
		for i < len(r.Plan)-1 && !r.policy.Admitted(i, ro) {
			i++
		}
		w := &r.Plan[i]
		m := WaveMember{OwnerKind: ownerKind, Namespace: o.Namespace, Name: o.Name, State: WaveWaiting}
		on := ro.Revision == r.Target && ro.Current
		switch {
		case !w.Reached:
		case on && ro.Ready == string(st.True):
			m.State = WaveReady
			w.Updated++
		case on && ro.Ready == string(st.False):
			m.State = WaveFailed
			w.Failing++
		default:
			m.State = WaveMoving
		}
		w.Owners++
		members[i] = append(members[i], m)
	}
	order := map[string]int{WaveFailed: 0, WaveMoving: 1, WaveReady: 2, WaveWaiting: 3}
	for i, ms := range members {
		sort.Slice(ms, func(a, b int) bool {
			if order[ms[a].State] != order[ms[b].State] {
				return order[ms[a].State] < order[ms[b].State]
			}
			if ms[a].Namespace != ms[b].Namespace {
				return ms[a].Namespace < ms[b].Namespace
			}
			return ms[a].Name < ms[b].Name
		})
		if len(ms) > MaxWaveMembers {
			ms = ms[:MaxWaveMembers]
		}
		r.Plan[i].Members = ms
	}
}
