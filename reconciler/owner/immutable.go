package owner

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kontinue.dev/kontinue/reconciler/failure"
	"kontinue.dev/kontinue/reconciler/stamp"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/step"
)

// How immutable steps (lifecycle immutable or tekton) write: runs created
// (never applied) as the step's service account, listed by label, deleted
// when retention lets them go. Whether to create one, and which go, is
// step.Strategy's.
type immutableWriter struct {
	io   *ownerIO
	sc   *stepCtx
	gvr  schema.GroupVersionResource
	runs stamp.RunQuery
	what string
}

func newImmutableWriter(x *ownerIO, sc *stepCtx) stepIO { return &immutableWriter{io: x, sc: sc} }

// load turns the rendered object into the run (its input set is the
// Observed digest), resolves its kind and lists the step's runs (stamp's
// run protocol: confirmed by the API server when the cache calls for a
// create).
func (w *immutableWriter) load(o *step.Observed) (step.Seen, *stepFail) {
	x, sc := w.io, w.sc
	o.Desired, o.Digest = step.RunOf(o.Objects[0])
	o.Objects = []*unstructured.Unstructured{o.Desired}
	w.what = fmt.Sprintf("%s for step [%s] from template [%s/%s]", o.Desired.GetKind(), sc.step.Name, sc.kind, sc.tmplName)
	t, fail := x.resolve(o.Desired, "create", w.what)
	if fail != nil {
		return step.Seen{}, fail
	}
	w.gvr, o.Resource = t.gvr, resourceString(t.gvr)
	w.runs = x.stepRuns(sc.step.Name, t.key, o.Digest)
	if err := x.adopting(&w.runs, sc, *o); err != nil {
		return step.Seen{}, failed(failure.Client(err))
	}
	list, pending, err := x.w.LoadRuns(x.ctx, w.runs)
	if err != nil {
		if adopt := (*stamp.AdoptError)(nil); errors.As(err, &adopt) {
			return step.Seen{}, failed(failure.Write(x.subject("take over the runs another controller created of", w.what), "", err))
		}
		return step.Seen{}, &stepFail{err: err, cond: st.Cond(st.ResourceSubmitted, st.Unknown, step.ReasonUnknownError,
			fmt.Sprintf("unable to list the runs of step [%s]: %v", sc.step.Name, err))}
	}
	if step.NeedsLiveSet(*o) {
		for _, r := range list {
			if r.Digest == o.Digest {
				o.LiveSet = r.Obj.GetAnnotations()[step.AnnotationInputSet]
				break
			}
		}
	}
	return step.Seen{Runs: list, Pending: pending}, nil
}

// adopting lets q adopt the runs another controller created for the step
// (stamp/foreign.go): those of the run rendered now (o), created as the
// step's account with its riders; the step's status names its newest run.
func (x *ownerIO) adopting(q *stamp.RunQuery, sc *stepCtx, o step.Observed) error {
	cl, err := x.client()
	if err != nil {
		return err
	}
	r := ridersOf(sc, o)
	q.Adopt = &stamp.Adoption{For: stamp.For{Client: cl, Owner: x.owner, Step: sc.step.Name, TraceParent: r.trace, InputSet: r.set}, Desired: o.Desired}
	if sc.prev != nil && sc.prev.StampedRef != nil {
		q.Recorded = sc.prev.StampedRef.Name
	}
	return nil
}

// write creates the Plan's run.
func (w *immutableWriter) write(o step.Observed, p step.Plan) (step.Got, *stepFail) {
	created, fail := w.io.createRun(w.runs, w.sc.step.Name, ridersOf(w.sc, o), p.Create, w.gvr, w.what)
	if fail != nil {
		return step.Got{}, fail
	}
	return step.Got{Live: []*unstructured.Unstructured{created}, Refs: []st.StampedRef{w.ref(created)}, Wrote: true}, nil
}

func (w *immutableWriter) ref(u *unstructured.Unstructured) st.StampedRef {
	return st.StampedRef{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(), Resource: resourceString(w.gvr)}
}

// remove deletes the runs retention lets go.
func (w *immutableWriter) remove(p step.Plan) error {
	return w.io.removeRuns(w.gvr, p.Delete, fmt.Sprintf("(retention policy of step [%s])", w.sc.step.Name))
}
