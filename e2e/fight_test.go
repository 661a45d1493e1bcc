package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"kontinue.dev/kontinue/reconciler"
	"kontinue.dev/kontinue/reconciler/stamp"
)

// Kontinue never fights another controller over a field. A second
// "controller" (the test) sets back, under its own field manager, a field
// of a ConfigMap that Kontinue applies, each time Kontinue writes it.
// Kontinue repairs it a bounded number of times, then stops writing it:
// the step says so (StampedObjectContested, naming the field and the other
// manager, from managedFields), the workload gets a Warning event saying
// the same, and a reconcile after that writes nothing. A change of what
// Kontinue renders is written again at once.
func TestKontinueDoesNotFightAnotherController(t *testing.T) {
	if env.external {
		t.Skip("reads the in-process Kontinue's reconciles")
	}
	k := newKit(t)
	chain, tmpl := k.name("chain"), k.name("tmpl")
	k.apply(k.cmTemplate(tmpl, "fought", `{key: $(params.value)$, other: kept}`) + "---" +
		k.chainYAML(chain, "", k.step("cm", "ClusterTemplate", tmpl, "")))
	k.workload("app", chain, "  params: [{name: value, value: kontinue}]")
	k.waitObj(configMapGVR, "app-fought", k.dataIs("key", "kontinue"))

	// The rival: whenever data.key is not its value, it sets it back.
	cms := env.dyn.Resource(configMapGVR).Namespace(k.ns)
	var mu sync.Mutex
	resets, lastRV := 0, ""
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			u, err := cms.Get(ctx, "app-fought", metav1.GetOptions{})
			if err == nil && nested(u.Object, "data", "key") != "rival" {
				u.Object["data"].(map[string]any)["key"] = "rival"
				if got, err := cms.Update(ctx, u, metav1.UpdateOptions{FieldManager: "rival-controller"}); err == nil {
					mu.Lock()
					resets, lastRV = resets+1, got.GetResourceVersion()
					mu.Unlock()
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	defer func() { stop(); <-done }()
	count := func() (int, string) {
		mu.Lock()
		defer mu.Unlock()
		return resets, lastRV
	}

	w := k.waitStep("app", "cm", "ResourceSubmitted", "False", "StampedObjectContested")
	c := k.stepCond(w, "cm", "ResourceSubmitted")
	k.assertCond(c, "False", "StampedObjectContested", "ConfigMap "+k.ns+"/app-fought", "manager [rival-controller]", "field [data.key]")
	t.Logf("step: %v", c["message"])
	k.waitEvent("app", "StampedObjectContested", "Step [cm]", "manager [rival-controller]", "field [data.key]")
	n, _ := count()
	// Each reset answered a write of Kontinue's: its create, its first
	// apply, and at most FightRepairs repairs.
	assert.LessOrEqual(t, n, stamp.FightRepairs+2, "Kontinue's writes of the same content")
	assert.GreaterOrEqual(t, n, stamp.FightRepairs+1, "the rival reset every repair")

	// Writes stop: a reconcile (an annotation on the workload) writes
	// nothing, and the rival has nothing left to set back.
	_, rv := count()
	key := reconciler.Key{Kind: "Workload", NamespacedName: types.NamespacedName{Namespace: k.ns, Name: "app"}}
	poked := time.Now()
	k.poke("app")
	eventually(t, 30*time.Second, func() string {
		if len(reconciles.since(key, poked)) == 0 {
			return "the workload was not reconciled after the poke"
		}
		return ""
	})
	k.waitStep("app", "cm", "ResourceSubmitted", "False", "StampedObjectContested")
	u := get(t, configMapGVR, k.ns, "app-fought")
	assert.Equal(t, "rival", nested(u.Object, "data", "key"), "left to the rival")
	assert.Equal(t, rv, u.GetResourceVersion(), "Kontinue wrote nothing after it stopped")
	after, _ := count()
	assert.Equal(t, n, after, "nothing for the rival to set back")

	// New content is written at once (the rival may fight it again).
	stop()
	<-done
	k.workload("app", chain, "  params: [{name: value, value: changed}]")
	k.waitObj(configMapGVR, "app-fought", k.dataIs("key", "changed"))
	k.waitStep("app", "cm", "ResourceSubmitted", "True", "ResourceSubmissionComplete")
	require.Equal(t, "kept", nested(get(t, configMapGVR, k.ns, "app-fought").Object, "data", "other"))
}
