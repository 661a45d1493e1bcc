// Package apply writes stamped objects: server-side apply with one field
// manager, through a client that carries the permissions of the owner's
// service account, and only when the live object lacks something Kontinue
// wants.
package apply

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"kontinue.dev/kontinue/reconciler/jsonvalue"
)

// Clients hands out dynamic clients that impersonate service accounts, one
// per account, created once.
type Clients struct {
	base *rest.Config
	mu   sync.Mutex
	m    map[string]dynamic.Interface
}

// NewClients returns a pool on top of the controller's own config.
func NewClients(base *rest.Config) *Clients {
	return &Clients{base: base, m: map[string]dynamic.Interface{}}
}

// ServiceAccountUser is the user name of a service account.
func ServiceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// For returns a client acting as the service account namespace/name. It
// sends no groups: the API server then gives the account its own groups
// (system:serviceaccounts, system:serviceaccounts:<ns>, system:authenticated),
// so RBAC bindings to them keep working, and Kontinue needs `impersonate` on
// serviceaccounts only, not on groups (which would reach system:masters).
func (c *Clients) For(namespace, name string) (dynamic.Interface, error) {
	key := namespace + "/" + name
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.m[key]; ok {
		return cl, nil
	}
	cfg := rest.CopyConfig(c.base)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: ServiceAccountUser(namespace, name)}
	cl, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	c.m[key] = cl
	return cl, nil
}

// Apply server-side applies obj as Kontinue's field manager, forcing
// ownership of the fields it sets.
func Apply(ctx context.Context, cl dynamic.Interface, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, fieldManager string) (*unstructured.Unstructured, error) {
	ri := cl.Resource(gvr)
	var r dynamic.ResourceInterface = ri
	if ns := obj.GetNamespace(); ns != "" {
		r = ri.Namespace(ns)
	}
	return r.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
}

// Delete deletes an object only if it is still the one we know (UID
// precondition), in the background so the garbage collector removes its
// dependents.
func Delete(ctx context.Context, cl dynamic.Interface, gvr schema.GroupVersionResource, namespace, name string, uid types.UID) error {
	ri := cl.Resource(gvr)
	var r dynamic.ResourceInterface = ri
	if namespace != "" {
		r = ri.Namespace(namespace)
	}
	bg := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &bg}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	return r.Delete(ctx, name, opts)
}

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

// Describe names an object for messages: "Kind/namespace/name".
func Describe(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() == "" {
		return fmt.Sprintf("%s/%s", obj.GetKind(), obj.GetName())
	}
	return fmt.Sprintf("%s/%s/%s", obj.GetKind(), obj.GetNamespace(), obj.GetName())
}
