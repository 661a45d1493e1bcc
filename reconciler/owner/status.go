package owner

// The status stage of an owner's reconcile: bounded to what the API server
// takes, written only when it changed, and the wait for the cache to show
// what was written.

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/reconciler/stamp"
	st "kontinue.dev/kontinue/reconciler/status"
)

// ownWriteWait bounds how long a reconcile waits for the cache to show the
// status this controller just wrote.
const ownWriteWait = time.Second

// recordWrite remembers (as a digest: cheap to keep for every owner) the
// status just written for an owner.
func (r *Reconciler) recordWrite(user string, status map[string]any) {
	now := time.Now()
	d := stamp.StatusDigest(status)
	r.writesMu.Lock()
	defer r.writesMu.Unlock()
	if len(r.writes) >= 1024 {
		// Owners nobody reconciled since their write: the wait is over.
		for u, w := range r.writes {
			if now.Sub(w.at) > ownWriteWait {
				delete(r.writes, u)
			}
		}
	}
	r.writes[user] = ownWrite{digest: d, at: now}
}

// awaitOwnWrite reports whether the cached owner does not show the status
// this controller wrote moments ago. Its own stamped objects' events
// re-queue an owner right after its status write; reconciling the stale
// copy would only fail with a conflict and be retried. The wait is short
// and bounded: after ownWriteWait the cache is used as it is.
func (r *Reconciler) awaitOwnWrite(user string, obj *unstructured.Unstructured) bool {
	r.writesMu.Lock()
	w, ok := r.writes[user]
	r.writesMu.Unlock()
	if !ok {
		return false
	}
	cached, _ := obj.Object["status"].(map[string]any)
	if time.Since(w.at) <= ownWriteWait && stamp.StatusDigest(cached) != w.digest {
		return true
	}
	r.writesMu.Lock()
	delete(r.writes, user)
	r.writesMu.Unlock()
	return false
}

type ownWrite struct {
	digest [32]byte
	at     time.Time
}

// writeStatus is the status stage: the owner obj's status, as load (l) and
// the later stages left it, bounded and written only when it changed.
func (r *Reconciler) writeStatus(ctx context.Context, obj *unstructured.Unstructured, l *loaded, status *st.OwnerStatus) error {
	r.bound(obj, l, status)
	user := l.user
	written, err := r.env.Writer.WriteStatus(ctx, r.env.Flavor.OwnerGVR, obj, *status, r.env.Tracker)
	if written != nil {
		r.recordWrite(user, written)
	}
	if apierrors.IsConflict(err) {
		r.stale.Note(user, obj.GetResourceVersion())
		if r.env.StatusConflict != nil {
			r.env.StatusConflict()
		}
	}
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		// The cache is behind: the owner is looked at again once it is not.
		klog.V(2).InfoS("status write raced; will retry", "owner", user, "err", err.Error())
	}
	return err
}

// bound keeps the status within what the API server takes for the owner
// obj (st.Bound), and says what it cut in the StatusTruncated condition,
// with a Warning event when that changes: a status that fails to write
// would leave the owner stale for good.
func (r *Reconciler) bound(obj *unstructured.Unstructured, l *loaded, status *st.OwnerStatus) {
	notes := st.Bound(status, st.Free(obj.Object))
	if len(notes) == 0 {
		return
	}
	msg := strings.Join(notes, "; ")
	c := st.Merge([]metav1.Condition{st.Cond(CondStatusTruncated, st.True, ReasonStatusTooLarge, msg)}, l.prev.Conditions, obj.GetGeneration(), l.now)[0]
	status.Conditions = append(status.Conditions, c)
	if p := st.Find(l.prev.Conditions, CondStatusTruncated); p == nil || p.Message != msg {
		klog.InfoS("status too large; cut", "owner", l.user, "cut", msg)
		r.env.Events.Event(l.owner, corev1.EventTypeWarning, stamp.EventStatusTooLarge, "%s", msg)
	}
}

// The condition an owner carries while its status had to be cut.
const (
	CondStatusTruncated  = "StatusTruncated"
	ReasonStatusTooLarge = "StatusTooLarge"
)
