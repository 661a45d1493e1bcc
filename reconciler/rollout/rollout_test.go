package rollout

import (
	"fmt"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func pct(n int) *int { return &n }

func policy(t *testing.T, p *Policy) *Compiled {
	t.Helper()
	c, err := Compile(p)
	require.NoError(t, err)
	return c
}

// canaryPolicy: canary label, 10%, 50%, (100% implied).
func canaryPolicy(t *testing.T) *Compiled {
	return policy(t, &Policy{Waves: []Wave{
		{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}},
		{Percent: pct(10)}, {Percent: pct(50)},
	}})
}

func TestCompile(t *testing.T) {
	for _, tc := range []struct {
		name  string
		p     *Policy
		waves int
		err   string
	}{
		{"none", nil, 0, ""},
		{"empty: one wave of all", &Policy{}, 1, ""},
		{"100 implied", &Policy{Waves: []Wave{{Percent: pct(10)}}}, 2, ""},
		{"100 given", &Policy{Waves: []Wave{{Percent: pct(10)}, {Percent: pct(100)}}}, 2, ""},
		{"both", &Policy{Waves: []Wave{{Percent: pct(10), Selector: &metav1.LabelSelector{}}}}, 0, "wave [0]: give exactly one"},
		{"neither", &Policy{Waves: []Wave{{}}}, 0, "wave [0]: give exactly one"},
		{"too much", &Policy{Waves: []Wave{{Percent: pct(101)}}}, 0, "not within 0..100"},
		{"bad selector", &Policy{Waves: []Wave{{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Nope"}}}}}}, 0, "wave [0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Compile(tc.p)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			if tc.p == nil {
				require.Nil(t, c)
				return
			}
			require.Equal(t, tc.waves, c.Waves())
		})
	}
}

func TestAdmitted(t *testing.T) {
	c := canaryPolicy(t)
	canary := Owner{Namespace: "ns", Name: "x", Labels: map[string]string{"canary": "true"}}
	require.True(t, c.Admitted(0, canary))
	// Percentages: an owner is admitted from the first wave whose percent
	// exceeds its bucket, and in every later wave.
	counts := make([]int, 4)
	for i := 0; i < 1000; i++ {
		o := Owner{Namespace: "ns", Name: fmt.Sprintf("app-%d", i)}
		first := -1
		for w := 0; w < 4; w++ {
			if c.Admitted(w, o) {
				counts[w]++
				if first < 0 {
					first = w
				}
			} else {
				require.Less(t, first, 0, "a wave never drops an owner an earlier one admitted")
			}
		}
		b := Bucket(o.Namespace, o.Name)
		switch {
		case b < 10:
			assert.Equal(t, 1, first)
		case b < 50:
			assert.Equal(t, 2, first)
		default:
			assert.Equal(t, 3, first)
		}
	}
	assert.Equal(t, 0, counts[0], "no canary label")
	assert.InDelta(t, 100, counts[1], 40)
	assert.InDelta(t, 500, counts[2], 80)
	assert.Equal(t, 1000, counts[3])
	require.Equal(t, Bucket("ns", "a"), Bucket("ns", "a"), "stable")
}

func TestSnapshotHash(t *testing.T) {
	chain := map[string]any{"resources": []any{"a"}, "rollout": map[string]any{"waves": []any{}}}
	a := Snapshot(chain, []Template{{Kind: "K", Name: "b", Spec: map[string]any{"x": 1}}, {Kind: "K", Name: "a", Spec: map[string]any{"y": 2}}})
	b := Snapshot(map[string]any{"resources": []any{"a"}}, []Template{{Kind: "K", Name: "a", Spec: map[string]any{"y": 2}}, {Kind: "K", Name: "b", Spec: map[string]any{"x": 1}}})
	require.Equal(t, a.Name, b.Name, "the policy and the order of templates are not definitions")
	require.Len(t, a.Name, 12)
	require.NotContains(t, a.Chain, "rollout")
	require.Equal(t, "a", a.Templates[0].Name)
	c := Snapshot(chain, []Template{{Kind: "K", Name: "a", Spec: map[string]any{"y": 3}}, {Kind: "K", Name: "b", Spec: map[string]any{"x": 1}}})
	require.NotEqual(t, a.Name, c.Name, "a template edit is a new revision")
}

func TestChoose(t *testing.T) {
	c := canaryPolicy(t)
	canary := Owner{Namespace: "ns", Name: "c", Labels: map[string]string{"canary": "true"}}
	var late Owner // an owner no wave before the last admits
	for i := 0; ; i++ {
		late = Owner{Namespace: "ns", Name: fmt.Sprintf("w-%d", i)}
		if Bucket(late.Namespace, late.Name) >= 50 {
			break
		}
	}
	rolling := &Status{Stable: "A", Target: "B", Wave: 0, Revisions: []Revision{{Name: "A"}, {Name: "B"}, {Name: "X"}}}
	onX := late
	onX.Revision = "X"
	gone := late
	gone.Revision = "Z"
	for _, tc := range []struct {
		name string
		c    *Compiled
		st   *Status
		o    Owner
		want string
	}{
		{"no policy: live", nil, rolling, canary, ""},
		{"no state yet: live", c, &Status{}, canary, ""},
		{"no roll-out: stable", c, &Status{Stable: "A"}, late, "A"},
		{"admitted: target", c, rolling, canary, "B"},
		{"not admitted: stable", c, rolling, late, "A"},
		{"not admitted keeps its revision", c, rolling, onX, "X"},
		{"its revision is gone: stable", c, rolling, gone, "A"},
		{"last wave admits all", c, &Status{Stable: "A", Target: "B", Wave: 3}, onX, "B"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Choose(tc.c, tc.st, tc.o))
		})
	}
}

// fleet: the canary, two owners of the 10% wave, two of 50%, two of 100%.
func fleet(t *testing.T) []Owner {
	out := []Owner{{Namespace: "ns", Name: "canary", Labels: map[string]string{"canary": "true"}}}
	need := map[int]int{1: 2, 2: 2, 3: 2}
	for i := 0; len(out) < 7; i++ {
		o := Owner{Namespace: "ns", Name: fmt.Sprintf("app-%d", i)}
		w := 3
		if b := Bucket(o.Namespace, o.Name); b < 10 {
			w = 1
		} else if b < 50 {
			w = 2
		}
		if need[w] > 0 {
			need[w]--
			out = append(out, o)
		}
	}
	return out
}

// on sets the revision and readiness of the owners a wave admits.
func on(c *Compiled, owners []Owner, wave int, rev, ready string) []Owner {
	out := make([]Owner, len(owners))
	for i, o := range owners {
		if c.Admitted(wave, o) {
			o.Revision, o.Ready, o.Current = rev, ready, true
		}
		out[i] = o
	}
	return out
}

func TestNext(t *testing.T) {
	c := canaryPolicy(t)
	A := Revision{Name: "A"}
	B := Revision{Name: "B"}
	owners := fleet(t)
	onA := on(c, owners, 3, "A", "True")
	rolling := func(wave int) Status {
		return Status{Stable: "A", Target: "B", Wave: wave, Phase: PhaseProgressing, Revisions: []Revision{A, B}}
	}
	for _, tc := range []struct {
		name    string
		in      Input
		phase   string
		stable  string
		target  string
		wave    int
		failing []string
		due     []string
		cond    metav1.ConditionStatus
		revs    []string
	}{
		{name: "adopt the live definitions", in: Input{Live: &A, Owners: on(c, owners, 3, "", "True")},
			phase: PhaseComplete, stable: "A", cond: metav1.ConditionTrue, revs: []string{"A"}},
		{name: "nothing changed", in: Input{Live: &A, Prev: Status{Stable: "A", Revisions: []Revision{A}}, Owners: onA},
			phase: PhaseComplete, stable: "A", cond: metav1.ConditionTrue, revs: []string{"A"}},
		{name: "a template edit starts at wave 0, wakes nobody yet", in: Input{Live: &B, Prev: Status{Stable: "A", Revisions: []Revision{A}}, Owners: onA},
			phase: PhaseProgressing, stable: "A", target: "B", cond: metav1.ConditionUnknown, revs: []string{"A", "B"}},
		{name: "wave 0 as the cache shows it wakes the canary", in: Input{Live: &B, Prev: rolling(0), Owners: onA},
			phase: PhaseProgressing, stable: "A", target: "B", due: []string{"ns/canary"}, cond: metav1.ConditionUnknown, revs: []string{"A", "B"}},
		{name: "canary Ready: next wave", in: Input{Live: &B, Prev: rolling(0), Owners: on(c, onA, 0, "B", "True")},
			phase: PhaseProgressing, stable: "A", target: "B", wave: 1, due: []string{}, cond: metav1.ConditionUnknown, revs: []string{"A", "B"}},
		{name: "canary not yet Ready: wait", in: Input{Live: &B, Prev: rolling(0), Owners: on(c, onA, 0, "B", "Unknown")},
			phase: PhaseProgressing, stable: "A", target: "B", cond: metav1.ConditionUnknown, revs: []string{"A", "B"}},
		{name: "canary failed: halt, named", in: Input{Live: &B, Prev: rolling(0), Owners: on(c, onA, 0, "B", "False")},
			phase: PhaseHalted, stable: "A", target: "B", failing: []string{"ns/canary"}, cond: metav1.ConditionFalse, revs: []string{"A", "B"}},
		{name: "halted stays halted when the owner recovers", in: Input{Live: &B, Prev: func() Status { s := rolling(0); s.Phase, s.Failing = PhaseHalted, []string{"ns/canary"}; return s }(), Owners: on(c, onA, 0, "B", "True")},
			phase: PhaseHalted, stable: "A", target: "B", failing: []string{"ns/canary"}, cond: metav1.ConditionFalse, revs: []string{"A", "B"}},
		{name: "resume after recovery: next wave", in: Input{Live: &B, Resume: "r1", Prev: func() Status { s := rolling(0); s.Phase = PhaseHalted; return s }(), Owners: on(c, onA, 0, "B", "True")},
			phase: PhaseProgressing, stable: "A", target: "B", wave: 1, cond: metav1.ConditionUnknown, revs: []string{"A", "B"}},
		{name: "resume while failing: halted again", in: Input{Live: &B, Resume: "r1", Prev: func() Status { s := rolling(0); s.Phase = PhaseHalted; return s }(), Owners: on(c, onA, 0, "B", "False")},
			phase: PhaseHalted, stable: "A", target: "B", failing: []string{"ns/canary"}, cond: metav1.ConditionFalse, revs: []string{"A", "B"}},
		{name: "a fix (new revision C) restarts at wave 0", in: Input{Live: &Revision{Name: "C"}, Prev: func() Status { s := rolling(0); s.Phase = PhaseHalted; return s }(), Owners: on(c, onA, 0, "B", "False")},
			phase: PhaseProgressing, stable: "A", target: "C", cond: metav1.ConditionUnknown, revs: []string{"A", "B", "C"}},
		{name: "paused: no advance", in: Input{Live: &B, Paused: true, Prev: rolling(0), Owners: on(c, onA, 0, "B", "True")},
			phase: PhasePaused, stable: "A", target: "B", due: []string{}, cond: metav1.ConditionUnknown, revs: []string{"A", "B"}},
		{name: "the last wave done: complete, the old stable kept for an undo", in: Input{Live: &B, Prev: rolling(3), Owners: on(c, onA, 3, "B", "True")},
			phase: PhaseComplete, stable: "B", cond: metav1.ConditionTrue, revs: []string{"A", "B"}},
		{name: "revisions nobody uses are dropped", in: Input{Live: &B, Prev: Status{Stable: "B", Previous: "A", Revisions: []Revision{{Name: "X"}, A, B}}, Owners: on(c, onA, 3, "B", "True")},
			phase: PhaseComplete, stable: "B", cond: metav1.ConditionTrue, revs: []string{"A", "B"}},
		{name: "undo: live is stable again, moved owners are due", in: Input{Live: &A, Prev: rolling(1), Owners: on(c, onA, 1, "B", "True")},
			phase: PhaseComplete, stable: "A", cond: metav1.ConditionTrue, revs: []string{"A", "B"}},
		{name: "templates missing at first sight: pending", in: Input{Owners: onA},
			phase: "", cond: metav1.ConditionUnknown},
		{name: "templates missing: the roll-out stays", in: Input{Prev: rolling(1), Owners: on(c, onA, 1, "B", "True")},
			phase: PhaseProgressing, stable: "A", target: "B", wave: 2, cond: metav1.ConditionUnknown, revs: []string{"A", "B"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Policy = c
			out := Next(tc.in)
			s := out.Status
			assert.Equal(t, tc.phase, s.Phase)
			assert.Equal(t, tc.stable, s.Stable)
			assert.Equal(t, tc.target, s.Target)
			assert.Equal(t, tc.wave, s.Wave)
			assert.Equal(t, tc.failing, s.Failing)
			assert.Equal(t, 4, s.Waves)
			assert.Equal(t, tc.cond, out.Condition.Status, out.Condition.Message)
			var revs []string
			for _, r := range s.Revisions {
				revs = append(revs, r.Name)
			}
			assert.Equal(t, tc.revs, revs)
			switch {
			case tc.due == nil:
			case len(tc.due) == 0:
				assert.Empty(t, out.Due)
			default:
				assert.Equal(t, tc.due, out.Due)
			}
			if tc.phase == PhaseHalted {
				assert.Contains(t, out.Condition.Message, "ns/canary")
			}
		})
	}
}

// TestUndoDue: after an undo the owners that moved are due back to Stable;
// owners that never recorded a revision are not woken for it.
func TestUndoDue(t *testing.T) {
	c := canaryPolicy(t)
	owners := on(c, fleet(t), 1, "B", "True")
	owners = append(owners, Owner{Namespace: "ns", Name: "zz-new"})
	out := Next(Input{Policy: c, Live: &Revision{Name: "A"}, Prev: Status{Stable: "A", Revisions: []Revision{{Name: "A"}, {Name: "B"}}}, Owners: owners})
	var want []string
	for _, o := range owners {
		if o.Revision == "B" {
			want = append(want, o.Key())
		}
	}
	require.Len(t, want, 3)
	sort.Strings(want)
	require.Equal(t, want, out.Due)
}

// TestWalkThrough: a roll-out from edit to complete, each owner moving
// when it is due, takes one wave per round and moves nobody early.
func TestWalkThrough(t *testing.T) {
	c := canaryPolicy(t)
	owners := on(c, fleet(t), 3, "A", "True")
	st := Status{Stable: "A", Revisions: []Revision{{Name: "A"}}}
	B := Revision{Name: "B"}
	var waves []int
	for round := 0; round < 20 && (round == 0 || st.Target != ""); round++ {
		out := Next(Input{Policy: c, Live: &B, Prev: st, Owners: owners})
		due := map[string]bool{}
		for _, k := range out.Due {
			due[k] = true
		}
		for i, o := range owners {
			if due[o.Key()] {
				require.True(t, c.Admitted(st.Wave, o), "only admitted owners move: %s in wave %d", o.Key(), st.Wave)
				owners[i].Revision, owners[i].Ready = "B", "True"
			}
		}
		st = out.Status
		waves = append(waves, st.Wave)
	}
	require.Equal(t, "B", st.Stable)
	require.Equal(t, PhaseComplete, st.Phase)
	for _, o := range owners {
		require.Equal(t, "B", o.Revision)
	}
	// Each wave takes two rounds: the wave shows in the status, then its
	// owners (woken from that status) move and are Ready.
	require.Equal(t, []int{0, 0, 1, 1, 2, 2, 3, 3, 0}, waves)
}
