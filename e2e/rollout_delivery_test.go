package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"kontinue.dev/kontinue/cli"
	"kontinue.dev/kontinue/reconciler"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/rollout"
)

// chainGVR is the resource of the flavor's chains.
func (f ownerFlavor) chainGVR() schema.GroupVersionResource {
	if f.chainKind == api.KindClusterDelivery {
		return deliveryGVR
	}
	return chainGVR
}

// TestRolloutDeliverables: a ClusterDelivery's template edit reaches its
// Deliverables in waves (a canary label, 50%, the implied 100%), as a
// supply chain's reaches Workloads (TestRolloutWaves):
//  1. a failing edit halts at the canary: RolledOut=False Halted names
//     it, every other Deliverable stays Ready on its revision, untouched;
//     while halted nothing polls (the chain is neither reconciled nor
//     written); `kontinue rollout status --delivery` lists each wave
//     with its Deliverables, in text and JSON;
//  2. `kontinue rollout undo --delivery` writes the stable definitions
//     back: the canary is Ready on them again;
//  3. a good edit rolls out wave after wave, no Deliverable early, until
//     every one renders with it.
func TestRolloutDeliverables(t *testing.T) {
	k := newKit(t)
	f := deliveryFlavor
	chain, tmpl := k.name("prod"), k.name("dcfg")
	template := func(data string) string {
		return k.templateYAML("ClusterTemplate", tmpl, `
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(deliverable.metadata.name)$-cfg}
    data: `+data)
	}
	const canaryLabel = "rollout.example.com/canary"
	k.apply(template(`{v: "1"}`))
	k.apply(fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterDelivery
metadata: {name: %[1]s}
spec:
  selector: {app.example.com/delivery: %[1]s}
  rollout:
    waves:
    - selector: {matchLabels: {%[2]s: "true"}}
    - percent: 50
  resources:
  - name: cfg
    templateRef: {kind: ClusterTemplate, name: %[3]s}
`, chain, canaryLabel, tmpl))
	policy, err := rollout.Compile(&api.RolloutPolicy{Waves: []api.RolloutWave{
		{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{canaryLabel: "true"}}}, {Percent: ptr(50)}}})
	require.NoError(t, err)

	// Two Deliverables in each half of the percentages: both later waves
	// have owners.
	var low, high []string
	for i := 0; len(low) < 2 || len(high) < 2; i++ {
		n := fmt.Sprintf("app-%d", i)
		if b := rollout.Bucket(k.ns, n); b < 50 && len(low) < 2 {
			low = append(low, n)
		} else if b >= 50 && len(high) < 2 {
			high = append(high, n)
		}
	}
	others := append(append([]string{}, low...), high...)
	all := append([]string{"canary"}, others...)
	for _, n := range all {
		k.apply(fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: Deliverable
metadata:
  name: %s
  labels: {app.example.com/delivery: %s, %s: "%t"}
spec:
  source: {git: {url: "https://git.example.com/app.git", ref: {branch: main}}}
`, n, chain, canaryLabel, n == "canary"))
	}
	for _, n := range all {
		waitOwner(t, deliverableGVR, k.ns, n, "Ready", "True", "Ready")
	}
	waitPhase := func(phase string) rollout.Status {
		var st rollout.Status
		eventually(t, 30*time.Second, func() string {
			if st = k.rolloutOf(f, chain); st.Phase != phase {
				return fmt.Sprintf("roll-out %s wave %d, want %s", st.Phase, st.Wave, phase)
			}
			return ""
		})
		return st
	}
	r1 := waitPhase(rollout.PhaseComplete).Stable
	require.NotEmpty(t, r1)

	// 1. A failing edit halts at the canary.
	k.apply(template(`{v: "2", x: $(deliverable.metadata.annotations.missing)$}`))
	st := waitPhase(rollout.PhaseHalted)
	r2 := st.Target
	require.NotEqual(t, r1, r2)
	require.Equal(t, []string{k.ns + "/canary"}, st.Failing)
	require.Equal(t, 3, st.Waves)
	waitOwner(t, deliverableGVR, k.ns, "canary", "Ready", "False", "TemplateStampFailure")
	for _, n := range others {
		d := get(t, deliverableGVR, k.ns, n)
		// No revision recorded: walked before the policy was adopted,
		// rendering with the stable definitions; either way not the target.
		rev, _ := nested(d.Object, "status", "chainRevision").(string)
		require.Contains(t, []string{"", r1}, rev, "%s is in a later wave: untouched", n)
		require.Equal(t, "True", ownerCondition(d, "Ready")["status"], n)
		require.Equal(t, "1", nested(get(t, configMapGVR, k.ns, n+"-cfg").Object, "data", "v"), n)
	}
	// Nothing polls a halted roll-out: no owner moves, so the chain is
	// not looked at, let alone written. (A wake pending from the canary's
	// last change fires within a second of it.)
	time.Sleep(1500 * time.Millisecond)
	key := reconciler.Key{Kind: api.KindClusterDelivery, NamespacedName: types.NamespacedName{Name: chain}}
	before := reconciles.get(key)
	k.assertStable(3*time.Second, k.cluster(deliveryGVR, chain), objRef{deliverableGVR, k.ns, "canary"})
	require.Equal(t, before, reconciles.get(key), "a halted roll-out whose owners do not move is not reconciled")

	code, out, errOut := kontinueCLI(t, "rollout", "status", "--delivery", chain)
	require.Equal(t, 1, code, "halted: %s %s", out, errOut)
	require.Contains(t, out, "ClusterDelivery "+chain+": Halted")
	require.Contains(t, out, "failed owners:    "+k.ns+"/canary")
	require.Regexp(t, `1  selector `+canaryLabel+`=true\s+current  1 owner\(s\): 0 Ready on the target, 1 failed\n         failed    `+k.ns+`/canary\n`, out)
	require.Regexp(t, `2  50%\s+waiting  2 owner\(s\)\n`, out)
	for _, n := range others {
		require.Contains(t, out, "         waiting   "+k.ns+"/"+n+"\n")
	}
	code, out, errOut = kontinueCLI(t, "rollout", "status", "--delivery", chain, "-o", "json")
	require.Equal(t, 1, code, errOut)
	var js cli.RolloutStatus
	require.NoError(t, json.Unmarshal([]byte(out), &js), out)
	require.Len(t, js.Plan, 3)
	waveOf := map[string]int{}
	for i, w := range js.Plan {
		for _, m := range w.Members {
			require.Equal(t, api.KindDeliverable, m.OwnerKind)
			waveOf[m.Name] = i
		}
	}
	require.Equal(t, map[string]int{"canary": 0, low[0]: 1, low[1]: 1, high[0]: 2, high[1]: 2}, waveOf)
	require.Equal(t, "failed", js.Plan[0].Members[0].State)

	// 2. Undo during the halt.
	code, out, errOut = kontinueCLI(t, "rollout", "undo", "--delivery", chain)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "restored revision "+r1)
	require.Equal(t, r1, waitPhase(rollout.PhaseComplete).Stable)
	waitOwner(t, deliverableGVR, k.ns, "canary", "Ready", "True", "Ready")
	k.waitObj(configMapGVR, "canary-cfg", k.dataIs("v", "1"))

	// 3. A good edit, wave after wave.
	k.apply(template(`{v: "3"}`))
	var r3 string
	eventually(t, 30*time.Second, func() string {
		if r3 = k.rolloutOf(f, chain).Target; r3 == "" || r3 == r1 || r3 == r2 {
			return "no new target yet: " + r3
		}
		return ""
	})
	seen := k.watchWavesOf(f, chain, policy, r3)
	require.Subset(t, seen, []int{1, 2}, "the later waves were rolled in turn: %v", seen)
	for _, n := range all {
		k.waitObj(configMapGVR, n+"-cfg", k.dataIs("v", "3"))
		require.Equal(t, r3, nested(get(t, deliverableGVR, k.ns, n).Object, "status", "chainRevision"), n)
	}
}
