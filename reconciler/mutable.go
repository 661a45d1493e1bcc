package reconciler

// The executor of mutable steps: one object (or several, with a primary)
// applied in place; gated steps hold inputs and keep a shadow, as
// reconciler/step decides.

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/render"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/step"
)

// stampAndObserve applies the step's objects and reads outputs and health
// from its primary object. A step whose template says what success is
// (gated) does not take new inputs while its object is still working on the
// previous ones.
func (op *ownerPass) stampAndObserve(sc *stepCtx, objs []*unstructured.Unstructured, in render.Inputs) stepResult {
	primaryIdx := primaryIndex(sc.spec, objs)
	targets := make([]target, len(objs))
	for i, desired := range objs {
		t, cond, err := op.resolve(sc, desired)
		if cond != nil {
			r := op.stepDone(sc, nil, *cond, nil)
			r.err = err
			return r
		}
		targets[i] = t
	}
	o := op.observed(sc, objs[primaryIdx], in)
	if step.Gated(sc.spec) {
		// Decided on the live object before anything is applied.
		live, _ := op.current(targets[primaryIdx].key, objs[primaryIdx].GetNamespace(), objs[primaryIdx].GetName())
		ob := step.Admit(o, live)
		o.State = ob.State
		if ob.Held {
			sc.res.StampedRef = &targets[primaryIdx].ref
			sc.res.HeldInputDigest = o.Digest
			return op.finish(sc, o, ob)
		}
	}
	var refs []st.StampedRef
	var primary *unstructured.Unstructured
	changed := false
	for i, desired := range objs {
		live, wrote, cond, err := op.stampOne(sc, targets[i], desired)
		if cond != nil {
			r := op.stepDone(sc, nil, *cond, nil)
			r.err = err
			return r
		}
		refs = append(refs, targets[i].ref)
		if i == primaryIdx {
			primary, changed = live, wrote
		}
	}
	sc.res.StampedRef = &refs[primaryIdx]
	sc.res.StampedObjects = nil
	if len(refs) > 1 {
		sc.res.StampedObjects = refs
	}
	return op.finish(sc, o, step.Observe(o, primary, changed))
}

// observed is what the step's decisions start from.
func (op *ownerPass) observed(sc *stepCtx, primary *unstructured.Unstructured, in render.Inputs) step.Observed {
	o := step.Observed{Kind: sc.kind, Step: sc.step.Name, Template: sc.tmplName, Spec: sc.spec, Desired: primary,
		Digest: primary.GetAnnotations()[AnnotationDigest], State: step.StateOf(sc.prev)}
	if in.Deployment != nil {
		o.Deployment = outputs{"url": in.Deployment.URL, "revision": in.Deployment.Revision}
	}
	return o
}

// finish stamps the shadow the observation wants (its health decides who
// serves the outputs), then records the step.
func (op *ownerPass) finish(sc *stepCtx, o step.Observed, ob step.Observation) stepResult {
	if want := ob.ShadowWant; want != nil {
		t, cond, err := op.resolve(sc, want)
		if cond == nil {
			var live *unstructured.Unstructured
			if live, _, cond, err = op.stampOne(sc, t, want); cond == nil {
				ob = ob.WithShadow(t.ref, live, o)
			}
		}
		if cond != nil {
			klog.V(1).InfoS("could not stamp shadow", "owner", op.r.user(op.owner.GetNamespace(), op.owner.GetName()), "step", sc.step.Name, "reason", cond.Reason, "message", cond.Message, "err", err)
			ob = ob.ShadowFailed(cond.Message)
		}
	}
	s := ob.State
	sc.res.ShadowRef, sc.res.ServedBy, sc.res.LastGoodObject = s.ShadowRef, s.ServedBy, s.LastGoodObject
	if ob.Gated {
		sc.res.InputDigest, sc.res.OutputValues = s.GoodDigest, s.Good
	}
	return op.stepDoneWith(sc, ob)
}

// stepDoneWith finishes a step as its Observation says.
func (op *ownerPass) stepDoneWith(sc *stepCtx, ob step.Observation) stepResult {
	return op.stepDone(sc, ob.Outputs(), ob.Submitted, ob.Healthy)
}

func primaryIndex(spec *api.TemplateSpec, objs []*unstructured.Unstructured) int {
	if spec.Primary == nil {
		return 0
	}
	for i, o := range objs {
		if o.GetKind() == spec.Primary.Kind && (spec.Primary.Name == "" || o.GetName() == spec.Primary.Name) &&
			(spec.Primary.APIVersion == "" || o.GetAPIVersion() == spec.Primary.APIVersion) {
			return i
		}
	}
	return 0
}
