package step

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/health"
	st "kontinue.dev/kontinue/reconciler/status"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func TestProgressDeadline(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"": DefaultProgressDeadline, "90s": 90 * time.Second, "1h": time.Hour,
		"0s": DefaultProgressDeadline, "-1m": DefaultProgressDeadline, "soon": DefaultProgressDeadline,
	} {
		assert.Equal(t, want, ProgressDeadline(&api.TemplateSpec{ProgressDeadline: in}), in)
	}
}

func TestDeadline(t *testing.T) {
	spec := &api.TemplateSpec{ProgressDeadline: "5m"}
	proc := health.Result{Outcome: health.Processing, Status: health.StatusUnknown, Reason: "ConditionNotMet", Message: "waiting"}
	ok := health.Result{Outcome: health.Succeeded, Status: health.StatusTrue}
	bad := health.Result{Outcome: health.Failed, Status: health.StatusFalse, Reason: "FailedConditionMet"}
	clock := func(d string, at time.Time) State { return State{ProcessingDigest: d, ProcessingSince: at} }
	tests := []struct {
		name    string
		state   State
		digest  string
		h       health.Result
		now     time.Time
		outcome health.Outcome
		reason  string
		clock   State
		recheck time.Duration
	}{
		{"processing, first seen: the clock starts now", State{}, "d1", proc, t0, health.Processing, "ConditionNotMet", clock("d1", t0), 5*time.Minute + time.Second},
		{"processing within the deadline", clock("d1", t0), "d1", proc, t0.Add(4 * time.Minute), health.Processing, "ConditionNotMet", clock("d1", t0), time.Minute + time.Second},
		{"processing at the deadline: failed", clock("d1", t0), "d1", proc, t0.Add(5 * time.Minute), health.Failed, ReasonProgressDeadlineExceeded, clock("d1", t0), 0},
		{"past the deadline it stays failed", clock("d1", t0), "d1", proc, t0.Add(time.Hour), health.Failed, ReasonProgressDeadlineExceeded, clock("d1", t0), 0},
		{"another input set: the clock starts again", clock("d1", t0), "d2", proc, t0.Add(time.Hour), health.Processing, "ConditionNotMet", clock("d2", t0.Add(time.Hour)), 5*time.Minute + time.Second},
		{"success stops the clock", clock("d1", t0), "d1", ok, t0.Add(time.Hour), health.Succeeded, "", State{}, 0},
		{"failure stops the clock", clock("d1", t0), "d1", bad, t0.Add(time.Hour), health.Failed, "FailedConditionMet", State{}, 0},
		{"an object without an input set has no clock", State{}, "", proc, t0, health.Processing, "ConditionNotMet", State{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, s, recheck := Deadline(spec, tt.state, tt.digest, "Image [ns/app]", tt.h, tt.now)
			assert.Equal(t, tt.outcome, h.Outcome)
			assert.Equal(t, tt.reason, h.Reason)
			assert.Equal(t, tt.clock, s)
			assert.Equal(t, tt.recheck, recheck)
			if tt.reason == ReasonProgressDeadlineExceeded {
				assert.Equal(t, health.StatusFalse, h.Status)
				assert.Contains(t, h.Message, "Image [ns/app] has neither succeeded nor failed on input set d1 within the progress deadline 5m0s (processing since 2026-01-01T12:00:00Z): waiting")
			}
		})
	}
}

// A gated step whose object never finishes: past the deadline its input set
// counts as failed, the newest held set goes in, and the failure on inputs
// other than the last good ones wants a shadow.
func TestDeadlineReleasesHeldInputs(t *testing.T) {
	spec := gatedSpec()
	spec.ProgressDeadline = "1m"
	good := State{Good: Outputs{"image": "img@d0"}, GoodDigest: "d0", LastGoodObject: object("app", "d0", nil).Object}
	busy := object("app", "d1", processing())

	o := observed(spec, "d2", good)
	o.Now = t0
	ob := Admit(o, busy)
	require.True(t, ob.Held, "within the deadline")
	assert.Equal(t, time.Minute+time.Second, ob.Recheck)
	assert.Equal(t, "d1", ob.State.ProcessingDigest)

	o.State, o.Now = ob.State, t0.Add(time.Minute)
	ob = Admit(o, busy)
	assert.True(t, ob.Held, "past the deadline the held set waits one reconcile, for the shadow to be recorded")
	assert.Equal(t, recordRecheck, ob.Recheck)
	assert.Contains(t, ob.Submitted.Message, "for one reconcile")
	assert.Equal(t, Outputs{"image": "img@d0"}, ob.State.Good)

	// The deadline is a failure: the reconcile that sees it stamps the
	// shadow from the last good inputs first, and the status records it
	// before the held set goes in (once in, the object shows that set
	// processing, not the failure).
	mo := mutableObserved(spec, "d2", o.State)
	mo.Now = t0.Add(time.Minute)
	w := world{status: processing(), wrote: true, shadow: processing()}
	writes, first := drive(t, mo, Seen{Live: busy}, w)
	assert.Equal(t, []string{"shadow"}, kinds(writes), "the shadow, not the newer set")
	assert.Equal(t, "registry/d0", writes[0].Apply[0].Object["spec"].(map[string]any)["tag"], "stamped from the last good inputs")
	require.NotNil(t, first.Done.State.ShadowRef)
	assert.True(t, first.Done.Held)

	// Its status write lost a race: the next reconcile decides the same
	// again from the same state, and nothing is forgotten.
	writes, again := drive(t, mo, Seen{Live: busy}, w)
	assert.Equal(t, []string{"shadow"}, kinds(writes))
	assert.Equal(t, first.Done.State.ShadowRef, again.Done.State.ShadowRef)

	// Recorded: the held set goes in, and the shadow stays.
	var res st.Resource
	mutable{}.Record(*first.Done, &res)
	mo.State = StateOf(&res)
	writes, next := drive(t, mo, Seen{Live: busy}, w)
	assert.Equal(t, []string{"apply", "shadow"}, kinds(writes))
	assert.False(t, next.Done.Held)
	assert.NotNil(t, next.Done.State.ShadowRef, "kept until the primary succeeds")

	// Nothing newer: the object itself is failed past the deadline.
	o = observed(spec, "d1", good)
	o.State, o.Now = ob.State, t0.Add(2*time.Minute)
	ob = Observe(o, busy, false)
	require.NotNil(t, ob.Healthy)
	assert.Equal(t, st.False, ob.Healthy.Status)
	assert.Equal(t, ReasonProgressDeadlineExceeded, ob.Healthy.Reason)
	assert.Equal(t, Outputs{"image": "img@d0"}, ob.Outputs())
	assert.NotNil(t, ob.ShadowWant, "a deadline failure on new inputs is a failure like any other")

	res = st.Resource{}
	mutable{}.Record(ob, &res)
	assert.Equal(t, "d1", res.ProcessingInputDigest)
	assert.Equal(t, metav1.NewTime(t0), *res.ProcessingSince)
	assert.Equal(t, ob.State.ProcessingSince, StateOf(&res).ProcessingSince, "the clock survives the status")
}

// Every failure of a gated step makes a shadow, whatever detected it: the
// failure rule, or the progress deadline for rules that cannot fail
// otherwise; the shadow serves the outputs while it is in success.
func TestShadowForEveryFailure(t *testing.T) {
	matches := &api.TemplateSpec{ImagePath: ".status.image", ProgressDeadline: "1m",
		ObservedMatches: []api.ObservedMatch{{Input: "spec.tag", Output: "status.tag"}}}
	succeedOnly := &api.TemplateSpec{ImagePath: ".status.image", ProgressDeadline: "1m",
		ObservedCompletion: &api.ObservedCompletion{Succeeded: api.Rules{{Key: "status.ok", Value: true}}}}
	withFailure := gatedSpec()
	withFailure.ProgressDeadline = "1m"
	lastGood := object("app", "d0", nil).Object
	good := State{Good: Outputs{"image": "img@d0"}, GoodDigest: "d0", LastGoodObject: lastGood}
	matched := func(digest, image string) map[string]any {
		return map[string]any{"tag": "registry/" + digest, "image": image, "ok": true}
	}
	tests := []struct {
		name   string
		spec   *api.TemplateSpec
		status map[string]any
		now    time.Time
		reason string // the primary's Healthy reason
		shadow bool
	}{
		{"failure rule", withFailure, failedOn(), t0, "FailedConditionMet", true},
		{"failure rule, within the deadline", withFailure, processing(), t0, "ConditionNotMet", false},
		{"failure rule, past the deadline", withFailure, processing(), t0.Add(time.Minute), ReasonProgressDeadlineExceeded, true},
		{"observedMatches within the deadline", matches, map[string]any{"tag": "old"}, t0, "ConditionNotMet", false},
		{"observedMatches past the deadline", matches, map[string]any{"tag": "old"}, t0.Add(time.Minute), ReasonProgressDeadlineExceeded, true},
		{"succeeded only, past the deadline", succeedOnly, processing(), t0.Add(time.Minute), ReasonProgressDeadlineExceeded, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := good
			s.ProcessingDigest, s.ProcessingSince = "d1", t0
			o := observed(tt.spec, "d1", s)
			o.Now = tt.now
			ob := Observe(o, object("app", "d1", tt.status), false)
			require.NotNil(t, ob.Healthy)
			assert.Equal(t, tt.reason, ob.Healthy.Reason, ob.Healthy.Message)
			require.Equal(t, tt.shadow, ob.ShadowWant != nil)
			if !tt.shadow {
				return
			}
			assert.Equal(t, st.False, ob.Healthy.Status)
			assert.Equal(t, "app-last-good", ob.ShadowWant.GetName())
			assert.Equal(t, "registry/d0", ob.ShadowWant.Object["spec"].(map[string]any)["tag"], "stamped from the last good inputs")

			// The shadow, rebuilt outside, in success: it serves the outputs.
			live := object("app-last-good", "d0", matched("d0", "img@d0-rebased"))
			served := ob.WithShadow(st.StampedRef{Kind: "Image", Name: "app-last-good"}, live, o)
			assert.Equal(t, Outputs{"image": "img@d0-rebased"}, served.Outputs())
			assert.Equal(t, ServedByShadow, served.State.ServedBy)
			assert.Contains(t, served.Healthy.Message, "outputs served by shadow")

			// Not in success: downstream keeps the last good outputs.
			waiting := ob.WithShadow(st.StampedRef{Kind: "Image", Name: "app-last-good"}, object("app-last-good", "d0", processing()), o)
			assert.Equal(t, Outputs{"image": "img@d0"}, waiting.Outputs())
		})
	}
}
