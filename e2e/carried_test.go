package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestFailedStepDoesNotLoop (robustness seed 735): a step that stamped a
// kind no other step of its owner stamps, and then fails before its apply
// (here: its template no longer renders), still points at its object. Kontinue
// used to keep no watch of that kind then; the cleanup glanced at it each
// reconcile, and each glance's informer, started anew, listed the owner's
// object, whose add event (of a version someone else wrote) woke the
// owner again: reconciles several times a
// second, each with a LIST, for as long as the step failed. Its own
// Kontinue (shard "carried") serves only this Workload, so that its
// reconcile count is this owner's.
func TestFailedStepDoesNotLoop(t *testing.T) {
	k := newKit(t)
	p := startKontinueProc(t, "carried", "--shard=carried")
	cfg, sec := k.name("cfg"), k.name("sec")
	k.apply(k.cmTemplate(cfg, "cfg", `{greeting: hello}`))
	k.apply(k.templateYAML("ClusterTemplate", sec, `
  template:
    apiVersion: v1
    kind: Secret
    metadata: {name: $(workload.metadata.name)$-sec}
    stringData: {greeting: hello}`))
	chain := k.name("chain")
	k.apply(k.chainYAML(chain, "", k.step("cfg", "ClusterTemplate", cfg, "")+k.step("sec", "ClusterTemplate", sec, "")))
	readyOnShard(k, chain, "carried")
	// Someone else writes the Secret (a person, another controller): its
	// events are not the echoes of Kontinue's own writes.
	k.waitObj(secretGVR, "app-sec", nil)
	k.update(secretGVR, k.ns, "app-sec", func(u *unstructured.Unstructured) {
		u.SetAnnotations(map[string]string{"example.com/touched": "yes"})
	})
	// The template now fails to render (a key its params lack).
	k.apply(k.templateYAML("ClusterTemplate", sec, "\n  goTemplate: \"{apiVersion: v1, kind: Secret, metadata: {name: {{ .params.nope }}}}\""))
	w := k.waitStep("app", "sec", "ResourceSubmitted", "False", "TemplateStampFailure")
	require.Equal(t, "app-sec", nested(stepStatus(w, "sec"), "stampedRef", "name"), "the step still points at its Secret")

	// One more look at the owner, after its Secret's watch was let go
	// (any event of the owner does: here an annotation).
	k.update(workloadGVR, k.ns, "app", func(u *unstructured.Unstructured) {
		u.SetAnnotations(map[string]string{"example.com/poke": "1"})
	})

	requireQuiet(t, p, "the owner of a failing step is reconciled again and again")
}

// TestOwnerWithoutChainDoesNotLoop (robustness seed 762): an owner whose
// labels no longer select a chain walks no step, and its status still
// points at what its steps stamped. Kontinue's cleanup looked for objects
// never recorded in the caches of those kinds, which nothing watched any
// more (after its next reconcile, or a restart): not synced, so it looked
// again a second later, once a second for as long as the owner matched no
// chain.
func TestOwnerWithoutChainDoesNotLoop(t *testing.T) {
	k := newKit(t)
	p := startKontinueProc(t, "chainless", "--shard=chainless")
	cfg := k.name("cfg")
	k.apply(k.cmTemplate(cfg, "cfg", `{greeting: hello}`))
	chain := k.name("chain")
	k.apply(k.chainYAML(chain, "", k.step("cfg", "ClusterTemplate", cfg, "")))
	readyOnShard(k, chain, "chainless")
	k.update(workloadGVR, k.ns, "app", func(u *unstructured.Unstructured) {
		l := u.GetLabels()
		l["app.example.com/chain"] = "none"
		u.SetLabels(l)
	})
	w := k.waitOwner("app", "SupplyChainReady", "False", "SupplyChainNotFound")
	require.Equal(t, "app-cfg", nested(stepStatus(w, "cfg"), "stampedRef", "name"), "the step still points at its ConfigMap")
	// One more look at the owner, after its ConfigMap's watch was let go
	// (as after a restart).
	k.update(workloadGVR, k.ns, "app", func(u *unstructured.Unstructured) {
		u.SetAnnotations(map[string]string{"example.com/poke": "1"})
	})
	requireQuiet(t, p, "an owner without a chain is reconciled again and again")
}

// readyOnShard creates Workload app of chain on shard, and waits until it
// is Ready.
func readyOnShard(k *kit, chain, shard string) {
	k.t.Helper()
	k.apply(fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: Workload
metadata:
  name: app
  labels: {app.example.com/chain: %s, kontinue.dev/shard: %s}
spec: {}
`, chain, shard))
	k.waitOwner("app", "Ready", "True", "Ready")
}

// requireQuiet fails when p reconciles Workloads more than twice in 5 s
// (after 2 s for the last change's own reconciles): the test's one owner,
// with nothing changing, is looked at once or twice at most; a loop makes
// 5 or more.
func requireQuiet(t *testing.T, p *kontinueProc, why string) {
	t.Helper()
	reconciles := func() float64 {
		n, msg := p.metric("kontinue_reconcile_duration_seconds_count", map[string]string{"controller": "Workload"})
		require.Empty(t, msg)
		return n
	}
	time.Sleep(2 * time.Second)
	before := reconciles()
	time.Sleep(5 * time.Second)
	require.LessOrEqual(t, reconciles()-before, 2.0, why)
}
