package step

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
	st "kontinue.dev/kontinue/reconciler/status"
)

// An image template whose object reports status.ok true (success) or false
// (failure), and its image at status.image.
func gatedSpec() *api.TemplateSpec {
	return &api.TemplateSpec{
		ImagePath: ".status.image",
		ObservedCompletion: &api.ObservedCompletion{
			Succeeded: api.Rules{{Key: "status.ok", Value: true}},
			Failed:    api.Rules{{Key: "status.ok", Value: false}},
		},
	}
}

func healthRuleSpec() *api.TemplateSpec {
	return &api.TemplateSpec{ImagePath: ".status.image", HealthRule: &api.HealthRule{SingleConditionType: "Ready"}}
}

// object is an image object applied with input set digest; status is its
// status (nil: none yet).
func object(name, digest string, status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kpack.io/v1alpha2", "kind": "Image",
		"metadata": map[string]any{"name": name, "namespace": "ns", "annotations": map[string]any{AnnotationDigest: digest}, "labels": map[string]any{"app": "x"}},
		"spec":     map[string]any{"tag": "registry/" + digest},
	}}
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

func succeededOn(image string) map[string]any { return map[string]any{"ok": true, "image": image} }
func failedOn() map[string]any                { return map[string]any{"ok": false} }
func processing() map[string]any              { return map[string]any{} }

func observed(spec *api.TemplateSpec, digest string, s State) Observed {
	return Observed{Kind: api.KindClusterImageTemplate, Step: "build", Template: "kpack", Spec: spec,
		Desired: object("app", digest, nil), Digest: digest, State: s}
}

func TestAdmit(t *testing.T) {
	// The step applied d1 (as rendered: AppliedObject) after d0 succeeded.
	good := State{Good: Outputs{"image": "img@d0"}, GoodDigest: "d0", ServedBy: ServedByPrimary,
		AppliedDigest: "d1", AppliedObject: object("app", "d1", nil).Object}
	tests := []struct {
		name     string
		live     *unstructured.Unstructured
		held     bool
		state    State // expected
		lastGood bool  // a LastGoodObject was recorded: d1 as rendered
	}{
		{name: "nothing stamped yet", live: nil, state: good},
		{name: "same input set: applied at once (hand edits too)", live: object("app", "d2", processing()), state: good},
		{name: "object without a digest", live: object("app", "", processing()), state: good},
		{name: "busy on another input set: held", live: object("app", "d1", processing()), held: true, state: good},
		{name: "previous set succeeded, not recorded yet: held one reconcile, its outputs recorded first",
			live: object("app", "d1", succeededOn("img@d1")), held: true, state: State{Good: Outputs{"image": "img@d1"}, GoodDigest: "d1", ServedBy: ServedByPrimary}, lastGood: true},
		{name: "previous set failed: released, last good kept", live: object("app", "d1", failedOn()), state: good},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ob := Admit(observed(gatedSpec(), "d2", good), tt.live)
			assert.Equal(t, tt.held, ob.Held)
			assert.Equal(t, tt.state.Good, ob.State.Good)
			assert.Equal(t, tt.state.GoodDigest, ob.State.GoodDigest)
			assert.Equal(t, tt.lastGood, ob.State.LastGoodObject != nil)
			if tt.lastGood {
				assert.Equal(t, object("app", "d1", nil).Object, ob.State.LastGoodObject, "the object as rendered, not as the API server keeps it")
			}
			if tt.held && tt.state.GoodDigest == "d1" {
				assert.Contains(t, ob.Submitted.Message, "for one reconcile")
				assert.Equal(t, recordRecheck, ob.Recheck)
				return
			}
			if tt.held {
				assert.Equal(t, ReasonInputsHeld, ob.Submitted.Reason)
				assert.Equal(t, st.Unknown, ob.Submitted.Status)
				assert.Contains(t, ob.Submitted.Message, "input set d2")
				assert.Contains(t, ob.Submitted.Message, "input set d1")
				assert.Equal(t, Outputs{"image": "img@d0"}, ob.Outputs(), "downstream keeps the last good outputs while held")
				assert.Nil(t, ob.ShadowWant, "a busy primary is no reason for a shadow")
			}
		})
	}
}

func TestObserve(t *testing.T) {
	last := State{Good: Outputs{"image": "img@d0"}, GoodDigest: "d0", LastGoodObject: object("app", "d0", nil).Object}
	tests := []struct {
		name       string
		spec       *api.TemplateSpec
		live       *unstructured.Unstructured
		changed    bool
		submitted  metav1.ConditionStatus
		reason     string
		healthy    metav1.ConditionStatus
		out        Outputs
		goodDigest string
		shadow     bool
	}{
		{name: "success on the applied inputs publishes them", spec: gatedSpec(), live: object("app", "d1", succeededOn("img@d1")),
			submitted: st.True, reason: ReasonSubmitted, healthy: st.True, out: Outputs{"image": "img@d1"}, goodDigest: "d1"},
		{name: "just written: what it reports is about the old inputs", spec: gatedSpec(), live: object("app", "d1", succeededOn("img@d0")), changed: true,
			submitted: st.True, reason: ReasonSubmitted, healthy: st.Unknown, out: Outputs{"image": "img@d0"}, goodDigest: "d0"},
		{name: "processing keeps the last good outputs", spec: gatedSpec(), live: object("app", "d1", processing()),
			submitted: st.True, reason: ReasonSubmitted, healthy: st.Unknown, out: Outputs{"image": "img@d0"}, goodDigest: "d0"},
		{name: "failure on new inputs: last good outputs, a shadow", spec: gatedSpec(), live: object("app", "d1", failedOn()),
			submitted: st.True, reason: ReasonSubmitted, healthy: st.False, out: Outputs{"image": "img@d0"}, goodDigest: "d0", shadow: true},
		{name: "failure on the last good inputs is external: no shadow", spec: gatedSpec(), live: object("app", "d0", failedOn()),
			submitted: st.True, reason: ReasonSubmitted, healthy: st.False, out: Outputs{"image": "img@d0"}, goodDigest: "d0"},
		{name: "success reported for other inputs (a hand edit) is not trusted", spec: gatedSpec(), live: object("app", "dX", succeededOn("img@dX")),
			submitted: st.True, reason: ReasonSubmitted, healthy: st.True, out: Outputs{"image": "img@d0"}, goodDigest: "d0"},
		{name: "healthRule only: outputs whenever readable", spec: healthRuleSpec(), live: object("app", "d1", map[string]any{"image": "img@d1"}),
			submitted: st.True, reason: ReasonSubmitted, healthy: st.Unknown, out: Outputs{"image": "img@d1"}, goodDigest: "d0"},
		{name: "healthRule only: missing output waits", spec: healthRuleSpec(), live: object("app", "d1", processing()),
			submitted: st.Unknown, reason: ReasonMissingValueAtPath, healthy: st.Unknown, out: nil, goodDigest: "d0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ob := Observe(observed(tt.spec, "d1", last), tt.live, tt.changed)
			assert.Equal(t, tt.submitted, ob.Submitted.Status, ob.Submitted.Message)
			assert.Equal(t, tt.reason, ob.Submitted.Reason)
			require.NotNil(t, ob.Healthy)
			assert.Equal(t, tt.healthy, ob.Healthy.Status, ob.Healthy.Message)
			assert.Equal(t, tt.out, ob.Outputs())
			assert.Equal(t, tt.goodDigest, ob.State.GoodDigest)
			assert.Equal(t, tt.shadow, ob.ShadowWant != nil)
		})
	}
}

func TestObserveDeployment(t *testing.T) {
	spec := &api.TemplateSpec{ObservedCompletion: &api.ObservedCompletion{
		Succeeded: api.Rules{{Key: "status.ok", Value: true}}, Failed: api.Rules{{Key: "status.ok", Value: false}}}}
	o := Observed{Kind: api.KindClusterDeploymentTemplate, Step: "deploy", Template: "app-deploy", Spec: spec, Digest: "d1",
		Desired: object("app", "d1", nil), Deployment: Outputs{"url": "u", "revision": "r1"}, State: State{Good: Outputs{"url": "u", "revision": "r0"}, GoodDigest: "d0"}}
	with := func(status map[string]any) *unstructured.Unstructured {
		u := object("app", "d1", status)
		u.SetGeneration(1)
		status["observedGeneration"] = int64(1)
		return u
	}

	ob := Observe(o, with(map[string]any{"ok": true}), false)
	assert.Equal(t, st.True, ob.Submitted.Status)
	assert.Equal(t, Outputs{"url": "u", "revision": "r1"}, ob.Outputs(), "passes its deployment input on once done")
	assert.Nil(t, ob.ShadowWant, "a deployment never has a shadow")

	ob = Observe(o, with(map[string]any{"ok": false}), false)
	assert.Equal(t, ReasonFailedConditionMet, ob.Submitted.Reason)
	assert.Equal(t, st.False, ob.Submitted.Status)
	assert.Equal(t, Outputs{"url": "u", "revision": "r0"}, ob.Outputs())

	ob = Observe(o, with(map[string]any{}), false)
	assert.Equal(t, ReasonConditionNotMet, ob.Submitted.Reason)
	assert.Equal(t, st.Unknown, ob.Submitted.Status)
}

func TestGatedAndImmutable(t *testing.T) {
	yes := true
	assert.True(t, Gated(&api.TemplateSpec{AlwaysSuccessful: yes}))
	assert.True(t, Gated(&api.TemplateSpec{ObservedMatches: []api.ObservedMatch{{Input: "a", Output: "b"}}}))
	assert.True(t, Gated(gatedSpec()))
	assert.False(t, Gated(healthRuleSpec()))
	optIn := healthRuleSpec()
	optIn.Shadow = &yes
	assert.True(t, Gated(optIn), "shadow: true makes a healthRule a success rule")
	assert.False(t, Gated(&api.TemplateSpec{Shadow: &yes}), "shadow: true without a rule has nothing to judge")
	assert.True(t, IsImmutable(&api.TemplateSpec{Lifecycle: api.LifecycleTekton}))
	assert.True(t, IsImmutable(&api.TemplateSpec{Lifecycle: api.LifecycleImmutable}))
	assert.False(t, IsImmutable(&api.TemplateSpec{Lifecycle: api.LifecycleMutable}))
	assert.False(t, IsImmutable(nil))
	assert.Equal(t, Runnable, LifecycleOf(&api.TemplateSpec{Runnable: true, Lifecycle: api.LifecycleTekton}))
	assert.Equal(t, Immutable, LifecycleOf(&api.TemplateSpec{Lifecycle: api.LifecycleImmutable}))
	assert.Equal(t, Mutable, LifecycleOf(gatedSpec()))
}

func TestStateOf(t *testing.T) {
	assert.Equal(t, State{}, StateOf(nil))
	ref := &st.StampedRef{Kind: "Image", Name: "app-last-good"}
	s := StateOf(&st.Resource{InputDigest: "d0", OutputValues: map[string]any{"image": "x"}, ShadowRef: ref, ServedBy: ServedByShadow})
	assert.Equal(t, State{Good: Outputs{"image": "x"}, GoodDigest: "d0", ShadowRef: ref, ServedBy: ServedByShadow}, s)
}

// The outputs a step publishes survive its status' JSON round trip.
func TestOutputsJSON(t *testing.T) {
	b, err := json.Marshal(Outputs{"image": "x"})
	require.NoError(t, err)
	assert.JSONEq(t, `{"image":"x"}`, string(b))
}

// Output paths may be written as a tag, as in design document 002's
// example (imagePath: $(status.latestImage)$).
func TestReadOutputsTaggedPath(t *testing.T) {
	doc := []byte(`{"status":{"latestImage":"img@d1","url":"u","revision":"r"}}`)
	for _, path := range []string{"$(status.latestImage)$", " $(status.latestImage)$ ", ".status.latestImage", "status.latestImage"} {
		out, err := ReadOutputs(api.KindClusterImageTemplate, &api.TemplateSpec{ImagePath: path}, doc, nil)
		require.NoError(t, err, path)
		assert.Equal(t, Outputs{"image": "img@d1"}, out, path)
	}
	out, err := ReadOutputs(api.KindClusterSourceTemplate, &api.TemplateSpec{URLPath: "$(status.url)$", RevisionPath: "$(status.revision)$"}, doc, nil)
	require.NoError(t, err)
	assert.Equal(t, Outputs{"url": "u", "revision": "r"}, out)
}
