package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLeaseNamePerShard(t *testing.T) {
	assert.Equal(t, "kontinue-leader", leaseName("kontinue-leader", ""), "the default shard keeps the Lease it always had")
	assert.Equal(t, "kontinue-leader-shard-a", leaseName("kontinue-leader", "a"))
	assert.NotEqual(t, leaseName("x", "a"), leaseName("x", "b"))
	assert.NotEqual(t, leaseName("x", ""), leaseName("x", "a"))
}
