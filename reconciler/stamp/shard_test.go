package stamp

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
)

func TestUpToDateIsInTheShard(t *testing.T) {
	obj := func(shard string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"kind": "Runnable", "metadata": map[string]any{"name": "x"}, "spec": map[string]any{"a": "b"}}}
		l := map[string]string{api.StampedLabel: "true"}
		api.SetShard(l, shard)
		u.SetLabels(l)
		return u
	}
	tests := []struct {
		desired, live string
		want          bool
	}{
		{"", "", true},
		{"a", "a", true},
		{"a", "", false},
		{"b", "a", false},
		// A live object in shard a "contains" a desired one without the
		// label: moving to the default shard must still be written.
		{"", "a", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, upToDate(obj(tt.desired), obj(tt.live)), "desired in %q, live in %q", tt.desired, tt.live)
	}
	assert.False(t, upToDate(obj(""), nil))
}

func TestShardPatch(t *testing.T) {
	assert.JSONEq(t, `{"metadata":{"uid":"u1","labels":{"kontinue.dev/shard":"a"}}}`, string(shardPatch("a", "u1")))
	assert.JSONEq(t, `{"metadata":{"uid":"u1","labels":{"kontinue.dev/shard":null}}}`, string(shardPatch("", "u1")), "the default shard: the label is removed")
}

func TestMovedOnly(t *testing.T) {
	obj := func(shard, data string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"kind": "ConfigMap", "metadata": map[string]any{"name": "x"}, "data": map[string]any{"a": data}}}
		l := map[string]string{api.StampedLabel: "true"}
		api.SetShard(l, shard)
		u.SetLabels(l)
		return u
	}
	assert.True(t, movedOnly(obj("b", "1"), obj("a", "1")), "only the shard differs")
	assert.True(t, movedOnly(obj("", "1"), obj("a", "1")), "to the default shard")
	assert.True(t, movedOnly(obj("a", "1"), obj("", "1")), "from the default shard")
	assert.False(t, movedOnly(obj("b", "2"), obj("a", "1")), "moved and changed: news")
	assert.False(t, movedOnly(obj("a", "2"), obj("a", "1")), "changed in its shard")
	assert.False(t, movedOnly(obj("a", "1"), obj("a", "1")), "nothing moved")
	assert.False(t, movedOnly(obj("a", "1"), nil))
}
