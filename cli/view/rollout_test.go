package view

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"kontinue.dev/kontinue/reconciler/rollout"
)

const rolloutChainYAML = `
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata:
  name: web
  annotations: {kontinue.dev/rollout-paused: "true"}
spec:
  selector: {app.example.com/chain: web}
  rollout:
    waves:
    - selector: {matchLabels: {canary: "true"}}
    - percent: 50
  resources:
  - name: cfg
    templateRef: {kind: ClusterTemplate, name: cfg}
status:
  conditions:
  - {type: Ready, status: "True", reason: Ready}
  - {type: RolledOut, status: "False", reason: Halted, message: "wave 1 of 3 halted: owner(s) failed on revision bbb: dev/c1"}
  rollout:
    stable: aaa
    target: bbb
    previous: zzz
    wave: 0
    waves: 3
    phase: Halted
    admitted: 2
    updated: 1
    owners: 4
    failing: [dev/c1]
`

// TestRolloutView: a chain's roll-out as the dashboard shows it: the
// status's phase, revisions and tally, the waves of the policy (the
// implied last one included), and each owner in the first wave that
// admits it (the controller's rollout.Compiled.Admitted), in its state on
// the target.
func TestRolloutView(t *testing.T) {
	c := BuildChain(obj(t, rolloutChainYAML))
	r := c.Rollout
	require.NotNil(t, r)
	require.Equal(t, rollout.PhaseHalted, r.Phase)
	require.True(t, r.Paused)
	require.Equal(t, []string{"aaa", "bbb", "zzz"}, []string{r.Stable, r.Target, r.Previous})
	require.Equal(t, []int{0, 3, 2, 1, 4}, []int{r.Wave, r.Waves, r.Admitted, r.Updated, r.Owners})
	require.Equal(t, []string{"dev/c1"}, r.Failing)
	require.Equal(t, "Halted", r.Condition.Reason)
	require.Equal(t, []RolloutWave{{Rule: "selector canary=true", Reached: true}, {Rule: "50%"}, {Rule: "100%", Implied: true}}, r.Plan)

	// Names in each half of the percentages.
	var low, high string
	for i := 0; low == "" || high == ""; i++ {
		n := fmt.Sprintf("app-%d", i)
		if rollout.Bucket("dev", n) < 50 && low == "" {
			low = n
		} else if rollout.Bucket("dev", n) >= 50 && high == "" {
			high = n
		}
	}
	owner := func(name string, labels map[string]string, rev, ready string, stale bool) Owner {
		return Owner{Namespace: "dev", Name: name, Chain: &Ref{Kind: "ClusterSupplyChain", Name: "web"}, labels: labels,
			ChainRevision: rev, Ready: Condition{Type: "Ready", Status: ready}, Stale: stale}
	}
	canary := map[string]string{"canary": "true"}
	// As read: its labels and status.chainRevision.
	c2 := Build(obj(t, `{apiVersion: carto.run/v1alpha1, kind: Workload, metadata: {name: c2, namespace: dev, generation: 2, labels: {canary: "true"}},
status: {observedGeneration: 2, chainRevision: bbb, supplyChainRef: {kind: ClusterSupplyChain, name: web}, conditions: [{type: Ready, status: "True", reason: Ready}]}}`), nil)
	require.Equal(t, "bbb", c2.ChainRevision)
	chains := []Chain{c}
	Count(chains, []Owner{
		c2,
		owner("c1", canary, "bbb", "False", false),
		owner("c3", canary, "bbb", "True", true), // its status is older than its spec: not yet on the target
		owner(low, nil, "aaa", "True", false),
		owner(high, nil, "aaa", "True", false),
		{Namespace: "dev", Name: "other", Chain: &Ref{Kind: "ClusterSupplyChain", Name: "api"}},
	})
	plan := chains[0].Rollout.Plan
	require.Equal(t, []int{3, 1, 1}, []int{plan[0].Owners, plan[1].Owners, plan[2].Owners})
	require.Equal(t, 1, plan[0].Updated)
	require.Equal(t, 1, plan[0].Failing)
	require.Equal(t, []WaveMember{
		{OwnerKind: "Workload", Namespace: "dev", Name: "c1", State: WaveFailed},
		{OwnerKind: "Workload", Namespace: "dev", Name: "c3", State: WaveMoving},
		{OwnerKind: "Workload", Namespace: "dev", Name: "c2", State: WaveReady}}, plan[0].Members, "failed first")
	require.Equal(t, []WaveMember{{OwnerKind: "Workload", Namespace: "dev", Name: low, State: WaveWaiting}}, plan[1].Members)
	require.Equal(t, []WaveMember{{OwnerKind: "Workload", Namespace: "dev", Name: high, State: WaveWaiting}}, plan[2].Members)
	require.Nil(t, c.Rollout.Plan[0].Members, "Count works on a copy: the chain given keeps its own")

	// Owners nothing moves are placed as the controller places them
	// (rollout.Stand): an owner of a shard the status names as unserved
	// (named or not), one being deleted, one no chain renders; an owner of
	// another shard, and one whose label is served, are moving.
	passed := BuildChain(obj(t, `{apiVersion: carto.run/v1alpha1, kind: ClusterSupplyChain, metadata: {name: web},
spec: {rollout: {waves: [{selector: {matchLabels: {canary: "true"}}}]}, resources: []},
status: {rollout: {stable: aaa, target: bbb, wave: 0, phase: Progressing, passedOver: [{owner: dev/t1, reason: Unserved}], passedOverCount: 2}}}`))
	shard := func(v string) map[string]string { return map[string]string{"canary": "true", "kontinue.dev/shard": v} }
	deleting := owner("d", canary, "aaa", "True", false)
	deleting.deleting = true
	left := owner("l", canary, "aaa", "False", false)
	left.Conditions = []Condition{{Type: "SupplyChainReady", Status: "False", Reason: "MultipleSupplyChainMatches"}}
	chains = []Chain{passed}
	Count(chains, []Owner{owner("t1", shard("nowhere"), "aaa", "True", false), owner("t2", shard("nowhere"), "aaa", "True", false),
		owner("b", shard("b"), "aaa", "True", false), owner("e", shard(""), "aaa", "True", false), deleting, left})
	require.Equal(t, []WaveMember{
		{OwnerKind: "Workload", Namespace: "dev", Name: "b", State: WaveMoving},
		{OwnerKind: "Workload", Namespace: "dev", Name: "d", State: WaveDeleting, Reason: rollout.ReasonDeleting},
		{OwnerKind: "Workload", Namespace: "dev", Name: "e", State: WaveUnserved, Reason: rollout.ReasonUnserved},
		{OwnerKind: "Workload", Namespace: "dev", Name: "l", State: WaveDetached, Reason: "MultipleSupplyChainMatches"},
		{OwnerKind: "Workload", Namespace: "dev", Name: "t1", State: WaveUnserved, Reason: rollout.ReasonUnserved},
		{OwnerKind: "Workload", Namespace: "dev", Name: "t2", State: WaveUnserved, Reason: rollout.ReasonUnserved}}, chains[0].Rollout.Plan[0].Members)
	require.Equal(t, 5, chains[0].Rollout.Plan[0].PassedOver)
	require.Equal(t, 2, chains[0].Rollout.PassedOverCount)

	// Complete: no roll-out under way, no wave is reached or counted.
	done := BuildChain(obj(t, `{apiVersion: carto.run/v1alpha1, kind: ClusterDelivery, metadata: {name: d},
spec: {rollout: {waves: [{percent: 10}]}, resources: []}, status: {rollout: {stable: aaa, phase: Complete}}}`))
	chains = []Chain{done}
	Count(chains, []Owner{{Namespace: "dev", Name: "x", Chain: &Ref{Kind: "ClusterDelivery", Name: "d"}}})
	require.Equal(t, rollout.PhaseComplete, chains[0].Rollout.Phase)
	require.Equal(t, []RolloutWave{{Rule: "10%"}, {Rule: "100%", Implied: true}}, chains[0].Rollout.Plan)

	// A policy that cannot be used says why; none, no roll-out.
	bad := BuildChain(obj(t, `{apiVersion: carto.run/v1alpha1, kind: ClusterSupplyChain, metadata: {name: b},
spec: {rollout: {waves: [{percent: 10, selector: {matchLabels: {a: b}}}]}, resources: []}}`))
	require.Equal(t, rollout.PhaseInvalid, bad.Rollout.Phase)
	require.Contains(t, bad.Rollout.Error, "give exactly one of selector and percent")
	require.Nil(t, BuildChain(obj(t, chainYAML)).Rollout)
}
