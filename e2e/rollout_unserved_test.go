package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"kontinue.dev/kontinue/reconciler/rollout"
)

// TestRolloutPassesOverOwnersNothingMoves: owners that nothing will move
// to a roll-out's target do not hold its wave (docs/rollouts.md, "Owners
// nothing moves"). A chain's canary wave admits the platform's canary and
// three tenants' Workloads that joined it with the canary label, then:
// one labels itself kontinue.dev/shard=<a shard no replica runs>, one is
// deleted while a finalizer of its own holds it, one drops the label its
// chain selects it by. Shard b's replica runs next to the suite's (the
// default shard), and serves an owner of the last wave. A template edit
// (pauseOnFailure: false), the roll-out paused first:
//  1. the canary wave's tally counts the three as passed over, and the
//     chain's status names them with why; `kontinue rollout status` shows
//     them unserved, deleting, detached (not moving); `kontinue check`
//     reports the owner no running replica serves, and the owners the
//     roll-out passed over, and not shard b's owner;
//  2. resumed, the roll-out completes: every other owner, shard b's too,
//     renders with the target, the three keep what they had, and the
//     completed roll-out still names them;
//  3. the tenant labels itself for shard b: b's replica moves it.
func TestRolloutPassesOverOwnersNothingMoves(t *testing.T) {
	if env.external {
		t.Skip("starts a replica of shard b")
	}
	k := newKit(t)
	b := startKontinueProc(t, "b", "--shard=b")
	chain, tmpl := k.name("chain"), k.name("cfg")
	nowhere := "nowhere-" + strings.TrimPrefix(k.ns, "e2e-")
	const canaryLabel = "rollout.example.com/canary"
	template := func(v string) string { return k.cmTemplate(tmpl, "cfg", `{v: "`+v+`"}`) }
	k.apply(template("1"))
	k.apply(k.chainYAML(chain, `
  rollout:
    waves:
    - selector: {matchLabels: {`+canaryLabel+`: "true"}}
    pauseOnFailure: false`, k.step("cfg", "ClusterTemplate", tmpl, "")))
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
	owners := map[string]bool{"canary": true, "tenant": true, "held": true, "left": true, "later": false}
	for n, canary := range owners {
		k.apply(workload(n, "", canary))
	}
	k.apply(workload("b-later", "b", false))
	for _, n := range []string{"canary", "tenant", "held", "left", "later", "b-later"} {
		k.waitOwner(n, "Ready", "True", "Ready")
	}
	k.waitChain(chain, rollout.ConditionRolledOut, "True", rollout.PhaseComplete)
	r1 := k.rollout(chain).Stable
	require.NotEmpty(t, r1)
	// Paused now, so that every replica's cache shows it well before the
	// edit: the canary wave's owners will move, no later wave begin.
	code, out, errOut := kontinueCLI(t, "rollout", "pause", chain)
	require.Equal(t, 0, code, out+errOut)

	// What no roll-out changes: a shard nobody serves, a deletion held by a
	// finalizer, no chain selecting the owner.
	k.update(workloadGVR, k.ns, "tenant", func(u *unstructured.Unstructured) {
		l := u.GetLabels()
		l[shardLabel] = nowhere
		u.SetLabels(l)
	})
	k.update(workloadGVR, k.ns, "held", func(u *unstructured.Unstructured) { u.SetFinalizers([]string{"e2e.kontinue.dev/hold"}) })
	t.Cleanup(func() {
		_, _ = env.dyn.Resource(workloadGVR).Namespace(k.ns).Patch(context.Background(), "held", types.MergePatchType,
			[]byte(`{"metadata": {"finalizers": null}}`), metav1.PatchOptions{})
	})
	require.NoError(t, env.dyn.Resource(workloadGVR).Namespace(k.ns).Delete(context.Background(), "held", metav1.DeleteOptions{}))
	k.update(workloadGVR, k.ns, "left", func(u *unstructured.Unstructured) {
		l := u.GetLabels()
		delete(l, "app.example.com/chain")
		u.SetLabels(l)
	})
	k.waitOwner("left", "SupplyChainReady", "False", "SupplyChainNotFound")

	// 1. Paused, the canary wave's owners move and no later wave begins.
	k.apply(template("2"))
	k.waitObj(configMapGVR, "canary-cfg", k.dataIs("v", "2"))
	passed := func() []any {
		u := get(t, chainGVR, "", chain)
		p, _, _ := unstructured.NestedSlice(u.Object, "status", "rollout", "passedOver")
		return p
	}
	want := []any{
		map[string]any{"owner": k.ns + "/held", "reason": "Deleting"},
		map[string]any{"owner": k.ns + "/left", "reason": "SupplyChainNotFound"},
		map[string]any{"owner": k.ns + "/tenant", "reason": "Unserved"},
	}
	var target string
	eventually(t, 30*time.Second, func() string {
		st := k.rollout(chain)
		target = st.Target
		if st.Phase != rollout.PhasePaused || st.Updated != 1 || fmt.Sprint(passed()) != fmt.Sprint(want) {
			c := ownerCondition(get(t, chainGVR, "", chain), rollout.ConditionRolledOut)
			return fmt.Sprintf("the canary wave: %s, %d of %d Ready, passed over %v, want the three named (%v)", st.Phase, st.Updated, st.Admitted, passed(), c["message"])
		}
		return ""
	})
	require.NotEqual(t, r1, target)
	require.Contains(t, ownerCondition(get(t, chainGVR, "", chain), rollout.ConditionRolledOut)["message"],
		"3 owner(s) passed over, which nothing can move now: "+k.ns+"/held (Deleting), "+k.ns+"/left (SupplyChainNotFound), "+k.ns+"/tenant (Unserved)")

	code, out, errOut = kontinueCLI(t, "rollout", "status", chain)
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "unserved  "+k.ns+"/tenant", out)
	require.Contains(t, out, "deleting  "+k.ns+"/held", out)
	require.Contains(t, out, "detached  "+k.ns+"/left", out)
	require.Contains(t, out, "ready     "+k.ns+"/canary", out)
	require.NotContains(t, out, "moving", out)

	// Other tests' shards may fail the check: its lines are matched by name.
	_, out, errOut = kontinueCLI(t, "check", "--controller-namespace", "default", "--leader-election-id", "kontinue-leader")
	require.Contains(t, out, "shard "+nowhere+": no Lease default/kontinue-leader-shard-"+nowhere+": no replica serves its 1 owner (Workload "+k.ns+"/tenant)", out+errOut)
	require.Contains(t, out, "ClusterSupplyChain "+chain+": its roll-out of revision "+target+" passed over 3 owner(s) that nothing moves to it (Workload "+k.ns+"/held: Deleting, Workload "+k.ns+"/left: SupplyChainNotFound, Workload "+k.ns+"/tenant: Unserved)", out)
	require.NotContains(t, out, k.ns+"/b-later", "shard b's replica runs, and keeps its Lease")

	// 2. Resumed: the roll-out completes without them.
	code, out, errOut = kontinueCLI(t, "rollout", "resume", chain)
	require.Equal(t, 0, code, out+errOut)
	eventually(t, 60*time.Second, func() string {
		if st := k.rollout(chain); st.Stable != target || st.Phase != rollout.PhaseComplete {
			return fmt.Sprintf("roll-out to %s: %s wave %d, %d of %d Ready, passed over %v", target, st.Phase, st.Wave, st.Updated, st.Admitted, passed())
		}
		return ""
	})
	for _, n := range []string{"canary", "later", "b-later"} {
		k.waitObj(configMapGVR, n+"-cfg", k.dataIs("v", "2"))
		k.waitOwner(n, "Ready", "True", "Ready")
	}
	for _, n := range []string{"tenant", "held", "left"} {
		require.Equal(t, "1", nested(get(t, configMapGVR, k.ns, n+"-cfg").Object, "data", "v"), "%s was not moved", n)
	}
	require.Equal(t, fmt.Sprint(want), fmt.Sprint(passed()), "the completed roll-out names what it passed over")
	require.Contains(t, ownerCondition(get(t, chainGVR, "", chain), rollout.ConditionRolledOut)["message"], k.ns+"/tenant (Unserved)")

	// 3. Served again, the tenant moves to the stable revision.
	k.update(workloadGVR, k.ns, "tenant", func(u *unstructured.Unstructured) {
		l := u.GetLabels()
		l[shardLabel] = "b"
		u.SetLabels(l)
	})
	k.waitObj(configMapGVR, "tenant-cfg", k.dataIs("v", "2"))
	noForeign(t, b)
}
