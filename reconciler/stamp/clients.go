package stamp

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
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

// ServerSideApply server-side applies obj as Kontinue's field manager, forcing
// ownership of the fields it sets.
func ServerSideApply(ctx context.Context, cl dynamic.Interface, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, fieldManager string) (*unstructured.Unstructured, error) {
	ri := cl.Resource(gvr)
	var r dynamic.ResourceInterface = ri
	if ns := obj.GetNamespace(); ns != "" {
		r = ri.Namespace(ns)
	}
	return r.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
}

// deleteObject deletes an object only if it is still the one we know (UID
// precondition), in the background so the garbage collector removes its
// dependents.
func deleteObject(ctx context.Context, cl dynamic.Interface, gvr schema.GroupVersionResource, namespace, name string, uid types.UID) error {
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
