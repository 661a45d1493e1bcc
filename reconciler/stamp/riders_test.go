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

func withSet(u *unstructured.Unstructured, set string) *unstructured.Unstructured {
	u = u.DeepCopy()
	ann := u.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[api.AnnotationInputSet] = set
	u.SetAnnotations(ann)
	return u
}

// TestRidersAreNeverCompared: the traceparent alone never makes an object
// out of date, in either direction, nor a move between shards news; the
// input set only once the live object names one; the rest of the object
// still does.
func TestRidersAreNeverCompared(t *testing.T) {
	base := configMap(map[string]any{"a": "1"}, false)
	for _, tt := range []struct {
		name          string
		desired, live *unstructured.Unstructured
		want          bool
	}{
		{"traces turned on: live has none", ridden(base, For{TraceParent: tp1}), base, true},
		{"the same set traced to another span since", ridden(base, For{TraceParent: tp2}), withTrace(base, tp1), true},
		{"traces turned off: live keeps its own", base, withTrace(base, tp1), true},
		{"live names no set (written before objects named theirs)", ridden(base, For{TraceParent: tp1, InputSet: "s1"}), withTrace(base, tp1), true},
		{"live names the same set", ridden(base, For{InputSet: "s1"}), withSet(base, "s1"), true},
		{"live names another set (stale, or edited): written back", ridden(base, For{InputSet: "s2"}), withSet(base, "s1"), false},
		{"deployment inputs changed, the object not: no write", ridden(base, For{DeploymentInputs: `{"url":"u2"}`}), ridden(base, For{DeploymentInputs: `{"url":"u1"}`}), true},
		{"deployment inputs on an object written without: no write", ridden(base, For{DeploymentInputs: `{"url":"u1"}`}), base, true},
		{"new inputs: a write, whatever the trace", ridden(configMap(map[string]any{"a": "2"}, false), For{TraceParent: tp1}), withTrace(base, tp1), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, upToDate(tt.desired, tt.live))
		})
	}
	moved := withTrace(base, tp1)
	moved.SetLabels(map[string]string{api.ShardLabel: "b"})
	assert.True(t, movedOnly(ridden(base, For{TraceParent: tp2}), moved), "a move of shard only, whatever the trace")
}

// TestRiddenCopies: the caller's object is never changed (its decisions,
// such as a shadow's last good object, are kept in the status), and
// without riders nothing is copied.
func TestRiddenCopies(t *testing.T) {
	base := configMap(map[string]any{"a": "1"}, false)
	before := base.DeepCopy()
	out := ridden(base, For{TraceParent: tp1})
	assert.Equal(t, tp1, out.GetAnnotations()[api.AnnotationTraceParent])
	assert.Equal(t, before, base, "desired untouched")
	assert.Same(t, base, ridden(base, For{}))
	assert.Same(t, base, unridden(base, nil))

	back := unridden(out, nil)
	assert.Equal(t, before.Object, back.Object)
	assert.Equal(t, tp1, out.GetAnnotations()[api.AnnotationTraceParent], "the traced copy untouched")
	dep := ridden(base, For{DeploymentInputs: `{"url":"u"}`})
	assert.Equal(t, `{"url":"u"}`, dep.GetAnnotations()[api.AnnotationDeploymentInputs])
	assert.Equal(t, before, base, "desired untouched")

	bare := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x"}}}
	b := ridden(bare, For{TraceParent: tp1, InputSet: "s1"})
	require.Equal(t, map[string]string{api.AnnotationTraceParent: tp1, api.AnnotationInputSet: "s1"}, b.GetAnnotations())
	_, has := unridden(b, nil).Object["metadata"].(map[string]any)["annotations"]
	assert.False(t, has, "no annotations left: none at all, as rendered")
}
