package step

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/runs"
	st "kontinue.dev/kontinue/reconciler/status"
)

// world plays the executor: what each write leaves behind. status is the
// status the primary reports after the apply (nil: none yet); shadow the
// shadow's (nil: stamping it fails).
type world struct {
	status     map[string]any
	wrote      bool
	shadow     map[string]any
	created    *unstructured.Unstructured
	runnableSt map[string]any
}

func (w world) got(p Plan) Got {
	switch {
	case p.Create != nil:
		c := w.created
		if c == nil {
			c = p.Create.DeepCopy()
			c.SetName("created")
			c.SetLabels(map[string]string{runs.LabelInputDigest: "new"})
		}
		return Got{Live: []*unstructured.Unstructured{c}, Wrote: true}
	case p.Shadow:
		if w.shadow == nil {
			return Got{Failed: "forbidden"}
		}
		live := p.Apply[0].DeepCopy()
		live.Object["status"] = w.shadow
		return Got{Live: []*unstructured.Unstructured{live}, Refs: []st.StampedRef{{Kind: live.GetKind(), Name: live.GetName()}}}
	}
	var g Got
	for i, u := range p.Apply {
		live := u.DeepCopy()
		if i == p.Primary {
			if w.runnableSt != nil {
				live.Object["status"] = w.runnableSt
			} else if w.status != nil {
				live.Object["status"] = w.status
			}
		}
		g.Live, g.Refs = append(g.Live, live), append(g.Refs, st.StampedRef{Kind: live.GetKind(), Name: live.GetName()})
	}
	g.Wrote = w.wrote
	return g
}

// drive runs a Strategy as the executor does after Check and returns the
// writes asked for (in order) and the Done plan.
func drive(t *testing.T, o Observed, seen Seen, w world) ([]Plan, Plan) {
	t.Helper()
	s := StrategyOf(o.Spec)
	var writes []Plan
	p := s.Start(o, seen)
	for i := 0; p.Done == nil; i++ {
		require.Less(t, i, 5, "a strategy must come to a decision")
		require.True(t, p.Writes(), "a plan that is not done asks for a write")
		writes = append(writes, p)
		p = s.Next(o, p, w.got(p))
	}
	return writes, p
}

func kinds(ps []Plan) []string {
	var out []string
	for _, p := range ps {
		switch {
		case p.Create != nil:
			out = append(out, "create")
		case p.Shadow:
			out = append(out, "shadow")
		default:
			out = append(out, "apply")
		}
	}
	return out
}

func mutableObserved(spec *api.TemplateSpec, digest string, s State) Observed {
	o := observed(spec, digest, s)
	o.Objects = []*unstructured.Unstructured{o.Desired}
	return o
}

func TestMutableStrategy(t *testing.T) {
	lastGood := State{Good: Outputs{"image": "img@d0"}, GoodDigest: "d0", LastGoodObject: object("app", "d0", nil).Object, ServedBy: ServedByPrimary}
	shadowRef := &st.StampedRef{Kind: "Image", Name: ShadowName("app")}
	withShadow := lastGood
	withShadow.ShadowRef = shadowRef
	goodD1 := State{Good: Outputs{"image": "img@d1"}, GoodDigest: "d1", LastGoodObject: object("app", "d1", nil).Object, ServedBy: ServedByPrimary}
	tests := []struct {
		name     string
		spec     *api.TemplateSpec
		state    State
		live     *unstructured.Unstructured // before the apply
		after    world
		writes   []string
		held     bool
		out      Outputs
		servedBy string
		shadow   bool // the decision keeps a shadow
		healthy  metav1.ConditionStatus
	}{
		{name: "not gated: applied, outputs whenever readable", spec: healthRuleSpec(), state: State{},
			after: world{status: map[string]any{"image": "img@d1"}}, writes: []string{"apply"}, out: Outputs{"image": "img@d1"}, healthy: st.Unknown},
		{name: "hold: busy on another input set, nothing written", spec: gatedSpec(), state: lastGood, live: object("app", "d1", processing()),
			held: true, out: Outputs{"image": "img@d0"}, servedBy: ServedByPrimary, healthy: st.Unknown},
		{name: "success not recorded yet: held one reconcile, the previous set's outputs recorded first", spec: gatedSpec(), state: lastGood, live: object("app", "d1", succeededOn("img@d1")),
			held: true, out: Outputs{"image": "img@d1"}, servedBy: ServedByPrimary, healthy: st.True},
		{name: "release on a recorded success: the new inputs applied", spec: gatedSpec(), state: goodD1, live: object("app", "d1", succeededOn("img@d1")),
			after: world{status: succeededOn("img@d1"), wrote: true}, writes: []string{"apply"}, out: Outputs{"image": "img@d1"}, servedBy: ServedByPrimary, healthy: st.Unknown},
		{name: "failure without its shadow: held one reconcile, the shadow stamped first", spec: gatedSpec(), state: lastGood, live: object("app", "d1", failedOn()),
			after: world{shadow: processing()}, writes: []string{"shadow"}, held: true, out: Outputs{"image": "img@d0"}, servedBy: ServedByPrimary, shadow: true, healthy: st.False},
		{name: "failure without its shadow, and the shadow cannot be stamped: the newer set goes in all the same", spec: gatedSpec(), state: lastGood, live: object("app", "d1", failedOn()),
			after: world{status: processing(), wrote: true}, writes: []string{"shadow", "apply"}, out: Outputs{"image": "img@d0"}, servedBy: ServedByPrimary, healthy: st.Unknown},
		{name: "release on failure once its shadow is recorded: applied, last good outputs kept, the shadow stays", spec: gatedSpec(), state: withShadow, live: object("app", "d1", failedOn()),
			after: world{status: processing(), wrote: true, shadow: processing()}, writes: []string{"apply", "shadow"}, out: Outputs{"image": "img@d0"}, servedBy: ServedByPrimary, shadow: true, healthy: st.Unknown},
		{name: "release on failure of the last good inputs (external state): applied, no shadow", spec: gatedSpec(), state: lastGood, live: object("app", "d0", failedOn()),
			after: world{status: processing(), wrote: true, shadow: processing()}, writes: []string{"apply"}, out: Outputs{"image": "img@d0"}, servedBy: ServedByPrimary, healthy: st.Unknown},
		{name: "success while a shadow serves: recorded first, the shadow goes", spec: gatedSpec(), state: withShadow, live: object("app", "d1", succeededOn("img@d1")),
			held: true, out: Outputs{"image": "img@d1"}, servedBy: ServedByPrimary, healthy: st.True},
		{name: "success on the applied inputs publishes them", spec: gatedSpec(), state: lastGood, live: object("app", "d2", processing()),
			after: world{status: succeededOn("img@d2")}, writes: []string{"apply"}, out: Outputs{"image": "img@d2"}, servedBy: ServedByPrimary, healthy: st.True},
		{name: "shadow created after a failure on new inputs; it serves the outputs once in success", spec: gatedSpec(), state: lastGood, live: object("app", "d2", processing()),
			after: world{status: failedOn(), shadow: succeededOn("img@d0-rebased")}, writes: []string{"apply", "shadow"},
			out: Outputs{"image": "img@d0-rebased"}, servedBy: ServedByShadow, shadow: true, healthy: st.False},
		{name: "shadow not in success yet: last good outputs", spec: gatedSpec(), state: lastGood, live: object("app", "d2", processing()),
			after: world{status: failedOn(), shadow: processing()}, writes: []string{"apply", "shadow"},
			out: Outputs{"image": "img@d0"}, servedBy: ServedByPrimary, shadow: true, healthy: st.False},
		{name: "shadow that cannot be stamped: reported, last good outputs", spec: gatedSpec(), state: lastGood, live: object("app", "d2", processing()),
			after: world{status: failedOn()}, writes: []string{"apply", "shadow"}, out: Outputs{"image": "img@d0"}, servedBy: ServedByPrimary, healthy: st.False},
		{name: "shadow kept while held", spec: gatedSpec(), state: withShadow, live: object("app", "d1", processing()),
			after: world{shadow: succeededOn("img@d0-rebased")}, writes: []string{"shadow"}, held: true,
			out: Outputs{"image": "img@d0-rebased"}, servedBy: ServedByShadow, shadow: true, healthy: st.Unknown},
		{name: "shadow removed once the primary succeeds again", spec: gatedSpec(), state: withShadow, live: object("app", "d2", processing()),
			after: world{status: succeededOn("img@d2")}, writes: []string{"apply"}, out: Outputs{"image": "img@d2"}, servedBy: ServedByPrimary, healthy: st.True},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := mutableObserved(tt.spec, "d2", tt.state)
			require.Nil(t, StrategyOf(tt.spec).Check(o))
			writes, p := drive(t, o, Seen{Live: tt.live}, tt.after)
			assert.Equal(t, tt.writes, kinds(writes))
			ob := *p.Done
			assert.Equal(t, tt.held, ob.Held, ob.Submitted.Message)
			assert.Equal(t, tt.out, ob.Outputs())
			assert.Equal(t, tt.servedBy, ob.State.ServedBy)
			assert.Equal(t, tt.shadow, ob.State.ShadowRef != nil)
			require.NotNil(t, ob.Healthy)
			assert.Equal(t, tt.healthy, ob.Healthy.Status, ob.Healthy.Message)
			assert.Same(t, o.Desired, p.Ref, "the step points at its primary, held or not")
			if len(writes) > 0 && writes[0].Shadow {
				assert.Equal(t, ShadowName("app"), writes[0].Apply[0].GetName())
			}

			var res st.Resource
			StrategyOf(tt.spec).Record(ob, &res)
			if tt.held {
				assert.Equal(t, "d2", res.HeldInputDigest)
			} else {
				assert.Empty(t, res.HeldInputDigest)
			}
			if Gated(tt.spec) {
				assert.Equal(t, map[string]any(ob.State.Good), res.OutputValues, "the last good outputs survive in status")
			}
		})
	}
}

// Several objects: all applied in order, the primary observed, every one
// listed in the status.
func TestMutableStrategySeveralObjects(t *testing.T) {
	o := mutableObserved(healthRuleSpec(), "d1", State{})
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cfg"}}}
	o.Objects = []*unstructured.Unstructured{cm, o.Desired}
	o.Primary = 1
	writes, p := drive(t, o, Seen{}, world{status: map[string]any{"image": "img@d1"}})
	require.Len(t, writes, 1)
	assert.Equal(t, o.Objects, writes[0].Apply)
	assert.Equal(t, Outputs{"image": "img@d1"}, p.Done.Outputs())
	assert.Same(t, o.Desired, p.Ref)
	assert.Equal(t, o.Objects, p.Objects)
}

// Several objects, the primary fails on new inputs: only the primary gets a
// shadow (the others are not judged, and the primary names them).
func TestMutableStrategySeveralObjectsShadowOnlyThePrimary(t *testing.T) {
	lastGood := State{Good: Outputs{"image": "img@d0"}, GoodDigest: "d0", LastGoodObject: object("app", "d0", nil).Object, ServedBy: ServedByPrimary}
	o := mutableObserved(gatedSpec(), "d2", lastGood)
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cfg"}}}
	o.Objects = []*unstructured.Unstructured{cm, o.Desired}
	o.Primary = 1
	writes, p := drive(t, o, Seen{Live: object("app", "d2", processing())}, world{status: failedOn(), shadow: succeededOn("img@d0-rebased")})
	require.Equal(t, []string{"apply", "shadow"}, kinds(writes))
	assert.Equal(t, o.Objects, writes[0].Apply)
	require.Len(t, writes[1].Apply, 1, "one shadow: the primary's")
	assert.Equal(t, ShadowName("app"), writes[1].Apply[0].GetName())
	assert.Equal(t, "Image", writes[1].Apply[0].GetKind())
	assert.Equal(t, Outputs{"image": "img@d0-rebased"}, p.Done.Outputs())
	assert.Equal(t, o.Objects, p.Objects, "the step still lists every object it stamped")
}

func immutableObserved(policy *api.RetentionPolicy) Observed {
	spec := &api.TemplateSpec{ConfigPath: ".status.out", Lifecycle: api.LifecycleTekton, RetentionPolicy: policy}
	desired := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "tekton.dev/v1", "kind": "TaskRun",
		"metadata": map[string]any{"generateName": "test-", "namespace": "ns", "annotations": map[string]any{AnnotationDigest: "x"}}}}
	run, digest := RunOf(desired)
	return Observed{Kind: api.KindClusterConfigTemplate, Step: "test", Template: "tests", Spec: spec,
		Desired: run, Digest: digest, Objects: []*unstructured.Unstructured{run}}
}

func TestImmutableStrategy(t *testing.T) {
	o := immutableObserved(&api.RetentionPolicy{MaxSuccessfulRuns: 1, MaxFailedRuns: 1})
	cur := func(name, status, out string) runs.Run { return run(name, o.Digest, status, out) }
	tests := []struct {
		name    string
		list    []runs.Run // newest first
		pending bool
		writes  []string
		ref     string
		out     Outputs
		digest  string
		deleted []string
		kept    []string
		requeue time.Duration
	}{
		{name: "first input set: a run is created, downstream waits", writes: []string{"create"}, ref: "created", kept: []string{"created"}},
		{name: "a run for these inputs exists: nothing created", list: []runs.Run{cur("r1", "True", "a")},
			ref: "r1", out: Outputs{"config": "a"}, digest: o.Digest, kept: []string{"r1"}},
		{name: "new input set: a new run; the last good outputs meanwhile", list: []runs.Run{run("r1", "d1", "True", "a")},
			writes: []string{"create"}, ref: "created", out: Outputs{"config": "a"}, digest: "d1", kept: []string{"created", "r1"}},
		{name: "a run just created, not in the cache yet: none created, look again shortly", list: []runs.Run{run("r1", "d1", "True", "a")}, pending: true,
			ref: "r1", out: Outputs{"config": "a"}, digest: "d1", kept: []string{"r1"}, requeue: 300 * time.Millisecond},
		{name: "retention: finished runs beyond the policy go, the newest success stays",
			list:   []runs.Run{cur("r5", "True", "e"), run("r4", "d4", "True", "d"), run("r3", "d3", "False", ""), run("r2", "d2", "False", ""), run("r1", "d1", "True", "a")},
			ref:    "r5",
			out:    Outputs{"config": "e"},
			digest: o.Digest, deleted: []string{"r4", "r2", "r1"}, kept: []string{"r5", "r3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			writes, p := drive(t, o, Seen{Runs: tt.list, Pending: tt.pending}, world{})
			assert.Equal(t, tt.writes, kinds(writes))
			if len(writes) > 0 {
				assert.Same(t, o.Desired, writes[0].Create, "the run is the rendered object, without the digest annotation")
				assert.NotContains(t, writes[0].Create.GetAnnotations(), AnnotationDigest)
			}
			assert.True(t, p.Reached)
			require.NotNil(t, p.Ref)
			assert.Equal(t, tt.ref, p.Ref.GetName(), "the step points at its newest run")
			assert.Equal(t, tt.out, p.Done.Outputs())
			assert.Equal(t, tt.deleted, runNames(p.Delete))
			assert.Equal(t, tt.kept, runNames(p.Keep))
			assert.Equal(t, tt.requeue, p.Requeue)
			var res st.Resource
			StrategyOf(o.Spec).Record(*p.Done, &res)
			assert.Equal(t, tt.digest, res.InputDigest, "the input set of the run whose outputs are published")
		})
	}
}

func TestImmutableCheck(t *testing.T) {
	o := immutableObserved(nil)
	assert.Nil(t, StrategyOf(o.Spec).Check(o))
	o.Objects = append(o.Objects, o.Desired)
	c := StrategyOf(o.Spec).Check(o)
	require.NotNil(t, c)
	assert.Equal(t, ReasonStampFailure, c.Reason)
	assert.Contains(t, c.Message, "exactly one object per input set")
}

func TestRunOfIsStableAndIgnoresTheDigestAnnotation(t *testing.T) {
	a := immutableObserved(nil)
	desired := a.Desired.DeepCopy()
	desired.SetAnnotations(map[string]string{AnnotationDigest: "other"})
	_, d := RunOf(desired)
	assert.Equal(t, a.Digest, d)
}

func runNames(rs []runs.Run) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Name)
	}
	return out
}

func TestRunnableStrategy(t *testing.T) {
	spec := &api.TemplateSpec{Runnable: true, ImagePath: ".status.image", Template: map[string]any{"kind": "TaskRun"},
		HealthRule: &api.HealthRule{SingleConditionType: "Succeeded"}}
	rendered := &unstructured.Unstructured{Object: map[string]any{"kind": "TaskRun"}}
	o := Observed{Kind: api.KindClusterImageTemplate, Step: "build", Template: "t", Spec: spec, Objects: []*unstructured.Unstructured{rendered}}
	s := StrategyOf(spec)
	assert.Equal(t, runnableLifecycle, LifecycleOf(spec))
	require.Nil(t, s.Check(o))

	noTemplate := o
	noTemplate.Spec = &api.TemplateSpec{Runnable: true}
	assert.Contains(t, s.Check(noTemplate).Message, "needs spec.template")
	for name, rule := range map[string]*api.TemplateSpec{
		"none":             {},
		"alwaysSuccessful": {AlwaysSuccessful: true},
	} {
		noRule := o
		noRule.Spec = &api.TemplateSpec{Runnable: true, Template: spec.Template, AlwaysSuccessful: rule.AlwaysSuccessful}
		assert.Contains(t, s.Check(noRule).Message, "needs a rule that says when a run has succeeded", name)
	}
	for name, rule := range map[string]*api.TemplateSpec{
		"healthRule":         {HealthRule: &api.HealthRule{AlwaysHealthy: &struct{}{}}},
		"observedCompletion": {ObservedCompletion: &api.ObservedCompletion{Succeeded: api.Rules{{Key: "status.phase", Value: "Done"}}}},
		"observedMatches":    {ObservedMatches: []api.ObservedMatch{{Input: "spec.a", Output: "status.a"}}},
	} {
		withRule := o
		r := *rule
		r.Runnable, r.Template = true, spec.Template
		withRule.Spec = &r
		assert.Nil(t, s.Check(withRule), name)
	}
	two := o
	two.Objects = []*unstructured.Unstructured{rendered, rendered}
	assert.Contains(t, s.Check(two).Message, "exactly one object, not 2")

	// The executor replaces the rendered object with what it generated.
	crt := &unstructured.Unstructured{Object: map[string]any{"kind": api.KindClusterRunTemplate, "metadata": map[string]any{"name": "crt"}}}
	rn := &unstructured.Unstructured{Object: map[string]any{"kind": api.KindRunnable, "metadata": map[string]any{"name": "app-build", "generation": int64(1)}}}
	o.Objects, o.Primary, o.Desired = []*unstructured.Unstructured{crt, rn}, 1, rn
	writes, p := drive(t, o, Seen{}, world{runnableSt: map[string]any{"observedGeneration": int64(1),
		"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}, "outputs": map[string]any{"image": "img@1"}}})
	require.Len(t, writes, 1)
	assert.Equal(t, []*unstructured.Unstructured{crt, rn}, writes[0].Apply, "the run template before the Runnable that names it")
	assert.True(t, writes[0].Reached, "reached before the writes: a step failing on them keeps what it had")
	assert.Same(t, rn, p.Ref)
	assert.Empty(t, p.Objects)
	assert.NotNil(t, p.Objects, "the step stamps one object now")
	assert.Equal(t, Outputs{"image": "img@1"}, p.Done.Outputs())
	assert.Equal(t, st.True, p.Done.Healthy.Status)
}

func TestRunOfLeavesTheShardOutOfTheInputSet(t *testing.T) {
	a := immutableObserved(nil)
	moved := a.Desired.DeepCopy()
	l := moved.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[api.ShardLabel] = "b"
	moved.SetLabels(l)
	run, d := RunOf(moved)
	assert.Equal(t, a.Digest, d, "an owner that moves shard keeps its input set: no new run")
	assert.Equal(t, "b", run.GetLabels()[api.ShardLabel], "the run is created in the owner's shard")
}
