package chain

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestMoved: which updates of a chain (that leave its spec and
// labels alone) wake the chain reconciler: a roll-out that moved (the
// owners due change) or was steered; not a new tally, not another
// condition.
func TestMoved(t *testing.T) {
	chain := func(ann map[string]any, ro map[string]any) *unstructured.Unstructured {
		md := map[string]any{"name": "web"}
		if ann != nil {
			md["annotations"] = ann
		}
		return &unstructured.Unstructured{Object: map[string]any{"metadata": md, "status": map[string]any{"rollout": ro}}}
	}
	base := map[string]any{"stable": "A", "target": "B", "wave": int64(0), "phase": "Progressing", "updated": int64(1)}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for a, b := range base {
			m[a] = b
		}
		m[k] = v
		return m
	}
	for _, tc := range []struct {
		name     string
		old, cur *unstructured.Unstructured
		want     bool
	}{
		{"nothing", chain(nil, base), chain(nil, base), false},
		{"a tally", chain(nil, base), chain(nil, with("updated", int64(2))), false},
		{"a phase alone (its own decision, written)", chain(nil, base), chain(nil, with("phase", "Halted")), false},
		{"the next wave", chain(nil, base), chain(nil, with("wave", int64(1))), true},
		{"a new target", chain(nil, base), chain(nil, with("target", "C")), true},
		{"complete", chain(nil, base), chain(nil, with("target", nil)), true},
		{"a status of garbage", chain(nil, base), chain(nil, with("stable", map[string]any{"x": 1})), true},
		{"paused", chain(nil, base), chain(map[string]any{"kontinue.dev/rollout-paused": "true"}, base), true},
		{"resumed", chain(map[string]any{"kontinue.dev/rollout-resume": "t1"}, base), chain(map[string]any{"kontinue.dev/rollout-resume": "t2"}, base), true},
		{"another annotation", chain(nil, base), chain(map[string]any{"x": "y"}, base), false},
		{"added", nil, chain(nil, base), true},
	} {
		assert.Equal(t, tc.want, Moved(tc.old, tc.cur), tc.name)
	}
}
