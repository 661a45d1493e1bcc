package stamp

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"kontinue.dev/kontinue/reconciler/apply"
	"kontinue.dev/kontinue/reconciler/failure"
	"kontinue.dev/kontinue/tracking"
)

// For is whom a stamped object is written for: the owner (its object, for
// events; Claim, for an object that exists) and its step, and the client
// of the service account that stamps.
type For struct {
	Client dynamic.Interface
	Owner  *unstructured.Unstructured
	Claim  Owner
	Step   string
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
	cached, err := s.Live(ctx, t.Watch(), watch, desired.GetNamespace(), desired.GetName())
	if err != nil {
		cached = nil // the create decides
	}
	live, wrote, err := s.put(ctx, f, t, desired, cached)
	if wrote {
		s.applied(f, live)
	}
	return live, wrote, err
}

// applied records on f.Owner that live was written for f.Step.
func (s *Session) applied(f For, live *unstructured.Unstructured) {
	name := live.GetName()
	if ns := live.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	s.Events.Event(f.Owner, corev1.EventTypeNormal, EventStampedObjectApplied, "Applied %s %s for step [%s]", live.GetKind(), name, f.Step)
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
		s.applied(f, created)
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
		s.applied(f, out)
	}
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
