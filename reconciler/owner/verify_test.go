package owner

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/verify"
	"kontinue.dev/kontinue/reconciler/verify/check"
	"kontinue.dev/kontinue/reconciler/verify/verifytest"
)

// fakeVerifier answers by the image value asked about.
type fakeVerifier struct {
	mu      sync.Mutex
	answers map[string]check.Decision // by value
	asked   []check.Request
}

func (f *fakeVerifier) Check(r check.Request) check.Decision {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, r)
	if d, ok := f.answers[r.Value.(string)]; ok {
		return d
	}
	return check.Decision{Result: verify.Result{Outcome: verify.Unknown, Why: "verifying"}}
}

func (f *fakeVerifier) Wait(_ context.Context, r check.Request) check.Decision { return f.Check(r) }
func (f *fakeVerifier) Prefetch(r check.Request)                               { f.Check(r) }

const (
	digestNew = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	digestOld = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
)

// The chain: image (a ConfigMap whose status gives the image, by tag) →
// deploy (renders the image; its chain requires a signature), and other
// (no input: independent of the verification).
var (
	verifyChain = []api.Step{
		{Name: "image", TemplateRef: api.StepTemplateRef{Kind: api.KindClusterImageTemplate, Name: "img"}},
		{Name: "deploy", TemplateRef: api.StepTemplateRef{Kind: api.KindClusterTemplate, Name: "deploy"},
			Images: []api.StepInput{{Name: "app", Resource: "image"}},
			Verify: &api.StepVerify{Images: []api.InputVerify{{Name: "app", Keys: []api.VerifyKey{{PublicKey: verifytest.NewKey("ecdsa").PublicPEM()}}}}}},
		{Name: "other", TemplateRef: api.StepTemplateRef{Kind: api.KindClusterTemplate, Name: "other"}},
	}
	verifyTemplates = map[string]*api.TemplateSpec{
		"img": {ImagePath: "status.image", HealthRule: healthy, Template: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "app-img"}}},
		"deploy": {HealthRule: healthy, Template: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "app-deploy"},
			"data": map[string]any{"image": "$(images.app.image)$"}}},
		"other": {HealthRule: healthy, Template: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "app-other"}}},
	}
)

// prevDeploy is the deploy step's previous status: it rendered with the
// image reg.example/app@digestOld.
func prevDeploy(verification ...st.InputVerification) st.Resource {
	set := &st.InputSet{Digest: "set1", Images: []st.ImageValue{{Name: "app", Resource: "image", Image: "reg.example/app@" + digestOld}}}
	return st.Resource{Name: "deploy", Provenance: &st.Provenance{Current: set}, Verification: verification}
}

func TestVerifyInputs(t *testing.T) {
	tag := "reg.example/app:v2"
	graceEnd := time.Now().Add(800 * time.Millisecond)
	refused := check.Decision{Result: verify.Result{Outcome: verify.Refused, Rule: verify.RuleSignature, Digest: digestNew, Why: "no signature by the policy's keys"},
		Recheck: 5 * time.Second}
	for _, tt := range []struct {
		name     string
		answer   *check.Decision // nil: not decided yet
		prev     []st.Resource
		rendered string // the image app-deploy was rendered with ("": not rendered)
		// want
		submitted string
		result    string
		held      bool
		events    int // Warning InputNotVerified events
		refusals  []string
		requeue   time.Duration
		message   []string
		grace     time.Time // the status may wait until then for the decision
	}{
		{name: "verified: renders pinned to the digest checked",
			answer:    &check.Decision{Result: verify.Result{Outcome: verify.Verified, Rule: verify.RuleSignature, Digest: digestNew}},
			rendered:  "reg.example/app@" + digestNew,
			submitted: "True ResourceSubmissionComplete", result: "Verified"},
		{name: "refused, nothing to hold: not rendered, InputNotVerified, a Warning and the metric",
			answer:    &refused,
			submitted: "False InputNotVerified", result: "Refused", events: 1, refusals: []string{"web/deploy/signature"}, requeue: 5 * time.Second,
			message: []string{"image [app]", digestNew, "rule [signature]"}},
		{name: "refused, held: renders with the previous image, keeps its object",
			answer: &refused, prev: []st.Resource{prevDeploy()},
			rendered:  "reg.example/app@" + digestOld,
			submitted: "False InputNotVerified", result: "Refused", held: true, events: 1, refusals: []string{"web/deploy/signature"}, requeue: 5 * time.Second,
			message: []string{"image [app]", digestNew, "rule [signature]"}},
		{name: "the same refusal as before: no second event",
			answer: &refused, prev: []st.Resource{prevDeploy(st.InputVerification{Type: "image", Name: "app", Result: "Refused", Digest: digestNew, Rule: verify.RuleSignature})},
			rendered:  "reg.example/app@" + digestOld,
			submitted: "False InputNotVerified", result: "Refused", held: true, requeue: 5 * time.Second},
		{name: "not decided yet (a registry failing): pending, not failed; held",
			answer: &check.Decision{Result: verify.Result{Outcome: verify.Unknown, Why: "verifying: 503 Service Unavailable (attempt 2)"}},
			prev:   []st.Resource{prevDeploy()}, rendered: "reg.example/app@" + digestOld,
			submitted: "Unknown InputVerifying", result: "Verifying", held: true,
			message: []string{"verifying image [app]", "503"}},
		{name: "not decided yet, nothing to hold: waits, Unknown",
			submitted: "Unknown InputVerifying", result: "Verifying"},
		{name: "asked just now: held, and the status waits the decision's grace",
			answer: &check.Decision{Result: verify.Result{Outcome: verify.Unknown, Why: "verifying"}, GraceUntil: graceEnd},
			prev:   []st.Resource{prevDeploy()}, rendered: "reg.example/app@" + digestOld,
			submitted: "Unknown InputVerifying", result: "Verifying", held: true, grace: graceEnd},
		{name: "asked just now, nothing to hold: not rendered, the status waits the grace",
			answer:    &check.Decision{Result: verify.Result{Outcome: verify.Unknown, Why: "verifying"}, GraceUntil: graceEnd},
			submitted: "Unknown InputVerifying", result: "Verifying", grace: graceEnd},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fv := &fakeVerifier{answers: map[string]check.Decision{}}
			if tt.answer != nil {
				fv.answers[tag] = *tt.answer
			}
			var refusals []string
			w := &world{status: map[string]map[string]any{"image": {"image": tag}}}
			got := walkVerified(t, w, tt.prev, fv, func(chain, step, rule string) { refusals = append(refusals, chain+"/"+step+"/"+rule) })
			require.Len(t, got.res, 3)
			deploy := got.res[1]
			assert.Equal(t, tt.submitted, cond(deploy, st.ResourceSubmitted))
			require.Len(t, deploy.Verification, 1)
			v := deploy.Verification[0]
			assert.Equal(t, tt.result, v.Result)
			assert.Equal(t, tt.held, v.Held)
			assert.Equal(t, "image", v.Type)
			assert.Equal(t, "app", v.Name)
			c := st.Find(deploy.Conditions, st.ResourceSubmitted)
			for _, part := range tt.message {
				assert.Contains(t, c.Message, part)
			}

			rendered := ""
			for _, u := range w.applied {
				if u.GetName() == "app-deploy" {
					rendered, _, _ = unstructured.NestedString(u.Object, "data", "image")
				}
			}
			assert.Equal(t, tt.rendered, rendered)
			// The other step goes on whatever deploy's input is.
			assert.Equal(t, "True Ready", cond(got.res[2], st.Ready))
			assert.Equal(t, "True Ready", cond(got.res[0], st.Ready))

			warnings := 0
			for _, e := range got.events {
				if strings.HasPrefix(e, "Warning InputNotVerified") {
					warnings++
				}
			}
			assert.Equal(t, tt.events, warnings, "%v", got.events)
			assert.Equal(t, tt.refusals, refusals)
			if tt.requeue > 0 {
				assert.Equal(t, tt.requeue, got.requeue)
			}
			assert.Equal(t, tt.grace, got.verifyUntil)
			// Asked as the owner's account, with its history.
			require.NotEmpty(t, fv.asked)
			assert.Equal(t, check.Owner{Kind: "Workload", Namespace: "dev", Name: "app"}, fv.asked[0].Owner)
			assert.Equal(t, api.ServiceAccountRef{Namespace: "dev", Name: "builder"}, fv.asked[0].Account)
		})
	}
}

// A policy that cannot be used refuses every input it names (fail closed).
func TestVerifyInputsBadPolicy(t *testing.T) {
	defs := append([]api.Step(nil), verifyChain...)
	bad := defs[1]
	bad.Verify = &api.StepVerify{Images: []api.InputVerify{{Name: "app"}}} // no rule
	defs[1] = bad
	fv := &fakeVerifier{answers: map[string]check.Decision{}}
	w := &world{status: map[string]map[string]any{"image": {"image": "reg.example/app:v2"}}}
	got := walkVerifiedWith(t, w, nil, defs, fv, nil)
	deploy := got.res[1]
	assert.Equal(t, "False InputNotVerified", cond(deploy, st.ResourceSubmitted))
	assert.Contains(t, st.Find(deploy.Conditions, st.ResourceSubmitted).Message, "rule [policy]")
	assert.Empty(t, fv.asked, "nothing fetched for a policy that cannot be used")
	for _, u := range w.applied {
		assert.NotEqual(t, "app-deploy", u.GetName(), "not rendered")
	}
}

func walkVerified(t *testing.T, w *world, prev []st.Resource, v Verifier, onRefused func(chain, step, rule string)) walkedOver {
	return walkVerifiedWith(t, w, prev, verifyChain, v, onRefused)
}

// walkVerifiedWith walks defs with the input check a pass gives the walk
// (checkInputs), as account dev/builder.
func walkVerifiedWith(t *testing.T, w *world, prev []st.Resource, defs []api.Step, v Verifier, onRefused func(chain, step, rule string)) walkedOver {
	t.Helper()
	return walkWithSetup(t, w, prev, defs, verifyTemplates, func(s *steps) {
		s.verify = &inputCheck{v: v, owner: check.Owner{Kind: "Workload", Namespace: "dev", Name: "app"},
			account: api.ServiceAccountRef{Namespace: "dev", Name: "builder"}, onRefused: onRefused, chain: defs, byStep: map[string]*checked{}}
		s.prepare.Verify = s.verifyInputs
	})
}

// askLog is a Verifier that notes, for each value asked about, how many
// objects the walk had written then.
type askLog struct {
	fakeVerifier
	w       *world
	written map[string][]int // value → objects written at each ask
}

func (a *askLog) Check(r check.Request) check.Decision {
	a.written[fmt.Sprint(r.Value)] = append(a.written[fmt.Sprint(r.Value)], len(a.w.applied))
	return a.fakeVerifier.Check(r)
}

func (a *askLog) Wait(_ context.Context, r check.Request) check.Decision { return a.Check(r) }
func (a *askLog) Prefetch(r check.Request)                               { a.Check(r) }

// A step whose object publishes an output a later step's policy checks,
// in a field it renders (not its status), has that value asked about
// before its object is applied: the fetch runs beside the apply. An
// output read from a status is asked about only once published.
func TestVerifyPrefetchesARenderedOutput(t *testing.T) {
	for _, tt := range []struct {
		name      string
		imagePath string
		want      []int // objects written at each ask about the image
	}{
		{"an output the rendered object holds: asked before the apply, and again by the step", "data.image", []int{0, 1}},
		{"an output of the status: asked by the step only", "status.image", []int{1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const image = "reg.example/app:v3"
			templates := map[string]*api.TemplateSpec{}
			for k, v := range verifyTemplates {
				templates[k] = v
			}
			templates["img"] = &api.TemplateSpec{ImagePath: tt.imagePath, HealthRule: healthy, Template: map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "app-img"}, "data": map[string]any{"image": image}}}
			w := &world{status: map[string]map[string]any{"image": {"image": image}}}
			a := &askLog{fakeVerifier: fakeVerifier{answers: map[string]check.Decision{}}, w: w, written: map[string][]int{}}
			walkWithSetup(t, w, nil, verifyChain, templates, func(s *steps) {
				s.verify = &inputCheck{v: a, owner: check.Owner{Kind: "Workload", Namespace: "dev", Name: "app"},
					account: api.ServiceAccountRef{Namespace: "dev", Name: "builder"}, chain: verifyChain, byStep: map[string]*checked{}}
				s.prepare.Verify = s.verifyInputs
			})
			assert.Equal(t, tt.want, a.written[image])
		})
	}
}

func TestVerifyInputsBadPolicyOneWarning(t *testing.T) {
	defs := append([]api.Step(nil), verifyChain...)
	bad := defs[1]
	bad.Verify = &api.StepVerify{Images: []api.InputVerify{{Name: "app"}}}
	defs[1] = bad
	var refusals []string
	w := &world{status: map[string]map[string]any{"image": {"image": "reg.example/app:v2"}}}
	got := walkVerifiedWith(t, w, nil, defs, &fakeVerifier{}, func(chain, step, rule string) { refusals = append(refusals, rule) })
	require.Len(t, got.events, 1, "%v", got.events)
	assert.True(t, strings.HasPrefix(got.events[0], "Warning InputNotVerified: step [deploy]: image [app] (no digest) refused by rule [policy]: "), got.events[0])
	assert.Equal(t, []string{"policy"}, refusals)
}

// An owner's status waits for an input's decision until the end of the
// first grace it waited for; it is looked at again then only when no
// fetch's grace ends by then to wake it, or sooner when the walk asks.
func TestDeferral(t *testing.T) {
	now := time.Now()
	at := func(d time.Duration) time.Time { return now.Add(d) }
	for _, tt := range []struct {
		name           string
		until, soonest time.Time
		requeue        time.Duration
		want           time.Duration
		wait           bool
	}{
		{"asked just now: the verifier wakes it", at(time.Second), at(time.Second), 0, 0, true},
		{"waited already, another input's grace ends sooner: woken then", at(time.Second), at(300 * time.Millisecond), 0, 0, true},
		{"the input of the first grace decided, another's ends later: looked at again at the first's end", at(300 * time.Millisecond), at(time.Second), 0, 300 * time.Millisecond, true},
		{"the first grace is over: written now", now, at(time.Second), 0, 0, false},
		{"inputs changing faster than decided: written", at(-2 * time.Second), at(900 * time.Millisecond), 0, 0, false},
		{"the walk asks to look again sooner", at(time.Second), at(time.Second), 100 * time.Millisecond, 100 * time.Millisecond, true},
		{"the walk asks to look again later than the first grace's end", at(400 * time.Millisecond), at(time.Second), time.Minute, 400 * time.Millisecond, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, wait := deferral(now, tt.until, tt.soonest, tt.requeue)
			assert.Equal(t, tt.wait, wait)
			assert.Equal(t, tt.want, got)
		})
	}
}
