// Package stamp is the only code that writes stamped objects and runs: it
// resolves a kind to its resource, reads the live object (cache, or the API
// server while the cache is cold), applies, creates and deletes, lists the
// runs of a step or Runnable, removes the runs retention lets go (the callers
// decide which), classifies API errors and records the events about all of
// it. Deciding what to write is not its
// business: the reconcilers and reconciler/step do that.
package stamp

import (
	"context"
	"crypto/sha256"
	"encoding/json"
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

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/failure"
	"kontinue.dev/kontinue/reconciler/runs"
	"kontinue.dev/kontinue/tracking"
)

// FieldManager owns every field Kontinue applies.
const FieldManager = tracking.FieldManager

// StampedSelector filters the informers of stamped kinds: Kontinue caches
// only the objects it stamped.
const StampedSelector = api.StampedSelector

// Writer is the edge to the API server for stamped objects. One is shared by
// every reconciler.
type Writer struct {
	dyn     dynamic.Interface
	mapper  *tracking.Mapper
	tracker *tracking.Tracker
	Events  *Events
	// noted is told of every apply (true) and every apply skipped because
	// the live object was up to date (false): metrics.
	noted func(applied bool)
	// written are the records written lately (records.go).
	written recentWrites
	// recent are the runs created lately (runs.go), for Runnables and
	// immutable steps alike.
	recent *runs.Recent
	// Shard is the shard this writer's replica serves (api.ShardLabel):
	// runs found in another are relabelled into it (shard.go).
	Shard string
}

// NewWriter returns a Writer. noted may be nil.
func NewWriter(dyn dynamic.Interface, mapper *tracking.Mapper, tracker *tracking.Tracker, events *Events, noted func(applied bool)) *Writer {
	return &Writer{dyn: dyn, mapper: mapper, tracker: tracker, Events: events, noted: noted, recent: runs.NewRecent(recentRunTTL)}
}

func (w *Writer) note(applied bool) {
	if w.noted != nil {
		w.noted(applied)
	}
}

// Target is where objects of one kind go.
type Target struct {
	GVR        schema.GroupVersionResource
	Namespaced bool
}

// Watch is the stamped watch of the target's kind.
func (t Target) Watch() tracking.Key { return tracking.Key{GVR: t.GVR, Selector: StampedSelector} }

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

// Watch starts or joins a watch for the reconcile at hand and reports
// whether its cache has synced (tracking.Handle.Watch).
type Watch func(tracking.Key) bool

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
	live, err := ServerSideApply(ctx, cl, gvr, desired, FieldManager)
	w.note(true)
	if err != nil {
		return nil, false, err
	}
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

func resource(cl dynamic.Interface, gvr schema.GroupVersionResource, namespace string) dynamic.ResourceInterface {
	if namespace == "" {
		return cl.Resource(gvr)
	}
	return cl.Resource(gvr).Namespace(namespace)
}

// WriteStatus replaces obj's status (obj is changed) when it differs from
// what obj holds, so that an idle system makes no writes, and returns the
// status written (nil when nothing was written).
func (w *Writer) WriteStatus(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, status any) (map[string]any, error) {
	b, err := json.Marshal(status)
	if err != nil {
		return nil, err
	}
	var newStatus map[string]any
	if err := json.Unmarshal(b, &newStatus); err != nil {
		return nil, err
	}
	oldStatus, _ := obj.Object["status"].(map[string]any)
	if StatusDigest(oldStatus) == StatusDigest(newStatus) {
		return nil, nil
	}
	obj.Object["status"] = newStatus
	if _, err := resource(w.dyn, gvr, obj.GetNamespace()).UpdateStatus(ctx, obj, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
		return nil, err
	}
	return newStatus, nil
}

// StatusDigest identifies a status: encoding/json sorts map keys and prints
// int64 3 and float64 3 alike, so the cache's copy (int64) and ours (from a
// JSON round trip, float64) compare equal. One marshal each, no decoding.
func StatusDigest(status map[string]any) [32]byte {
	b, _ := json.Marshal(status)
	return sha256.Sum256(b)
}

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
