package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"kontinue.dev/kontinue/reconciler"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/rollout"
)

// TestRolloutShards: a chain's roll-out across shards (docs/rollouts.md,
// "Shards"). Two replicas serve shards a and b; the suite's own Kontinue
// serves the default shard; each of the three decides the chain's
// roll-out. The canary is in shard b, the later waves' owners in all
// three shards.
//  1. a failing edit halts at the canary: shard a's replica, whose own
//     owners include no canary, does not move the wave on (it decides on
//     every shard's owners); no owner of a later wave moves; the tally
//     counts every shard's owners; the three replicas agree (the chain's
//     status is written no more);
//  2. a fix rolls out wave by wave across the three shards, no owner
//     early, until every owner renders with it;
//  3. each replica woke only its own shard's owners: the suite's Kontinue
//     never reconciled an owner of a or b;
//  4. the policy removed, a replica stops watching the other shards.
func TestRolloutShards(t *testing.T) {
	if env.external {
		t.Skip("counts the in-process Kontinue's reconciles")
	}
	k := newKit(t)
	a, b := startKontinueProc(t, "a", "--shard=a"), startKontinueProc(t, "b", "--shard=b")
	chain, tmpl := k.name("chain"), k.name("cfg")
	template := func(data string) string { return k.cmTemplate(tmpl, "cfg", data) }
	const canaryLabel = "rollout.example.com/canary"
	k.apply(template(`{v: "1"}`))
	k.apply(k.chainYAML(chain, `
  rollout:
    waves:
    - selector: {matchLabels: {`+canaryLabel+`: "true"}}
    - percent: 50`, k.step("cfg", "ClusterTemplate", tmpl, "")))
	policy, err := rollout.Compile(&api.RolloutPolicy{Waves: []api.RolloutWave{
		{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{canaryLabel: "true"}}}, {Percent: ptr(50)}}})
	require.NoError(t, err)

	workload := func(name, shard string, canary bool) string {
		l := ""
		if shard != "" {
			l = ", " + shardLabel + ": " + shard
		}
		return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: Workload
metadata:
  name: %s
  labels: {app.example.com/chain: %s, %s: "%t"%s}
spec: {}
`, name, chain, canaryLabel, canary, l)
	}
	// In each shard two owners of the 50% wave and two of the last.
	shardOf := map[string]string{"canary": "b"}
	for _, s := range []string{"a", "b", ""} {
		low, high := 0, 0
		for i := 0; low < 2 || high < 2; i++ {
			n := fmt.Sprintf("%s-%02d", map[string]string{"a": "a", "b": "b", "": "default"}[s], i)
			if rollout.Bucket(k.ns, n) < 50 {
				if low == 2 {
					continue
				}
				low++
			} else {
				if high == 2 {
					continue
				}
				high++
			}
			shardOf[n] = s
		}
	}
	var others []objRef
	for n, s := range shardOf {
		k.apply(workload(n, s, n == "canary"))
		if n != "canary" {
			others = append(others, k.cm(n+"-cfg"))
		}
	}
	for n := range shardOf {
		k.waitOwner(n, "Ready", "True", "Ready")
	}
	k.waitChain(chain, rollout.ConditionRolledOut, "True", rollout.PhaseComplete)
	r1 := k.rollout(chain).Stable
	require.NotEmpty(t, r1)

	// 1. A failing edit: the canary (shard b) fails, the roll-out halts
	// there, for every replica.
	k.apply(template(`{v: "2", x: $(workload.metadata.annotations.missing)$}`))
	k.waitChain(chain, rollout.ConditionRolledOut, "False", rollout.PhaseHalted)
	k.waitOwner("canary", "Ready", "False", "TemplateStampFailure")
	// The three replicas agree: the chain's status stops changing.
	eventually(t, 30*time.Second, func() string {
		before := get(t, chainGVR, "", chain).GetResourceVersion()
		time.Sleep(2 * time.Second)
		if get(t, chainGVR, "", chain).GetResourceVersion() != before {
			return fmt.Sprintf("the chain's status is still written: %v", k.rollout(chain))
		}
		return ""
	})
	st := k.rollout(chain)
	r2 := st.Target
	require.NotEqual(t, r1, r2)
	require.Equal(t, 0, st.Wave, "no replica moved past the canary's wave")
	require.Equal(t, []string{k.ns + "/canary"}, st.Failing)
	require.Equal(t, len(shardOf), st.Owners, "the tally counts every shard's owners")
	k.assertStable(2*time.Second, others...)
	for n := range shardOf {
		if n == "canary" {
			continue
		}
		w := get(t, workloadGVR, k.ns, n)
		// An owner first walked before any replica adopted the policy
		// recorded no revision (it renders with the stable one): either
		// way, not the target.
		rev, _ := nested(w.Object, "status", "chainRevision").(string)
		require.Contains(t, []string{"", r1}, rev, "%s (shard %q) is in a later wave: untouched", n, shardOf[n])
		require.Equal(t, "True", ownerCondition(w, "Ready")["status"], n)
		require.Equal(t, "1", nested(get(t, configMapGVR, k.ns, n+"-cfg").Object, "data", "v"), n)
	}

	// 2. A fix rolls out in waves across the shards, nobody early.
	k.apply(template(`{v: "3"}`))
	eventually(t, 30*time.Second, func() string {
		if st := k.rollout(chain); st.Target == r2 || st.Target == "" {
			return "the fix is not the target yet"
		}
		return ""
	})
	r3 := k.rollout(chain).Target
	seen := k.watchWaves(chain, policy, r3)
	require.Subset(t, seen, []int{1, 2}, "every wave was rolled in turn: %v", seen)
	for n := range shardOf {
		k.waitObj(configMapGVR, n+"-cfg", k.dataIs("v", "3"))
		k.waitOwner(n, "Ready", "True", "Ready")
	}

	// 3. Each replica woke its own shard's owners only.
	for n, s := range shardOf {
		if s != "" {
			assert.Zero(t, reconciles.get(reconciler.Key{Kind: api.KindWorkload, NamespacedName: types.NamespacedName{Namespace: k.ns, Name: n}}),
				"the default shard's Kontinue reconciled %s of shard %s", n, s)
		}
	}
	noForeign(t, a, b)

	// 4. Without a policy the chain needs no other shard's facts: shard
	// a's replica stops its watch of the other shards' owners.
	informers := func() float64 {
		v, msg := a.metric("kontinue_active_informers", nil)
		require.Empty(t, msg)
		return v
	}
	with := informers()
	k.apply(k.chainYAML(chain, "", k.step("cfg", "ClusterTemplate", tmpl, "")))
	eventually(t, 30*time.Second, func() string {
		if got := informers(); got != with-1 {
			return fmt.Sprintf("shard a runs %v informers, want %v", got, with-1)
		}
		return ""
	})
}
