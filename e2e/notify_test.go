package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cdapi "github.com/cdevents/sdk-go/pkg/api"
	cdv05 "github.com/cdevents/sdk-go/pkg/api/v05"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/notify"
	"kontinue.dev/kontinue/reconciler"
)

// receiver is a local HTTP server standing in for a notification
// receiver: it records what it is sent.
type receiver struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []received
	// down: it answers 503 Service Unavailable and records nothing,
	// counting the requests it turned away.
	down       atomic.Bool
	turnedAway atomic.Int32
	// hold, when set, keeps requests waiting (unrecorded) until it is
	// closed; held counts the requests that waited.
	hold chan struct{}
	held atomic.Int32
}

type received struct {
	path   string
	raw    string // the path as sent (escaped)
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		if r.down.Load() {
			r.turnedAway.Add(1)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		r.mu.Lock()
		hold := r.hold
		r.mu.Unlock()
		if hold != nil {
			r.held.Add(1)
			select {
			case <-hold:
			case <-req.Context().Done(): // the sender gave up: it retries
				return
			}
		}
		r.mu.Lock()
		r.reqs = append(r.reqs, received{path: req.URL.Path, raw: req.URL.EscapedPath(), header: req.Header.Clone(), body: b})
		r.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(func() {
		r.release() // a held request would keep Close waiting
		r.Close()
	})
	return r
}

// holdRequests keeps the requests that arrive from now on waiting, until
// release.
func (r *receiver) holdRequests() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hold == nil {
		r.hold = make(chan struct{})
	}
}

func (r *receiver) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hold != nil {
		close(r.hold)
		r.hold = nil
	}
}

func (r *receiver) all() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.reqs...)
}

// waitFor waits until one request satisfies f, and returns it.
func (r *receiver) waitFor(t *testing.T, what string, f func(received) bool) received {
	t.Helper()
	var got received
	eventually(t, time.Minute, func() string {
		for _, q := range r.all() {
			if f(q) {
				got = q
				return ""
			}
		}
		var seen []string
		for _, q := range r.all() {
			seen = append(seen, q.path+" "+string(q.body))
		}
		return fmt.Sprintf("%s: not received; received %q", what, seen)
	})
	return got
}

// providerReady checks a Provider's Ready condition and the generation
// it says it observed.
func providerReady(status, reason string, generation int64) func(*unstructured.Unstructured) string {
	return func(u *unstructured.Unstructured) string {
		c := condition(u.Object, "Ready", "status")
		if c == nil || c["status"] != status || c["reason"] != reason || c["observedGeneration"] != generation ||
			nested(u.Object, "status", "observedGeneration") != generation {
			return fmt.Sprintf("provider [%s] status %v, want Ready %s %s at generation %d", u.GetName(), u.Object["status"], status, reason, generation)
		}
		return ""
	}
}

// startNotifier restarts Kontinue in this process with a notifier of
// opts (private addresses allowed: the receivers listen on 127.0.0.1, as
// the suite's chart repositories do; the API server and metadata endpoints
// stay refused; short grouping and status intervals unless opts say), and
// back without it after the test.
func startNotifier(t *testing.T, opts notify.Options) *notify.Notifier {
	t.Helper()
	require.False(t, env.external, "the test restarts Kontinue in this process with its notifier")
	opts.AllowPrivateNetworks = true
	if opts.Group == 0 {
		opts.Group = 200 * time.Millisecond
	}
	if opts.StatusInterval == 0 {
		opts.StatusInterval = 500 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(context.Background())
	n, err := notify.New(env.cfg, opts)
	require.NoError(t, err)
	go n.Run(ctx)
	env.kontinue.stop()
	env.kontinue = startKontinueWith(env.cfg, func(o *reconciler.Options) { o.Written = n.Written })
	t.Cleanup(func() {
		env.kontinue.stop()
		cancel()
		env.kontinue = startKontinue(env.cfg)
	})
	return n
}

// waitSynced waits until the notifier knows the alerts and providers.
func waitSynced(t *testing.T, n *notify.Notifier) {
	t.Helper()
	eventually(t, 30*time.Second, func() string {
		if !n.Synced() {
			return "notifier not synced"
		}
		return ""
	})
}

// notifyChain: a source step (a ConfigMap whose data are the GitHub URL
// and the workload's commit) and a test step (a Test whose Ready
// condition says whether the tests passed, as a test Job would).
func notifyChain(k *kit) string {
	src, test, chain := k.name("n-src"), k.name("n-test"), k.name("n-chain")
	k.apply(k.templateYAML("ClusterSourceTemplate", src, `
  urlPath: .data.url
  revisionPath: .data.revision
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-src}
    data: {url: "https://github.com/org/app.git", revision: $(params.commit)$}`))
	k.apply(k.templateYAML("ClusterTemplate", test, `
  healthRule: {singleConditionType: Ready}
  template:
    apiVersion: test.run/v1alpha1
    kind: Test
    metadata: {name: $(workload.metadata.name)$-test}
    spec: {commit: $(source.revision)$}`))
	k.apply(k.chainYAML(chain, "", k.step("source", "ClusterSourceTemplate", src, "")+
		k.step("test", "ClusterTemplate", test, "sources: [{name: source, resource: source}]")))
	return chain
}

// Notifications end to end: a failing test step sends a signed generic
// webhook, a Slack message and a GitHub commit status "failure" on the
// workload's commit; its recovery sends "resolved" and "success". An
// Alert in another namespace naming the owner gets nothing; providers
// pointing at the cluster's API server or a cloud metadata endpoint are
// refused and say so on their alert and their own status (Ready, written
// only when it changes).
func TestNotifications(t *testing.T) {
	n := startNotifier(t, notify.Options{Dashboard: "https://kontinue.example", Retry: notify.Retry{Attempts: 2, Initial: 100 * time.Millisecond}})
	k := newKit(t)
	other := newNamespace(t)
	generic, slack, github, otherHook := newReceiver(t), newReceiver(t), newReceiver(t), newReceiver(t)
	teams, gitlab, cdevents := newReceiver(t), newReceiver(t), newReceiver(t)
	k.apply(fmt.Sprintf(`
apiVersion: v1
kind: Secret
metadata: {name: hook}
stringData: {address: %q, token: hmac-key}
---
apiVersion: v1
kind: Secret
metadata: {name: github}
stringData: {token: gh-token}
---
apiVersion: notification.kontinue.dev/v1alpha1
kind: Provider
metadata: {name: hook}
spec: {type: generic, secretRef: {name: hook}}
---
apiVersion: notification.kontinue.dev/v1alpha1
kind: Provider
metadata: {name: slack}
spec: {type: slack, address: %q}
---
apiVersion: notification.kontinue.dev/v1alpha1
kind: Provider
metadata: {name: github}
spec: {type: github, address: %q, secretRef: {name: github}}
---
apiVersion: notification.kontinue.dev/v1alpha1
kind: Provider
metadata: {name: teams}
spec: {type: msteams, address: %q}
---
apiVersion: notification.kontinue.dev/v1alpha1
kind: Provider
metadata: {name: gitlab}
spec: {type: gitlab, address: %q, repository: group/sub/app, secretRef: {name: github}}
---
apiVersion: notification.kontinue.dev/v1alpha1
kind: Provider
metadata: {name: cdevents}
spec: {type: cdevents, address: %q}
---
apiVersion: notification.kontinue.dev/v1alpha1
kind: Alert
metadata: {name: teams}
spec: {providerRef: {name: teams}, events: [StepFailed]}
---
apiVersion: notification.kontinue.dev/v1alpha1
kind: Alert
metadata: {name: gitlab}
spec: {providerRef: {name: gitlab}, steps: [test]}
---
apiVersion: notification.kontinue.dev/v1alpha1
kind: Alert
metadata: {name: cdevents}
spec: {providerRef: {name: cdevents}, events: [StepFailed, StepRecovered]}
---
apiVersion: notification.kontinue.dev/v1alpha1
kind: Provider
metadata: {name: locked}
spec: {type: generic, secretRef: {name: hook}, serviceAccountName: no-secrets}
---
apiVersion: notification.kontinue.dev/v1alpha1
kind: Alert
metadata: {name: locked}
spec: {providerRef: {name: locked}, severity: error}
---
apiVersion: notification.kontinue.dev/v1alpha1
kind: Provider
metadata: {name: apiserver}
spec: {type: generic, address: %q}
---
apiVersion: notification.kontinue.dev/v1alpha1
kind: Provider
metadata: {name: metadata}
spec: {type: generic, address: "http://169.254.169.254/latest/meta-data/"}
---
apiVersion: notification.kontinue.dev/v1alpha1
kind: Alert
metadata: {name: hook}
spec: {providerRef: {name: hook}, owners: [{kind: Workload, name: app}], events: [StepFailed, StepRecovered]}
---
apiVersion: notification.kontinue.dev/v1alpha1
kind: Alert
metadata: {name: slack}
spec: {providerRef: {name: slack}, summary: "team payments", owners: [{matchLabels: {team: payments}}], events: [StepFailed, StepRecovered]}
---
apiVersion: notification.kontinue.dev/v1alpha1
kind: Alert
metadata: {name: github}
spec: {providerRef: {name: github}, steps: [test]}
---
apiVersion: notification.kontinue.dev/v1alpha1
kind: Alert
metadata: {name: apiserver}
spec: {providerRef: {name: apiserver}, severity: error}
---
apiVersion: notification.kontinue.dev/v1alpha1
kind: Alert
metadata: {name: metadata}
spec: {providerRef: {name: metadata}, severity: error}
`, generic.URL+"/hook", slack.URL+"/services/T/B/X", github.URL, teams.URL, gitlab.URL, cdevents.URL, env.cfg.Host))
	// Namespace B names A's owner, by name and in namespaces: it is not a
	// platform namespace, so it watches its own namespace only.
	apply(t, other, fmt.Sprintf(`
apiVersion: notification.kontinue.dev/v1alpha1
kind: Provider
metadata: {name: hook}
spec: {type: generic, address: %q}
---
apiVersion: notification.kontinue.dev/v1alpha1
kind: Alert
metadata: {name: spy}
spec: {providerRef: {name: hook}, owners: [{name: app}], namespaces: [%q]}
`, otherHook.URL, k.ns))
	waitSynced(t, n)

	chain := notifyChain(k)
	const commit = "4f9a2b7c0d1e2f30415263748596a7b8c9d0e1f2"
	k.apply(workloadYAML(k.ns, "app", chain, "\n  params: [{name: commit, value: \""+commit+"\"}]"))
	k.update(workloadGVR, k.ns, "app", func(u *unstructured.Unstructured) {
		l := u.GetLabels()
		l["team"] = "payments"
		u.SetLabels(l)
	})
	k.waitStep("app", "test", "Healthy", "Unknown", "")

	// The tests fail.
	setStatus(t, testGVR, k.ns, "app-test", map[string]any{"conditions": []any{
		map[string]any{"type": "Ready", "status": "False", "reason": "TestsFailed", "message": "2 of 40 tests failed"}}})
	k.waitStep("app", "test", "Ready", "False", "")

	failedEvent := func(q received) bool { return strings.Contains(string(q.body), `"type":"StepFailed"`) }
	q := generic.waitFor(t, "generic StepFailed", failedEvent)
	assert.Equal(t, "/hook", q.path, "the address from the Secret")
	assert.Equal(t, "sha256="+notify.Sign([]byte("hmac-key"), q.body), q.header.Get("X-Signature"), "signed with the Secret's token")
	var payload struct {
		Events []map[string]any `json:"events"`
	}
	require.NoError(t, json.Unmarshal(q.body, &payload))
	require.NotEmpty(t, payload.Events)
	e := payload.Events[0]
	assert.Equal(t, "app", e["name"])
	assert.Equal(t, k.ns, e["namespace"])
	assert.Equal(t, "test", e["step"])
	assert.Equal(t, commit, e["revision"])
	assert.Contains(t, e["message"], "2 of 40 tests failed")
	assert.Equal(t, "https://kontinue.example/#/owner/Workload/"+k.ns+"/app", e["url"])

	q = slack.waitFor(t, "slack failure", func(q received) bool { return strings.Contains(string(q.body), "failed at commit") })
	var msg map[string]string
	require.NoError(t, json.Unmarshal(q.body, &msg))
	assert.Contains(t, msg["text"], "team payments\n")
	assert.Contains(t, msg["text"], "Workload "+k.ns+"/app: step [test] failed at commit "+commit[:12]+" of org/app")
	assert.Contains(t, msg["text"], "2 of 40 tests failed")

	statusPath := "/repos/org/app/statuses/" + commit
	ghStatus := func(state string) func(received) bool {
		return func(q received) bool {
			var s map[string]string
			_ = json.Unmarshal(q.body, &s)
			return q.path == statusPath && s["state"] == state && s["context"] == "kontinue/"+k.ns+"/app/test"
		}
	}
	q = github.waitFor(t, "github status failure", ghStatus("failure"))
	assert.Equal(t, "Bearer gh-token", q.header.Get("Authorization"))

	q = teams.waitFor(t, "teams card", func(q received) bool { return strings.Contains(string(q.body), "failed at commit") })
	var card struct {
		Type        string `json:"type"`
		Attachments []struct {
			ContentType string `json:"contentType"`
			Content     struct {
				Type string `json:"type"`
				Body []struct {
					Text string `json:"text"`
				} `json:"body"`
			} `json:"content"`
		} `json:"attachments"`
	}
	require.NoError(t, json.Unmarshal(q.body, &card))
	require.Len(t, card.Attachments, 1)
	assert.Equal(t, "application/vnd.microsoft.card.adaptive", card.Attachments[0].ContentType)
	assert.Equal(t, "AdaptiveCard", card.Attachments[0].Content.Type)
	assert.Contains(t, card.Attachments[0].Content.Body[0].Text, "2 of 40 tests failed")

	glPath := "/api/v4/projects/group%2Fsub%2Fapp/statuses/" + commit
	glStatus := func(state string) func(received) bool {
		return func(q received) bool {
			var s map[string]string
			_ = json.Unmarshal(q.body, &s)
			return q.raw == glPath && s["state"] == state && s["name"] == "kontinue/"+k.ns+"/app/test"
		}
	}
	q = gitlab.waitFor(t, "gitlab status failed", glStatus("failed"))
	assert.Equal(t, "gh-token", q.header.Get("PRIVATE-TOKEN"))

	// A CDEvent in CloudEvents' HTTP binary mode, valid by the SDK's schema.
	q = cdevents.waitFor(t, "cdevent incident detected", func(q received) bool {
		return strings.HasPrefix(q.header.Get("Ce-Type"), "dev.cdevents.incident.detected.")
	})
	ev, err := cdv05.NewFromJsonBytes(q.body)
	require.NoError(t, err, "%s", q.body)
	require.NoError(t, cdapi.Validate(ev))
	assert.Equal(t, notify.Source, q.header.Get("Ce-Source"))
	assert.Equal(t, "Workload/"+k.ns+"/app/test", ev.GetSubjectId())
	// The step's span in the owner's trace (W3C trace context), as
	// `kontinue trace` and the OTLP spans name it.
	assert.Regexp(t, `^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`, q.header.Get("Ce-Traceparent"))

	// A usable provider says Ready once; later deliveries that find it
	// usable write nothing to it.
	k.waitObj(notify.ProviderGVR, "slack", providerReady("True", "Ready", 1))
	slackRV := get(t, notify.ProviderGVR, k.ns, "slack").GetResourceVersion()

	// The tests pass again: resolved.
	setStatus(t, testGVR, k.ns, "app-test", map[string]any{"conditions": []any{
		map[string]any{"type": "Ready", "status": "True", "reason": "TestsPassed"}}})
	k.waitStep("app", "test", "Ready", "True", "")
	generic.waitFor(t, "generic StepRecovered", func(q received) bool { return strings.Contains(string(q.body), `"type":"StepRecovered"`) })
	slack.waitFor(t, "slack resolved", func(q received) bool { return strings.Contains(string(q.body), "recovered (resolved)") })
	github.waitFor(t, "github status success", ghStatus("success"))
	gitlab.waitFor(t, "gitlab status success", glStatus("success"))
	q = cdevents.waitFor(t, "cdevent incident resolved", func(q received) bool {
		return strings.HasPrefix(q.header.Get("Ce-Type"), "dev.cdevents.incident.resolved.")
	})
	ev, err = cdv05.NewFromJsonBytes(q.body)
	require.NoError(t, err, "%s", q.body)
	require.NoError(t, cdapi.Validate(ev))

	// Refused addresses, said on the alerts.
	// The Secret of a provider whose service account may not read it is
	// not read with Kontinue's rights instead.
	for name, reason := range map[string]string{"apiserver": "AddressRefused", "metadata": "AddressRefused", "locked": "SecretNotReadable"} {
		k.waitObj(notify.AlertGVR, name, func(u *unstructured.Unstructured) string {
			c := condition(u.Object, "Ready", "status")
			if c == nil || c["reason"] != reason {
				return fmt.Sprintf("alert [%s] Ready %v, want %s", name, c, reason)
			}
			if d, _ := nested(u.Object, "status", "dropped").(int64); d < 1 {
				return "nothing counted as dropped"
			}
			return ""
		})
	}
	// The providers say why too, from their check when they appeared.
	for name, reason := range map[string]string{"apiserver": "AddressRefused", "metadata": "AddressRefused", "locked": "SecretNotReadable"} {
		k.waitObj(notify.ProviderGVR, name, providerReady("False", reason, 1))
	}
	// The alerts' statuses are written after their deliveries: by the time
	// A's slack alert counts both messages, B's spy would have received.
	k.waitObj(notify.AlertGVR, "slack", func(u *unstructured.Unstructured) string {
		if s, _ := nested(u.Object, "status", "sent").(int64); s < 2 {
			return fmt.Sprintf("sent %v", s)
		}
		return ""
	})
	assert.Equal(t, slackRV, get(t, notify.ProviderGVR, k.ns, "slack").GetResourceVersion(),
		"a delivery that finds the provider as its status says writes nothing to it")
	// A provider fixed (its spec) is checked again.
	k.update(notify.ProviderGVR, k.ns, "apiserver", func(u *unstructured.Unstructured) {
		require.NoError(t, unstructured.SetNestedField(u.Object, generic.URL+"/fixed", "spec", "address"))
	})
	k.waitObj(notify.ProviderGVR, "apiserver", providerReady("True", "Ready", 2))
	var leaked []string
	for _, q := range otherHook.all() {
		leaked = append(leaked, string(q.body))
	}
	assert.Empty(t, leaked, "an alert of another namespace gets nothing of this one's owners")
	spy := get(t, notify.AlertGVR, other, "spy")
	assert.Nil(t, nested(spy.Object, "status", "sent"))
}
