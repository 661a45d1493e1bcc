package shard

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/specs"
	"kontinue.dev/kontinue/tracking"
)

func TestShardSelector(t *testing.T) {
	cm := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	tests := []struct {
		name string
		key  tracking.Key
		want string // in shard "a"
	}{
		{"workloads", tracking.Key{GVR: api.WorkloadGVR}, "kontinue.dev/shard=a"},
		{"deliverables", tracking.Key{GVR: api.DeliverableGVR}, "kontinue.dev/shard=a"},
		{"runnables", tracking.Key{GVR: api.RunnableGVR}, "kontinue.dev/shard=a"},
		{"stamped objects", tracking.Key{GVR: cm, Selector: api.StampedSelector}, "kontinue.dev/stamped=true,kontinue.dev/shard=a"},
		{"stamped Runnables", tracking.Key{GVR: api.RunnableGVR, Selector: api.StampedSelector}, "kontinue.dev/stamped=true,kontinue.dev/shard=a"},
		{"chains are shared", tracking.Key{GVR: api.SupplyChainGVR}, ""},
		{"deliveries are shared", tracking.Key{GVR: api.DeliveryGVR}, ""},
		{"run templates are shared", tracking.Key{GVR: api.RunTemplateGVR}, ""},
		{"templates are shared", tracking.Key{GVR: specs.TemplateGVRs()[0]}, ""},
		{"service accounts are shared", tracking.Key{GVR: schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}}, ""},
		{"a Runnable's selector reads what it selects", tracking.Key{GVR: cm, Selector: "app=x", Namespace: "ns", As: "ns/sa"}, "app=x"},
		{"a selector watch as an account is not narrowed, even of stamped objects", tracking.Key{GVR: cm, Selector: api.StampedSelector, Namespace: "ns", As: "ns/sa"}, api.StampedSelector},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Selector("a", tt.key))
			if tt.want != tt.key.Selector {
				assert.Equal(t, api.WithShard(tt.key.Selector, ""), Selector("", tt.key), "the default shard: objects without the label")
			} else {
				assert.Equal(t, tt.key.Selector, Selector("", tt.key))
			}
		})
	}
}

// TestOthers: a shard's watch and its others' watch hold every owner, none
// in both, and Others is not narrowed again to the shard.
func TestOthers(t *testing.T) {
	owners := []map[string]string{{}, {"x": "y"}, {api.ShardLabel: "a"}, {api.ShardLabel: "b"}, {api.ShardLabel: ""}, {api.ShardLabel: "a", "x": "y"}}
	for _, shard := range []string{"", "a", "b"} {
		own, err := labels.Parse(api.ShardSelector(shard))
		require.NoError(t, err)
		others, err := labels.Parse(Others(shard))
		require.NoError(t, err)
		for _, l := range owners {
			assert.NotEqual(t, own.Matches(labels.Set(l)), others.Matches(labels.Set(l)), "shard %q, owner %v: in exactly one", shard, l)
			served := has(l) && l[api.ShardLabel] == shard
			if shard == "" {
				served = !has(l)
			}
			assert.Equal(t, served, own.Matches(labels.Set(l)), "shard %q, owner %v: served", shard, l)
		}
		k := tracking.Key{GVR: api.WorkloadGVR, Selector: Others(shard)}
		assert.False(t, Narrowed(k))
		assert.Equal(t, Others(shard), Selector(shard, k))
	}
}

func has(l map[string]string) bool { _, ok := l[api.ShardLabel]; return ok }
