package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"kontinue.dev/kontinue/reconciler/rollout"
)

// TestRolloutMaxUnavailable: a canary wave with maxUnavailable: 1 moves on
// while one canary never becomes healthy on the new revision (Ready
// Unknown: its ConfigMap matches neither health rule); the last wave (no
// cap) moves every other owner, then holds until that canary is Ready, and
// the roll-out completes once its owner fixes it. Without the cap the
// roll-out holds at the canaries and no other owner moves.
func TestRolloutMaxUnavailable(t *testing.T) {
	k := newKit(t)
	chain, tmpl := k.name("chain"), k.name("cfg")
	template := func(data string) string {
		return k.templateYAML("ClusterTemplate", tmpl, `
  params: [{name: ok, default: "yes"}]
  healthRule:
    multiMatch:
      healthy: {matchFields: [{key: data.ok, operator: In, values: ["yes"]}]}
      unhealthy: {matchFields: [{key: data.ok, operator: In, values: ["no"]}]}
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-cfg}
    data: `+data)
	}
	const canaryLabel = "rollout.example.com/canary"
	k.apply(template(`{v: "1", ok: "yes"}`))
	k.apply(k.chainYAML(chain, `
  rollout:
    waves:
    - selector: {matchLabels: {`+canaryLabel+`: "true"}}
      maxUnavailable: 1`, k.step("cfg", "ClusterTemplate", tmpl, "")))
	workload := func(name string, canary bool, ok string) {
		k.apply(fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: Workload
metadata:
  name: %s
  labels: {app.example.com/chain: %s, %s: "%t"}
spec: {params: [{name: ok, value: %q}]}
`, name, chain, canaryLabel, canary, ok))
	}
	workload("canary-0", true, "yes")
	workload("canary-1", true, "wait") // healthy on the first revision, which ignores the param
	others := []string{"app-0", "app-1", "app-2"}
	for _, n := range others {
		workload(n, false, "yes")
	}
	for _, n := range append([]string{"canary-0", "canary-1"}, others...) {
		k.waitOwner(n, "Ready", "True", "Ready")
	}
	k.waitChain(chain, rollout.ConditionRolledOut, "True", rollout.PhaseComplete)

	// A new revision: canary-1 renders data.ok "wait" and stays Ready
	// Unknown; the canary wave is done with it as its one unavailable
	// owner, and the last wave moves the others.
	k.apply(template(`{v: "2", ok: $(params.ok)$}`))
	var r2 string
	eventually(t, time.Minute, func() string {
		r2 = k.rollout(chain).Target
		if r2 == "" {
			return "no target yet"
		}
		return ""
	})
	onR2 := func(name, ready string) string {
		w := get(t, workloadGVR, k.ns, name)
		if rev := nested(w.Object, "status", "chainRevision"); rev != r2 {
			return fmt.Sprintf("%s renders with %v, want %s", name, rev, r2)
		}
		if got := ownerCondition(w, "Ready")["status"]; got != ready {
			return fmt.Sprintf("%s is Ready %v on %s, want %s", name, got, r2, ready)
		}
		return ""
	}
	eventually(t, time.Minute, func() string { return onR2("canary-1", "Unknown") })
	for _, n := range append([]string{"canary-0"}, others...) {
		eventually(t, time.Minute, func() string { return onR2(n, "True") })
	}
	// The last wave has no cap: it holds while canary-1 is not Ready.
	eventually(t, time.Minute, func() string {
		st := k.rollout(chain)
		if st.Target != r2 || st.Wave != 1 || st.Phase != rollout.PhaseProgressing || st.Admitted != 5 || st.Updated != 4 {
			return fmt.Sprintf("roll-out %s wave %d %s, %d of %d updated; want %s wave 1 (the last) Progressing, 4 of 5",
				st.Target, st.Wave, st.Phase, st.Updated, st.Admitted, r2)
		}
		return ""
	})

	// Its owner fixes it: the roll-out completes.
	workload("canary-1", true, "yes")
	k.waitChain(chain, rollout.ConditionRolledOut, "True", rollout.PhaseComplete)
	require.Equal(t, r2, k.rollout(chain).Stable)
	require.Empty(t, onR2("canary-1", "True"))
}
