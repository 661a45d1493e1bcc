package e2e

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"kontinue.dev/kontinue/reconciler"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/rollout"
)

// TestRolloutWaves: a template edit over 52 Workloads (ConfigMap steps)
// under spec.rollout (a canary label, 10%, 50%, 100%):
//  1. a failing edit halts at the canaries: RolledOut=False Halted names
//     them, every other owner stays Ready on its revision, untouched;
//  2. `kontinue rollout undo` during the halt writes the stable definitions
//     back: the canaries are Ready on them again;
//  3. paused, a good edit moves the canaries only; a Workload's own change
//     flows meanwhile, on its old revision;
//  4. resumed, the waves follow in order, no owner renders with the new
//     revision before its wave admits it, until every owner does;
//  5. undo after completion rolls the previous revision out again;
//  6. an edit of the chain itself rolls out the same way.
func TestRolloutWaves(t *testing.T) {
	k := newKit(t)
	chain, tmpl := k.name("chain"), k.name("cfg")
	template := func(data string) string {
		return k.templateYAML("ClusterTemplate", tmpl, `
  params: [{name: p, default: a}]
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-cfg}
    data: `+data)
	}
	const canaryLabel = "rollout.example.com/canary"
	k.apply(template(`{v: "1", p: $(params.p)$}`))
	chainYAML := func(extra string) string {
		return k.chainYAML(chain, `
  rollout:
    waves:
    - selector: {matchLabels: {`+canaryLabel+`: "true"}}
    - percent: 10
    - percent: 50`+extra, k.step("cfg", "ClusterTemplate", tmpl, ""))
	}
	k.apply(chainYAML(""))
	policy, err := rollout.Compile(&api.RolloutPolicy{Waves: []api.RolloutWave{
		{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{canaryLabel: "true"}}},
		{Percent: ptr(10)}, {Percent: ptr(50)}}})
	require.NoError(t, err)

	workload := func(name string, canary bool, p string) string {
		params := ""
		if p != "" {
			params = fmt.Sprintf("[{name: p, value: %s}]", p)
		} else {
			params = "[]"
		}
		return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: Workload
metadata:
  name: %s
  labels: {app.example.com/chain: %s, %s: "%t"}
spec: {params: %s}
`, name, chain, canaryLabel, canary, params)
	}
	canaries := []string{"canary-0", "canary-1"}
	var others []string
	for i := 0; i < 50; i++ {
		others = append(others, fmt.Sprintf("app-%02d", i))
	}
	for _, n := range canaries {
		k.apply(workload(n, true, ""))
	}
	for _, n := range others {
		k.apply(workload(n, false, ""))
	}
	all := append(append([]string{}, canaries...), others...)
	for _, n := range all {
		k.waitOwner(n, "Ready", "True", "Ready")
	}
	k.waitChain(chain, rollout.ConditionRolledOut, "True", rollout.PhaseComplete)
	r1 := k.rollout(chain).Stable
	require.NotEmpty(t, r1)
	// An owner of the last wave only: its own change must flow on its old
	// revision while the roll-out holds it back.
	late := ""
	for _, n := range others {
		if rollout.Bucket(k.ns, n) >= 50 {
			late = n
			break
		}
	}
	require.NotEmpty(t, late)
	otherCMs := make([]objRef, 0, len(others))
	for _, n := range others {
		otherCMs = append(otherCMs, k.cm(n+"-cfg"))
	}

	// 1. A failing edit: the canaries fail, the roll-out halts there. The
	// edit itself wakes no owner: the waves do (the others are not even
	// reconciled).
	woken := func() map[string]int {
		out := map[string]int{}
		for _, n := range others {
			out[n] = reconciles.get(reconciler.Key{Kind: api.KindWorkload, NamespacedName: types.NamespacedName{Namespace: k.ns, Name: n}})
		}
		return out
	}
	before := woken()
	k.apply(template(`{v: "2", x: $(workload.metadata.annotations.missing)$}`))
	c := k.waitChain(chain, rollout.ConditionRolledOut, "False", rollout.PhaseHalted)
	for _, n := range canaries {
		require.Contains(t, c["message"], k.ns+"/"+n, "the condition names the failing owners")
		k.waitOwner(n, "Ready", "False", "TemplateStampFailure")
	}
	st := k.rollout(chain)
	r2 := st.Target
	require.NotEqual(t, r1, r2)
	require.Equal(t, 0, st.Wave)
	require.Equal(t, 4, st.Waves)
	require.ElementsMatch(t, []string{k.ns + "/canary-0", k.ns + "/canary-1"}, st.Failing)
	k.assertStable(2*time.Second, otherCMs...)
	require.Equal(t, before, woken(), "a template edit under a roll-out reconciles only the wave's owners")
	for _, n := range others {
		w := get(t, workloadGVR, k.ns, n)
		require.NotEqual(t, r2, nested(w.Object, "status", "chainRevision"), "%s is in a later wave: untouched", n)
		require.Equal(t, "True", ownerCondition(w, "Ready")["status"], n)
		require.Equal(t, "1", nested(get(t, configMapGVR, k.ns, n+"-cfg").Object, "data", "v"), n)
	}
	code, out, errOut := kontinueCLI(t, "rollout", "status", chain)
	require.Equal(t, 1, code, "halted: %s %s", out, errOut)
	require.Contains(t, out, "Halted")
	require.Contains(t, out, "failed owners:    "+k.ns+"/canary-0, "+k.ns+"/canary-1")

	// 2. Undo during the halt: the stable definitions are written back, the
	// canaries render with them again.
	code, out, errOut = kontinueCLI(t, "rollout", "undo", chain)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "restored revision "+r1)
	k.waitChain(chain, rollout.ConditionRolledOut, "True", rollout.PhaseComplete)
	require.Equal(t, r1, k.rollout(chain).Stable)
	for _, n := range canaries {
		k.waitOwner(n, "Ready", "True", "Ready")
		k.waitObj(configMapGVR, n+"-cfg", k.dataIs("v", "1"))
	}

	// 3. Paused, a good edit: the canary wave moves, no other.
	code, _, errOut = kontinueCLI(t, "rollout", "pause", chain)
	require.Equal(t, 0, code, errOut)
	k.apply(template(`{v: "3", p: $(params.p)$}`))
	for _, n := range canaries {
		k.waitObj(configMapGVR, n+"-cfg", k.dataIs("v", "3"))
	}
	k.waitChain(chain, rollout.ConditionRolledOut, "Unknown", rollout.PhasePaused)
	r3 := k.rollout(chain).Target
	require.NotContains(t, []string{"", r1, r2}, r3)
	// The late owner's own change flows, on the revision it has.
	k.apply(workload(late, false, "b"))
	k.waitObj(configMapGVR, late+"-cfg", k.dataIs("p", "b"))
	require.Equal(t, "1", nested(get(t, configMapGVR, k.ns, late+"-cfg").Object, "data", "v"), "rendered with its old revision")
	k.waitObjStatus(late, func(u *unstructured.Unstructured) string {
		if got := nested(u.Object, "status", "chainRevision"); got != r1 {
			return fmt.Sprintf("chainRevision %v, want %s", got, r1)
		}
		return ""
	})
	st = k.rollout(chain)
	require.Equal(t, 0, st.Wave, "paused: no wave advances")
	for _, n := range others {
		require.Equal(t, "1", nested(get(t, configMapGVR, k.ns, n+"-cfg").Object, "data", "v"), n)
	}

	// 4. Resumed: wave after wave, nobody early.
	code, _, errOut = kontinueCLI(t, "rollout", "resume", chain)
	require.Equal(t, 0, code, errOut)
	seen := k.watchWaves(chain, policy, r3)
	require.Subset(t, seen, []int{1, 2, 3}, "every wave was rolled in turn: %v", seen)
	for _, n := range all {
		k.waitObj(configMapGVR, n+"-cfg", k.dataIs("v", "3"))
	}
	require.Equal(t, "b", nested(get(t, configMapGVR, k.ns, late+"-cfg").Object, "data", "p"))
	code, out, errOut = kontinueCLI(t, "rollout", "status", chain)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "Complete")
	require.Contains(t, out, "previous:         "+r1)

	// 5. Undo after completion: the previous revision rolls out in waves.
	code, out, errOut = kontinueCLI(t, "rollout", "undo", chain)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "restored revision "+r1)
	seen = k.watchWaves(chain, policy, r1)
	require.Subset(t, seen, []int{1, 2, 3}, "%v", seen)
	for _, n := range all {
		k.waitObj(configMapGVR, n+"-cfg", k.dataIs("v", "1"))
	}

	// 6. An edit of the chain itself is a revision too: it wakes only the
	// canaries (paused, so that no later wave begins while we count), then
	// rolls out in waves.
	code, _, errOut = kontinueCLI(t, "rollout", "pause", chain)
	require.Equal(t, 0, code, errOut)
	before = woken()
	k.apply(chainYAML("\n  params: [{name: p, default: c}]"))
	for _, n := range canaries {
		k.waitObj(configMapGVR, n+"-cfg", k.dataIs("p", "c"))
	}
	k.waitChain(chain, rollout.ConditionRolledOut, "Unknown", rollout.PhasePaused)
	require.Equal(t, before, woken(), "a chain edit under a roll-out wakes the first wave only")
	r4 := k.rollout(chain).Target
	require.NotContains(t, []string{"", r1, r3}, r4)
	code, _, errOut = kontinueCLI(t, "rollout", "resume", chain)
	require.Equal(t, 0, code, errOut)
	seen = k.watchWaves(chain, policy, r4)
	require.Subset(t, seen, []int{1, 2, 3}, "%v", seen)
	for _, n := range others {
		want := "c"
		if n == late {
			want = "b" // the Workload's own value wins over the chain's default
		}
		k.waitObj(configMapGVR, n+"-cfg", k.dataIs("p", want))
	}
}

func ptr[T any](v T) *T { return &v }

// rollout is the ClusterSupplyChain's status.rollout.
func (k *kit) rollout(chain string) rollout.Status {
	k.t.Helper()
	return k.rolloutOf(supplyChainFlavor, chain)
}

// rolloutOf is the status.rollout of a chain of flavor f.
func (k *kit) rolloutOf(f ownerFlavor, chain string) rollout.Status {
	k.t.Helper()
	_, st, err := rollout.Read(get(k.t, f.chainGVR(), "", chain).Object)
	require.NoError(k.t, err)
	require.NotNil(k.t, st)
	return *st
}

// watchWaves follows a ClusterSupplyChain's roll-out (watchWavesOf).
func (k *kit) watchWaves(chain string, policy *rollout.Compiled, target string) []int {
	k.t.Helper()
	return k.watchWavesOf(supplyChainFlavor, chain, policy, target)
}

// watchWavesOf follows a roll-out to target until it completes: at every
// look no owner renders with target before a wave admits it (owners are
// read before the chain, whose wave only grows). It returns the waves the
// chain's status went through for target, from a watch of the chain (every
// status write is an event: a wave that lasts less than a look is seen
// too).
func (k *kit) watchWavesOf(f ownerFlavor, chain string, policy *rollout.Compiled, target string) []int {
	k.t.Helper()
	var mu sync.Mutex
	waves := map[int]bool{}
	saw := func(c *unstructured.Unstructured) {
		if _, st, err := rollout.Read(c.Object); err == nil && st.Target == target {
			mu.Lock()
			waves[st.Wave] = true
			mu.Unlock()
		}
	}
	first := get(k.t, f.chainGVR(), "", chain)
	saw(first)
	w, err := env.dyn.Resource(f.chainGVR()).Watch(context.Background(), metav1.ListOptions{
		FieldSelector: "metadata.name=" + chain, ResourceVersion: first.GetResourceVersion()})
	require.NoError(k.t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if c, ok := ev.Object.(*unstructured.Unstructured); ok {
				saw(c)
			}
		}
	}()
	eventually(k.t, 60*time.Second, func() string {
		owners, err := env.dyn.Resource(f.ownerGVR).Namespace(k.ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		c := get(k.t, f.chainGVR(), "", chain)
		_, st, err := rollout.Read(c.Object)
		require.NoError(k.t, err)
		if st.Target == target {
			for _, o := range owners.Items {
				rev, _, _ := unstructured.NestedString(o.Object, "status", "chainRevision")
				ro := rollout.Owner{Namespace: o.GetNamespace(), Name: o.GetName(), Labels: o.GetLabels()}
				if rev == target && !policy.Admitted(st.Wave, ro) {
					k.t.Fatalf("%s renders with %s before its wave (wave %d)", o.GetName(), target, st.Wave)
				}
			}
		}
		if st.Stable != target || st.Phase != rollout.PhaseComplete {
			return fmt.Sprintf("roll-out to %s: %s wave %d (%d/%d)", target, st.Phase, st.Wave, st.Updated, st.Admitted)
		}
		return ""
	})
	w.Stop()
	<-done
	var out []int
	for w := range waves {
		out = append(out, w)
	}
	sort.Ints(out)
	return out
}

// TestRolloutInvalidPolicy: a policy that cannot be used (a wave with both
// a selector and a percent, a selector with an unknown operator) is a
// clear RolledOut=False InvalidRollout on the chain; its owners render with
// the live definitions, as without a policy, and a fixed policy is adopted.
func TestRolloutInvalidPolicy(t *testing.T) {
	k := newKit(t)
	chain, tmpl := k.name("chain"), k.name("cfg")
	k.apply(k.cmTemplate(tmpl, "cfg", `{v: "1"}`))
	chainWith := func(waves string) string {
		return k.chainYAML(chain, "\n  rollout:\n    waves: "+waves, k.step("cfg", "ClusterTemplate", tmpl, ""))
	}
	k.apply(chainWith(`[{percent: 10, selector: {matchLabels: {a: b}}}]`))
	k.workload("app", chain, "")
	k.waitOwner("app", "Ready", "True", "Ready")
	c := k.waitChain(chain, rollout.ConditionRolledOut, "False", "InvalidRollout")
	require.Contains(t, c["message"], "wave [0]: give exactly one of selector and percent")
	require.Nil(t, nested(get(t, chainGVR, "", chain).Object, "status", "rollout"))
	require.Equal(t, "True", ownerCondition(get(t, chainGVR, "", chain), "Ready")["status"], "the chain's Ready does not depend on its roll-out")

	k.apply(chainWith(`[{selector: {matchExpressions: [{key: a, operator: Nope}]}}]`))
	c = k.waitChain(chain, rollout.ConditionRolledOut, "False", "InvalidRollout")
	require.Contains(t, c["message"], "wave [0]")
	// The owner renders with the live definitions: a template edit reaches it.
	k.apply(k.cmTemplate(tmpl, "cfg", `{v: "2"}`))
	k.waitObj(configMapGVR, "app-cfg", k.dataIs("v", "2"))
	require.Nil(t, nested(get(t, workloadGVR, k.ns, "app").Object, "status", "chainRevision"))

	k.apply(chainWith(`[{percent: 50}]`))
	k.waitChain(chain, rollout.ConditionRolledOut, "True", rollout.PhaseComplete)
	code, out, errOut := kontinueCLI(t, "rollout", "status", chain, "-o", "json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"phase": "Complete"`)
	require.Contains(t, out, `"waves": 2`)
}
