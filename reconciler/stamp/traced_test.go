package stamp

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
)

const tp1, tp2 = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01"

func withTrace(u *unstructured.Unstructured, tp string) *unstructured.Unstructured {
	u = u.DeepCopy()
	ann := u.GetAnnotations()
	if tp == "" {
		delete(ann, api.AnnotationTraceParent)
	} else {
		ann[api.AnnotationTraceParent] = tp
	}
	u.SetAnnotations(ann)
	return u
}

// TestTracedIsNeverCompared: the traceparent alone never makes an object
// out of date, in either direction, nor a move between shards news; the
// rest of the object still does.
func TestTracedIsNeverCompared(t *testing.T) {
	base := configMap(map[string]any{"a": "1"}, false)
	for _, tt := range []struct {
		name          string
		desired, live *unstructured.Unstructured
		want          bool
	}{
		{"traces turned on: live has none", traced(base, tp1), base, true},
		{"the same set traced to another span since", traced(base, tp2), withTrace(base, tp1), true},
		{"traces turned off: live keeps its own", base, withTrace(base, tp1), true},
		{"new inputs: a write, whatever the trace", traced(configMap(map[string]any{"a": "2"}, false), tp1), withTrace(base, tp1), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, upToDate(tt.desired, tt.live))
		})
	}
	moved := withTrace(base, tp1)
	moved.SetLabels(map[string]string{api.ShardLabel: "b"})
	assert.True(t, movedOnly(traced(base, tp2), moved), "a move of shard only, whatever the trace")
}

// TestTracedCopies: the caller's object is never changed (its decisions,
// such as a shadow's last good object, are kept in the status), and
// without a traceparent nothing is copied.
func TestTracedCopies(t *testing.T) {
	base := configMap(map[string]any{"a": "1"}, false)
	before := base.DeepCopy()
	out := traced(base, tp1)
	assert.Equal(t, tp1, out.GetAnnotations()[api.AnnotationTraceParent])
	assert.Equal(t, before, base, "desired untouched")
	assert.Same(t, base, traced(base, ""))
	assert.Same(t, base, untraced(base))

	back := untraced(out)
	assert.Equal(t, before.Object, back.Object)
	assert.Equal(t, tp1, out.GetAnnotations()[api.AnnotationTraceParent], "the traced copy untouched")

	bare := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x"}}}
	b := traced(bare, tp1)
	require.Equal(t, map[string]string{api.AnnotationTraceParent: tp1}, b.GetAnnotations())
	_, has := untraced(b).Object["metadata"].(map[string]any)["annotations"]
	assert.False(t, has, "no annotations left: none at all, as rendered")
}
