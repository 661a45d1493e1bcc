package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/notify"
)

// genericEvents are the events of a generic webhook's request.
func genericEvents(q received) []map[string]any {
	var p struct {
		Events []map[string]any `json:"events"`
	}
	_ = json.Unmarshal(q.body, &p)
	return p.Events
}

// sourceChain is one source step whose revision is the workload's param
// commit.
func sourceChain(k *kit) string {
	src, chain := k.name("d-src"), k.name("d-chain")
	k.apply(k.templateYAML("ClusterSourceTemplate", src, `
  urlPath: .data.url
  revisionPath: .data.revision
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-src}
    data: {url: "https://github.com/org/app.git", revision: $(params.commit)$}`))
	k.apply(k.chainYAML(chain, "", k.step("source", "ClusterSourceTemplate", src, "")))
	return chain
}

func commitParam(commit string) string {
	return "\n  params: [{name: commit, value: \"" + commit + "\"}]"
}

// waitRevision waits until the owner's source step publishes revision.
func (k *kit) waitRevision(owner, revision string) {
	k.t.Helper()
	k.waitObjStatus(owner, func(u *unstructured.Unstructured) string {
		outs, _ := stepStatus(u, "source")["outputs"].([]any)
		for _, o := range outs {
			if m, _ := o.(map[string]any); m["name"] == "revision" && m["preview"] == revision+"\n" {
				return ""
			}
		}
		return fmt.Sprintf("%s: source outputs %v, want revision %s", owner, outs, revision)
	})
}

// A receiver that is down: the request in flight is retried for a while
// (Retry.For, 5 minutes by default), not a few times, and the provider's
// later events wait in its queue behind it; when the receiver is back,
// every event of the outage arrives and none is counted as dropped. Owners
// reconcile meanwhile: each change below is reconciled while the sender is
// stuck retrying (the receiver stays down until all are).
//
// The outage is counted in turned-away requests, not in time: it lasts
// until the receiver has answered 503 to at least 8 tries, more than the
// 6 tries after which events used to be dropped; with the test's backoff
// (100 ms doubling to 1 s) that is a few seconds, and what a minute's
// outage shows with the default backoff (1 s doubling to 30 s, about 6
// tries in a minute) is the same: an outage shorter than Retry.For loses
// nothing within the queue bound. With Retry.Attempts: 6 (the old policy)
// this test fails: the first events of the outage are dropped.
func TestNotificationsReceiverDown(t *testing.T) {
	n := startNotifier(t, notify.Options{QueueSize: 100, Retry: notify.Retry{Initial: 100 * time.Millisecond, Max: time.Second}})
	k := newKit(t)
	hook := newReceiver(t)
	k.apply(fmt.Sprintf(`
apiVersion: notification.kontinue.dev/v1alpha1
kind: Provider
metadata: {name: hook}
spec: {type: generic, address: %q}
---
apiVersion: notification.kontinue.dev/v1alpha1
kind: Alert
metadata: {name: sources}
spec: {providerRef: {name: hook}, events: [SourceChanged]}
`, hook.URL))
	waitSynced(t, n)
	chain := sourceChain(k)
	owners := []string{"a", "b", "c"}
	got := func(owner, revision string) func(received) bool {
		return func(q received) bool {
			for _, e := range genericEvents(q) {
				if e["type"] == "SourceChanged" && e["name"] == owner && e["revision"] == revision {
					return true
				}
			}
			return false
		}
	}
	for _, o := range owners {
		k.workload(o, chain, commitParam("r0"))
	}
	for _, o := range owners {
		hook.waitFor(t, o+" r0 while the receiver is up", got(o, "r0"))
	}

	hook.down.Store(true)
	const changes = 3
	for i := 1; i <= changes; i++ {
		for _, o := range owners {
			k.update(workloadGVR, k.ns, o, func(u *unstructured.Unstructured) {
				require.NoError(t, unstructured.SetNestedSlice(u.Object,
					[]any{map[string]any{"name": "commit", "value": fmt.Sprintf("r%d", i)}}, "spec", "params"))
			})
		}
		// Reconciled while the receiver is down and the sender retries.
		for _, o := range owners {
			k.waitRevision(o, fmt.Sprintf("r%d", i))
		}
	}
	eventually(t, time.Minute, func() string {
		if c := hook.turnedAway.Load(); c < 8 {
			return fmt.Sprintf("the receiver turned away %d tries, want 8", c)
		}
		return ""
	})
	// The alert says it is retrying, and has dropped nothing.
	k.waitObj(notify.AlertGVR, "sources", func(u *unstructured.Unstructured) string {
		c := condition(u.Object, "Ready", "status")
		if c == nil || c["reason"] != "DeliveryFailing" {
			return fmt.Sprintf("alert Ready %v, want DeliveryFailing", c)
		}
		return ""
	})
	a := get(t, notify.AlertGVR, k.ns, "sources")
	assert.Contains(t, fmt.Sprint(condition(a.Object, "Ready", "status")["message"]), "retrying: ")
	assert.Nil(t, nested(a.Object, "status", "dropped"), "nothing dropped while the receiver is down")

	hook.down.Store(false)
	for i := 1; i <= changes; i++ {
		for _, o := range owners {
			hook.waitFor(t, fmt.Sprintf("%s r%d after the outage", o, i), got(o, fmt.Sprintf("r%d", i)))
		}
	}
	k.waitObj(notify.AlertGVR, "sources", func(u *unstructured.Unstructured) string {
		sent, _ := nested(u.Object, "status", "sent").(int64)
		c := condition(u.Object, "Ready", "status")
		if sent != int64(len(owners)*(changes+1)) || c == nil || c["status"] != "True" {
			return fmt.Sprintf("alert sent %d, Ready %v; want %d sent, Ready", sent, c, len(owners)*(changes+1))
		}
		return ""
	})
	assert.Nil(t, nested(get(t, notify.AlertGVR, k.ns, "sources").Object, "status", "dropped"), "nothing dropped")
}
