package tracking

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// lastApplied is kubectl's copy of what a person applied: a second copy of
// the object's spec that Kontinue never reads.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// maxInterned bounds the strings shared between cached objects: longer
// values are rarely repeated.
const maxInterned = 64

// compact is the informers' transform: it keeps out of the cache what
// Kontinue never reads (managedFields, kubectl's last-applied copy) and
// shares the strings that every cached object repeats (keys, label keys
// and values, kinds, owner references), so that a cached object costs
// memory for what is its own. Status writes are not affected: a status
// PUT takes only the status from the request.
func compact(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		if _, ok := obj.(runtime.Object); !ok {
			return nil, fmt.Errorf("unexpected object %T", obj)
		}
		return obj, nil
	}
	if md, ok := u.Object["metadata"].(map[string]any); ok {
		delete(md, "managedFields")
		if a, ok := md["annotations"].(map[string]any); ok {
			delete(a, lastApplied)
		}
	}
	internMap(u.Object)
	return u, nil
}

// unshared are keys whose values differ in every object: interning them
// would only cost.
var unshared = map[string]bool{"uid": true, "resourceVersion": true, "creationTimestamp": true, "name": true, "generateName": true}

func internMap(m map[string]any) {
	for k, v := range m {
		// Assigning under an equal key stores the interned key too.
		m[intern(k)] = internValue(k, v)
	}
}

func internValue(key string, v any) any {
	switch x := v.(type) {
	case map[string]any:
		internMap(x)
	case []any:
		for i := range x {
			x[i] = internValue("", x[i])
		}
	case string:
		if !unshared[key] {
			return intern(x)
		}
	}
	return v
}

// interned is the table of shared strings. unique.Make would not do: its
// canonical strings are forgotten once no Handle is left, and cached
// objects keep strings, not handles. The table only grows, so it is
// bounded; past the bound a string is simply kept as it came.
var interned = struct {
	sync.RWMutex
	m map[string]string
}{m: map[string]string{}}

const maxInternedStrings = 1 << 15

func intern(s string) string {
	if len(s) > maxInterned || len(s) == 0 {
		return s
	}
	interned.RLock()
	c, ok := interned.m[s]
	interned.RUnlock()
	if ok {
		return c
	}
	interned.Lock()
	defer interned.Unlock()
	if c, ok := interned.m[s]; ok {
		return c
	}
	if len(interned.m) >= maxInternedStrings {
		return s
	}
	interned.m[s] = s
	return s
}
