package crds

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// GVR is the resource of CustomResourceDefinitions.
var GVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// Install server-side applies objs (CRDs) as fieldManager and waits until
// every one is Established.
func Install(ctx context.Context, dyn dynamic.Interface, fieldManager string, objs []*unstructured.Unstructured, timeout time.Duration) error {
	ri := dyn.Resource(GVR)
	for _, c := range objs {
		if _, err := ri.Apply(ctx, c.GetName(), c, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
			return fmt.Errorf("install CRD %s: %w", c.GetName(), err)
		}
	}
	deadline := time.Now().Add(timeout)
	for _, c := range objs {
		for {
			got, err := ri.Get(ctx, c.GetName(), metav1.GetOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			if err == nil && Established(got) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("CRD %s not established after %s", c.GetName(), timeout)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// Established reports whether a CRD is served.
func Established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}
