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
	// PassedOver and PassedOverCount are the admitted owners the roll-out
	// does not wait for, since nothing moves them (rollout.Stand): a few
	// named with why, and how many.
	PassedOver      []rollout.PassedOwner `json:"passedOver,omitempty"`
	PassedOverCount int                   `json:"passedOverCount,omitempty"`
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
	// those that failed on it; PassedOver, those nothing moves to it.
	Owners     int `json:"owners"`
	Updated    int `json:"updated"`
	Failing    int `json:"failing"`
	PassedOver int `json:"passedOver,omitempty"`
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
	// Passed over: admitted, but nothing moves it to the target
	// (rollout.Stand), so its wave does not wait for it; Reason says why.
	WaveUnserved = "unserved" // its shard is served by no running replica
	WaveDeleting = "deleting" // being deleted
	WaveDetached = "detached" // its status says no chain renders it (its Reason)
)

// WaveMember is one owner of a wave.
type WaveMember struct {
	OwnerKind string `json:"ownerKind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	State     string `json:"state"`
	// Reason is why it is passed over (rollout.ReasonUnserved,
	// ReasonDeleting, or its chain condition's reason).
	Reason string `json:"reason,omitempty"`
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
	r.PassedOver, r.PassedOverCount = s.PassedOver, s.PassedOverCount
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
	served := servedShards(r, owners)
	members := make([][]WaveMember, len(r.Plan))
	for _, o := range owners {
		ro := rolloutOwner(o)
		i := 0
		for i < len(r.Plan)-1 && !r.policy.Admitted(i, ro) {
			i++
		}
		w := &r.Plan[i]
		m := WaveMember{OwnerKind: ownerKind, Namespace: o.Namespace, Name: o.Name, State: WaveWaiting}
		if w.Reached {
			// Placed as the controller places it (rollout.Stand).
			switch stand, why := rollout.Stand(ro, r.Target, served); stand {
			case rollout.Updated:
				m.State = WaveReady
				w.Updated++
			case rollout.Failed:
				m.State = WaveFailed
				w.Failing++
			case rollout.PassedOver:
				m.State, m.Reason = WaveDetached, why
				switch why {
				case rollout.ReasonUnserved:
					m.State = WaveUnserved
				case rollout.ReasonDeleting:
					m.State = WaveDeleting
				}
				w.PassedOver++
			default:
				m.State = WaveMoving
			}
		}
		w.Owners++
		members[i] = append(members[i], m)
	}
	order := map[string]int{WaveFailed: 0, WaveMoving: 1, WaveUnserved: 2, WaveDeleting: 2, WaveDetached: 2, WaveReady: 3, WaveWaiting: 4}
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

// rolloutOwner is what the controller decides on of an owner.
func rolloutOwner(o Owner) rollout.Owner {
	ro := rollout.Owner{Namespace: o.Namespace, Name: o.Name, Labels: o.labels, Revision: o.ChainRevision,
		Ready: o.Ready.Status, Current: !o.Stale, Deleting: o.deleting}
	for _, c := range o.Conditions {
		if (c.Type == api.WorkloadFlavor.ChainReadyCondition || c.Type == api.DeliverableFlavor.ChainReadyCondition) && c.Status == string(st.False) {
			ro.ChainReason = c.Reason
		}
	}
	return ro
}

// servedShards is which of the owners' shards a running replica serves,
// as far as the chain's status tells: the controller reads the shards'
// Leases, the status names (some of) the owners it found in a shard no
// replica serves, and so their shards. The others count as served.
func servedShards(r *Rollout, owners []Owner) map[string]bool {
	byKey := make(map[string]Owner, len(owners))
	for _, o := range owners {
		byKey[o.Namespace+"/"+o.Name] = o
	}
	down := map[string]bool{}
	for _, p := range r.PassedOver {
		o, ok := byKey[p.Owner]
		if !ok || p.Reason != rollout.ReasonUnserved {
			continue
		}
		if v, labelled := o.labels[api.ShardLabel]; !labelled || (v != "" && api.ValidShard(v) == nil) {
			down[v] = true // a shard no running replica serves (an empty or bad label never is)
		}
	}
	served := map[string]bool{}
	for _, o := range owners {
		if v := o.labels[api.ShardLabel]; !down[v] && api.ValidShard(v) == nil {
			served[v] = true
		}
	}
	return served
}
