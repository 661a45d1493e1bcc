package stamp

// The run protocol, one for the immutable steps of owners and for
// Runnables: list the runs (LoadRuns: the cache, confirmed by the API
// server before a create), decide (runs.Decide: the caller's, pure),
// create and remember (CreateRun), remove what retention lets go
// (RemoveRuns).

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/reconciler/runs"
	"kontinue.dev/kontinue/tracking"
)

// recentRunTTL bounds how long a just-created run is remembered while the
// cache catches up (normally milliseconds).
const recentRunTTL = 30 * time.Second

// RunQuery finds the runs of a step or a Runnable.
type RunQuery struct {
	Kind      tracking.Key
	Watch     Watch // starts the watch
	Namespace string
	Labels    labels.Set
	// Controller is the UID the runs' controller reference must name, so
	// that an owner deleted and created again does not adopt old runs.
	Controller types.UID
	// Current is the input digest rendered now: among runs created in the
	// same second it is the newest (runs.SortNewestFirst).
	Current string
	// Memo is the step's or Runnable's key in the memory of runs just
	// created (LoadRuns, CreateRun).
	Memo string
	// Live asks the API server even when the cache has synced.
	Live bool
	// Client is the service account's client, to relabel runs the API
	// server shows in another shard (an owner that moved: adoptRuns); nil:
	// none are relabelled.
	Client func() (dynamic.Interface, error)
	// Recorded is the run the caller's status names as its newest ("":
	// none). When it is not among the runs, or a run would be created,
	// foreign runs are looked for and adopted (Adopt; foreign.go).
	Recorded string
	// Adopt, when set, adopts foreign runs (nil: they are not looked for).
	Adopt *Adoption
}

// ListRuns returns the runs newest first (outcome Running: the caller
// judges them): objects with an input digest, not being deleted, controlled
// by q.Controller. Before the cache has synced (or when q.Live) it asks the
// API server, because deciding on an empty cache would create a duplicate.
func (w *Session) ListRuns(ctx context.Context, q RunQuery) (_ []runs.Run, err error) {
	defer func() { _ = w.Note(err) }()
	sel := labels.SelectorFromSet(q.Labels)
	var objs []*unstructured.Unstructured
	if q.Watch(q.Kind) && !q.Live {
		// The controller index, not the namespace: an owner's reconcile
		// must not cost a walk over every object of its kind.
		all, _ := w.tracker.ListControlledBy(q.Kind, q.Controller)
		for _, o := range all {
			if o.GetNamespace() == q.Namespace && sel.Matches(labels.Set(o.GetLabels())) {
				objs = append(objs, o)
			}
		}
	} else {
		l, err := resource(w.dyn, q.Kind.GVR, q.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		for i := range l.Items {
			objs = append(objs, &l.Items[i])
		}
	}
	var mine []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetLabels()[runs.LabelInputDigest] == "" || o.GetDeletionTimestamp() != nil {
			continue
		}
		if c := metav1.GetControllerOfNoCopy(o); c == nil || c.UID != q.Controller {
			continue
		}
		mine = append(mine, o)
	}
	adoptRuns(ctx, w.Shard, q, q.Kind.GVR, mine)
	out := make([]runs.Run, 0, len(mine))
	for _, o := range mine {
		out = append(out, runs.FromObject(o, runs.Running))
	}
	runs.SortNewestFirst(out, q.Current)
	return out, nil
}

// LoadRuns returns q's runs newest first, and whether a run of q.Current
// was created so recently that the cache does not show it yet (pending:
// runs.Decide says Wait). When the cache says a run must be created, the
// API server confirms first: creates are rare, a duplicate run is not
// undone, and a cache can lag for longer than a create is remembered (a
// watch gap after an outage, a create whose answer was lost). Runs another
// controller created are adopted then too (foreign.go).
func (w *Session) LoadRuns(ctx context.Context, q RunQuery) ([]runs.Run, bool, error) {
	list, err := w.ListRuns(ctx, q)
	if err != nil {
		return nil, false, err
	}
	pending := w.recent.Pending(q.Memo, q.Current, list)
	if runs.Decide(list, q.Current, pending, false) == runs.Create && !q.Live {
		q.Live = true
		if list, err = w.ListRuns(ctx, q); err != nil {
			return nil, false, err
		}
	}
	if lookForForeign(q, list, pending) {
		list, err = w.adoptForeign(ctx, q, list)
	}
	return list, pending, err
}

// CreateRun creates run, of the input set digest, as f.Client, records it
// on f.Owner, and remembers it under memo (RunQuery.Memo) until the cache
// shows it.
func (w *Session) CreateRun(ctx context.Context, f For, gvr schema.GroupVersionResource, run *unstructured.Unstructured, digest, memo string) (_ *unstructured.Unstructured, err error) {
	defer func() { _ = w.Note(err) }()
	created, err := createRun(ctx, f.Client, gvr, ridden(run, f), digest)
	w.note(true)
	if err != nil {
		return nil, err
	}
	w.recent.Remember(memo, digest, string(created.GetUID()))
	forStep := ""
	if f.Step != "" {
		forStep = " for step [" + f.Step + "]"
	}
	if ann := created.GetAnnotations(); ann[runs.AnnotationRetryOf] != "" {
		w.Events.Event(f.Owner, corev1.EventTypeNormal, EventRunRetried, "Retried %s %s/%s%s: created %s for the same inputs (%s=%s)",
			created.GetKind(), created.GetNamespace(), ann[runs.AnnotationRetryOf], forStep, created.GetName(), runs.AnnotationRetry, ann[runs.AnnotationRetry])
	} else {
		w.Events.Event(f.Owner, corev1.EventTypeNormal, EventStampedObjectApplied, "Created %s %s/%s%s", created.GetKind(), created.GetNamespace(), created.GetName(), forStep)
	}
	klog.V(2).InfoS("created run", "for", memo, "run", created.GetName(), "digest", digest)
	return created, nil
}

// createRun creates a run through cl, stamped with its input digest and, for
// people, its creation time (runs.AnnotationCreatedAt: never read).
func createRun(ctx context.Context, cl dynamic.Interface, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, digest string) (*unstructured.Unstructured, error) {
	obj = obj.DeepCopy()
	l := obj.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[runs.LabelInputDigest] = digest
	obj.SetLabels(l)
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[runs.AnnotationCreatedAt] = time.Now().UTC().Format(time.RFC3339Nano)
	obj.SetAnnotations(ann)
	return resource(cl, gvr, obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{FieldManager: FieldManager})
}

// RemoveRuns removes the runs retention no longer keeps (the caller
// decided which). It reports whether a deletion was forbidden (retrying
// cannot help until RBAC changes: noted, so the key waits for RBAC news)
// and the first other error.
func (w *Session) RemoveRuns(ctx context.Context, cl dynamic.Interface, gvr schema.GroupVersionResource, doomed []runs.Run, owner *unstructured.Unstructured, account, why string) (forbidden bool, err error) {
	for _, d := range doomed {
		switch e := w.Remove(ctx, cl, gvr, d.Obj, owner, account, why); {
		case e == nil:
		case apierrors.IsForbidden(e):
			forbidden = true
		case err == nil:
			err = e
		}
	}
	return forbidden, err
}
