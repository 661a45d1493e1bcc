package render

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// ObjectGetter reads an object from the cluster. Engines that read inputs
// other than the template context (the helm engine's chart in a ConfigMap)
// find it in the context.Context given to Render; an engine that needs one
// and finds none fails with a StampError.
type ObjectGetter interface {
	Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error)
}

type getterKey struct{}

// WithObjectGetter returns ctx carrying g for the engines.
func WithObjectGetter(ctx context.Context, g ObjectGetter) context.Context {
	return context.WithValue(ctx, getterKey{}, g)
}

// ObjectGetterFrom returns the getter in ctx, or nil.
func ObjectGetterFrom(ctx context.Context) ObjectGetter {
	g, _ := ctx.Value(getterKey{}).(ObjectGetter)
	return g
}

// DynamicGetter reads objects with a dynamic client (and its credentials).
func DynamicGetter(c dynamic.Interface) ObjectGetter { return dynamicGetter{c} }

type dynamicGetter struct{ c dynamic.Interface }

func (g dynamicGetter) Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	return g.c.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
}
