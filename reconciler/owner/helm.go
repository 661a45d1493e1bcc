package owner

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/failure"
	"kontinue.dev/kontinue/reconciler/prepare"
	"kontinue.dev/kontinue/reconciler/render"
	"kontinue.dev/kontinue/tracking"
)

// A helm step keeps its release (what it last rendered, and the revision)
// in a Secret of the owner's namespace (render/release.go): read here
// before rendering, written through stamp before the new objects are
// applied, with the owner's service account.

var secretGVR = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

// helm keeps the Helm releases of one pass's steps.
type helm struct{ *pass }

// release returns ctx carrying the step's kept release and a `lookup`
// answered as the owner's service account, and what keeps the release the
// engine rendered (prepare.Env.Release).
func (op *helm) release(ctx context.Context, def api.Step) (context.Context, func() error, error) {
	ns, name := op.owner.GetNamespace(), op.releaseSecretName(def.Name)
	live, err := op.w.Live(op.ctx, tracking.Key{GVR: secretGVR, Selector: render.ReleaseSelector}, op.watch.Watch, ns, name)
	if err != nil {
		return nil, nil, render.Transient(fmt.Errorf("unable to read the Secret [%s] that keeps the step's Helm release: %w", name, err))
	}
	live = op.env.Writer.Record(live, ns, name)
	rec := &helmRecord{}
	if live != nil {
		if !ownedByUID(live, op.owner) {
			return nil, nil, op.refusedRecord(ns, name, op.notOurs(name))
		}
		rec.uid = live.GetUID()
		if rec.Stored, err = render.ParseReleaseSecret(live); err != nil {
			// Edited by hand: render anew, as a first install.
			klog.InfoS("helm release unreadable, rendering anew", "owner", op.user, "step", def.Name, "secret", name, "err", err)
		}
	}
	ctx = render.WithRelease(ctx, &rec.ReleaseRecord)
	ctx = render.WithLookup(ctx, saLookup{op.pass})
	if cl, err := op.stampClient(); err == nil {
		// helm.chart.secretRef is read as the service account.
		ctx = render.WithServiceAccountGetter(ctx, render.DynamicGetter(cl))
	}
	return ctx, func() error { return op.keepRelease(def.Name, rec) }, nil
}

type helmRecord struct {
	render.ReleaseRecord
	uid types.UID // of the Secret read, proven the owner's ("": none)
}

// keepRelease writes the release the engine rendered, if it rendered.
func (op *helm) keepRelease(stepName string, rec *helmRecord) error {
	if rec.Next == nil {
		return nil
	}
	ns, name := op.owner.GetNamespace(), op.releaseSecretName(stepName)
	secret, err := render.ReleaseSecret(ns, name, prepare.OwnerReference(op.env.Flavor, op.owner), stepName, rec.Next)
	if err != nil {
		return err
	}
	cl, err := op.stampClient()
	if err != nil {
		return render.Transient(err)
	}
	sa := op.serviceAccount()
	if err := op.w.KeepRecord(op.ctx, cl, secret, rec.uid); err != nil {
		switch failure.Classify(err) {
		case failure.Forbidden:
			return fmt.Errorf("service account [%s/%s] may not write the Secret [%s] that keeps the step's Helm release (it needs get, create and patch on secrets in its namespace): %w", sa.Namespace, sa.Name, name, err)
		case failure.AlreadyExists:
			return op.refusedRecord(ns, name, op.notOurs(name))
		case failure.Rejected:
			return fmt.Errorf("unable to keep the step's Helm release in Secret [%s]: %w", name, err)
		}
		return render.Transient(fmt.Errorf("unable to keep the step's Helm release in Secret [%s]: %w", name, err))
	}
	return nil
}

// notOurs is the refusal of a release Secret someone else holds: one
// message whether the cache or a create found it, so that the look again
// that follows writes no other status.
func (op *helm) notOurs(name string) error {
	return fmt.Errorf("the Secret [%s] that keeps the step's Helm release exists and is not this %s's (its ownerReferences do not name it): it is left as it is; delete or rename it", name, op.env.Flavor.OwnerKind)
}

// refusedRecord is err, the refusal of a release Secret someone else holds,
// with the Secret watched while the refusal stands (as ownerIO.refused
// does for stamped objects): its removal wakes the owner. Until that watch
// has synced, err is retried (render.Transient, with backoff): the Secret
// may have gone before the watch's first list.
func (op *helm) refusedRecord(ns, name string, err error) error {
	if !op.watch.Watch(blocker(secretGVR, ns, name)) {
		return render.Transient(err)
	}
	return err
}

func (op *helm) releaseSecretName(stepName string) string {
	return render.ReleaseSecretName(op.env.Flavor.OwnerKind, op.owner.GetName(), stepName)
}

func ownedByUID(o, owner *unstructured.Unstructured) bool {
	for _, r := range o.GetOwnerReferences() {
		if r.UID == owner.GetUID() {
			return true
		}
	}
	return false
}

// saLookup answers Helm's `lookup` as the owner's service account, for
// namespaced kinds only (the engine keeps it to the owner's namespace).
type saLookup struct{ op *pass }

func (l saLookup) Lookup(ctx context.Context, apiVersion, kind, namespace, name string) (map[string]any, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, err
	}
	t, err := l.op.env.Writer.Session().Resolve(gv.WithKind(kind)) // not the owner's: a lookup never blocks it
	if err != nil {
		return nil, err
	}
	if !t.Namespaced {
		return nil, fmt.Errorf("kind [%s] is cluster-scoped: lookup reads only the owner's namespace", kind)
	}
	cl, err := l.op.stampClient()
	if err != nil {
		return nil, err
	}
	sa := l.op.serviceAccount()
	r := cl.Resource(t.GVR).Namespace(namespace)
	var o map[string]any
	if name != "" {
		var got *unstructured.Unstructured
		if got, err = r.Get(ctx, name, metav1.GetOptions{}); err == nil {
			o = got.Object
		}
	} else {
		var got *unstructured.UnstructuredList
		if got, err = r.List(ctx, metav1.ListOptions{}); err == nil {
			o = got.UnstructuredContent()
		}
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case apierrors.IsForbidden(err):
		return nil, fmt.Errorf("service account [%s/%s] may not read it", sa.Namespace, sa.Name)
	case err != nil:
		return nil, err
	}
	return o, nil
}
