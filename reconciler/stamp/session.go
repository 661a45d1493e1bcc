package stamp

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
// reads a watch someone else keeps). A missing object is (nil, nil).
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

// Apply server-side applies desired through cl unless cached already holds
// it, and reports whether the object was written.
func (w *Session) Apply(ctx context.Context, cl dynamic.Interface, gvr schema.GroupVersionResource, desired, cached *unstructured.Unstructured) (_ *unstructured.Unstructured, _ bool, err error) {
	defer func() { _ = w.Note(err) }()
	if upToDate(desired, cached) {
		w.note(false)
		return cached, false, nil
	}
	fw, current, err := w.fightCheck(ctx, cl, gvr, desired, cached) // fights.go
	if current != nil || err != nil {
		return current, false, err
	}
	live, err := ServerSideApply(ctx, cl, gvr, desired, FieldManager)
	w.note(true)
	if err != nil {
		return nil, false, err
	}
	fw.wrote(cached, live)
	return live, cached == nil || cached.GetResourceVersion() != live.GetResourceVersion(), nil
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

// KeepRecord applies a record Secret through cl (the owner's service
// account) and remembers it for a while: a reconcile that follows at once
// may still find the old one in the cache, and must not take it for the
// current one (a Helm step would render again, drawing new random values).
//
// create is for a first write: it creates the Secret, so that one someone
// else made under that name fails (AlreadyExists) instead of being taken
// over.
func (s *Session) KeepRecord(ctx context.Context, cl dynamic.Interface, secret *unstructured.Unstructured, create bool) error {
	var live *unstructured.Unstructured
	var err error
	if create {
		live, err = cl.Resource(secretGVR).Namespace(secret.GetNamespace()).Create(ctx, secret, metav1.CreateOptions{FieldManager: FieldManager})
	} else {
		live, err = ServerSideApply(ctx, cl, secretGVR, secret, FieldManager)
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
	// LooksAgain: the caller does not take what the written object
	// reports now, and looks again at its next event, which may be the
	// write's own (a gated step): that event is news (Echoes).
	LooksAgain bool
	// TraceParent, when set, is the W3C trace context of the step's input
	// set (api.AnnotationTraceParent), and InputSet the set's provenance id
	// (api.AnnotationInputSet): riders, put on the object written and never
	// compared (riders.go), so they change only with the object.
	TraceParent string
	InputSet    string
}

// Put writes desired, an object of t's kind, as f.Client unless the live
// object (from t's stamped watch, which watch starts) already holds it,
// and reports whether it was written.
//   - An object the cache does not have is created: nearly always it is new,
//     a create costs the API server half of a GET and an apply, and it
//     cannot take over an object someone else made (AlreadyExists).
//   - When the name is taken, the object is read as f.Client, and written
//     only if f's owner stamped it (Claim; else a failure.NotOwned error).
//   - An object Kontinue created, about to lose a field, is read too, to
//     hand the create's fields to the apply (UpgradeFields) so that the
//     field is removed. A change that only sets fields needs no hand over:
//     the apply takes what it changes, and shares what it does not.
//
// Then it is server-side applied. An error is the API server's, or a
// failure.Error: failure.Write says what it comes to.
func (s *Session) Put(ctx context.Context, f For, t Target, watch Watch, desired *unstructured.Unstructured) (*unstructured.Unstructured, bool, error) {
	desired = ridden(desired, f)
	cached, err := s.Live(ctx, t.Watch(), watch, desired.GetNamespace(), desired.GetName())
	if err != nil {
		cached = nil // the create decides
	}
	live, wrote, err := s.put(ctx, f, t, desired, cached)
	s.Echoes.Decided(cached, live, err, f.LooksAgain)
	if wrote {
		s.Events.applied(f, live)
	}
	s.Events.fought(f, err)
	return live, wrote, err
}

func (s *Session) put(ctx context.Context, f For, t Target, desired, cached *unstructured.Unstructured) (*unstructured.Unstructured, bool, error) {
	if cached == nil {
		created, err := s.CreateStamped(ctx, f.Client, t.GVR, desired)
		if err == nil {
			return created, true, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, false, err
		}
	}
	known := cached
	if cached == nil || HandOver(desired, cached) {
		// Not readable, or gone meanwhile: the apply decides, as it would
		// have without the read.
		if full, err := resource(f.Client, t.GVR, desired.GetNamespace()).Get(ctx, desired.GetName(), metav1.GetOptions{}); err == nil {
			if err := claim(full, f.Claim); err != nil {
				return nil, false, err
			}
			if HandOver(desired, full) {
				if err := s.UpgradeFields(ctx, f.Client, t.GVR, full); err != nil {
					return nil, false, err
				}
			}
			tracking.Compact(full)
			known = full
		}
	} else if err := claim(cached, f.Claim); err != nil {
		return nil, false, err
	}
	live, wrote, err := s.Apply(ctx, f.Client, t.GVR, desired, known)
	if wrote && movedOnly(desired, known) {
		// Relabelled into this shard, nothing else: not news to the step.
		wrote = false
	}
	return live, wrote, err
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
	out, wrote, err := s.Apply(ctx, f.Client, gvr, desired, live)
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

// claim is the failure.NotOwned error that refuses to write to live, an
// object owner did not stamp (Claim); nil when it may.
func claim(live *unstructured.Unstructured, owner Owner) error {
	if ok, why := Claim(live, owner); !ok {
		return &failure.Error{Class: failure.NotOwned, Err: errors.New(why)}
	}
	return nil
}
