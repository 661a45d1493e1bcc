package stamp

// Riders: annotations put on an object at its write and left out of every
// comparison, the trace context (api.AnnotationTraceParent) and the
// provenance input set (api.AnnotationInputSet). An object whose only
// difference is a rider is up to date. So turning traces on or off, or a
// restamp that keeps its input set, writes nothing by itself; a rider
// comes, changes or goes with the next write of the object, which a new
// input set makes anyway. Written by Kontinue's apply, a rider is removed
// by the first apply without it (traces off).

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
)

// riderKeys are the rider annotations.
var riderKeys = [...]string{api.AnnotationTraceParent, api.AnnotationInputSet}

// riders are the annotations f puts on what it writes.
func (f For) riders() map[string]string {
	var out map[string]string
	for k, v := range map[string]string{api.AnnotationTraceParent: f.TraceParent, api.AnnotationInputSet: f.InputSet} {
		if v != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// ridden is desired with f's riders (desired itself when f has none), a
// copy: desired is the caller's, and its decisions (a shadow's last good
// object, kept in the status) must not carry them.
func ridden(desired *unstructured.Unstructured, f For) *unstructured.Unstructured {
	r := f.riders()
	if len(r) == 0 {
		return desired
	}
	out, ann := withAnnotations(desired)
	for k, v := range r {
		ann[k] = v
	}
	return out
}

// unridden is desired without riders, for comparisons (desired itself
// when it has none).
func unridden(desired *unstructured.Unstructured) *unstructured.Unstructured {
	md, _ := desired.Object["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	has := false
	for _, k := range riderKeys {
		_, ok := ann[k]
		has = has || ok
	}
	if !has {
		return desired
	}
	out, copied := withAnnotations(desired)
	for _, k := range riderKeys {
		delete(copied, k)
	}
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
