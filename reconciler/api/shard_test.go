package api

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/labels"
)

func TestShardSelectors(t *testing.T) {
	tests := []struct {
		selector, shard, want string
		in, out               []map[string]string // objects the selector must select, and not
	}{
		{"", "", "!kontinue.dev/shard",
			[]map[string]string{{}, {"a": "b"}}, []map[string]string{{ShardLabel: "a"}, {ShardLabel: ""}}},
		{"", "a", "kontinue.dev/shard=a",
			[]map[string]string{{ShardLabel: "a"}}, []map[string]string{{}, {ShardLabel: "b"}}},
		{StampedSelector, "", "kontinue.dev/stamped=true,!kontinue.dev/shard",
			[]map[string]string{{StampedLabel: "true"}}, []map[string]string{{StampedLabel: "true", ShardLabel: "a"}, {}}},
		{StampedSelector, "blue", "kontinue.dev/stamped=true,kontinue.dev/shard=blue",
			[]map[string]string{{StampedLabel: "true", ShardLabel: "blue"}}, []map[string]string{{StampedLabel: "true"}, {ShardLabel: "blue"}}},
	}
	for _, tt := range tests {
		got := WithShard(tt.selector, tt.shard)
		assert.Equal(t, tt.want, got)
		sel, err := labels.Parse(got)
		if !assert.NoError(t, err, got) {
			continue
		}
		for _, l := range tt.in {
			assert.True(t, sel.Matches(labels.Set(l)), "%s must select %v", got, l)
		}
		for _, l := range tt.out {
			assert.False(t, sel.Matches(labels.Set(l)), "%s must not select %v", got, l)
		}
	}
}

func TestSetShard(t *testing.T) {
	l := map[string]string{"x": "y", ShardLabel: "rendered"}
	SetShard(l, "a")
	assert.Equal(t, map[string]string{"x": "y", ShardLabel: "a"}, l)
	SetShard(l, "")
	assert.Equal(t, map[string]string{"x": "y"}, l, "the default shard has no label, whatever a template rendered")
	assert.Equal(t, "", ShardOf(nil))
}

func TestValidShard(t *testing.T) {
	for _, ok := range []string{"", "a", "tenant-1", "0"} {
		assert.NoError(t, ValidShard(ok), ok)
	}
	for _, bad := range []string{"A", "a_b", "a.b", "-a", "a/b", "x,y", "!a", string(make([]byte, 64))} {
		assert.Error(t, ValidShard(bad), bad)
	}
}

func TestShardLease(t *testing.T) {
	assert.Equal(t, "kontinue-leader", ShardLease("kontinue-leader", ""))
	assert.Equal(t, "kontinue-leader-shard-a", ShardLease("kontinue-leader", "a"))
	for _, shard := range []string{"", "a", "blue-2", "shard"} {
		got, ok := LeaseShard("kontinue-leader", ShardLease("kontinue-leader", shard))
		assert.True(t, ok, shard)
		assert.Equal(t, shard, got)
	}
	for _, name := range []string{"other", "kontinue-leader-shard-", "kontinue-leader-shard-Bad_Name", "kontinue-leader-2", "x-kontinue-leader-shard-a"} {
		_, ok := LeaseShard("kontinue-leader", name)
		assert.False(t, ok, name)
	}
}
