package history

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"

	st "kontinue.dev/kontinue/reconciler/status"
)

var cmGR = schema.GroupResource{Resource: "configmaps"}

// recorder is a Recorder whose writes fail with fail (nil: succeed),
// counting writes and log lines.
type recorder struct {
	*Recorder
	fail          error
	writes, lines int
	extra         []map[string]string // of each write
}

func newRecorder() *recorder {
	x := &recorder{Recorder: NewRecorder(10)}
	x.store = func(_ context.Context, _ dynamic.Interface, _ Owner, _ []Event, extra map[string]string) error {
		x.writes++
		x.extra = append(x.extra, extra)
		return x.fail
	}
	x.logf = func(string, ...any) { x.lines++ }
	return x
}

// moved is a status whose build moved from c1 to c2: c1's set left.
func moved() (prev, next []st.Resource) {
	prev = []st.Resource{source("c1", 1, 0), build(st.Provenance{Current: buildSet("c1", st.OutcomeSucceeded, 1, at(5))}, "img-c1")}
	next = []st.Resource{source("c2", 2, 10), build(st.Provenance{Current: buildSet("c2", st.OutcomeSucceeded, 11, at(15))}, "img-c2")}
	return prev, next
}

func TestPermanent(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{apierrors.NewForbidden(cmGR, "h", errors.New("no rights")), true},
		{apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "h", field.ErrorList{field.TooLong(field.NewPath("data"), "", 1<<20)}), true},
		{apierrors.NewRequestEntityTooLargeError("too big"), true},
		{apierrors.NewInternalError(errors.New("etcdserver: request is too large")), true},
		{fmt.Errorf("ConfigMap dev/h: %w Workload app", ErrNotOwned), true},
		{apierrors.NewConflict(cmGR, "h", errors.New("changed")), false},
		{apierrors.NewServerTimeout(cmGR, "update", 1), false},
		{apierrors.NewTimeoutError("slow", 1), false},
		{apierrors.NewInternalError(errors.New("etcd leader changed")), false},
		{apierrors.NewServiceUnavailable("down"), false},
		{context.DeadlineExceeded, false},
	} {
		assert.Equal(t, tc.want, Permanent(tc.err), "%v", tc.err)
	}
}

// TestRecordRetries: a write that failed for a passing reason is retried
// from the same status on the next reconcile, even with nothing new;
// one that retrying cannot fix keeps nothing and is logged once.
func TestRecordRetries(t *testing.T) {
	ctx := context.Background()
	o := Owner{Kind: "Workload", Namespace: "dev", Name: "app", UID: "u1"}
	prev, next := moved()

	x := newRecorder()
	x.fail = apierrors.NewConflict(cmGR, "h", errors.New("changed"))
	x.Record(ctx, nil, o, prev, next)
	x.Record(ctx, nil, o, next, next)
	assert.Equal(t, 2, x.writes, "a conflict: retried with nothing new")
	x.fail = nil
	x.Record(ctx, nil, o, next, next)
	x.Record(ctx, nil, o, next, next)
	assert.Equal(t, 3, x.writes, "written once it passes, then nothing")
	p, r := x.kept()
	assert.Equal(t, [2]int{0, 0}, [2]int{p, r})

	for _, fail := range []error{apierrors.NewForbidden(cmGR, "h", errors.New("no rights")),
		fmt.Errorf("%w", ErrNotOwned), apierrors.NewRequestEntityTooLargeError("too big")} {
		x := newRecorder()
		x.fail = fail
		x.Record(ctx, nil, o, prev, next)
		for i := 0; i < 5; i++ {
			x.Record(ctx, nil, o, next, next)
		}
		assert.Equal(t, 1, x.writes, "%v: not retried with nothing new", fail)
		_, after := moved()
		after[1].Provenance = &st.Provenance{Current: buildSet("c3", st.OutcomeSucceeded, 21, at(25))}
		x.Record(ctx, nil, o, next, after)
		assert.Equal(t, 2, x.writes, "%v: a later set's end tries again", fail)
		assert.Equal(t, 1, x.lines, "%v: logged once per owner", fail)
		p, r := x.kept()
		assert.Equal(t, 0, p, "%v: nothing pending", fail)
		assert.Equal(t, 1, r)
		x.Forget(o.Kind, o.Namespace, o.Name)
		p, r = x.kept()
		assert.Equal(t, [2]int{0, 0}, [2]int{p, r}, "%v: forgotten with the owner", fail)
	}
}

// TestRecordRecreated: an owner deleted and created again under its name
// does not inherit the old one's pending retry; Forget drops it.
func TestRecordRecreated(t *testing.T) {
	ctx := context.Background()
	o := Owner{Kind: "Workload", Namespace: "dev", Name: "app", UID: "u1"}
	prev, next := moved()
	x := newRecorder()
	x.fail = apierrors.NewServerTimeout(cmGR, "update", 1)
	x.Record(ctx, nil, o, prev, next)
	assert.Equal(t, 1, x.writes)

	o2 := o
	o2.UID = "u2"
	x.Record(ctx, nil, o2, next, next)
	assert.Equal(t, 1, x.writes, "the new owner's status is its own")

	p, _ := x.kept()
	assert.Equal(t, 0, p)
	x.Record(ctx, nil, o, prev, next)
	p, _ = x.kept()
	assert.Equal(t, 1, p)
	x.Forget(o.Kind, o.Namespace, o.Name)
	p, _ = x.kept()
	assert.Equal(t, 0, p, "forgotten once the owner is gone")
	var none *Recorder
	none.Forget(o.Kind, o.Namespace, o.Name) // no history kept: nothing to forget
}

// TestRecordExtra: Extra's keys are written with the history, in the same
// write when both have something, alone when only Extra has; nothing when
// neither has (a restart), and a failed write retries both.
func TestRecordExtra(t *testing.T) {
	ctx := context.Background()
	o := Owner{Kind: "Workload", Namespace: "dev", Name: "app", UID: "u1"}
	prev, next := moved()
	x := newRecorder()
	// A key per step whose build output changed: what the attestor does.
	x.Extra = func(_ Owner, p, n []st.Resource) map[string]string {
		out := map[string]string{}
		for i := range n {
			if b := find(p, n[i].Name); b == nil || outHash(b.Outputs) != outHash(n[i].Outputs) {
				out["extra."+n[i].Name] = outHash(n[i].Outputs)
			}
		}
		return out
	}
	x.Record(ctx, nil, o, nil, prev)
	assert.Equal(t, 1, x.writes, "first revision: no history event, Extra alone writes")
	assert.Len(t, x.extra[0], 2)
	x.Record(ctx, nil, o, prev, next)
	assert.Equal(t, 2, x.writes, "history and Extra in one write")
	assert.Contains(t, x.extra[1], "extra.build")
	x.Record(ctx, nil, o, next, next)
	assert.Equal(t, 2, x.writes, "nothing changed: nothing written")

	x.fail = apierrors.NewConflict(cmGR, "h", errors.New("changed"))
	_, later := moved()
	later[1].Outputs = []st.Output{{Name: "image", Digest: "sha256:other"}}
	x.Record(ctx, nil, o, next, later)
	x.fail = nil
	x.Record(ctx, nil, o, later, later)
	assert.Equal(t, 4, x.writes)
	assert.Equal(t, x.extra[2], x.extra[3], "retried from the same status")
}

// TestMergeExtra: Extra's values are written through Merge with what the
// ConfigMap holds under each key; written when any differs.
func TestMergeExtra(t *testing.T) {
	o := Owner{Kind: "Workload", Namespace: "dev", Name: "app", UID: "u1"}
	appendLine := func(_ Owner, key, stored, fresh string) string {
		if stored == "" {
			return fresh
		}
		return stored + "\n" + fresh
	}
	keep := func(_ Owner, key, stored, fresh string) string { return stored }
	for _, tt := range []struct {
		name          string
		stored, extra map[string]string
		merge         func(Owner, string, string, string) string
		want          map[string]string
		max           int
		changed, full bool
	}{
		{name: "nothing extra", stored: map[string]string{"a": "1"}, merge: appendLine},
		{name: "no merge: replaced", stored: map[string]string{"a": "1"}, extra: map[string]string{"a": "2"},
			want: map[string]string{"a": "2"}, changed: true},
		{name: "no merge, the same value: unchanged", stored: map[string]string{"a": "1"}, extra: map[string]string{"a": "1"},
			want: map[string]string{"a": "1"}},
		{name: "merged with what is stored", stored: map[string]string{"a": "1", "b": "x"}, extra: map[string]string{"a": "2", "c": "3"}, merge: appendLine,
			want: map[string]string{"a": "1\n2", "c": "3"}, changed: true},
		{name: "merged to what is stored: unchanged", stored: map[string]string{"a": "1"}, extra: map[string]string{"a": "2"}, merge: keep,
			want: map[string]string{"a": "1"}},
		// Sizes count keys and values: "h"+"12345" is 6, "a"+"1" 2.
		{name: "merged, exactly at the bound", stored: map[string]string{"h": "12345", "a": "1"}, extra: map[string]string{"a": "2"}, merge: appendLine, max: 10,
			want: map[string]string{"a": "1\n2"}, changed: true},
		{name: "merged past the bound: the fresh value replaces what is stored", stored: map[string]string{"h": "123456", "a": "1"}, extra: map[string]string{"a": "2"}, merge: appendLine, max: 10,
			want: map[string]string{"a": "2"}, changed: true, full: true},
		{name: "past the bound, the fresh value as stored: unchanged", stored: map[string]string{"h": "123456", "a": "2"}, extra: map[string]string{"a": "2"}, merge: appendLine, max: 10,
			want: map[string]string{"a": "2"}, full: true},
		{name: "without merge the bound is not the recorder's to keep", stored: map[string]string{"h": "123456789"}, extra: map[string]string{"a": "2"}, max: 1,
			want: map[string]string{"a": "2"}, changed: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.max == 0 {
				tt.max = MaxData
			}
			got, changed, full := mergeExtra(o, tt.stored, tt.extra, tt.merge, tt.max)
			assert.Equal(t, tt.changed, changed)
			assert.Equal(t, tt.full, full)
			if tt.want == nil {
				assert.Empty(t, got)
				return
			}
			assert.Equal(t, tt.want, got)
		})
	}
}
