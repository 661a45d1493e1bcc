package stamp

// The trace context on what is written (api.AnnotationTraceParent). It is
// put on the object at the write and left out of every comparison: an
// object whose only difference is its traceparent is up to date. So
// turning traces on, or off, writes nothing by itself; the annotation
// comes, changes or goes with the next write of the object, which a new
// input set makes anyway. Written by Kontinue's apply, it is removed by
// the first apply without it (traces off).

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
)

// traced is desired with traceparent tp (desired itself when tp is ""),
// a copy: desired is the caller's, and its decisions (a shadow's last good
// object, kept in the status) must not carry it.
func traced(desired *unstructured.Unstructured, tp string) *unstructured.Unstructured {
	if tp == "" {
		return desired
	}
	out, ann := withAnnotations(desired)
	ann[api.AnnotationTraceParent] = tp
	return out
}

// untraced is desired without a traceparent, for comparisons (desired
// itself when it has none).
func untraced(desired *unstructured.Unstructured) *unstructured.Unstructured {
	md, _ := desired.Object["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	if _, ok := ann[api.AnnotationTraceParent]; !ok {
		return desired
	}
	out, copied := withAnnotations(desired)
	delete(copied, api.AnnotationTraceParent)
	if len(copied) == 0 {
		delete(out.Object["metadata"].(map[string]any), "annotations")
	}
	return out
}

// withAnnotations copies desired down to its annotations (shared below:
// nothing else is changed) and returns the copy's annotations, to change.
func withAnnotations(desired *unstructured.Unstructured) (*unstructured.Unstructured, map[string]any) {
	obj := make(map[string]any, len(desired.Object))
	for k, v := range desired.Object {
		obj[k] = v
	}
	old, _ := obj["metadata"].(map[string]any)
	md := make(map[string]any, len(old)+1)
	for k, v := range old {
		md[k] = v
	}
	oldAnn, _ := md["annotations"].(map[string]any)
	ann := make(map[string]any, len(oldAnn)+1)
	for k, v := range oldAnn {
		ann[k] = v
	}
	md["annotations"] = ann
	obj["metadata"] = md
	return &unstructured.Unstructured{Object: obj}, ann
}
