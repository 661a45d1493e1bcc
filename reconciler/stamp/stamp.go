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
	"errors"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/jsonvalue"
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
	// Echoes are the versions Put wrote whose events have not come back
	// (echoes.go).
	Echoes *Echoes
	// Fights are the objects Kontinue writes again and again with the
	// same content (fights.go).
	Fights *Fights
}

// NewWriter returns a Writer. noted may be nil.
func NewWriter(dyn dynamic.Interface, mapper *tracking.Mapper, tracker *tracking.Tracker, events *Events, noted func(applied bool)) *Writer {
	return &Writer{dyn: dyn, mapper: mapper, tracker: tracker, Events: events, noted: noted, recent: runs.NewRecent(recentRunTTL), Echoes: NewEchoes(), Fights: NewFights()}
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

// Watch starts or joins a watch for the reconcile at hand and reports
// whether its cache has synced (tracking.Handle.Watch).
type Watch func(tracking.Key) bool

func resource(cl dynamic.Interface, gvr schema.GroupVersionResource, namespace string) dynamic.ResourceInterface {
	if namespace == "" {
		return cl.Resource(gvr)
	}
	return cl.Resource(gvr).Namespace(namespace)
}

// Cache is where WriteStatus finds the cached copy of the object whose
// status it writes (tracking.Tracker).
type Cache interface {
	Get(key tracking.Key, namespace, name string) (*unstructured.Unstructured, bool)
}

// ErrStaleCopy: the cache holds a newer copy of the object than the one
// its status was decided on; nothing is written.
var ErrStaleCopy = errors.New("decided on an older copy than the cache has")

// WriteStatus replaces obj's status (obj is changed) when it differs from
// what obj holds, so that an idle system makes no writes, and returns the
// status written (nil when nothing was written).
//
// When cache (nil: not asked) holds a newer copy of obj than the one read,
// nothing is written and the error is ErrStaleCopy: the object's other
// writers (the owner that applies a Runnable's spec, a person editing an
// owner) moved it on while the reconcile decided, and a write on the copy
// read could only be refused (409 Conflict). The newer copy's event brings
// the key back to decide on it.
func (w *Writer) WriteStatus(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, status any, cache Cache) (map[string]any, error) {
	if cache != nil {
		if now, _ := cache.Get(tracking.Key{GVR: gvr}, obj.GetNamespace(), obj.GetName()); now != nil && now.GetResourceVersion() != obj.GetResourceVersion() {
			return nil, ErrStaleCopy
		}
	}
	b, err := json.Marshal(status)
	if err != nil {
		return nil, err
	}
	var newStatus map[string]any
	// As the API server will hold it: integers exact (outputValues,
	// lastGoodObject), so that the digest below compares like with like.
	if err := jsonvalue.Unmarshal(b, &newStatus); err != nil {
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
	b, _ := tracking.MarshalJSON(status)
	return sha256.Sum256(b)
}

// Record returns the record Secret namespace/name that Kontinue wrote last
// if the cache may not have it yet, else cached.
func (w *Writer) Record(cached *unstructured.Unstructured, namespace, name string) *unstructured.Unstructured {
	return w.written.newest(cached, namespace, name)
}

// ForgetRuns drops what is remembered of the runs created for memo (its
// Runnable or owner is gone).
func (w *Writer) ForgetRuns(memo string) { w.recent.Forget(memo) }
