package history

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	st "kontinue.dev/kontinue/reconciler/status"
)

// The history object: a ConfigMap in the owner's namespace, owned by the
// owner (the garbage collector removes it with the owner), written with
// the owner's service account as its stamped objects are.
const (
	// LabelHistory marks it; its value is the owner's kind, lower case.
	LabelHistory = "kontinue.dev/history"
	// AnnotationOwner names the owner (names can be longer than a label).
	AnnotationOwner = "kontinue.dev/history-of"
	// DataKey holds the History as JSON.
	DataKey = "history.json"
)

// MaxBytes bounds the history's JSON. A ConfigMap's data holds at most
// 1 MiB: past it every write would fail. Half leaves room for the rest of
// the object and for escaping.
const MaxBytes = 512 << 10

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// Name is the history ConfigMap's name for an owner: deterministic, so
// that readers need only `get`. Kind keeps a Workload's apart from a
// Deliverable's of the same name.
func Name(kind, name string) string {
	n := "kontinue-history." + strings.ToLower(kind) + "." + name
	if len(n) <= 253 {
		return n
	}
	sum := sha256.Sum256([]byte(name))
	// A label of a DNS subdomain ends alphanumeric: no "….-<hash>".
	return strings.TrimRight(n[:253-17], ".-") + "-" + hex.EncodeToString(sum[:8])
}

// Owner is the owner a history belongs to.
type Owner struct {
	APIVersion, Kind, Namespace, Name string
	UID                               string
	// Object is the owner as the reconcile read it and Status the status
	// it wrote: what Recorder.Extra reads (nil: not known).
	Object *unstructured.Unstructured
	Status *st.OwnerStatus
}

// Decode reads a history ConfigMap's History.
func Decode(cm *unstructured.Unstructured) (History, error) {
	var h History
	s, _, _ := unstructured.NestedString(cm.Object, "data", DataKey)
	if s == "" {
		return h, nil
	}
	err := json.Unmarshal([]byte(s), &h)
	return h, err
}

// Get reads an owner's history with client (the caller's identity);
// an absent history is empty.
func Get(ctx context.Context, client dynamic.Interface, kind, namespace, name string) (History, error) {
	cm, err := client.Resource(configMaps).Namespace(namespace).Get(ctx, Name(kind, name), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return History{}, nil
	}
	if err != nil {
		return History{}, err
	}
	return Decode(cm)
}

// Recorder writes owners' histories after their status writes: nothing
// unless an input set ended (Events), then one GET and one write.
type Recorder struct {
	Limit int
	// Now is the clock (tests).
	Now func() time.Time
	// OnWrite is told of each history write and each failure (metrics).
	OnWrite func(err error)
	// Extra, when set, says which other data keys the ConfigMap should
	// hold after the status write from prev to next (the signed
	// attestations of steps whose current input set just succeeded,
	// reconciler/attestor). It is decided from the statuses alone, as
	// Events is: nothing when nothing changed. They are written with the
	// history, in the same write when both have something.
	Extra func(o Owner, prev, next []st.Resource) map[string]string
	// Merge, when set, is the value written under an Extra key from what
	// the ConfigMap holds there (stored) and what Extra gave (fresh): the
	// attestations keep a step's last few statements (attest.Signer.Merge).
	// Unset, fresh replaces stored.
	Merge func(o Owner, key, stored, fresh string) string

	mu sync.Mutex
	// pending keeps, per owner, the status a write that failed for a
	// passing reason (a conflict, a timeout, a 5xx) started from: the next
	// status write retries from there, so events are not lost. It holds
	// the owner's UID: an owner deleted and created again under its name
	// starts afresh.
	pending map[string]pending
	// refused are the owners (by UID) whose write failed for a reason a
	// retry cannot fix, as logged: once per owner, not per reconcile.
	refused map[string]string

	// store and logf are the edges (tests replace them).
	store func(ctx context.Context, client dynamic.Interface, o Owner, events []Event, extra map[string]string) error
	logf  func(msg string, kv ...any)
}

// Extras adds keys to owners' history ConfigMaps, as Recorder.Extra and
// Recorder.Merge (attest.Signer).
type Extras interface {
	Extra(o Owner, prev, next []st.Resource) map[string]string
	Merge(o Owner, key, stored, fresh string) string
}

type pending struct {
	uid  string
	prev []st.Resource
}

// ForRevisions is the recorder of the --history-revisions flag: 0 keeps
// DefaultRevisions, a negative number none (nil: no history).
func ForRevisions(n int) *Recorder {
	switch {
	case n == 0:
		return NewRecorder(DefaultRevisions)
	case n > 0:
		return NewRecorder(n)
	}
	return nil
}

// NewRecorder keeps limit revisions per owner.
func NewRecorder(limit int) *Recorder {
	r := &Recorder{Limit: limit, Now: time.Now, pending: map[string]pending{}, refused: map[string]string{}, logf: klog.InfoS}
	r.store = r.write
	return r
}

// Record folds what left the provenance between prev and next into the owner's history,
// writing with client (the owner's service account).
func (r *Recorder) Record(ctx context.Context, client dynamic.Interface, o Owner, prev, next []st.Resource) {
	key := o.Kind + "/" + o.Namespace + "/" + o.Name
	r.mu.Lock()
	if p, ok := r.pending[key]; ok && p.uid == o.UID {
		prev = p.prev
	}
	r.mu.Unlock()
	events := withoutRestamps(Events(prev, next, r.Now()), next)
	var extra map[string]string
	if r.Extra != nil {
		extra = r.Extra(o, prev, next)
	}
	if len(events) == 0 && len(extra) == 0 {
		r.mu.Lock()
		delete(r.pending, key)
		r.mu.Unlock()
		return
	}
	err := r.store(ctx, client, o, events, extra)
	if r.OnWrite != nil {
		r.OnWrite(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err == nil:
		delete(r.pending, key)
		delete(r.refused, key)
	case Permanent(err):
		// Retrying writes the same and fails the same: what ended now is
		// not recorded; a later set's end tries again.
		delete(r.pending, key)
		if r.refused[key] != o.UID {
			r.refused[key] = o.UID
			r.logf("history not written, nor retried: the owner's later input sets try again", "owner", key, "err", err)
		}
	default:
		r.logf("history not written; retried on the owner's next reconcile", "owner", key, "err", err)
		if p, ok := r.pending[key]; !ok || p.uid != o.UID {
			r.pending[key] = pending{uid: o.UID, prev: prev}
		}
	}
}

// Permanent is a write's error that retrying cannot fix: no right to the
// ConfigMap, an invalid or too large one, one that is not the owner's.
func Permanent(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsRequestEntityTooLargeError(err) || errors.Is(err, ErrNotOwned) ||
		strings.Contains(err.Error(), "request is too large") // etcd's limit, as a 500
}

// ErrNotOwned: the history's ConfigMap exists and is not the owner's.
var ErrNotOwned = errors.New("not owned by the owner")

// Forget drops what is kept for a deleted owner.
func (r *Recorder) Forget(kind, namespace, name string) {
	if r == nil {
		return
	}
	key := kind + "/" + namespace + "/" + name
	r.mu.Lock()
	delete(r.pending, key)
	delete(r.refused, key)
	r.mu.Unlock()
}

// kept is how many owners the recorder keeps something for (tests).
func (r *Recorder) kept() (pending, refused int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pending), len(r.refused)
}

func (r *Recorder) write(ctx context.Context, client dynamic.Interface, o Owner, events []Event, extra map[string]string) error {
	res := client.Resource(configMaps).Namespace(o.Namespace)
	name := Name(o.Kind, o.Name)
	cm, err := res.Get(ctx, name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	var h History
	if err == nil {
		if h, err = Decode(cm); err != nil {
			// Unreadable (edited by hand): start again rather than stop
			// recording.
			h = History{}
		}
	}
	h, changed := Apply(h, events, r.Limit)
	b, err := Encode(h, MaxBytes)
	if err != nil {
		return err
	}
	if cm != nil {
		stored, _, _ := unstructured.NestedStringMap(cm.Object, "data")
		if stored == nil {
			stored = map[string]string{}
		}
		stored[DataKey] = string(b)
		var more, full bool
		extra, more, full = mergeExtra(o, stored, extra, r.Merge, MaxData)
		changed = changed || more
		if full {
			r.logf("history ConfigMap near its size limit: the steps' earlier statements are not kept", "owner", o.Kind+"/"+o.Namespace+"/"+o.Name)
		}
	}
	if !changed && cm != nil {
		return nil
	}
	if cm == nil {
		cm = &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": o.Namespace,
				"labels":          map[string]any{LabelHistory: strings.ToLower(o.Kind), "app.kubernetes.io/managed-by": "kontinue"},
				"annotations":     map[string]any{AnnotationOwner: o.Kind + "/" + o.Name},
				"ownerReferences": []any{map[string]any{"apiVersion": o.APIVersion, "kind": o.Kind, "name": o.Name, "uid": o.UID}},
			},
			"data": map[string]any{DataKey: string(b)}}}
		for k, v := range extra {
			cm.Object["data"].(map[string]any)[k] = v
		}
		_, err = res.Create(ctx, cm, metav1.CreateOptions{FieldManager: "kontinue"})
		return err
	}
	if !ownedBy(cm, o.UID) {
		return fmt.Errorf("ConfigMap %s/%s: %w %s %s: not overwritten", o.Namespace, name, ErrNotOwned, o.Kind, o.Name)
	}
	if err := unstructured.SetNestedField(cm.Object, string(b), "data", DataKey); err != nil {
		return err
	}
	for k, v := range extra {
		if err := unstructured.SetNestedField(cm.Object, v, "data", k); err != nil {
			return err
		}
	}
	// The resourceVersion read: a concurrent writer makes this a conflict,
	// retried from the pending status.
	_, err = res.Update(ctx, cm, metav1.UpdateOptions{FieldManager: "kontinue"})
	return err
}

// MaxData bounds the ConfigMap's data (keys and values) as written: the
// API server refuses more than 1 MiB, and a refused write loses the
// history's events too. A little is left for the rest of the object.
const MaxData = 1<<20 - 16<<10

// mergeExtra is what extra's keys hold once written over stored (the
// ConfigMap's data, with the history as it will be written): merge's value
// of each (nil: extra's), and whether any differs from what is stored.
// When the merged data would pass max, extra's values replace what is
// stored instead (full): the older content merge keeps goes first.
func mergeExtra(o Owner, stored, extra map[string]string, merge func(o Owner, key, stored, fresh string) string, max int) (out map[string]string, changed, full bool) {
	if len(extra) == 0 {
		return extra, false, false
	}
	out = make(map[string]string, len(extra))
	for k, v := range extra {
		if merge != nil {
			v = merge(o, k, stored[k], v)
		}
		out[k] = v
	}
	if merge != nil && dataSize(stored, out) > max {
		out, full = extra, true
	}
	for k, v := range out {
		changed = changed || stored[k] != v
	}
	return out, changed, full
}

// dataSize is the size of stored's keys and values, with over's written
// over them, as the API server counts a ConfigMap's.
func dataSize(stored, over map[string]string) int {
	n := 0
	for k, v := range stored {
		if _, ok := over[k]; !ok {
			n += len(k) + len(v)
		}
	}
	for k, v := range over {
		n += len(k) + len(v)
	}
	return n
}

// Encode is h as JSON of at most max bytes: its oldest revisions are
// dropped until it fits (a large --history-revisions and a long chain can
// pass what a ConfigMap holds).
func Encode(h History, max int) ([]byte, error) {
	b, err := json.Marshal(h)
	if err != nil || len(b) <= max {
		return b, err
	}
	// The newest n that fit, by bisection: a few marshals even for a
	// long history.
	fits := func(n int) bool {
		b, err := json.Marshal(History{Revisions: h.Revisions[:n]})
		return err == nil && len(b) <= max
	}
	lo, hi := 0, len(h.Revisions)
	for hi-lo > 1 {
		if mid := (lo + hi) / 2; fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return json.Marshal(History{Revisions: h.Revisions[:lo]})
}

func ownedBy(cm *unstructured.Unstructured, uid string) bool {
	for _, ref := range cm.GetOwnerReferences() {
		if string(ref.UID) == uid {
			return true
		}
	}
	return false
}
