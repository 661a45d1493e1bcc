package prepare

// What every rendered object gets before it is applied: the owner's
// namespace, the step's labels, the owner as controller, no status or
// write bookkeeping, and the digest of it all.

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/apply"
	"kontinue.dev/kontinue/reconciler/step"
)

// Labels are the labels every object of a step carries.
func Labels(f *api.Flavor, owner metav1.Object, chain, stepName, kind, template string, spec *api.TemplateSpec) map[string]string {
	l := map[string]string{
		api.StampedLabel:           "true",
		f.LabelOwnerName:           owner.GetName(),
		f.LabelOwnerNS:             owner.GetNamespace(),
		f.LabelChainName:           chain,
		api.LabelResourceName:      stepName,
		api.LabelTemplateKind:      kind,
		api.LabelTemplateName:      template,
		api.LabelTemplateLifecycle: step.LifecycleName(spec),
	}
	// In the owner's shard, so that the shard's replica watches it.
	api.SetShard(l, api.ShardOf(owner.GetLabels()))
	return l
}

// OwnerReference names the owner (no controller flag: a record such as a
// Helm release Secret, which no controller reference may claim).
func OwnerReference(f *api.Flavor, owner metav1.Object) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: api.Group + "/" + api.Version, Kind: f.OwnerKind, Name: owner.GetName(), UID: owner.GetUID()}
}

// ControllerReference names the owner as the controller of what its steps
// stamp.
func ControllerReference(f *api.Flavor, owner metav1.Object) metav1.OwnerReference {
	r := OwnerReference(f, owner)
	r.Controller = ptr.To(true)
	return r
}

// Finish fixes up what a template rendered into objects ready to apply, or
// says why they cannot be stamped.
func Finish(f *api.Flavor, owner metav1.Object, spec *api.TemplateSpec, labels map[string]string, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	if len(objs) == 0 {
		return nil, fmt.Errorf("the template rendered no object")
	}
	ns := owner.GetNamespace()
	ref := ControllerReference(f, owner)
	for _, o := range objs {
		// Only a run may be named by the API server: an object applied in
		// place needs its name.
		if o.GetName() == "" && (o.GetGenerateName() == "" || !step.LifecycleOf(spec).ServerNamed) {
			return nil, fmt.Errorf("stamped %s has no metadata.name", o.GetKind())
		}
		if got := o.GetNamespace(); got != "" && got != ns {
			return nil, fmt.Errorf("stamped %s [%s] names namespace [%s], but objects are stamped only in the %s's namespace [%s]", o.GetKind(), o.GetName(), got, f.OwnerKind, ns)
		}
		o.SetNamespace(ns)
		l := o.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		for k, v := range labels {
			l[k] = v
		}
		// The owner's shard, whatever the template rendered: an object
		// in another shard would be watched by no replica of the owner's.
		api.SetShard(l, api.ShardOf(owner.GetLabels()))
		o.SetLabels(l)
		o.SetOwnerReferences([]metav1.OwnerReference{ref})
		unstructured.RemoveNestedField(o.Object, "status")
		unstructured.RemoveNestedField(o.Object, "metadata", "resourceVersion")
		unstructured.RemoveNestedField(o.Object, "metadata", "managedFields")
		ann := o.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		delete(ann, api.AnnotationDigest)
		o.SetAnnotations(ann)
		ann[api.AnnotationDigest] = digest(o)
		o.SetAnnotations(ann)
		// Written as the API server keeps it (after the digest, which
		// stays the rendered object's), so that it is up to date once
		// written: a Secret's stringData becomes data.
		apply.Stored(o)
	}
	return objs, nil
}

// digest is the digest of o without its shard label: the shard is where an
// object is served, not what it is, so an owner that moves shard keeps its
// input sets.
func digest(o *unstructured.Unstructured) string {
	l := o.GetLabels()
	shard, ok := l[api.ShardLabel]
	if !ok {
		return apply.Digest(o.Object)
	}
	delete(l, api.ShardLabel)
	o.SetLabels(l)
	d := apply.Digest(o.Object)
	l[api.ShardLabel] = shard
	o.SetLabels(l)
	return d
}
