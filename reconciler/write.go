package reconciler

// The owner's side of reconciler/stamp: where an object goes, applying it
// as the step's service account, and the step condition an API error ends in.

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/apply"
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

// stampOne writes one object unless the cached live object already has
// it, and reports whether the object was written. On failure it returns the
// step's condition (and a transient error to retry, if retrying can help).
func (op *ownerPass) stampOne(sc *stepCtx, t target, desired *unstructured.Unstructured) (*unstructured.Unstructured, bool, *metav1.Condition, error) {
	cached, _ := op.current(t.key, desired.GetNamespace(), desired.GetName())
	cl, err := op.stampClient()
	if err != nil {
		c := failure.Client(err).Cond(st.ResourceSubmitted, step.Reasons)
		return nil, false, &c, nil
	}
	live, wrote, c, err := op.put(cl, t.gvr, t.what, desired, cached)
	if c != nil {
		return nil, false, c, err
	}
	if wrote {
		op.r.m.w.Events.Event(op.owner, corev1.EventTypeNormal, stamp.EventStampedObjectApplied, "Applied %s %s/%s for step [%s]", live.GetKind(), live.GetNamespace(), live.GetName(), sc.step.Name)
	}
	return live, wrote, nil, nil
}

// put writes desired as cl unless cached (the watch's copy, nil: none)
// already holds it.
//   - An object the cache does not have is created: nearly always it is new,
//     a create costs the API server half of a GET and an apply, and it
//     cannot take over an object someone else made (AlreadyExists).
//   - When the name is taken, the object is read as cl, and written only if
//     this owner stamped it (stamp.Claim).
//   - An object Kontinue created, about to lose a field, is read too, to
//     hand the create's fields to the apply (stamp.UpgradeFields) so that
//     the field is removed. A change that only sets fields needs no hand
//     over: the apply takes what it changes, and shares what it does not.
//
// Then it is server-side applied.
func (op *ownerPass) put(cl dynamic.Interface, gvr schema.GroupVersionResource, what string, desired, cached *unstructured.Unstructured) (*unstructured.Unstructured, bool, *metav1.Condition, error) {
	fail := func(err error) (*unstructured.Unstructured, bool, *metav1.Condition, error) {
		c, transient := op.applyFailure(what, err)
		return nil, false, &c, transient
	}
	if cached == nil {
		created, err := op.w.CreateStamped(op.ctx, cl, gvr, desired)
		if err == nil {
			return created, true, nil, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fail(err)
		}
	}
	known := cached
	if cached == nil || handOver(desired, cached) {
		// Not readable, or gone meanwhile: the apply decides, as it would
		// have without the read.
		if full, err := cl.Resource(gvr).Namespace(desired.GetNamespace()).Get(op.ctx, desired.GetName(), metav1.GetOptions{}); err == nil {
			if c := op.claimed(what, full); c != nil {
				return nil, false, c, nil
			}
			if handOver(desired, full) {
				if err := op.w.UpgradeFields(op.ctx, cl, gvr, full); err != nil {
					return fail(err)
				}
			}
			tracking.Compact(full)
			known = full
		}
	} else if c := op.claimed(what, cached); c != nil {
		return nil, false, c, nil
	}
	live, wrote, err := op.w.Apply(op.ctx, cl, gvr, desired, known)
	if err != nil {
		return fail(err)
	}
	return live, wrote, nil, nil
}

// handOver says whether live's fields must go from Kontinue's create entry
// to its apply entry before desired is applied: there is a create entry,
// and the apply would leave out a field live has.
func handOver(desired, live *unstructured.Unstructured) bool {
	return tracking.HasUpdateEntry(live) && !apply.UpToDate(desired, live) && apply.Leaves(desired, live)
}

// claimed is the condition that refuses to write to live, an object this
// owner did not stamp (stamp.Claim); nil when it may.
func (op *ownerPass) claimed(what string, live *unstructured.Unstructured) *metav1.Condition {
	owner := stamp.Owner{Kind: op.r.flavor.OwnerKind, Name: op.owner.GetName(), UID: op.owner.GetUID()}
	if ok, why := stamp.Claim(live, owner); !ok {
		c := st.Cond(st.ResourceSubmitted, st.False, step.ReasonNotOwned, fmt.Sprintf("unable to apply %s: %s", what, why))
		return &c
	}
	return nil
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
