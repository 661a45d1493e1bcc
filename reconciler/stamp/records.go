package stamp

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// Records are what Kontinue keeps in the cluster for itself about an owner
// (a Helm step's release, render.ReleaseSecret): written through the owner's
// service account, owned by the owner, and not stamped objects (no stamped
// label: nothing prunes or serves them).

var secretGVR = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

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

// Record returns the record Secret namespace/name that Kontinue wrote last
// if the cache may not have it yet, else cached.
func (w *Writer) Record(cached *unstructured.Unstructured, namespace, name string) *unstructured.Unstructured {
	return w.written.newest(cached, namespace, name)
}

// recentWrites are the records written in the last minute.
type recentWrites struct {
	mu sync.Mutex
	m  map[string]recentWrite
}

type recentWrite struct {
	obj *unstructured.Unstructured
	at  time.Time
}

const recentWriteTTL = time.Minute

func (r *recentWrites) put(o *unstructured.Unstructured) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]recentWrite{}
	}
	now := time.Now()
	for k, v := range r.m {
		if now.Sub(v.at) > recentWriteTTL {
			delete(r.m, k)
		}
	}
	r.m[o.GetNamespace()+"/"+o.GetName()] = recentWrite{obj: o, at: now}
}

// newest is the written object until the cache holds that version (or a
// minute has passed), then the cached one.
func (r *recentWrites) newest(cached *unstructured.Unstructured, namespace, name string) *unstructured.Unstructured {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := namespace + "/" + name
	v, ok := r.m[k]
	switch {
	case !ok:
		return cached
	case time.Since(v.at) > recentWriteTTL || (cached != nil && cached.GetResourceVersion() == v.obj.GetResourceVersion()):
		delete(r.m, k)
		return cached
	}
	return v.obj
}
