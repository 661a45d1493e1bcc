package reconciler

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kontinue.dev/kontinue/reconciler/runs"
	"kontinue.dev/kontinue/reconciler/stamp"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/step"
	"kontinue.dev/kontinue/tracking"
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

func newImmutableWriter(op *ownerPass, sc *stepCtx) stepIO {
	return &immutableWriter{io: op.io(), sc: sc}
}

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
	w.gvr = t.gvr
	w.runs = x.stepRuns(sc.step.Name, t.key, o.Digest)
	list, pending, err := x.w.LoadRuns(x.ctx, w.runs)
	if err != nil {
		return step.Seen{}, &stepFail{err: err, cond: st.Cond(st.ResourceSubmitted, st.Unknown, step.ReasonUnknownError,
			fmt.Sprintf("unable to list the runs of step [%s]: %v", sc.step.Name, err))}
	}
	return step.Seen{Runs: list, Pending: pending}, nil
}

// write creates the Plan's run.
func (w *immutableWriter) write(_ step.Observed, p step.Plan) (step.Got, *stepFail) {
	created, fail := w.io.createRun(w.runs, w.sc.step.Name, p.Create, w.gvr, w.what)
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

// deleteRun deletes a run as the stamping service account, only if it is
// still the object we saw (UID precondition).
func (op *ownerPass) deleteRun(gvr schema.GroupVersionResource, obj *unstructured.Unstructured, why string) error {
	cl, err := op.stampClient()
	if err != nil {
		return err
	}
	sa := op.serviceAccount()
	return op.w.Remove(op.ctx, cl, gvr, obj, op.owner, sa.Namespace+"/"+sa.Name, "("+why+")")
}

// removeStaleRuns deletes the runs of immutable steps that no longer need
// them: the step left the chain, was renamed, or its template became
// mutable or stamps another kind. Runs are found by label, not by status
// refs (retention keeps runs that status no longer names). Nothing is
// deleted when the steps were not realized in this reconcile (bad input must
// never delete objects), nor the runs of a step that failed before reaching
// its runs and still points at one.
func (op *ownerPass) removeStaleRuns() error {
	if st.Find(op.status.Conditions, st.ResourcesSubmitted) == nil {
		return nil
	}
	err := op.removeStaleRunTemplates()
	if err2 := op.removeStaleRunObjects(); err == nil {
		err = err2
	}
	return err
}

func (op *ownerPass) removeStaleRunObjects() error {
	current := map[string]*st.StampedRef{}
	for i := range op.status.Resources {
		current[op.status.Resources[i].Name] = op.status.Resources[i].StampedRef
	}
	// Kinds worth a look: those of a referenced object that is a run, is
	// gone (orphan removal may just have deleted the newest run), or is not
	// known yet. Kinds of live mutable objects cost nothing.
	refs := append([]st.StampedRef(nil), op.prev.Orphans...)
	for _, list := range [][]st.Resource{op.prev.Resources, op.status.Resources} {
		for _, res := range list {
			refs = append(refs, refsOf(res)...)
		}
	}
	gvrs := map[schema.GroupVersionResource]bool{}
	for _, ref := range refs {
		k := refKeyOf(ref)
		if gvrs[k.gvr] {
			continue
		}
		o, synced := op.r.m.tracker.Get(tracking.Key{GVR: k.gvr, Selector: StampedSelector}, k.namespace, k.name)
		gvrs[k.gvr] = !synced || o == nil || o.GetLabels()[runs.LabelInputDigest] != ""
	}
	var firstErr error
	for gvr, look := range gvrs {
		if !look {
			continue
		}
		key := tracking.Key{GVR: gvr, Selector: StampedSelector}
		objs, err := op.ownerRuns(key)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		for _, o := range objs {
			if !op.keep.has(refKey{gvr: gvr, namespace: o.GetNamespace(), name: o.GetName()}) {
				op.watch.Watch(key) // watch until they are gone
				break
			}
		}
		for _, o := range op.keep.staleRuns(gvr, objs, current) {
			step := o.GetLabels()[LabelResourceName]
			if err := op.deleteRun(gvr, o, fmt.Sprintf("step [%s] no longer creates runs", step)); err != nil {
				// Listed in status.orphans, so the next reconcile looks again
				// even when no step names this kind any more.
				op.status.Orphans = append(op.status.Orphans, st.StampedRef{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(),
					Namespace: o.GetNamespace(), Name: o.GetName(), Resource: resourceString(gvr)})
				if !apierrors.IsForbidden(err) && firstErr == nil {
					firstErr = err
				}
			}
		}
	}
	return firstErr
}

// ownerRuns lists the owner's runs of a kind: from the cache, or from the
// API server while the cache is not synced (a kind no step stamps any more
// may have no watch left after a restart).
func (op *ownerPass) ownerRuns(key tracking.Key) ([]*unstructured.Unstructured, error) {
	f := op.r.flavor
	ns := op.owner.GetNamespace()
	list, err := op.w.ListRuns(op.ctx, stamp.RunQuery{Kind: key, Watch: op.watch.Glance, Namespace: ns, Controller: op.owner.GetUID(),
		Labels: labels.Set{StampedLabel: "true", f.LabelOwnerName: op.owner.GetName(), f.LabelOwnerNS: ns}})
	out := make([]*unstructured.Unstructured, len(list))
	for i, r := range list {
		out[i] = r.Obj
	}
	return out, err
}
