// Package apply decides whether a stamped object must be written: the
// desired object against the live one (UpToDate), its digest, how to name
// it. It is pure; the writes themselves are reconciler/stamp's.
package apply

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/jsonvalue"
)

// Digest is a stable digest of an object's content (JSON of its map, whose
// keys encoding/json sorts).
func Digest(obj map[string]any) string {
	b, err := json.Marshal(obj)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// UpToDate reports whether live already holds every field of desired with
// the same value. Fields others added to live are ignored; numbers compare by
// value (the cache holds int64, a template may hold float64).
func UpToDate(desired, live *unstructured.Unstructured) bool {
	if live == nil {
		return false
	}
	return contains(live.Object, desired.Object)
}

func contains(live, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return len(w) == 0 && live == nil
		}
		for k, wv := range w {
			lv, ok := l[k]
			if !ok {
				if isEmpty(wv) {
					continue // [] / {} / null applied leave nothing behind
				}
				return false
			}
			if !contains(lv, wv) {
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok {
			return len(w) == 0 && live == nil
		}
		if len(l) != len(w) {
			return false
		}
		for i := range w {
			if !contains(l[i], w[i]) {
				return false
			}
		}
		return true
	default:
		if a, ok := jsonvalue.NumberOf(live); ok {
			if b, ok := jsonvalue.NumberOf(want); ok {
				return a.Equal(b)
			}
		}
		return reflect.DeepEqual(live, want)
	}
}

func isEmpty(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(t) == 0
	case []any:
		return len(t) == 0
	}
	return false
}

// Leaves reports whether live holds a field desired does not set: one an
// apply would remove if Kontinue's apply entry owns it. Server-managed
// metadata and the status are not looked at; a list whose length differs
// counts as leaving a field. False means an apply of desired removes
// nothing, whoever owns live's fields.
func Leaves(desired, live *unstructured.Unstructured) bool {
	for k, lv := range live.Object {
		switch k {
		case "apiVersion", "kind", "status":
			continue
		case "metadata":
			lm, _ := lv.(map[string]any)
			dm, _ := desired.Object["metadata"].(map[string]any)
			for _, f := range []string{"labels", "annotations", "ownerReferences", "finalizers"} {
				if v, ok := lm[f]; ok && leaves(dm[f], v) {
					return true
				}
			}
			continue
		}
		if leaves(desired.Object[k], lv) {
			return true
		}
	}
	return false
}

func leaves(want, live any) bool {
	switch l := live.(type) {
	case map[string]any:
		w, ok := want.(map[string]any)
		if !ok {
			return len(l) > 0
		}
		for k, lv := range l {
			wv, ok := w[k]
			if !ok || leaves(wv, lv) {
				return true
			}
		}
		return false
	case []any:
		w, ok := want.([]any)
		if !ok {
			return len(l) > 0
		}
		if len(w) != len(l) {
			return true
		}
		for i := range l {
			if leaves(w[i], l[i]) {
				return true
			}
		}
		return false
	default:
		return false
	}
}

// Describe names an object for messages: "Kind/namespace/name".
func Describe(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() == "" {
		return fmt.Sprintf("%s/%s", obj.GetKind(), obj.GetName())
	}
	return fmt.Sprintf("%s/%s/%s", obj.GetKind(), obj.GetNamespace(), obj.GetName())
}

// Stored rewrites obj as the API server stores it, where the two differ
// in a way UpToDate would see: a core Secret's stringData is write-only,
// merged into data base64-encoded (over data's own value for the same
// key), and never shown back. Written as is, such a Secret would never be
// up to date: every reconcile would apply it again, and the first apply
// after its create would hand its fields over, a write of an unchanged
// Secret. A stringData that is not a map of strings is left as it is, for
// the API server to refuse with its own message.
func Stored(obj *unstructured.Unstructured) {
	if obj.GetAPIVersion() != "v1" || obj.GetKind() != "Secret" {
		return
	}
	sd, ok := obj.Object["stringData"].(map[string]any)
	if !ok {
		return
	}
	data, ok := obj.Object["data"].(map[string]any)
	if !ok {
		if obj.Object["data"] != nil {
			return
		}
		data = map[string]any{}
	}
	enc := make(map[string]any, len(sd))
	for k, v := range sd {
		s, ok := v.(string)
		if !ok {
			return
		}
		enc[k] = base64.StdEncoding.EncodeToString([]byte(s))
	}
	for k, v := range enc {
		data[k] = v
	}
	obj.Object["data"] = data
	delete(obj.Object, "stringData")
}
