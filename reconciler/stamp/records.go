package stamp

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Records are what Kontinue keeps in the cluster for itself about an owner
// (a Helm step's release, render.ReleaseSecret): written through the owner's
// service account, owned by the owner, and not stamped objects (no stamped
// label: nothing prunes or serves them).

var secretGVR = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

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
