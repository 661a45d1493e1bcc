package notify

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	cdapi "github.com/cdevents/sdk-go/pkg/api"
	cdv05 "github.com/cdevents/sdk-go/pkg/api/v05"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kontinue.dev/kontinue/notify/api"
	"kontinue.dev/kontinue/reconciler/netguard"
	st "kontinue.dev/kontinue/reconciler/status"
)

var now = time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)

func step(name, kind, ready, reason, msg string) st.Resource {
	r := st.Resource{Name: name, TemplateRef: &st.TemplateRef{Kind: kind}}
	if ready != "" {
		r.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionStatus(ready), Reason: reason, Message: msg}}
	}
	return r
}

func src(rev string) st.Resource {
	r := step("source", "ClusterSourceTemplate", "True", "Ready", "")
	// As the status shows a source's outputs: previews, no outputValues
	// (kept only by steps with success rules).
	r.Outputs, _ = st.Outputs(map[string]any{"url": "https://github.com/org/app.git", "revision": rev}, nil, metav1.NewTime(now))
	return r
}

func types(evs []Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type+":"+e.Step)
	}
	return out
}

func TestDerive(t *testing.T) {
	o := Owner{Kind: "Workload", Namespace: "team", Name: "app"}
	for _, c := range []struct {
		name       string
		prev, next []st.Resource
		want       []string
	}{
		{"first status, failing", nil, []st.Resource{src("c1"), step("test", "ClusterTemplate", "False", "HealthyConditionRule", "tests failed")},
			[]string{"StepFailed:test", "SourceChanged:source"}},
		{"still failing: nothing",
			[]st.Resource{src("c1"), step("test", "ClusterTemplate", "False", "R", "a")},
			[]st.Resource{src("c1"), step("test", "ClusterTemplate", "False", "R", "b")}, nil},
		{"recovered",
			[]st.Resource{src("c1"), step("test", "ClusterTemplate", "False", "R", "a")},
			[]st.Resource{src("c1"), step("test", "ClusterTemplate", "True", "Ready", "")}, []string{"StepRecovered:test"}},
		{"unknown is not a failure",
			[]st.Resource{src("c1"), step("test", "ClusterTemplate", "Unknown", "MissingValueAtPath", "")},
			[]st.Resource{src("c1"), step("test", "ClusterTemplate", "Unknown", "MissingValueAtPath", "")}, nil},
		{"new revision", []st.Resource{src("c1")}, []st.Resource{src("c2")}, []string{"SourceChanged:source"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			evs := Derive(o, c.prev, c.next, nil, now)
			assert.ElementsMatch(t, c.want, types(evs))
			for _, e := range evs {
				assert.Equal(t, "https://github.com/org/app.git", e.Repository)
				if e.Type == api.EventStepFailed {
					assert.Equal(t, "tests failed", e.Message)
					assert.Equal(t, api.SeverityError, e.Severity)
				}
			}
		})
	}
}

func TestDeriveProvenance(t *testing.T) {
	o := Owner{Kind: "Workload", Namespace: "team", Name: "app"}
	taken := metav1.NewTime(now.Add(-time.Minute))
	ended := metav1.NewTime(now)
	set := func(digest, rev, outcome string) *st.InputSet {
		s := &st.InputSet{Digest: digest, TakenAt: &taken, Outcome: outcome,
			Sources: []st.SourceValue{{Name: "source", URL: "https://github.com/org/app", Revision: rev}}}
		if outcome != st.OutcomeProcessing && outcome != st.OutcomeHeld {
			s.EndedAt = &ended
		}
		return s
	}
	// As the status has them: current is the last success, latest the
	// newer set on the object (processing or failed), held the one waiting.
	deploy := func(ready string, p st.Provenance) st.Resource {
		r := step("deploy", "ClusterDeploymentTemplate", ready, "R", "")
		r.Provenance = &p
		return r
	}
	deploys := map[string]bool{"deploy": true}
	processing := deploy("Unknown", st.Provenance{Latest: set("d1", "abc", st.OutcomeProcessing)})
	evs := Derive(o, nil, []st.Resource{processing}, deploys, now)
	assert.Equal(t, []string{"StepStarted:deploy"}, types(evs))
	assert.Equal(t, "abc", evs[0].Revision, "the step's own input set's commit")
	succeeded := deploy("True", st.Provenance{Current: set("d1", "abc", st.OutcomeSucceeded)})
	evs = Derive(o, []st.Resource{processing}, []st.Resource{succeeded}, deploys, now)
	assert.Equal(t, []string{"StepSucceeded:deploy", "Deployed:deploy"}, types(evs))
	assert.Empty(t, Derive(o, []st.Resource{succeeded}, []st.Resource{succeeded}, nil, now))
	assert.Equal(t, []string{"StepStarted:deploy", "StepSucceeded:deploy", "Deployed:deploy"},
		types(Derive(o, nil, []st.Resource{succeeded}, deploys, now)), "taken and done in one reconcile")

	// A newer commit fails after abc succeeded: the failure is the newer
	// commit's, not abc's.
	held := deploy("True", st.Provenance{Current: set("d1", "abc", st.OutcomeSucceeded), Held: set("d2", "def", st.OutcomeHeld)})
	assert.Empty(t, Derive(o, []st.Resource{succeeded}, []st.Resource{held}, nil, now), "a held set is not taken")
	running := deploy("Unknown", st.Provenance{Current: set("d1", "abc", st.OutcomeSucceeded), Latest: set("d2", "def", st.OutcomeProcessing)})
	evs = Derive(o, []st.Resource{held}, []st.Resource{running}, nil, now)
	require.Equal(t, []string{"StepStarted:deploy"}, types(evs), "a held set going in is taken")
	assert.Equal(t, "def", evs[0].Revision)
	failed := deploy("False", st.Provenance{Current: set("d1", "abc", st.OutcomeSucceeded), Latest: set("d2", "def", st.OutcomeFailed)})
	evs = Derive(o, []st.Resource{running}, []st.Resource{failed}, nil, now)
	require.Equal(t, []string{"StepFailed:deploy"}, types(evs))
	assert.Equal(t, "def", evs[0].Revision, "the failing set's commit")

	// An image step's success publishes its image, read from its outputs'
	// preview.
	build := func(outcome string, end *metav1.Time) st.Resource {
		r := step("build", "ClusterImageTemplate", "True", "Ready", "")
		s := &st.InputSet{Digest: "d1", TakenAt: &taken, EndedAt: end, Outcome: outcome}
		r.Provenance = &st.Provenance{Current: s}
		if outcome == st.OutcomeProcessing {
			r.Provenance = &st.Provenance{Latest: s}
		}
		r.Outputs, _ = st.Outputs(map[string]any{"image": "registry.example/app@sha256:0123"}, nil, ended)
		return r
	}
	evs = Derive(o, []st.Resource{build(st.OutcomeProcessing, nil)}, []st.Resource{build(st.OutcomeSucceeded, &ended)}, nil, now)
	assert.Equal(t, []string{"StepSucceeded:build", "ArtifactPublished:build"}, types(evs))
	assert.Equal(t, "registry.example/app@sha256:0123", evs[1].Image)
}

func TestMatch(t *testing.T) {
	e := &Event{Type: api.EventStepFailed, Severity: api.SeverityError, Kind: "Workload", Namespace: "b", Name: "app",
		Labels: map[string]string{"team": "x"}, Chain: "c", Step: "test"}
	for _, c := range []struct {
		name     string
		ns       string
		spec     api.AlertSpec
		platform bool
		want     bool
	}{
		{"own namespace, everything", "b", api.AlertSpec{}, false, true},
		{"another namespace naming the owner gets nothing", "a", api.AlertSpec{Owners: []api.OwnerSelector{{Name: "app"}}}, false, false},
		{"another namespace listing b in namespaces gets nothing", "a", api.AlertSpec{Namespaces: []string{"b"}}, false, false},
		{"platform namespace, all", "platform", api.AlertSpec{}, true, true},
		{"platform namespace, other namespaces listed", "platform", api.AlertSpec{Namespaces: []string{"c"}}, true, false},
		{"by labels", "b", api.AlertSpec{Owners: []api.OwnerSelector{{MatchLabels: map[string]string{"team": "x"}}}}, false, true},
		{"labels differ", "b", api.AlertSpec{Owners: []api.OwnerSelector{{MatchLabels: map[string]string{"team": "y"}}}}, false, false},
		{"by kind and name", "b", api.AlertSpec{Owners: []api.OwnerSelector{{Kind: "Deliverable", Name: "app"}, {Kind: "Workload", Name: "app"}}}, false, true},
		{"other event kinds", "b", api.AlertSpec{Events: []string{api.EventDeployed}}, false, false},
		{"severity error", "b", api.AlertSpec{Severity: api.SeverityError}, false, true},
		{"other steps", "b", api.AlertSpec{Steps: []string{"deploy"}}, false, false},
		{"suspended", "b", api.AlertSpec{Suspend: true}, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, Match(c.ns, &c.spec, c.platform, e))
		})
	}
	info := *e
	info.Severity = api.SeverityInfo
	assert.False(t, Match("b", &api.AlertSpec{Severity: api.SeverityError}, false, &info))
}

var failed = Event{Type: api.EventStepFailed, Severity: api.SeverityError, Kind: "Workload", Namespace: "team", Name: "app",
	Step: "test", Reason: "HealthyConditionRule", Message: "3 tests failed", Repository: "https://github.com/org/app.git",
	Revision: "0123456789abcdef", At: now}

func body(t *testing.T, r *http.Request) []byte {
	b, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	return b
}

func TestRequests(t *testing.T) {
	reqs, err := Requests(Target{Type: api.TypeGeneric, Address: "https://hook.example/x", Token: "k"}, "team x", []Event{failed})
	require.NoError(t, err)
	require.Len(t, reqs, 1)
	b := body(t, reqs[0])
	assert.Equal(t, "sha256="+Sign([]byte("k"), b), reqs[0].Header.Get("X-Signature"))
	assert.Contains(t, string(b), `"revision":"0123456789abcdef"`)

	reqs, err = Requests(Target{Type: api.TypeSlack, Address: "https://hooks.slack.example/x", Dashboard: "https://dash.example"}, "team x", []Event{failed})
	require.NoError(t, err)
	var slack map[string]string
	require.NoError(t, json.Unmarshal(body(t, reqs[0]), &slack))
	assert.Equal(t, "team x\nWorkload team/app: step [test] failed at commit 0123456789ab of org/app: HealthyConditionRule: 3 tests failed (https://dash.example/#/owner/Workload/team/app)", slack["text"])

	ping := failed
	ping.Message = "<!channel> see <https://evil.example|here> & there"
	reqs, err = Requests(Target{Type: api.TypeSlack, Address: "https://hooks.slack.example/x"}, "", []Event{ping})
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(body(t, reqs[0]), &slack))
	assert.Contains(t, slack["text"], "&lt;!channel&gt; see &lt;https://evil.example|here&gt; &amp; there", "no ping, no disguised link")

	recovered := failed
	recovered.Type, recovered.Reason, recovered.Message = api.EventStepRecovered, "", ""
	reqs, err = Requests(Target{Type: api.TypeGitHub, Address: "https://gh.example/api/v3", Token: "t"}, "", []Event{failed, recovered})
	require.NoError(t, err)
	require.Len(t, reqs, 1, "one status per step and commit: the last wins")
	assert.Equal(t, "https://gh.example/api/v3/repos/org/app/statuses/0123456789abcdef", reqs[0].URL.String())
	assert.Equal(t, "Bearer t", reqs[0].Header.Get("Authorization"))
	var gh map[string]string
	require.NoError(t, json.Unmarshal(body(t, reqs[0]), &gh))
	assert.Equal(t, "success", gh["state"])
	assert.Equal(t, "kontinue/team/app/test", gh["context"])

	reqs, err = Requests(Target{Type: api.TypeGitLab, Token: "t", Repository: "grp/sub/app"}, "", []Event{failed})
	require.NoError(t, err)
	assert.Equal(t, "https://gitlab.com/api/v4/projects/grp%2Fsub%2Fapp/statuses/0123456789abcdef", reqs[0].URL.String())
	assert.Equal(t, "t", reqs[0].Header.Get("PRIVATE-TOKEN"))
	assert.Contains(t, string(body(t, reqs[0])), `"state":"failed"`)

	var many []Event
	for range 5000 {
		many = append(many, failed)
	}
	reqs, err = Requests(Target{Type: api.TypeMSTeams, Address: "https://teams.example/x"}, "", many)
	require.NoError(t, err)
	require.Len(t, reqs, 1, "a wave is one message")
	assert.Contains(t, string(body(t, reqs[0])), "and 4980 more events")
}

func TestCDEvents(t *testing.T) {
	for _, typ := range []string{api.EventStepFailed, api.EventStepRecovered, api.EventDeployed, api.EventRolledBack,
		api.EventStepStarted, api.EventStepSucceeded, api.EventArtifactPublished, api.EventSourceChanged} {
		e := failed
		e.Type = typ
		cd := CDEventOf(&e)
		require.NotNil(t, cd, typ)
		// The SDK is the oracle: its parser and its schemas take it.
		b, err := json.Marshal(cd)
		require.NoError(t, err)
		ev, err := cdv05.NewFromJsonBytes(b)
		require.NoError(t, err, "%s: %s", typ, b)
		require.NoError(t, cdapi.Validate(ev), "%s: %s", typ, b)
		assert.Equal(t, cd.Context.Type, ev.GetType().String(), typ)
		assert.Equal(t, cd.Subject.ID, ev.GetSubjectId(), typ)
	}
	none := failed
	none.Type = "NoSuchEvent"
	assert.Nil(t, CDEventOf(&none))
	withTrace := failed
	withTrace.TraceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	reqs, err := Requests(Target{Type: api.TypeCDEvents, Address: "https://broker.example/"}, "", []Event{withTrace})
	require.NoError(t, err)
	require.Len(t, reqs, 1)
	assert.Equal(t, "dev.cdevents.incident.detected.0.3.0", reqs[0].Header.Get("Ce-Type"))
	assert.Equal(t, Source, reqs[0].Header.Get("Ce-Source"))
	assert.Equal(t, withTrace.TraceParent, reqs[0].Header.Get("Ce-Traceparent"))
}

func TestSendRetries(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		assert.Equal(t, "x", string(b), "the body is sent again")
		if n.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("x"))
	require.NoError(t, send(context.Background(), srv.Client(), req, Retry{Initial: time.Millisecond}, nil))
	assert.Equal(t, int32(3), n.Load())

	n.Store(0)
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		w.WriteHeader(http.StatusNotFound)
	}))
	defer bad.Close()
	req, _ = http.NewRequest(http.MethodPost, bad.URL, strings.NewReader("x"))
	err := send(context.Background(), bad.Client(), req, Retry{Initial: time.Millisecond}, nil)
	var perm *permanentError
	require.ErrorAs(t, err, &perm)
	assert.Equal(t, int32(1), n.Load(), "a 4xx is not retried")
}

// A receiver down longer than a few attempts is retried for Retry.For,
// each failure told; past For, the request gives up.
func TestSendRetriesForADuration(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 10 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	var told int
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("x"))
	r := Retry{Initial: time.Millisecond, Max: 2 * time.Millisecond}
	require.NoError(t, send(context.Background(), srv.Client(), req, r, func(error) { told++ }))
	assert.Equal(t, int32(11), n.Load(), "down for 10 attempts, delivered at the 11th")
	assert.Equal(t, 10, told)

	n.Store(-1000)
	req, _ = http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("x"))
	r.For = 50 * time.Millisecond
	require.Error(t, send(context.Background(), srv.Client(), req, r, nil), "gave up after For")
	r.For, r.Attempts = 0, 3
	n.Store(-1000)
	req, _ = http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("x"))
	require.Error(t, send(context.Background(), srv.Client(), req, r, nil))
	assert.Equal(t, int32(-997), n.Load(), "Attempts caps the tries")
}

// The addresses a provider may not reach, whatever the options: metadata
// endpoints and the API server; loopback and private ones unless allowed.
func TestGuard(t *testing.T) {
	g := netguard.Guard{AllowPrivate: true, Deny: []string{"127.0.0.1:6443"}}
	assert.Error(t, g.Check("metadata", net.ParseIP("169.254.169.254"), "80"))
	assert.Error(t, g.Check("metadata", net.ParseIP("fd00:ec2::254"), "80"))
	assert.Error(t, g.Check("api", net.ParseIP("127.0.0.1"), "6443"))
	assert.NoError(t, g.Check("local", net.ParseIP("127.0.0.1"), "8080"))
	g.AllowPrivate = false
	assert.Error(t, g.Check("local", net.ParseIP("127.0.0.1"), "8080"))
	assert.Error(t, g.Check("svc", net.ParseIP("10.96.0.1"), "443"))
	assert.NoError(t, g.Check("public", net.ParseIP("140.82.112.3"), "443"))

	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("reached") }))
	defer srv.Close()
	tr := &http.Transport{DialContext: netguard.Guard{}.DialContext(nil)}
	req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
	err := send(context.Background(), &http.Client{Transport: tr}, req, Retry{Initial: time.Millisecond}, nil)
	var perm *permanentError
	require.ErrorAs(t, err, &perm, "a refused address is not retried")
}
