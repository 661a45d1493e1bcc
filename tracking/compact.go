package tracking

import (
	"fmt"
	"sync"
	"unsafe"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// lastApplied is kubectl's copy of what a person applied: a second copy of
// the object's spec that Kontinue never reads.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// maxInterned bounds the strings shared between cached objects: longer
// values are rarely repeated.
const maxInterned = 64

// FieldManager is the field manager Kontinue writes as. The cache keeps
// one thing of managedFields: whether this manager holds an Update entry,
// which a create leaves (reconciler/stamp creates a stamped object, then
// hands its fields to its apply entry before the next write).
const FieldManager = "kontinue"

// createdMarker is what the cache keeps of managedFields when FieldManager
// holds an Update entry: the entry without its fields. One value shared by
// every cached object that has it (cached objects are read-only).
var createdMarker = []any{map[string]any{"manager": FieldManager, "operation": "Update"}}

// HasUpdateEntry reports whether obj's managedFields (full, or as the
// cache keeps them) hold an Update entry of FieldManager for the object
// itself (not a subresource).
func HasUpdateEntry(obj *unstructured.Unstructured) bool {
	md, _ := obj.Object["metadata"].(map[string]any)
	entries, _ := md["managedFields"].([]any)
	for _, e := range entries {
		m, _ := e.(map[string]any)
		if m["manager"] == FieldManager && m["operation"] == "Update" && (m["subresource"] == nil || m["subresource"] == "") {
			return true
		}
	}
	return false
}

// Compact drops from obj what the cache does not keep: managedFields but
// for the marker of FieldManager's Update entry, and kubectl's
// last-applied copy. For objects read from the API server, so that they
// look like cached ones.
func Compact(obj *unstructured.Unstructured) {
	md, ok := obj.Object["metadata"].(map[string]any)
	if !ok {
		return
	}
	if HasUpdateEntry(obj) {
		md["managedFields"] = createdMarker
	} else {
		delete(md, "managedFields")
	}
	if a, ok := md["annotations"].(map[string]any); ok {
		delete(a, lastApplied)
	}
}

// compact is the informers' transform: it keeps out of the cache what
// Kontinue never reads (managedFields, kubectl's last-applied copy) and
// shares the strings that every cached object repeats (keys, label keys
// and values, kinds, owner references), so that a cached object costs
// memory for what is its own. Status writes are not affected: a status
// PUT takes only the status from the request.
func compact(obj any) (any, error) {
	u, err := toTransform(obj)
	if u == nil {
		return obj, err
	}
	Compact(u)
	internMap(u.Object)
	return u, nil
}

// toTransform is obj as the transforms take it; nil for another
// runtime.Object, kept as it is (an error if obj is not one).
func toTransform(obj any) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u, nil
	}
	if _, ok := obj.(runtime.Object); !ok {
		return nil, fmt.Errorf("unexpected object %T", obj)
	}
	return nil, nil
}

// unshared are keys whose values differ in every object: interning them
// would only cost.
var unshared = map[string]bool{"uid": true, "resourceVersion": true, "creationTimestamp": true, "name": true, "generateName": true}

func internMap(m map[string]any) {
	for k, v := range m {
		if k == "managedFields" {
			continue // createdMarker is shared: never written to
		}
		ik := intern(k)
		nv, changed := internValue(k, v)
		if changed || unsafe.StringData(ik) != unsafe.StringData(k) {
			// Assigning under an equal key stores the shared key too.
			m[ik] = nv
		}
	}
}

// internValue returns v with its strings shared, and whether v itself must
// be replaced (a string value is replaced by the shared boxed copy, so
// that not even the interface's box is repeated).
func internValue(key string, v any) (any, bool) {
	switch x := v.(type) {
	case map[string]any:
		internMap(x)
	case []any:
		for i := range x {
			if nv, changed := internValue("", x[i]); changed {
				x[i] = nv
			}
		}
	case string:
		if !unshared[key] && len(x) > 0 && len(x) <= maxInterned {
			return internBoxed(v, x)
		}
	}
	return v, false
}

// interned is the table of shared strings, each with its boxed form (a
// string in an interface is a pointer to a string header: sharing the
// box saves that too). unique.Make would not do: its canonical strings are
// forgotten once no Handle is left, and cached objects keep strings, not
// handles. The table only grows, so it is bounded; past the bound a string
// is kept as it came.
var interned = struct {
	sync.RWMutex
	m map[string]any
}{m: map[string]any{}}

const maxInternedStrings = 1 << 15

// shared returns the shared boxed string equal to s, if there is one.
func shared(s string) (any, bool) {
	interned.RLock()
	defer interned.RUnlock()
	c, ok := interned.m[s]
	return c, ok
}

// share adds boxed (which holds s) as the shared copy of s unless there is
// one already or the table is full, and returns the shared copy.
func share(s string, boxed any) (any, bool) {
	interned.Lock()
	defer interned.Unlock()
	if c, ok := interned.m[s]; ok {
		return c, true
	}
	if len(interned.m) >= maxInternedStrings {
		return nil, false
	}
	interned.m[s] = boxed
	return boxed, true
}

func intern(s string) string {
	if len(s) > maxInterned || len(s) == 0 {
		return s
	}
	c, ok := shared(s)
	if !ok {
		c, ok = share(s, s)
	}
	if ok {
		return c.(string)
	}
	return s
}

func internBoxed(v any, s string) (any, bool) {
	c, ok := shared(s)
	if !ok {
		c, ok = share(s, v)
	}
	if !ok {
		return v, false
	}
	return c, unsafe.StringData(c.(string)) != unsafe.StringData(s)
}
