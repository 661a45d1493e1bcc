package stamp

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kontinue.dev/kontinue/reconciler/failure"
	"kontinue.dev/kontinue/tracking"
)

// The status a reconcile computes went through a JSON round trip (float64
// numbers); the cached one holds int64. They must compare equal, or every
// reconcile would write a status that did not change.
func TestStatusDigestIgnoresNumberTypesAndKeyOrder(t *testing.T) {
	cached := map[string]any{"observedGeneration": int64(3), "conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}
	var computed map[string]any
	b, _ := json.Marshal(map[string]any{"conditions": []any{map[string]any{"status": "True", "type": "Ready"}}, "observedGeneration": 3})
	_ = json.Unmarshal(b, &computed)
	assert.IsType(t, float64(0), computed["observedGeneration"])
	assert.Equal(t, StatusDigest(cached), StatusDigest(computed))

	computed["observedGeneration"] = float64(4)
	assert.NotEqual(t, StatusDigest(cached), StatusDigest(computed))
	assert.Equal(t, StatusDigest(nil), StatusDigest(map[string]any(nil)))
}

// Only failures that news can fix block; the last one noted wins.
func TestSessionBlocked(t *testing.T) {
	gr := schema.GroupResource{Group: "x", Resource: "ys"}
	tests := []struct {
		name string
		errs []error
		want failure.Class
		ok   bool
	}{
		{"nothing failed", nil, 0, false},
		{"transient and rejected do not block", []error{apierrors.NewTimeoutError("slow", 1), apierrors.NewBadRequest("no"), nil}, 0, false},
		{"forbidden waits for RBAC", []error{apierrors.NewForbidden(gr, "a", errors.New("no"))}, failure.Forbidden, true},
		{"not served waits for discovery", []error{&failure.Error{Class: failure.NotServed, Err: errors.New("x")}}, failure.NotServed, true},
		{"a later transient keeps the block", []error{apierrors.NewForbidden(gr, "a", errors.New("no")), apierrors.NewTimeoutError("slow", 1)}, failure.Forbidden, true},
		{"the last block wins", []error{apierrors.NewForbidden(gr, "a", errors.New("no")), &meta.NoKindMatchError{GroupKind: schema.GroupKind{Kind: "Y"}}}, failure.NotServed, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := (&Writer{}).Session()
			for _, err := range tt.errs {
				assert.Equal(t, err, s.Note(err))
			}
			got, ok := s.Blocked()
			assert.Equal(t, tt.ok, ok)
			if ok {
				assert.Equal(t, tt.want, got)
			}
		})
	}
}

// cacheOf is a cache holding one copy.
type cacheOf struct{ obj *unstructured.Unstructured }

func (c cacheOf) Get(tracking.Key, string, string) (*unstructured.Unstructured, bool) {
	return c.obj, true
}

// A status decided on a copy the cache has replaced is not written: the
// write could only be refused. The guard answers before any API call (the
// Writer here has no client at all).
func TestWriteStatusRefusesACopyTheCacheReplaced(t *testing.T) {
	read := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "a", "namespace": "ns", "resourceVersion": "10"},
		"status": map[string]any{"x": "old"}}}
	newer := read.DeepCopy()
	newer.SetResourceVersion("11")
	w := &Writer{}
	written, err := w.WriteStatus(context.Background(), schema.GroupVersionResource{Resource: "runnables"}, read, map[string]any{"x": "new"}, cacheOf{newer})
	assert.ErrorIs(t, err, ErrStaleCopy)
	assert.Nil(t, written)
	assert.Equal(t, map[string]any{"x": "old"}, read.Object["status"], "the copy read is left as it was")

	// The cache shows the copy read, and the status is unchanged: no write, no error.
	written, err = w.WriteStatus(context.Background(), schema.GroupVersionResource{Resource: "runnables"}, read, map[string]any{"x": "old"}, cacheOf{read})
	assert.NoError(t, err)
	assert.Nil(t, written)
}
