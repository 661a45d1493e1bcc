package stamp

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/csaupgrade"

	"kontinue.dev/kontinue/reconciler/apply"
	"kontinue.dev/kontinue/reconciler/failure"
	"kontinue.dev/kontinue/tracking"
)

// Session is the Writer as one reconcile uses it: every read and write of
// stamped objects and runs is a Session's, and notes its error. It
// remembers the last failure that only news can fix (Forbidden: RBAC;
// NotServed: discovery), so that whether a key waits for news is decided
// in one place, from the error classes, however many calls failed.
type Session struct {
	*Writer
	blocking failure.Class
	blocked  bool
}

// Session starts a Session for one reconcile.
func (w *Writer) Session() *Session { return &Session{Writer: w} }

// Blocked returns the failure the reconcile waits on news for (false: none).
func (s *Session) Blocked() (failure.Class, bool) { return s.blocking, s.blocked }

// Note records err's class when it is one only news can fix; it returns
// err. The Session's own calls note their errors: callers note only errors
// that did not come through it.
func (s *Session) Note(err error) error {
	if err == nil {
		return nil
	}
	if f := failure.Classify(err); f == failure.Forbidden || f == failure.NotServed {
		s.blocking, s.blocked = f, true
	}
	return err
}

// Resolve maps a kind to its resource and scope. An error is a
// *failure.Error: the kind is not served (NotServed) or discovery failed
// (Transient).
func (w *Session) Resolve(gvk schema.GroupVersionKind) (_ Target, err error) {
	defer func() { _ = w.Note(err) }()
	m, err := w.mapper.Mapping(gvk)
	if err != nil {
		if meta.IsNoMatchError(err) {
			return Target{}, &failure.Error{Class: failure.NotServed, Err: fmt.Errorf("the API server does not serve kind [%s] in [%s]", gvk.Kind, gvk.GroupVersion())}
		}
		return Target{}, &failure.Error{Class: failure.Transient, Err: fmt.Errorf("unable to look up kind [%s]: %w", gvk.Kind, err)}
	}
	return Target{GVR: m.Resource, Namespaced: m.Scope.Name() == meta.RESTScopeNameNamespace}, nil
}

// Live returns the live object from the cache of key once it has synced,
// else from the API server, so that an unchanged object is not written again
// just because the cache is cold. watch starts the watch if needed (nil only
// reads a watch someone else keeps). A missing object is (nil, nil); so is
// one the cache would not hold (key's label selector does not match it): a
// cold cache answers as a warm one, and what is decided on it (a write, a
// refusal and its message) does not change once the cache has synced.
func (w *Session) Live(ctx context.Context, key tracking.Key, watch Watch, namespace, name string) (_ *unstructured.Unstructured, err error) {
	defer func() { _ = w.Note(err) }()
	if watch != nil {
		watch(key)
	}
	if obj, synced := w.tracker.Get(key, namespace, name); synced {
		return obj, nil
	}
	obj, err := resource(w.dyn, key.GVR, namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if sel, err := labels.Parse(key.Selector); err != nil || !sel.Matches(labels.Set(obj.GetLabels())) {
		return nil, nil
	}
	tracking.Compact(obj)
	return obj, nil
}

// CreateStamped creates desired through cl: the first write of a stamped
// object. A create costs the API server about half of a GET and a
// server-side apply together, and cannot take over an object someone else
// made (it fails with AlreadyExists). It records Kontinue's fields under an
// Update entry; UpgradeFields hands them to the apply entry before the
// object's next write.
func (w *Session) CreateStamped(ctx context.Context, cl dynamic.Interface, gvr schema.GroupVersionResource, desired *unstructured.Unstructured) (_ *unstructured.Unstructured, err error) {
	defer func() { _ = w.Note(err) }()
	created, err := resource(cl, gvr, desired.GetNamespace()).Create(ctx, desired, metav1.CreateOptions{FieldManager: FieldManager})
	w.note(true)
	if err != nil {
		return nil, err
	}
	tracking.Compact(created)
	return created, nil
}

// UpgradeFields hands the fields of Kontinue's create (its Update entry in
// managedFields) to Kontinue's apply entry, so that a field the template no
// longer sets is removed by the next apply instead of being kept by the
// create's entry. live must carry its full managedFields (read from the API
// server, not the cache); nothing is written when there is nothing to hand
// over. The patch is conditional on live's resourceVersion.
func (w *Session) UpgradeFields(ctx context.Context, cl dynamic.Interface, gvr schema.GroupVersionResource, live *unstructured.Unstructured) (err error) {
	defer func() { _ = w.Note(err) }()
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(live, sets.New(FieldManager), FieldManager)
	if err != nil || patch == nil {
		return err
	}
	_, err = resource(cl, gvr, live.GetNamespace()).Patch(ctx, live.GetName(), types.JSONPatchType, patch, metav1.PatchOptions{})
	w.note(true)
	return err
}

// apply server-side applies desired through cl over proven, the object it
// was proven the writer's on, with proven's UID as a precondition (the API
// server refuses the apply when the name now holds another object, or
// none), unless proven holds desired already; it reports whether the
// object was written. There is no apply without such an object: a write
// that is not a create always names what it was proven on.
func (w *Session) apply(ctx context.Context, cl dynamic.Interface, gvr schema.GroupVersionResource, desired, proven *unstructured.Unstructured) (_ *unstructured.Unstructured, _ bool, err error) {
	defer func() { _ = w.Note(err) }()
	if proven == nil || proven.GetUID() == "" {
		return nil, false, &failure.Error{Class: failure.NotOwned, Err: fmt.Errorf("%s [%s/%s] is not known to be this owner's: not written", desired.GetKind(), desired.GetNamespace(), desired.GetName())}
	}
	if upToDate(desired, proven) {
		w.note(false)
		return proven, false, nil
	}
	fw, current, err := w.fightCheck(ctx, cl, gvr, desired, proven) // fights.go
	if current != nil || err != nil {
		return current, false, err
	}
	live, err := ServerSideApply(ctx, cl, gvr, withUID(desired, proven.GetUID()), FieldManager)
	w.note(true)
	if err != nil {
		return nil, false, err
	}
	fw.wrote(proven, live)
	return live, proven.GetResourceVersion() != live.GetResourceVersion(), nil
}

// Delete deletes obj through cl only if it is still the object seen (UID
// precondition). Gone or replaced meanwhile is not an error.
func (w *Session) Delete(ctx context.Context, cl dynamic.Interface, gvr schema.GroupVersionResource, namespace, name string, uid types.UID) (err error) {
	defer func() { _ = w.Note(err) }()
	err = deleteObject(ctx, cl, gvr, namespace, name, uid)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// Remove deletes obj through cl (UID precondition) and records on owner
// that it did, or that account may not ("Removed Kind ns/name <why>").
// Delete notes the error.
func (w *Session) Remove(ctx context.Context, cl dynamic.Interface, gvr schema.GroupVersionResource, obj, owner *unstructured.Unstructured, account, why string) error {
	err := w.Delete(ctx, cl, gvr, obj.GetNamespace(), obj.GetName(), obj.GetUID())
	switch {
	case err == nil:
		w.Events.Event(owner, corev1.EventTypeNormal, EventStampedObjectRemoved, "Removed %s %s/%s %s", obj.GetKind(), obj.GetNamespace(), obj.GetName(), why)
	case apierrors.IsForbidden(err):
		w.Events.Event(owner, corev1.EventTypeWarning, EventStampedObjectNotRemoved, "Cannot remove %s %s/%s as service account [%s]: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), account, err)
	}
	return err
}

// The write protocol of a stamped object (Put) and of a record (KeepRecord).

// KeepRecord writes a record Secret through cl (the owner's service
// account) and remembers it for a while: a reconcile that follows at once
// may still find the old one in the cache, and must not take it for the
// current one (a Helm step would render again, drawing new random values).
//
// uid is the UID of the Secret the caller read and proved the owner's
// (""; there is none). Without one the Secret is created, so that one
// someone else made under that name fails (AlreadyExists) instead of being
// taken over; with one it is applied with that UID as a precondition, so
// that an object put at the name since is not written either.
func (s *Session) KeepRecord(ctx context.Context, cl dynamic.Interface, secret *unstructured.Unstructured, uid types.UID) error {
	var live *unstructured.Unstructured
	var err error
	if uid == "" {
		live, err = cl.Resource(secretGVR).Namespace(secret.GetNamespace()).Create(ctx, secret, metav1.CreateOptions{FieldManager: FieldManager})
	} else {
		live, err = ServerSideApply(ctx, cl, secretGVR, withUID(secret, uid), FieldManager)
	}
	if err != nil {
		return s.Note(err)
	}
	s.Writer.written.put(live)
	return nil
}

// For is whom a stamped object is written for: the owner (its object, for
// events; Claim, for an object that exists) and its step, and the client
// of the service account that stamps.
type For struct {
	Client dynamic.Interface
	Owner  *unstructured.Unstructured
	Claim  Owner
	Step   string
	// Holds says whether another step of the owner still stamps the
	// object written (Claimant.Holds).
	Holds func(step string, live *unstructured.Unstructured) bool
	// LooksAgain: the caller does not take what the written object
	// reports now, and looks again at its next event, which may be the
	// write's own (a gated step): that event is news (Echoes).
	LooksAgain bool
	// TraceParent, when set, is the W3C trace context of the step's input
	// set (api.AnnotationTraceParent), and InputSet the set's provenance id
	// (api.AnnotationInputSet): riders, put on the object written and never
	// compared (riders.go), so they change only with the object.
	// DeploymentInputs, when set, are a deployment step's inputs
	// (api.AnnotationDeploymentInputs), a rider never compared.
	TraceParent      string
	InputSet         string
	DeploymentInputs string
}

// Put writes desired, an object of t's kind, as f.Client unless the live
// object (from t's stamped watch, which watch starts) already holds it,
// and reports whether it was written. It carries out what Decide says,
// step by step, and nothing else:
//   - An object the cache does not have is created: nearly always it is new,
//     a create costs the API server half of a GET and an apply, and it
//     cannot take over an object someone else made (AlreadyExists).
//   - When the name is taken, the object is read as f.Client, and written
//     only if it is proven f's (Claim; else a failure.NotOwned error). An
//     object that cannot be read is not written: a refused read is
//     failure.NotOwned too, a read that failed for a passing reason an
//     error to retry.
//   - An object Kontinue created, about to lose a field, is read too, to
//     hand the create's fields to the apply (UpgradeFields) so that the
//     field is removed. A change that only sets fields needs no hand over:
//     the apply takes what it changes, and shares what it does not.
//
// Then it is server-side applied, with the UID of the object proven as a
// precondition. An error is the API server's, or a failure.Error:
// failure.Write says what it comes to.
func (s *Session) Put(ctx context.Context, f For, t Target, watch Watch, desired *unstructured.Unstructured) (*unstructured.Unstructured, bool, error) {
	desired = ridden(desired, f)
	cached, err := s.Live(ctx, t.Watch(), watch, desired.GetNamespace(), desired.GetName())
	if err != nil {
		cached = nil // the create decides: it cannot take anything over
	}
	live, wrote, err := s.put(ctx, f, t, desired, cached)
	s.Echoes.Decided(cached, live, err, f.LooksAgain)
	if wrote {
		s.Events.applied(f, live)
	}
	s.Events.fought(f, err)
	return live, wrote, err
}

// putAttempts bounds Put's steps: a name whose object keeps appearing and
// disappearing between them is someone racing Kontinue.
const putAttempts = 6

func (s *Session) put(ctx context.Context, f For, t Target, desired, cached *unstructured.Unstructured) (*unstructured.Unstructured, bool, error) {
	c := Claimant{Owner: f.Claim, Step: f.Step, Holds: f.Holds}
	seen := Seen{Live: cached}
	for range putAttempts {
		d := Decide(desired, seen, c)
		switch d.Action {
		case Create:
			created, err := s.CreateStamped(ctx, f.Client, t.GVR, desired)
			if err == nil {
				return created, true, nil
			}
			if !apierrors.IsAlreadyExists(err) {
				return nil, false, err
			}
			seen = s.seen(ctx, f.Client, t.GVR, desired)
			seen.Taken = true
		case Read:
			seen = s.seen(ctx, f.Client, t.GVR, desired)
		case Keep:
			s.note(false)
			if seen.Whole {
				tracking.Compact(seen.Live) // kept by the caller, as the cache would
			}
			return seen.Live, false, nil
		case Apply:
			if d.HandOver {
				if err := s.UpgradeFields(ctx, f.Client, t.GVR, seen.Live); err != nil {
					return nil, false, err
				}
			}
			live, wrote, err := s.apply(ctx, f.Client, t.GVR, desired, seen.Live)
			return live, wrote && !d.Quiet, err
		case Refuse:
			return nil, false, d.Err
		}
	}
	return nil, false, &failure.Error{Class: failure.Transient, Err: fmt.Errorf("%s [%s/%s] keeps appearing and disappearing while it is written",
		desired.GetKind(), desired.GetNamespace(), desired.GetName())}
}

// seen reads the object of desired's name as cl from the API server,
// whole (its managedFields are what UpgradeFields hands over): what Decide
// decides on after a create found the name taken, or before a hand over.
func (s *Session) seen(ctx context.Context, cl dynamic.Interface, gvr schema.GroupVersionResource, desired *unstructured.Unstructured) Seen {
	full, err := s.Read(ctx, cl, gvr, desired.GetNamespace(), desired.GetName())
	if err != nil {
		return Seen{Err: err}
	}
	return Seen{Live: full, Whole: true}
}

// withUID is a copy of desired (down to its metadata: nothing else is
// changed) carrying uid: applied, it is a precondition the API server
// checks (a Conflict when the name holds another object, or none).
func withUID(desired *unstructured.Unstructured, uid types.UID) *unstructured.Unstructured {
	obj := make(map[string]any, len(desired.Object))
	for k, v := range desired.Object {
		obj[k] = v
	}
	old, _ := obj["metadata"].(map[string]any)
	md := make(map[string]any, len(old)+1)
	for k, v := range old {
		md[k] = v
	}
	md["uid"] = string(uid)
	obj["metadata"] = md
	return &unstructured.Unstructured{Object: obj}
}

// Read reads the object namespace/name of gvr as cl from the API server,
// not the cache (nil: not found), whole: with its managedFields.
func (s *Session) Read(ctx context.Context, cl dynamic.Interface, gvr schema.GroupVersionResource, namespace, name string) (_ *unstructured.Unstructured, err error) {
	defer func() { _ = s.Note(err) }()
	got, err := resource(cl, gvr, namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return got, err
}

// Create creates desired as f.Client, the first write of an object whose
// name must be free (CreateStamped), and records it on f.Owner.
func (s *Session) Create(ctx context.Context, f For, gvr schema.GroupVersionResource, desired *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	created, err := s.CreateStamped(ctx, f.Client, gvr, desired)
	if err == nil {
		s.Events.applied(f, created)
	}
	return created, err
}

// ApplyTo writes desired over live, the object of desired's UID, as
// f.Client: the API server refuses the apply if the name now holds another
// object, or none (a Conflict or an Invalid metadata.uid). Fields the
// create set and desired leaves out are handed to the apply first
// (HandOver), from a read that must still show that UID.
func (s *Session) ApplyTo(ctx context.Context, f For, gvr schema.GroupVersionResource, desired, live *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if HandOver(desired, live) {
		full, err := s.Read(ctx, f.Client, gvr, desired.GetNamespace(), desired.GetName())
		if err != nil {
			return nil, err
		}
		if full == nil || full.GetUID() != desired.GetUID() {
			return nil, apierrors.NewConflict(gvr.GroupResource(), desired.GetName(), fmt.Errorf("the object of uid %s is gone", desired.GetUID()))
		}
		if err := s.UpgradeFields(ctx, f.Client, gvr, full); err != nil {
			return nil, err
		}
		tracking.Compact(full)
		live = full
	}
	out, wrote, err := s.apply(ctx, f.Client, gvr, desired, live)
	if wrote {
		s.Events.applied(f, out)
	}
	s.Events.fought(f, err)
	return out, err
}

// HandOver says whether live's fields must go from Kontinue's create entry
// to its apply entry before desired is applied: there is a create entry,
// and the apply would leave out a field live has.
func HandOver(desired, live *unstructured.Unstructured) bool {
	return tracking.HasUpdateEntry(live) && !upToDate(desired, live) && apply.Leaves(desired, live)
}
