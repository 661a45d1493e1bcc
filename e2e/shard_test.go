package e2e

// Sharding (issue 33, docs/operations.md#sharding): replicas started with
// --shard=<name> serve the owners labelled kontinue.dev/shard=<name>, watch
// and cache only them and what they stamped, and elect a leader per shard.
// The suite's own Kontinue keeps running: it serves the default shard (owners
// without the label) and must leave the shards' owners alone.
//
// These tests reuse the fault tests' four-step chain (mutable, runnable:
// true, immutable, gated) and their counts: runs per input set, orphans,
// convergence.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const shardLabel = "kontinue.dev/shard"

// foreignMsg is what a replica logs when a watch of its delivered an object
// of another shard (reconciler/shard.go).
const foreignMsg = "a watch delivered an object of another shard"

// newShardKit is a fault kit that leaves the suite's Kontinue running (the
// default shard's replica).
func newShardKit(t *testing.T) *faultKit {
	t.Helper()
	k := &faultKit{t: t, ns: newNamespace(t)}
	k.chain = uniq(k.ns, "shards")
	return k
}

// shardWorkloadYAML is a Workload of the kit's chain in shard ("": the
// default shard, no label).
func (k *faultKit) shardWorkloadYAML(name, shard string, commit int) string {
	l := ""
	if shard != "" {
		l = ", " + shardLabel + ": " + shard
	}
	return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: Workload
metadata:
  name: %s
  labels: {app.example.com/chain: %s%s}
spec:
  source: {git: {url: https://example.com/%[1]s.git, ref: {commit: c%[4]d}}}
`, name, k.chain, l, commit)
}

// misplaced lists the stamped objects of the namespace (ConfigMaps,
// Runnables, PipelineRuns; the runs too) not in their workload's shard
// (want: workload name to shard).
func (k *faultKit) misplaced(want map[string]string) []string {
	k.t.Helper()
	var out []string
	check := func(kind, name, workload string, labels map[string]string) {
		shard, ok := want[workload]
		if !ok {
			out = append(out, fmt.Sprintf("%s %s of an unknown workload %q", kind, name, workload))
			return
		}
		if got := labels[shardLabel]; got != shard {
			out = append(out, fmt.Sprintf("%s %s of %s: shard %q, want %q", kind, name, workload, got, shard))
		}
	}
	for _, u := range k.list(configMapGVR, "kontinue.dev/stamped=true") {
		check("ConfigMap", u.GetName(), u.GetLabels()["carto.run/workload-name"], u.GetLabels())
	}
	runnableOf := map[string]string{} // UID → workload
	for _, u := range k.list(immRunnableGVR, "kontinue.dev/stamped=true") {
		w := u.GetLabels()["carto.run/workload-name"]
		runnableOf[string(u.GetUID())] = w
		check("Runnable", u.GetName(), w, u.GetLabels())
	}
	for _, u := range k.list(immPipelineRunGVR, "kontinue.dev/stamped=true") {
		c := metav1.GetControllerOf(&u)
		if c == nil {
			out = append(out, "PipelineRun "+u.GetName()+" without a controller")
			continue
		}
		check("PipelineRun", u.GetName(), runnableOf[string(c.UID)], u.GetLabels())
	}
	sort.Strings(out)
	return out
}

// noForeign asserts that no replica was ever delivered an object of
// another shard: none logged one (the killed ones too), and the live ones
// count none.
func noForeign(t *testing.T, procs ...*kontinueProc) {
	t.Helper()
	for _, p := range procs {
		assert.Nil(t, p.logged(foreignMsg), "%s cached an object of another shard", p.name)
		select {
		case <-p.done:
			continue
		default:
		}
		v, msg := p.metric("kontinue_shard_foreign_objects_total", nil)
		if assert.Empty(t, msg) {
			assert.Zero(t, v, "%s: kontinue_shard_foreign_objects_total", p.name)
		}
	}
}

// Two shards, each a leader and a standby. Workloads of both shards are
// created and changed while shard a's leader is killed with SIGKILL. Every
// workload converges, every input set ran once, nothing is orphaned, every
// stamped object (the runs and the Runnables of `runnable: true` steps
// too) is in its workload's shard, and no replica was ever delivered an
// object of the other shard. Shard b's leader leads throughout.
func TestShardFailoverUnderLoad(t *testing.T) {
	n := 20 // workloads per shard
	if soak() {
		n = 50
	}
	k := newShardKit(t)
	k.fakeTekton()
	apply(t, k.ns, k.chainYAML())
	const lease = "kontinue-e2e-shards"
	args := func(shard string) []string {
		return []string{"--shard=" + shard,
			"--leader-elect", "--leader-election-namespace=" + k.ns, "--leader-election-id=" + lease,
			"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms"}
	}
	ids := map[*kontinueProc]string{}
	shardProcs := map[string][]*kontinueProc{}
	var all []*kontinueProc
	for _, s := range []string{"a", "b"} {
		for i := 0; i < 2; i++ {
			p := k.start(args(s)...)
			ids[p] = p.identity(t)
			shardProcs[s] = append(shardProcs[s], p)
			all = append(all, p)
		}
	}
	leaderA := leaderOf(t, 30*time.Second, k.ns, lease+"-shard-a", ids, shardProcs["a"]...)
	leaderB := leaderOf(t, 30*time.Second, k.ns, lease+"-shard-b", ids, shardProcs["b"]...)

	name := func(shard string, i int) string { return fmt.Sprintf("%s-w%02d", shard, i) }
	var mu sync.Mutex
	want, shardOf := map[string]int{}, map[string]string{}
	var work sync.WaitGroup
	work.Add(1)
	go func() {
		defer work.Done()
		for commit := 1; commit <= 2; commit++ {
			for i := 0; i < n; i++ {
				for _, s := range []string{"a", "b"} {
					if commit == 2 && i%2 == 1 {
						continue
					}
					applyBG(t, k.ns, k.shardWorkloadYAML(name(s, i), s, commit))
					mu.Lock()
					want[name(s, i)], shardOf[name(s, i)] = commit, s
					mu.Unlock()
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}()
	// Kill shard a's leader once it is busy.
	eventually(t, 60*time.Second, func() string {
		v, msg := leaderA.metric("kontinue_stamped_applies_total", map[string]string{"result": "applied"})
		if msg != "" || v < 10 {
			return fmt.Sprintf("shard a's leader has applied %v objects %s", v, msg)
		}
		return ""
	})
	require.NoError(t, leaderA.cmd.Process.Signal(syscall.SIGKILL))
	<-leaderA.done
	var standby *kontinueProc
	for _, p := range shardProcs["a"] {
		if p != leaderA {
			standby = p
		}
	}
	require.Same(t, standby, leaderOf(t, 30*time.Second, k.ns, lease+"-shard-a", ids, standby), "shard a's standby takes over")
	work.Wait()
	eventually(t, 4*time.Minute, func() string {
		mu.Lock()
		defer mu.Unlock()
		return k.converged(want)
	})
	assert.Same(t, leaderB, leaderOf(t, 10*time.Second, k.ns, lease+"-shard-b", ids, shardProcs["b"]...), "shard b's leader leads throughout")

	dups, total := k.duplicateRuns()
	assert.Empty(t, dups, "input sets that produced more than one run")
	t.Logf("%d runs for %d workloads", total, len(want))
	var orphans []string
	deadline := time.Now().Add(20 * time.Second)
	for {
		orphans = k.orphans()
		if len(orphans) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	assert.Empty(t, orphans, "stamped objects no live owner accounts for")
	mu.Lock()
	assert.Empty(t, k.misplaced(shardOf), "stamped objects outside their workload's shard")
	mu.Unlock()
	noForeign(t, all...)
	// Each shard's replicas reconciled their own shard's workloads: the
	// standby that took over shard a, and shard b's leader.
	for _, p := range []*kontinueProc{standby, leaderB} {
		v, msg := p.metric("kontinue_stamped_applies_total", map[string]string{"result": "applied"})
		assert.Empty(t, msg)
		assert.Positive(t, v, "%s applied nothing", p.name)
	}
}

// stampedUIDs are the UIDs of what the kit's workloads stamped (by kind and
// name) and of their generated ClusterRunTemplates.
func (k *faultKit) stampedUIDs() map[string]string {
	k.t.Helper()
	out := map[string]string{}
	for _, u := range k.list(configMapGVR, "kontinue.dev/stamped=true") {
		out["ConfigMap/"+u.GetName()] = string(u.GetUID())
	}
	for _, u := range k.list(immRunnableGVR, "kontinue.dev/stamped=true") {
		out["Runnable/"+u.GetName()] = string(u.GetUID())
	}
	for _, u := range k.list(immPipelineRunGVR, "kontinue.dev/stamped=true") {
		out["PipelineRun/"+u.GetName()] = string(u.GetUID())
	}
	l, err := env.dyn.Resource(immRunTemplateGVR).List(context.Background(), metav1.ListOptions{LabelSelector: "carto.run/workload-namespace=" + k.ns})
	require.NoError(k.t, err)
	for _, u := range l.Items {
		out["ClusterRunTemplate/"+u.GetName()] = string(u.GetUID())
	}
	return out
}

// A converged workload moves from shard a to shard b, then to the default
// shard (the suite's own Kontinue), then back to a. Each time the new
// shard's replica adopts what was stamped: every object (runs and the
// generated ClusterRunTemplate included) keeps its UID and is relabelled
// into the new shard; nothing is deleted, nothing runs again, the old
// shard's replica (which saw the workload leave its watch as if deleted)
// removes nothing. A change after the moves is carried by the last shard.
func TestShardMoveAdoptsStampedObjects(t *testing.T) {
	k := newShardKit(t)
	k.fakeTekton()
	apply(t, k.ns, k.chainYAML())
	a, b := k.start("--shard=a"), k.start("--shard=b")
	const w = "mover"
	apply(t, k.ns, k.shardWorkloadYAML(w, "a", 1))
	eventually(t, 2*time.Minute, func() string { return k.converged(map[string]int{w: 1}) })
	before := k.stampedUIDs()
	require.Len(t, before, 6, "src, gate, build run ConfigMaps; the Runnable, its PipelineRun, its ClusterRunTemplate: %v", before)
	_, runsBefore := k.duplicateRuns()
	readySince := ownerCondition(get(t, workloadGVR, k.ns, w), "Ready")["lastTransitionTime"]
	require.NotNil(t, readySince)

	for _, shard := range []string{"b", "", "a"} {
		apply(t, k.ns, k.shardWorkloadYAML(w, shard, 1))
		eventually(t, time.Minute, func() string {
			if bad := k.misplaced(map[string]string{w: shard}); len(bad) > 0 {
				return fmt.Sprintf("moving to shard %q: %s", shard, strings.Join(bad, "; "))
			}
			return ""
		})
		// Adopted, not replaced: the same objects, no more runs.
		assert.Equal(t, before, k.stampedUIDs(), "after the move to shard %q", shard)
		dups, runs := k.duplicateRuns()
		assert.Empty(t, dups, "after the move to shard %q", shard)
		assert.Equal(t, runsBefore, runs, "runs after the move to shard %q", shard)
		assert.Empty(t, k.converged(map[string]int{w: 1}))
	}
	// A move is no news to the workload: Ready never left True (a gated
	// step re-applied only to be relabelled must not wait for its object to
	// report on inputs that did not change).
	assert.Equal(t, readySince, ownerCondition(get(t, workloadGVR, k.ns, w), "Ready")["lastTransitionTime"], "Ready changed while the workload moved")
	// A change once moved back: shard a's replica carries it through.
	apply(t, k.ns, k.shardWorkloadYAML(w, "a", 2))
	eventually(t, 2*time.Minute, func() string { return k.converged(map[string]int{w: 2}) })
	dups, _ := k.duplicateRuns()
	assert.Empty(t, dups)
	assert.Empty(t, k.misplaced(map[string]string{w: "a"}))
	var orphans []string
	deadline := time.Now().Add(20 * time.Second)
	for {
		orphans = k.orphans()
		if len(orphans) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	assert.Empty(t, orphans)
	noForeign(t, a, b)
	assert.NotNil(t, b.logged("kept a generated ClusterRunTemplate: its owner left this replica's shard, it was not deleted"),
		"shard b saw the workload leave and kept what it generated")
}

// An owner moved in the same edit that renames a step's object: the new
// shard's replica does not cache the old object (still labelled for the old
// shard), yet must still remove it once no step stamps it.
func TestShardMoveWithChangeRemovesReplacedObject(t *testing.T) {
	k := newShardKit(t)
	k.fakeTekton()
	apply(t, k.ns, k.chainYAML())
	k.start("--shard=a")
	k.start("--shard=b")
	const w = "mover"
	apply(t, k.ns, k.shardWorkloadYAML(w, "a", 1))
	eventually(t, 2*time.Minute, func() string { return k.converged(map[string]int{w: 1}) })
	apply(t, k.ns, k.shardWorkloadYAML(w, "b", 2)) // c2 renames the src ConfigMap
	eventually(t, 2*time.Minute, func() string { return k.converged(map[string]int{w: 2}) })
	eventually(t, 30*time.Second, func() string {
		if o := k.orphans(); len(o) > 0 {
			return fmt.Sprintf("objects no status references: %v", o)
		}
		return ""
	})
	assert.Empty(t, k.misplaced(map[string]string{w: "b"}))
}

// An owner whose objects in its old shard are named by no status (applied,
// then the record lost: here shard a's replica is killed and the status
// rolled back; in robustness seed 6 a step refused at its new name while
// the owner moved) moves to shard b in the same edit that renames its src
// object. Shard b's replica, whose watches see only shard b, still finds
// the old object (labelled for shard a) and removes it, and brings the
// others into its shard; objects labelled for the owner that it does not
// control (a person's, another owner's), in shard a or the default shard,
// are left untouched.
func TestShardMoveRemovesUnrecordedObjectsOfTheOldShard(t *testing.T) {
	k := newShardKit(t)
	k.fakeTekton()
	apply(t, k.ns, k.chainYAML())
	a := k.start("--shard=a")
	k.start("--shard=b")
	const w = "mover"
	apply(t, k.ns, k.shardWorkloadYAML(w, "a", 1))
	apply(t, k.ns, k.shardWorkloadYAML("other", "a", 1))
	eventually(t, 2*time.Minute, func() string { return k.converged(map[string]int{w: 1, "other": 1}) })
	bystanders := k.bystanders(w) // the default shard's: no controller reference
	other := get(t, workloadGVR, k.ns, "other")
	apply(t, k.ns, fmt.Sprintf(`
apiVersion: v1
kind: ConfigMap
metadata:
  name: bystander-others
  labels: {kontinue.dev/stamped: "true", carto.run/workload-name: %[1]s, carto.run/workload-namespace: %[2]s,
    carto.run/resource-name: src, kontinue.dev/shard: a}
  ownerReferences: [{apiVersion: carto.run/v1alpha1, kind: Workload, name: other, uid: %[3]s, controller: true}]
data: {url: x, rev: "y"}
`, w, k.ns, other.GetUID()))
	bystanders[objRef{configMapGVR, k.ns, "bystander-others"}] = get(t, configMapGVR, k.ns, "bystander-others").GetResourceVersion()
	oldSrc := get(t, configMapGVR, k.ns, w+"-src-c1")
	require.Equal(t, "a", oldSrc.GetLabels()[shardLabel])

	// The record of src's object is lost: shard a's replica is gone, its
	// step's entry rolled out of the status (the generated
	// ClusterRunTemplate's record stays: without it the new shard rightly
	// refuses to take that object).
	a.kill()
	u := get(t, workloadGVR, k.ns, w)
	res, _ := nested(u.Object, "status", "resources").([]any)
	var kept []any
	for _, r := range res {
		if m, _ := r.(map[string]any); m["name"] != "src" {
			kept = append(kept, r)
		}
	}
	require.Len(t, kept, 3)
	require.NoError(t, unstructured.SetNestedSlice(u.Object, kept, "status", "resources"))
	_, err := env.dyn.Resource(workloadGVR).Namespace(k.ns).UpdateStatus(context.Background(), u, metav1.UpdateOptions{})
	require.NoError(t, err)
	apply(t, k.ns, k.shardWorkloadYAML(w, "b", 2)) // c2 renames the src ConfigMap

	eventually(t, 2*time.Minute, func() string { return k.converged(map[string]int{w: 2}) })
	eventually(t, time.Minute, func() string {
		var bad []string
		for _, o := range k.orphans() {
			if strings.Contains(o, w+"-") {
				bad = append(bad, o)
			}
		}
		if len(bad) > 0 {
			return fmt.Sprintf("objects no status references: %v", bad)
		}
		return ""
	})
	var misplaced []string
	for _, m := range k.misplaced(map[string]string{w: "b", "other": "a"}) {
		if !strings.Contains(m, "bystander-") {
			misplaced = append(misplaced, m)
		}
	}
	assert.Empty(t, misplaced)
	k.assertBystanders(bystanders)
}

// Robustness seed 6's case: an owner's src object whose record was lost
// (shard a's replica killed, src's entry rolled out of the status), then,
// in one edit, the owner moves to shard b and its src step to a new name
// that a person holds (refused: StampedObjectNotOwned). While the step is
// refused, shard b's replica brings the old object into its shard and
// keeps it (its step may still want it), leaving the person's object as it
// is; once the person hands that one over (kontinue.dev/adopt-by), the old
// object goes.
func TestShardMoveWhileRefusedRemovesTheOldObject(t *testing.T) {
	k := newShardKit(t)
	k.fakeTekton()
	apply(t, k.ns, k.chainYAML())
	a := k.start("--shard=a")
	k.start("--shard=b")
	const w = "mover"
	apply(t, k.ns, k.shardWorkloadYAML(w, "a", 1))
	eventually(t, 2*time.Minute, func() string { return k.converged(map[string]int{w: 1}) })
	// A person's object at the name commit c2 gives the src step, labelled
	// like the owner's.
	apply(t, k.ns, fmt.Sprintf(`
apiVersion: v1
kind: ConfigMap
metadata:
  name: %[1]s-src-c2
  labels: {kontinue.dev/stamped: "true", carto.run/workload-name: %[1]s, carto.run/workload-namespace: %[2]s,
    carto.run/resource-name: src, kontinue.dev/shard: a}
data: {url: x, rev: "y"}
`, w, k.ns))
	persons := get(t, configMapGVR, k.ns, w+"-src-c2").GetResourceVersion()

	a.kill()
	u := get(t, workloadGVR, k.ns, w)
	res, _ := nested(u.Object, "status", "resources").([]any)
	var kept []any
	for _, r := range res {
		if m, _ := r.(map[string]any); m["name"] != "src" {
			kept = append(kept, r)
		}
	}
	require.Len(t, kept, 3)
	require.NoError(t, unstructured.SetNestedSlice(u.Object, kept, "status", "resources"))
	_, err := env.dyn.Resource(workloadGVR).Namespace(k.ns).UpdateStatus(context.Background(), u, metav1.UpdateOptions{})
	require.NoError(t, err)
	apply(t, k.ns, k.shardWorkloadYAML(w, "b", 2))

	waitStep(t, workloadGVR, k.ns, w, "src", "Ready", "False", "StampedObjectNotOwned")
	eventually(t, time.Minute, func() string {
		if got := get(t, configMapGVR, k.ns, w+"-src-c1").GetLabels()[shardLabel]; got != "b" {
			return fmt.Sprintf("%s-src-c1 in shard %q, want b", w, got)
		}
		return ""
	})
	assert.Equal(t, persons, get(t, configMapGVR, k.ns, w+"-src-c2").GetResourceVersion(), "the person's object was written")

	cm := get(t, configMapGVR, k.ns, w+"-src-c2")
	cm.SetAnnotations(map[string]string{"kontinue.dev/adopt-by": "Workload/" + w})
	_, err = env.dyn.Resource(configMapGVR).Namespace(k.ns).Update(context.Background(), cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	eventually(t, 2*time.Minute, func() string { return k.converged(map[string]int{w: 2}) })
	eventually(t, time.Minute, func() string {
		if o := k.orphans(); len(o) > 0 {
			return fmt.Sprintf("objects no status references: %v", o)
		}
		return ""
	})
	assert.Empty(t, k.misplaced(map[string]string{w: "b"}))
}
