package rollout

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kontinue.dev/kontinue/reconciler/api"
)

// TestMaxUnavailable: a wave counts as done while at most its cap of the
// owners admitted so far (less those passed over) are not yet Ready on the
// target; failures still halt; the cap is the current wave's. Without the
// cap, every case but the first and the failures would hold the wave.
func TestMaxUnavailable(t *testing.T) {
	count := func(n int) *int { return &n }
	canary := &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}
	two := func(cap0, cap1 *int, pause bool) *Compiled {
		return policy(t, &Policy{PauseOnFailure: &pause, Waves: []Wave{
			{Selector: canary, MaxUnavailable: cap0},
			{Percent: pct(100), MaxUnavailable: cap1},
		}})
	}
	// owner is canary (wave 0) or not (wave 1), in state: "ready" on the
	// target, "unknown" on it, "failed" on it, "old" (not moved yet),
	// "unserved" (passed over).
	owner := func(i int, inCanary bool, state string) Owner {
		o := Owner{Namespace: "ns", Name: fmt.Sprintf("o%d", i), Labels: map[string]string{}, Current: true, Revision: "B"}
		if inCanary {
			o.Labels["canary"] = "true"
		}
		switch state {
		case "ready":
			o.Ready = "True"
		case "unknown":
			o.Ready = "Unknown"
		case "failed":
			o.Ready = "False"
		case "old":
			o.Revision, o.Ready = "A", "True"
		case "unserved":
			o.Revision, o.Labels[api.ShardLabel] = "A", ""
		}
		return o
	}
	fleet := func(canaryStates, restStates []string) []Owner {
		var out []Owner
		for _, s := range canaryStates {
			out = append(out, owner(len(out), true, s))
		}
		for _, s := range restStates {
			out = append(out, owner(len(out), false, s))
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		policy *Compiled
		wave   int
		owners []Owner
		phase  string
		want   int // the wave after the decision
	}{
		{"no cap: one not Ready holds the wave", two(nil, nil, true), 0,
			fleet([]string{"ready", "ready", "unknown"}, nil), PhaseProgressing, 0},
		{"cap 1: one not Ready on the target, the next wave", two(count(1), nil, true), 0,
			fleet([]string{"ready", "ready", "unknown"}, nil), PhaseProgressing, 1},
		{"cap 1: one not moved yet counts too", two(count(1), nil, true), 0,
			fleet([]string{"ready", "ready", "old"}, nil), PhaseProgressing, 1},
		{"cap 1: two not Ready hold the wave", two(count(1), nil, true), 0,
			fleet([]string{"ready", "unknown", "old"}, nil), PhaseProgressing, 0},
		{"cap 0 given: as none", two(count(0), nil, true), 0,
			fleet([]string{"ready", "unknown"}, nil), PhaseProgressing, 0},
		{"cap 2: two may wait", two(count(2), nil, true), 0,
			fleet([]string{"ready", "ready", "unknown", "old"}, nil), PhaseProgressing, 1},
		{"cap 2: three hold", two(count(2), nil, true), 0,
			fleet([]string{"ready", "unknown", "unknown", "old"}, nil), PhaseProgressing, 0},
		{"passed over: not waited for, not counted against the cap", two(count(1), nil, true), 0,
			fleet([]string{"ready", "unknown", "unserved", "unserved"}, nil), PhaseProgressing, 1},
		{"a failure halts whatever the cap", two(count(2), nil, true), 0,
			fleet([]string{"ready", "ready", "failed"}, nil), PhaseHalted, 0},
		{"without pauseOnFailure a failure has settled: not counted", two(count(1), nil, false), 0,
			fleet([]string{"failed", "unknown", "ready"}, nil), PhaseProgressing, 1},
		{"the wave's own cap: the canary's 1 lets the canary on, the last wave's none holds",
			two(count(1), nil, true), 0,
			fleet([]string{"ready", "unknown"}, []string{"old"}), PhaseProgressing, 1},
		{"the cap counts every admitted wave's owners: a canary straggler and a new one exceed 1",
			two(count(1), count(1), true), 1,
			fleet([]string{"ready", "unknown"}, []string{"ready", "old"}), PhaseProgressing, 1},
		{"the last wave's cap completes the roll-out with one not Ready",
			two(count(1), count(1), true), 1,
			fleet([]string{"ready", "ready"}, []string{"ready", "unknown"}), PhaseComplete, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prev := Status{Stable: "A", Target: "B", Wave: tc.wave, Phase: PhaseProgressing, Revisions: []Revision{{Name: "A"}, {Name: "B"}}}
			out := Next(Input{Policy: tc.policy, Prev: prev, Live: &Revision{Name: "B"}, Owners: tc.owners})
			assert.Equal(t, tc.phase, out.Status.Phase)
			assert.Equal(t, tc.want, out.Status.Wave)
			if tc.phase == PhaseComplete {
				assert.Equal(t, "B", out.Status.Stable)
			}
		})
	}
}

func TestCompileMaxUnavailable(t *testing.T) {
	for _, n := range []int{0, 1, 1000} {
		_, err := Compile(&Policy{Waves: []Wave{{Percent: pct(10), MaxUnavailable: &n}}})
		require.NoError(t, err, n)
	}
	n := -1
	_, err := Compile(&Policy{Waves: []Wave{{Percent: pct(10)}, {Percent: pct(50), MaxUnavailable: &n}}})
	require.EqualError(t, err, "wave [1]: maxUnavailable -1 is negative")
}
