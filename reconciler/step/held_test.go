package step

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
	st "kontinue.dev/kontinue/reconciler/status"
)

// heldKind is one template kind: its output paths, what its object reports
// once done on input set c, and the outputs that gives.
type heldKind struct {
	kind string
	spec func(*api.TemplateSpec)
	done func(c string) map[string]any // the status fields of the outputs
	out  func(c string) Outputs
}

var heldKinds = []heldKind{
	{api.KindClusterSourceTemplate, func(s *api.TemplateSpec) { s.URLPath, s.RevisionPath = "status.url", "status.revision" },
		func(c string) map[string]any { return map[string]any{"url": "git@" + c, "revision": "rev-" + c} },
		func(c string) Outputs { return Outputs{"url": "git@" + c, "revision": "rev-" + c} }},
	{api.KindClusterImageTemplate, func(s *api.TemplateSpec) { s.ImagePath = "status.image" },
		func(c string) map[string]any { return map[string]any{"image": "img@" + c} },
		func(c string) Outputs { return Outputs{"image": "img@" + c} }},
	{api.KindClusterConfigTemplate, func(s *api.TemplateSpec) { s.ConfigPath = "status.config" },
		func(c string) map[string]any { return map[string]any{"config": "cfg-" + c} },
		func(c string) Outputs { return Outputs{"config": "cfg-" + c} }},
	{api.KindClusterTemplate, func(*api.TemplateSpec) {},
		func(string) map[string]any { return map[string]any{} },
		func(string) Outputs { return Outputs{} }},
	// A deployment's outputs are its deployment input of the set.
	{api.KindClusterDeploymentTemplate, func(*api.TemplateSpec) {},
		func(string) map[string]any { return map[string]any{} },
		func(c string) Outputs { return Outputs{"url": "app@" + c, "revision": "rev-" + c} }},
}

// heldRule is one way of saying what success is, and the status of an
// object that works on its set or is done with it.
type heldRule struct {
	name              string
	spec              func(*api.TemplateSpec)
	working, finished func(c string) map[string]any
}

var heldRules = []heldRule{
	{"observedCompletion", func(s *api.TemplateSpec) {
		s.ObservedCompletion = &api.ObservedCompletion{Succeeded: api.Rules{{Key: "status.ok", Value: true}}, Failed: api.Rules{{Key: "status.ok", Value: false}}}
	}, func(string) map[string]any { return map[string]any{} }, func(string) map[string]any { return map[string]any{"ok": true} }},
	{"observedMatches", func(s *api.TemplateSpec) {
		s.ObservedMatches = []api.ObservedMatch{{Input: "spec.tag", Output: "status.tag"}}
	}, func(string) map[string]any { return map[string]any{"tag": "registry/old"} }, func(c string) map[string]any { return map[string]any{"tag": "registry/" + c} }},
	// shadow: true makes a healthRule a success rule (the API server
	// refuses it on a deployment template, which then keeps Cartographer's
	// behaviour: not gated).
	{"healthRule", func(s *api.TemplateSpec) {
		yes := true
		s.HealthRule, s.Shadow = &api.HealthRule{SingleConditionType: "Ready"}, &yes
	}, func(string) map[string]any {
		return map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "Unknown"}}}
	}, func(string) map[string]any {
		return map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}
	}},
}

// heldObserved renders input set c of kind k with rule r.
func heldObserved(k heldKind, spec *api.TemplateSpec, c string, s State, prev *st.Provenance) Observed {
	o := Observed{Kind: k.kind, Step: "step", Template: "tmpl", Spec: spec, Desired: rendered(c), Digest: c, State: s,
		PrevProvenance: prev, Now: t0, Inputs: st.InputSet{OwnerGeneration: int64(c[1] - '0')}}
	o.Objects = []*unstructured.Unstructured{o.Desired}
	if k.kind == api.KindClusterDeploymentTemplate {
		o.Deployment = Outputs{"url": "app@" + c, "revision": "rev-" + c}
		o.Inputs.Deployment = &st.SourceValue{Name: "deployment", Resource: "src", URL: "app@" + c, Revision: "rev-" + c}
	}
	return o
}

// rendered is the object rendered for input set c. (A generation, so that
// the status can report on it: a deployment's rule needs it.)
func rendered(c string) *unstructured.Unstructured {
	u := object("app", c, nil)
	u.SetGeneration(1)
	return u
}

// liveOn is the object on input set c as the API server and the object's
// controllers keep it: the render, plus what others added (a default, an
// annotation of its controller), and status.
func liveOn(c string, status ...map[string]any) *unstructured.Unstructured {
	u := rendered(c)
	u.SetAnnotations(map[string]string{AnnotationDigest: c, AnnotationInputSet: c, "deployment.kubernetes.io/revision": "7"})
	u.Object["spec"].(map[string]any)["defaulted"] = "by the API server"
	u.SetResourceVersion("42")
	u.Object["status"] = merge(status...)
	return u
}

// A set that completes while a newer one is held is recorded before the
// newer one goes in, for every template kind and every success rule:
// its outputs (a deployment's: the inputs it was applied with, not the
// held set's), its object as rendered (what a shadow is stamped from), its
// success in the provenance. The next reconcile lets the held set in.
func TestCompletesWhileNewerIsHeld(t *testing.T) {
	for _, k := range heldKinds {
		for _, r := range heldRules {
			t.Run(k.kind+"/"+r.name, func(t *testing.T) {
				spec := &api.TemplateSpec{}
				k.spec(spec)
				r.spec(spec)
				if k.kind == api.KindClusterDeploymentTemplate && r.name == "healthRule" {
					// A deployment template needs observedCompletion or
					// observedMatches beside a healthRule, and may not
					// set shadow: the former judges success.
					spec.Shadow = nil
					heldRules[0].spec(spec)
					working, finished := r.working, r.finished
					r.working = func(c string) map[string]any { return merge(heldRules[0].working(c), working(c)) }
					r.finished = func(c string) map[string]any { return merge(heldRules[0].finished(c), finished(c)) }
				}
				require.True(t, Gated(spec))
				var res st.Resource
				reconcile := func(c string, live *unstructured.Unstructured, w world) ([]string, Observation, Observed) {
					t.Helper()
					o := heldObserved(k, spec, c, StateOf(&res), res.Provenance)
					writes, p := drive(t, o, Seen{Live: live}, w)
					ob := *p.Done
					StrategyOf(spec).Record(ob, &res)
					RecordProvenance(o, ob, &res)
					res.OutputValues = map[string]any(ob.Outputs())
					if !ob.Gated {
						res.OutputValues = nil
					}
					return kinds(writes), ob, o
				}

				// c1 went through; c2 is applied and works.
				_, ob, _ := reconcile("c1", nil, world{status: merge(r.finished("c1"), k.done("c1"))})
				require.Equal(t, k.out("c1"), ob.Outputs(), "%+v %+v", ob.Submitted, ob.Healthy)
				writes, ob, _ := reconcile("c2", liveOn("c1", r.finished("c1"), k.done("c1")), world{status: merge(r.working("c2")), wrote: true})
				require.Equal(t, []string{"apply"}, writes)
				require.Equal(t, k.out("c1"), ob.Outputs(), "c2 works: c1's outputs meanwhile")
				assert.Equal(t, "c2", res.AppliedInputDigest, "the set on the object, as rendered")

				// c3 is rendered while the object works on c2: held.
				writes, ob, _ = reconcile("c3", liveOn("c2", r.working("c2")), world{})
				assert.Empty(t, writes)
				require.True(t, ob.Held)
				assert.Equal(t, k.out("c1"), ob.Outputs())
				require.NotNil(t, res.Provenance.Held, "%+v", res.Provenance)
				assert.Equal(t, "c3", res.Provenance.Held.Digest)

				// The object completes c2: held for one reconcile, c2's
				// end recorded first.
				live := liveOn("c2", r.finished("c2"), k.done("c2"))
				writes, ob, _ = reconcile("c3", live, world{})
				assert.Empty(t, writes, "c3 waits until c2's end is in the status")
				require.True(t, ob.Held, "held for one reconcile")
				assert.Contains(t, ob.Submitted.Message, "for one reconcile")
				assert.Equal(t, k.out("c2"), ob.Outputs(), "c2's outputs, not c1's or the held c3's")
				assert.Equal(t, map[string]any(k.out("c2")), res.OutputValues)
				assert.Equal(t, "c2", res.InputDigest)
				require.NotNil(t, res.Provenance.Current)
				assert.Equal(t, "c2", res.Provenance.Current.Digest)
				assert.Equal(t, st.OutcomeSucceeded, res.Provenance.Current.Outcome, "c2 succeeded, not superseded")
				assert.Equal(t, "c3", res.Provenance.Held.Digest)
				if ShadowCapable(k.kind, spec) {
					assert.Equal(t, rendered("c2").Object, res.LastGoodObject,
						"what a shadow is stamped from: c2 as rendered, not the live object (defaults, other controllers' annotations)")
				} else {
					assert.Nil(t, res.LastGoodObject)
				}
				assert.Empty(t, res.AppliedInputDigest, "the set on the object is the last good one")

				// The next reconcile lets c3 in; c2's outputs stay until c3
				// succeeds.
				writes, ob, _ = reconcile("c3", live, world{status: merge(r.working("c3")), wrote: true})
				assert.Equal(t, []string{"apply"}, writes)
				assert.False(t, ob.Held)
				assert.Equal(t, k.out("c2"), ob.Outputs())
				assert.Equal(t, "c2", res.Provenance.Current.Digest)
				assert.Equal(t, "c3", res.Provenance.Latest.Digest)
				assert.Equal(t, "c3", res.AppliedInputDigest)

				// c3 completes: its outputs.
				_, ob, _ = reconcile("c3", liveOn("c3", r.finished("c3"), k.done("c3")), world{status: merge(r.finished("c3"), k.done("c3"))})
				assert.Equal(t, k.out("c3"), ob.Outputs())
				assert.Equal(t, "c3", res.Provenance.Current.Digest)
			})
		}
	}
}

// A status written before Kontinue recorded what the set on the object was
// rendered from (an upgrade): its success cannot be recorded with outputs
// that are not its own. A deployment keeps its last good outputs, and the
// held set goes in as before; a shadow-capable step records the success
// without an object to stamp a shadow from, rather than the live object.
func TestCompletesWhileHeldUnknownRender(t *testing.T) {
	for _, k := range []heldKind{heldKinds[1], heldKinds[4]} {
		t.Run(k.kind, func(t *testing.T) {
			spec := &api.TemplateSpec{}
			k.spec(spec)
			heldRules[0].spec(spec)
			s := State{Good: k.out("c1"), GoodDigest: "c1", LastGoodObject: object("app", "c1", nil).Object}
			o := heldObserved(k, spec, "c3", s, nil)
			writes, p := drive(t, o, Seen{Live: liveOn("c2", map[string]any{"ok": true}, k.done("c2"))}, world{status: merge(), wrote: true})
			ob := *p.Done
			if k.kind == api.KindClusterDeploymentTemplate {
				assert.Equal(t, []string{"apply"}, kinds(writes))
				assert.Equal(t, k.out("c1"), ob.Outputs(), "c3's inputs are not c2's outputs")
				return
			}
			assert.Empty(t, writes)
			assert.Equal(t, k.out("c2"), ob.Outputs())
			assert.Nil(t, ob.State.LastGoodObject, "no shadow from the live object")
		})
	}
}

// merge is the status of ms together, reported on the object's generation.
func merge(ms ...map[string]any) map[string]any {
	out := map[string]any{"observedGeneration": int64(1)}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}
