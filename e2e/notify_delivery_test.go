package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	cdapi "github.com/cdevents/sdk-go/pkg/api"
	cdv05 "github.com/cdevents/sdk-go/pkg/api/v05"
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

// A template wave sends a grouped message: a template edit that breaks
// the step of every owner on a chain is one message with every owner's
// StepFailed, not one per owner. The provider's sender is kept busy (its
// receiver holds a first request) while the wave's events are queued,
// so that the grouping does not depend on how fast the wave goes: the
// events queued behind a request go out together, as do those within
// the grouping window (2 s) of the first.
func TestNotificationsWaveIsGrouped(t *testing.T) {
	n := startNotifier(t, notify.Options{Group: 2 * time.Second})
	k := newKit(t)
	hook := newReceiver(t)
	hook.holdRequests()
	k.apply(fmt.Sprintf(`
apiVersion: notification.kontinue.dev/v1alpha1
kind: Provider
metadata: {name: hook}
spec: {type: generic, address: %q}
---
apiVersion: notification.kontinue.dev/v1alpha1
kind: Alert
metadata: {name: failures}
spec: {providerRef: {name: hook}, events: [StepFailed]}
`, hook.URL))
	waitSynced(t, n)
	tmpl, chain := k.name("w-deploy"), k.name("w-chain")
	k.apply(k.cmTemplate(tmpl, "deploy", "{greeting: hello}"))
	k.apply(k.chainYAML(chain, "", k.step("deploy", "ClusterTemplate", tmpl, "")))
	const owners = 6
	for i := range owners {
		k.workload(fmt.Sprintf("w%d", i), chain, "")
	}
	for i := range owners {
		k.waitStep(fmt.Sprintf("w%d", i), "deploy", "Ready", "True", "")
	}
	// A first failure, on a chain of its own, occupies the sender.
	bad, badChain := k.name("w-bad"), k.name("w-bad-chain")
	k.apply(k.cmTemplate(bad, "bad", `{greeting: "$(workload.spec.nothing.here)$"}`))
	k.apply(k.chainYAML(badChain, "", k.step("deploy", "ClusterTemplate", bad, "")))
	k.workload("first", badChain, "")
	eventually(t, time.Minute, func() string {
		if hook.held.Load() == 0 {
			return "the first failure's request has not arrived"
		}
		return ""
	})

	// The wave: every owner's step fails to render.
	k.update(k.tmplGVR("clustertemplates"), "", tmpl, func(u *unstructured.Unstructured) {
		require.NoError(t, unstructured.SetNestedField(u.Object, "$(workload.spec.nothing.here)$", "spec", "template", "data", "greeting"))
	})
	for i := range owners {
		k.waitStep(fmt.Sprintf("w%d", i), "deploy", "Ready", "False", "")
	}
	hook.release()

	var msgs []map[string]bool // the wave's owners in each message
	eventually(t, time.Minute, func() string {
		msgs = nil
		seen := map[string]bool{}
		for _, q := range hook.all() {
			m := map[string]bool{}
			for _, e := range genericEvents(q) {
				if e["type"] == "StepFailed" && e["name"] != "first" {
					m[e["name"].(string)] = true
					seen[e["name"].(string)] = true
				}
			}
			if len(m) > 0 {
				msgs = append(msgs, m)
			}
		}
		if len(seen) < owners {
			return fmt.Sprintf("StepFailed of %d owners received, want %d", len(seen), owners)
		}
		return ""
	})
	assert.Less(t, len(msgs), owners, "grouped, not a message per owner: %v", msgs)
	most := 0
	for _, m := range msgs {
		most = max(most, len(m))
	}
	assert.GreaterOrEqual(t, most, owners-1, "one message has (nearly) the whole wave: %v", msgs)
}

// The CDEvents of a chain's life, sent to a CDEvents receiver that
// validates each with the SDK: a new source revision is a change merged,
// an image step's output an artifact published, the last step's success
// a service deployed, each step's input set a pipelineRun started and
// finished, a failing build an incident detected, and its shadow serving
// the last good image a service rolled back.
func TestNotificationsCDEventsOfAChain(t *testing.T) {
	n := startNotifier(t, notify.Options{})
	k := newKit(t)
	rcv := newReceiver(t)
	k.apply(fmt.Sprintf(`
apiVersion: notification.kontinue.dev/v1alpha1
kind: Provider
metadata: {name: cd}
spec: {type: cdevents, address: %q}
---
apiVersion: notification.kontinue.dev/v1alpha1
kind: Alert
metadata: {name: cd}
spec: {providerRef: {name: cd}}
`, rcv.URL))
	waitSynced(t, n)
	src, build, deploy, chain := k.name("c-src"), k.name("c-build"), k.name("c-deploy"), k.name("c-chain")
	k.apply(k.templateYAML("ClusterSourceTemplate", src, `
  urlPath: .data.url
  revisionPath: .data.revision
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-src}
    data: {url: "https://github.com/org/app.git", revision: $(params.commit)$}`))
	k.apply(k.templateYAML("ClusterImageTemplate", build, `
  imagePath: .status.latestImage`+readyRule+`
  template:
    apiVersion: test.run/v1alpha1
    kind: Test
    metadata: {name: $(workload.metadata.name)$-build}
    spec: {commit: $(source.revision)$}`))
	k.apply(k.cmTemplate(deploy, "deploy", "{image: $(image)$}"))
	k.apply(k.chainYAML(chain, "", k.step("source", "ClusterSourceTemplate", src, "")+
		k.step("build", "ClusterImageTemplate", build, "sources: [{name: source, resource: source}]")+
		k.step("deploy", "ClusterTemplate", deploy, "images: [{name: image, resource: build}]")))

	k.workload("app", chain, commitParam("good-1"))
	k.waitObj(testGVR, "app-build", fieldIs("good-1", "spec", "commit"))
	buildObj(t, k.ns, "app-build", "True", "img-good-1")
	k.waitObj(configMapGVR, "app-deploy", k.dataIs("image", "img-good-1"))

	// A bad commit: the build fails; its shadow, from good-1, serves.
	k.update(workloadGVR, k.ns, "app", func(u *unstructured.Unstructured) {
		require.NoError(t, unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "commit", "value": "bad-2"}}, "spec", "params"))
	})
	k.waitObj(testGVR, "app-build", fieldIs("bad-2", "spec", "commit"))
	buildObj(t, k.ns, "app-build", "False", "img-good-1")
	k.waitObj(testGVR, shadowOfBuild, fieldIs("good-1", "spec", "commit"))
	buildObj(t, k.ns, shadowOfBuild, "True", "img-good-1")
	k.waitObjStatus("app", func(u *unstructured.Unstructured) string {
		if s := stepStatus(u, "build"); s["servedBy"] != "shadow" {
			return fmt.Sprintf("build servedBy %v", s["servedBy"])
		}
		return ""
	})

	ceType := func(prefix string) func(received) bool {
		return func(q received) bool { return strings.HasPrefix(q.header.Get("Ce-Type"), "dev.cdevents."+prefix+".") }
	}
	for _, typ := range []string{"change.merged", "artifact.published", "service.deployed", "pipelinerun.started",
		"pipelinerun.finished", "incident.detected", "service.rolledback"} {
		rcv.waitFor(t, "cdevent "+typ, ceType(typ))
	}
	// Every event received is a valid CDEvent, by the SDK's schema.
	subjects := map[string][]string{}
	for _, q := range rcv.all() {
		ev, err := cdv05.NewFromJsonBytes(q.body)
		if !assert.NoError(t, err, "%s", q.body) {
			continue
		}
		assert.NoError(t, cdapi.Validate(ev), "%s", q.body)
		typ := strings.TrimPrefix(q.header.Get("Ce-Type"), "dev.cdevents.")
		subjects[typ] = append(subjects[typ], ev.GetSubjectId())
	}
	wl := "Workload/" + k.ns + "/app/"
	assert.Contains(t, fmt.Sprint(subjects), wl+"source", "the change merged is the source step's")
	for typ, ids := range subjects {
		switch {
		case strings.HasPrefix(typ, "artifact.published."):
			assert.Contains(t, ids, "pkg:generic/app@good-1", "the artifact: the owner at the commit the image was built from")
		case strings.HasPrefix(typ, "change.merged."):
			assert.Contains(t, ids, wl+"source")
		case strings.HasPrefix(typ, "service.deployed."):
			assert.Contains(t, ids, wl+"deploy")
		case strings.HasPrefix(typ, "service.rolledback."), strings.HasPrefix(typ, "incident.detected."):
			assert.Contains(t, ids, wl+"build")
		}
	}
}
