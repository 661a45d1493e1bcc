package reconciler

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/shard"
)

// The Manager's own watches of owners are the ones a shard narrows.
func TestPermanentOwnerWatchesAreNarrowed(t *testing.T) {
	for _, k := range permanentWatches() {
		if k.GVR == api.WorkloadGVR || k.GVR == api.DeliverableGVR || k.GVR == api.RunnableGVR {
			assert.True(t, shard.Narrowed(k), "the permanent watch of %s holds one shard", k)
		}
	}
}
