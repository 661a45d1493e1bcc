package owner

// How mutable steps write: one object (or several, with a primary) applied
// in place as the step's service account, and the shadow of a gated step.
// What is applied, and when, is step.Strategy's (reconciler/step).

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/failure"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/step"
)

type mutableWriter struct {
	noRuns
	io      *ownerIO
	sc      *stepCtx
	targets map[*unstructured.Unstructured]target
}

func newMutableWriter(op *pass, sc *stepCtx) stepIO {
	return &mutableWriter{io: op.io(), sc: sc, targets: map[*unstructured.Unstructured]target{}}
}

// load resolves every object before anything is written (so that a step
// that holds or fails never loses track of its objects), and reads the live
// primary when the Strategy decides on it.
func (w *mutableWriter) load(o *step.Observed) (step.Seen, *stepFail) {
	for _, desired := range o.Objects {
		t, fail := w.io.resolveObject(w.sc, desired)
		if fail != nil {
			return step.Seen{}, fail
		}
		w.targets[desired] = t
	}
	var seen step.Seen
	if step.NeedsLive(w.sc.spec) || step.NeedsLiveSet(*o) {
		live, err := w.io.live(w.targets[o.Desired].key, o.Desired.GetNamespace(), o.Desired.GetName())
		if err != nil {
			// Without the live primary the step cannot tell whether it
			// must hold the new inputs: it writes nothing and retries.
			t := w.targets[o.Desired]
			return step.Seen{}, failed(failure.Condition{Cause: failure.Unknown, Status: metav1.ConditionUnknown, Retry: err,
				Message: fmt.Sprintf("unable to read %s to decide whether its new inputs must wait: %v", t.what, err)})
		}
		// Only this owner's object may hold the step or lend it health: an
		// object of that name someone else made (with our labels, in the
		// cache) is refused at the write instead (stamp.Claim).
		if w.io.stamps(w.sc.step.Name, w.targets[o.Desired].ref, live) {
			o.LiveSet = step.LiveSetOf(*o, live)
			if step.NeedsLive(w.sc.spec) {
				seen.Live = live
			}
		}
	}
	return seen, nil
}

// write applies the Plan's objects in order; a failure ends the step,
// except the shadow's, which the step only reports.
func (w *mutableWriter) write(o step.Observed, p step.Plan) (step.Got, *stepFail) {
	x, sc := w.io, w.sc
	if p.Shadow {
		want := p.Apply[0]
		t, fail := x.resolveObject(sc, want)
		if fail == nil {
			var live *unstructured.Unstructured
			// The last good set's copy: not the span of the set at hand.
			if live, _, fail = x.put(sc.step.Name, riders{}, t, want, false); fail == nil {
				return step.Got{Live: []*unstructured.Unstructured{live}, Refs: []st.StampedRef{t.ref}}, nil
			}
		}
		klog.V(1).InfoS("could not stamp shadow", "owner", x.user, "step", sc.step.Name, "reason", fail.cond.Reason, "message", fail.cond.Message, "err", fail.err)
		return step.Got{Failed: fail.cond.Message}, nil
	}
	var got step.Got
	for i, desired := range p.Apply {
		t := w.targets[desired]
		// A gated step does not take what its primary reports in the
		// reconcile that wrote it (step.Observe): it needs the next event.
		// Only the primary names the input set: provenance reads the
		// primary, and a set's name on the step's other objects would
		// write each of them again for every new set, changed or not.
		r := riders{trace: sc.traceParent}
		if i == p.Primary {
			r = ridersOf(sc, o)
		}
		live, wrote, fail := x.put(sc.step.Name, r, t, desired, i == p.Primary && step.Gated(sc.spec))
		if fail != nil {
			return got, fail
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
