package reconciler

// The owner's side of reconciler/stamp: where an object goes, applying it
// as the step's service account, and the step condition an API error ends in.

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/failure"
	"kontinue.dev/kontinue/reconciler/stamp"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/step"
	"kontinue.dev/kontinue/tracking"
)

// target is where one desired object goes.
type target struct {
	gvr  schema.GroupVersionResource
	key  tracking.Key
	ref  st.StampedRef
	what string // for messages
}

// resolve maps a desired object to its resource, refuses cluster-scoped
// kinds, and registers the watch and the ref (so that a step that holds or
// fails never loses track of its object).
func (op *ownerPass) resolve(sc *stepCtx, desired *unstructured.Unstructured) (target, *metav1.Condition, error) {
	gvk := desired.GroupVersionKind()
	what := fmt.Sprintf("%s [%s] for step [%s] from template [%s/%s]", gvk.Kind, desired.GetName(), sc.step.Name, sc.kind, sc.tmplName)
	tg, err := op.w.Resolve(gvk)
	if f := failure.Kind(op.subject("apply", what), gvk.Kind, tg.Namespaced, err); f != nil {
		c := f.Cond(st.ResourceSubmitted, step.Reasons)
		return target{}, &c, f.Retry
	}
	t := target{gvr: tg.GVR, key: tg.Watch(), what: what}
	t.ref = st.StampedRef{APIVersion: desired.GetAPIVersion(), Kind: desired.GetKind(), Namespace: desired.GetNamespace(), Name: desired.GetName(), Resource: resourceString(t.gvr)}
	op.watch.Watch(t.key)
	op.keep.ref(t.ref)
	op.keep.want(t.ref)
	return t, nil, nil
}

// stampOne writes one object (stamp.Session.Put) and reports whether it
// was written. On failure it returns the step's condition (and a transient
// error to retry, if retrying can help).
func (op *ownerPass) stampOne(sc *stepCtx, t target, desired *unstructured.Unstructured) (*unstructured.Unstructured, bool, *metav1.Condition, error) {
	cl, err := op.stampClient()
	if err != nil {
		c := failure.Client(err).Cond(st.ResourceSubmitted, step.Reasons)
		return nil, false, &c, nil
	}
	f := stamp.For{Client: cl, Owner: op.owner, Claim: stamp.Owner{Kind: op.r.flavor.OwnerKind, Name: op.owner.GetName(), UID: op.owner.GetUID()}, Step: sc.step.Name}
	live, wrote, err := op.w.Put(op.ctx, f, stamp.Target{GVR: t.gvr, Namespaced: true}, op.watch.Watch, desired)
	if err != nil {
		fc := failure.Write(op.subject("apply", t.what), desired.GetName(), err)
		c := fc.Cond(st.ResourceSubmitted, step.Reasons)
		return nil, false, &c, fc.Retry
	}
	return live, wrote, nil, nil
}

// current is the live object (nil: missing), watched for this owner.
func (op *ownerPass) current(key tracking.Key, namespace, name string) (*unstructured.Unstructured, error) {
	return op.w.Live(op.ctx, key, op.watch.Watch, namespace, name)
}

// applyFailure turns an API error into the step's condition, and the error
// to retry (nil: retrying cannot help; RBAC, discovery, the template or the
// owner bring the step back).
func (op *ownerPass) applyFailure(what string, err error) (metav1.Condition, error) {
	f := failure.Write(op.subject("apply", what), "", err)
	return f.Cond(st.ResourceSubmitted, step.Reasons), f.Retry
}

// subject names a write of the owner's for failure's messages.
func (op *ownerPass) subject(verb, what string) failure.Subject {
	sa := op.serviceAccount()
	return failure.Subject{Verb: verb, What: what, Account: sa.Namespace + "/" + sa.Name,
		Home: fmt.Sprintf("stamped objects must live in the %s's namespace", op.r.flavor.OwnerKind)}
}

// serviceAccount is the account whose permissions stamp objects:
// the owner's, else the chain's, else "default" in the owner's namespace.
func (op *ownerPass) serviceAccount() api.ServiceAccountRef {
	ns := op.owner.GetNamespace()
	if op.spec.ServiceAccountName != "" {
		return api.ServiceAccountRef{Namespace: ns, Name: op.spec.ServiceAccountName}
	}
	if op.chain != nil && op.chain.spec.ServiceAccountRef != nil && op.chain.spec.ServiceAccountRef.Name != "" {
		ref := *op.chain.spec.ServiceAccountRef
		if ref.Namespace == "" {
			ref.Namespace = ns
		}
		return ref
	}
	return api.ServiceAccountRef{Namespace: ns, Name: "default"}
}

func (op *ownerPass) stampClient() (dynamic.Interface, error) {
	sa := op.serviceAccount()
	return op.r.m.clients.For(sa.Namespace, sa.Name)
}
