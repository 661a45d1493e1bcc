package stamp

// Riders: annotations put on an object at its write that never make it
// out of date by themselves. The trace context (api.AnnotationTraceParent)
// is never compared: turning traces on or off writes nothing, and the
// annotation comes, changes or goes with the next write of the object,
// which a new input set makes anyway. The provenance input set
// (api.AnnotationInputSet) is compared once the live object names one, so
// that a stale or edited name is written back; an object written before
// objects named their set gets it with its next write, so an upgrade
// writes nothing by itself. A deployment step's inputs
// (api.AnnotationDeploymentInputs) are never compared either: they go on
// the object with the set they were applied with, and inputs that change
// without changing the object write nothing. A rider written by Kontinue's apply is removed
// by the first apply without it (traces off).

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
)

// ridden is desired with f's riders (desired itself when f has none), a
// copy: desired is the caller's, and its decisions (a shadow's last good
// object, kept in the status) must not carry them.
func ridden(desired *unstructured.Unstructured, f For) *unstructured.Unstructured {
	if f.TraceParent == "" && f.InputSet == "" && f.DeploymentInputs == "" {
		return desired
	}
	out, ann := withAnnotations(desired)
	if f.TraceParent != "" {
		ann[api.AnnotationTraceParent] = f.TraceParent
	}
	if f.InputSet != "" {
		ann[api.AnnotationInputSet] = f.InputSet
	}
	if f.DeploymentInputs != "" {
		ann[api.AnnotationDeploymentInputs] = f.DeploymentInputs
	}
	return out
}

// unridden is desired without what live need not hold to be up to date:
// the traceparent, the deployment inputs, and the input set while live names none (desired itself
// when there is nothing to leave out).
func unridden(desired, live *unstructured.Unstructured) *unstructured.Unstructured {
	md, _ := desired.Object["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	var out []string
	for _, k := range []string{api.AnnotationTraceParent, api.AnnotationDeploymentInputs} {
		if _, ok := ann[k]; ok {
			out = append(out, k)
		}
	}
	if _, ok := ann[api.AnnotationInputSet]; ok && (live == nil || live.GetAnnotations()[api.AnnotationInputSet] == "") {
		out = append(out, api.AnnotationInputSet)
	}
	if len(out) == 0 {
		return desired
	}
	copied, left := withAnnotations(desired)
	for _, k := range out {
		delete(left, k)
	}
	if len(left) == 0 {
		delete(copied.Object["metadata"].(map[string]any), "annotations")
	}
	return copied
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
