package owner

// The executor of every step: it runs the step's Strategy (reconciler/step)
// and does what its Plans ask, through stamp. What differs between
// lifecycles is only how objects are read and written (a stepWriter:
// mutable.go, immutable.go, runnablestep.go); what is written, and in which
// order, is the Strategy's.

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/annotations"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/prepare"
	"kontinue.dev/kontinue/reconciler/render"
	"kontinue.dev/kontinue/reconciler/spans"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/step"
)

// A stepIO reads and writes the objects of one lifecycle's steps: the
// doing side, the mirror of step.Strategy. It works through an ownerIO
// (write.go), never the reconcile, and does not build the step's status: a
// non-nil *stepFail ends the step, its condition says why.
type stepIO interface {
	// load resolves and watches what the step stamps, may adjust o (the
	// objects actually stamped) and reads what Start decides on.
	load(o *step.Observed) (step.Seen, *stepFail)
	// write does the writes of a Plan.
	write(o step.Observed, p step.Plan) (step.Got, *stepFail)
	// ref is the status ref of an object the step stamped.
	ref(u *unstructured.Unstructured) st.StampedRef
	// remove deletes the runs a Done Plan lets go (and forgets them).
	remove(p step.Plan) error
}

// execute realizes a rendered step (prepare has refused what its Strategy's
// Check refuses): load, Start, then each Plan's writes fed back to Next
// until the Plan is Done, then what Done keeps and lets go.
func (s *steps) execute(sc *stepCtx, objs []*unstructured.Unstructured, in render.Inputs) stepResult {
	l := step.LifecycleOf(sc.spec)
	strat := l.Strategy
	o := s.observed(sc, objs, in)
	if s.traced {
		sc.traceParent, _ = spans.ForSet(string(s.owner.GetUID()), s.done, sc.step.Name, &o.Inputs)
	}
	x := s.io(l, sc)
	seen, stop := x.load(&o)
	if stop != nil {
		return s.stepFailed(sc, stop)
	}
	p := strat.Start(o, seen)
	for p.Done == nil {
		if p.Reached {
			// Before the writes: a step that fails on them keeps what it had.
			s.keep.reach(sc.step.Name)
		}
		got, stop := x.write(o, p)
		if stop != nil {
			return s.stepFailed(sc, stop)
		}
		p = strat.Next(o, p, got)
	}
	if p.Reached {
		s.keep.reach(sc.step.Name)
	}
	for _, r := range p.Keep {
		s.keep.run(x.ref(r.Obj))
	}
	removeErr := x.remove(p)

	if p.Ref != nil {
		ref := x.ref(p.Ref)
		sc.res.StampedRef = &ref
	}
	if p.Objects != nil {
		sc.res.StampedObjects = nil
		if len(p.Objects) > 1 {
			for _, u := range p.Objects {
				sc.res.StampedObjects = append(sc.res.StampedObjects, x.ref(u))
			}
		}
	}
	ob := *p.Done
	strat.Record(ob, &sc.res)
	step.RecordProvenance(o, ob, &sc.res)
	r := s.stepDone(sc, ob.Outputs(), ob.Submitted, ob.Healthy)
	if r.err == nil {
		r.err = removeErr
	}
	if p.Requeue > 0 && (r.requeue == 0 || p.Requeue < r.requeue) {
		r.requeue = p.Requeue
	}
	if ob.Recheck > 0 && (r.requeue == 0 || ob.Recheck < r.requeue) {
		r.requeue = ob.Recheck
	}
	return r
}

// stepFailed is the step's result when its stepIO failed.
func (s *steps) stepFailed(sc *stepCtx, f *stepFail) stepResult {
	r := s.stepDone(sc, nil, f.cond, nil)
	r.err, r.requeue = f.err, f.requeue
	return r
}

// observed is what the step's decisions start from.
func (s *steps) observed(sc *stepCtx, objs []*unstructured.Unstructured, in render.Inputs) step.Observed {
	i := primaryIndex(sc.spec, objs)
	primary := objs[i]
	o := step.Observed{Kind: sc.kind, Step: sc.step.Name, Template: sc.tmplName, Spec: sc.spec, Def: &sc.step, Desired: primary,
		Digest: primary.GetAnnotations()[api.AnnotationDigest], State: step.StateOf(sc.prev), Objects: objs, Primary: i,
		Now: s.now.Time, Retry: s.owner.GetAnnotations()[annotations.Retry], Inputs: prepare.InputValues(sc.step, in, s.owner.GetGeneration())}
	if sc.prev != nil {
		o.PrevProvenance = sc.prev.Provenance
	}
	if in.Deployment != nil {
		o.Deployment = outputs{"url": in.Deployment.URL, "revision": in.Deployment.Revision}
	}
	return o
}

// noRuns is the remove of writers whose steps have no runs.
type noRuns struct{}

func (noRuns) remove(step.Plan) error { return nil }
