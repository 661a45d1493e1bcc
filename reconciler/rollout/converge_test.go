package rollout

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMoves: which live revisions move a roll-out (and so are confirmed
// with the API server first): exactly those for which Next changes the
// stable or target revision while the owners hold the waves back.
func TestMoves(t *testing.T) {
	c := canaryPolicy(t)
	A, B, C := Revision{Name: "A"}, Revision{Name: "B"}, Revision{Name: "C"}
	rolling := Status{Stable: "A", Target: "B", Phase: PhaseProgressing, Revisions: []Revision{A, B}}
	for _, tc := range []struct {
		name string
		prev Status
		live *Revision
		want bool
	}{
		{"first sight: adopt", Status{}, &A, true},
		{"first sight, a template missing", Status{}, nil, false},
		{"nothing changed", Status{Stable: "A", Revisions: []Revision{A}}, &A, false},
		{"a new revision", Status{Stable: "A", Revisions: []Revision{A}}, &B, true},
		{"rolling, the same target", rolling, &B, false},
		{"rolling, another target", rolling, &C, true},
		{"rolling, the stable one again (undo)", rolling, &A, true},
		{"rolling, a template missing", rolling, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Moves(tc.prev, tc.live))
			// The canary is admitted and not Ready: no wave completes.
			owners := []Owner{{Namespace: "ns", Name: "canary", Labels: map[string]string{"canary": "true"}, Revision: "A", Ready: "Unknown", Current: true}}
			out := Next(Input{Policy: c, Prev: tc.prev, Live: tc.live, Owners: owners})
			moved := out.Status.Stable != tc.prev.Stable || out.Status.Target != tc.prev.Target
			require.Equal(t, moved, Moves(tc.prev, tc.live), "Moves agrees with Next")
		})
	}
}

// TestDueOfShard: every replica decides on every shard's owners, and wakes
// only its own shard's.
func TestDueOfShard(t *testing.T) {
	c := canaryPolicy(t)
	in := Input{Policy: c, Live: &Revision{Name: "B"}, Prev: Status{Stable: "A", Target: "B", Wave: 3, Phase: PhaseProgressing, Revisions: []Revision{{Name: "A"}, {Name: "B"}}}}
	for _, s := range []string{"-", "a", "b", "-", ""} {
		l := map[string]string{}
		if s != "-" {
			l["kontinue.dev/shard"] = s // "": a label no replica serves
		}
		in.Owners = append(in.Owners, Owner{Namespace: "ns", Name: fmt.Sprintf("o%d%s", len(in.Owners), s), Labels: l, Revision: "A"})
	}
	for shard, want := range map[string][]string{"": {"ns/o0-", "ns/o3-"}, "a": {"ns/o1a"}, "b": {"ns/o2b"}, "c": nil} {
		in.Shard = shard
		out := Next(in)
		require.Equal(t, want, out.Due, "shard %q", shard)
		require.Equal(t, 5, out.Status.Owners, "the tally counts every shard's owners")
	}
}

// TestDecidersConverge: the replicas of two shards decide one chain's
// roll-out, each from its own view of the same owners and templates, one
// or both behind the world by a few steps (watch lag), and write the
// chain's status when their decision differs from it (on its latest copy:
// a write on an older one is refused). Both look at every step, more
// often than the routing wakes them (a view that changed, a new stable,
// target or wave); a move by the live revision is made only once it is
// confirmed (Moves). The world: a bad revision B (the canary fails on
// it), then a fix C. Whatever the lags and order:
//   - a target is never replaced by an older revision, and a wave never
//     goes back for its target;
//   - no wave past the canary's begins for B (the canary failed there);
//   - once the world stops and the views caught up, the writes stop (no
//     field flips between the replicas), and the status is what one
//     replica with every fact decides: C complete, every owner on it.
func TestDecidersConverge(t *testing.T) {
	c := canaryPolicy(t)
	order := map[string]int{"A": 0, "B": 1, "C": 2}
	for _, lags := range [][2]int{{0, 0}, {0, 3}, {2, 0}, {1, 4}, {5, 5}} {
		for _, first := range []int{0, 1} {
			t.Run(fmt.Sprintf("lags %v, replica %d first", lags, first), func(t *testing.T) {
				type moment struct {
					live   string
					owners []Owner
				}
				live := "A"
				owners := on(c, fleet(t), 3, "A", "True")
				var history []moment
				st := Status{Stable: "A", Revisions: []Revision{{Name: "A"}}, Phase: PhaseComplete}
				writes, lastWrite, lastChange := 0, 0, 0
				maxRev, wave := 0, 0
				for step := 0; step < 120; step++ {
					switch step {
					case 3:
						live = "B"
					case 30:
						live = "C"
					}
					// The owners the status admits move (their reconciles):
					// the canary fails on B, every other move succeeds.
					for i, o := range owners {
						if want := Choose(c, &st, o); want != o.Revision {
							owners[i].Revision, owners[i].Ready, owners[i].Current = want, "True", true
							if want == "B" && o.Labels["canary"] == "true" {
								owners[i].Ready = "False"
							}
						}
					}
					now := moment{live, append([]Owner(nil), owners...)}
					if len(history) > 0 && !reflect.DeepEqual(now, history[len(history)-1]) {
						lastChange = step
					}
					history = append(history, now)
					for n := 0; n < 2; n++ {
						r := (n + first) % 2
						view := history[max(0, len(history)-1-lags[r])]
						lv := &Revision{Name: view.live}
						if Moves(st, lv) && view.live != live {
							continue // not confirmed: its cache of templates is behind
						}
						out := Next(Input{Policy: c, Prev: st, Live: lv, Owners: view.owners})
						if reflect.DeepEqual(out.Status, st) {
							continue
						}
						next := out.Status
						newest := next.Target
						if newest == "" {
							newest = next.Stable
						}
						require.GreaterOrEqual(t, order[newest], maxRev, "step %d, replica %d: back to %s from %v", step, r, newest, st)
						maxRev = order[newest]
						if next.Target == st.Target && next.Target != "" {
							require.GreaterOrEqual(t, next.Wave, wave, "step %d, replica %d: the wave went back", step, r)
						}
						if next.Target == "B" {
							require.Zero(t, next.Wave, "step %d, replica %d: a wave after the failed canary began", step, r)
						}
						st, wave = next, next.Wave
						writes++
						lastWrite = step
					}
				}
				require.LessOrEqual(t, lastWrite, lastChange+max(lags[0], lags[1]), "the writes stopped once the views caught up with the world")
				require.Equal(t, "C", st.Stable)
				require.Equal(t, PhaseComplete, st.Phase)
				for _, o := range owners {
					require.Equal(t, "C", o.Revision, o.Key())
				}
				final := Next(Input{Policy: c, Prev: st, Live: &Revision{Name: "C"}, Owners: owners})
				require.Equal(t, st, final.Status, "what one replica with every fact decides")
				t.Logf("%d writes, the last at step %d; the world's last change at step %d", writes, lastWrite, lastChange)
			})
		}
	}
}
