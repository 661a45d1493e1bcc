package reconciler

// How mutable steps write: one object (or several, with a primary) applied
// in place as the step's service account, and the shadow of a gated step.
// What is applied, and when, is step.Strategy's (reconciler/step).

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/reconciler/api"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/step"
)

type mutableWriter struct {
	noRuns
	op      *ownerPass
	sc      *stepCtx
	targets map[*unstructured.Unstructured]target
}

func newMutableWriter(op *ownerPass, sc *stepCtx) stepWriter {
	return &mutableWriter{op: op, sc: sc, targets: map[*unstructured.Unstructured]target{}}
}

// load resolves every object before anything is written (so that a step
// that holds or fails never loses track of its objects), and reads the live
// primary when the Strategy decides on it.
func (w *mutableWriter) load(o *step.Observed) (step.Seen, *stepResult) {
	for _, desired := range o.Objects {
		t, cond, err := w.op.resolve(w.sc, desired)
		if cond != nil {
			r := w.op.stepDone(w.sc, nil, *cond, nil)
			r.err = err
			return step.Seen{}, &r
		}
		w.targets[desired] = t
	}
	var seen step.Seen
	if step.NeedsLive(w.sc.spec) {
		live, _ := w.op.current(w.targets[o.Desired].key, o.Desired.GetNamespace(), o.Desired.GetName())
		// Only this owner's object may hold the step or lend it health: an
		// object of that name someone else made (with our labels, in the
		// cache) is refused at the write instead (stamp.Claim).
		if w.op.controls(live) {
			seen.Live = live
		}
	}
	return seen, nil
}

// write applies the Plan's objects in order; a failure ends the step,
// except the shadow's, which the step only reports.
func (w *mutableWriter) write(_ step.Observed, p step.Plan) (step.Got, *stepResult) {
	op, sc := w.op, w.sc
	if p.Shadow {
		want := p.Apply[0]
		t, cond, err := op.resolve(sc, want)
		if cond == nil {
			var live *unstructured.Unstructured
			if live, _, cond, err = op.stampOne(sc, t, want); cond == nil {
				return step.Got{Live: []*unstructured.Unstructured{live}, Refs: []st.StampedRef{t.ref}}, nil
			}
		}
		klog.V(1).InfoS("could not stamp shadow", "owner", op.r.user(op.owner.GetNamespace(), op.owner.GetName()), "step", sc.step.Name, "reason", cond.Reason, "message", cond.Message, "err", err)
		return step.Got{Failed: cond.Message}, nil
	}
	var got step.Got
	for i, desired := range p.Apply {
		t := w.targets[desired]
		live, wrote, cond, err := op.stampOne(sc, t, desired)
		if cond != nil {
			r := op.stepDone(sc, nil, *cond, nil)
			r.err = err
			return got, &r
		}
		got.Live, got.Refs = append(got.Live, live), append(got.Refs, t.ref)
		if i == p.Primary {
			got.Wrote = wrote
		}
	}
	return got, nil
}

func (w *mutableWriter) ref(u *unstructured.Unstructured) st.StampedRef { return w.targets[u].ref }

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
