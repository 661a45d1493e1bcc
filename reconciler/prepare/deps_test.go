package prepare

import (
	"go/build"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// prepare writes nothing: it imports no API client and none of the code
// that writes (stamp), watches (tracking) or reconciles (the root package).
// Engines reach the cluster only through the getter the caller gives.
func TestPrepareImportsNoWriter(t *testing.T) {
	pkg, err := build.Default.Import("kontinue.dev/kontinue/reconciler/prepare", ".", 0)
	assert.NoError(t, err)
	assert.NotEmpty(t, pkg.Imports)
	for _, imp := range pkg.Imports {
		assert.False(t, strings.HasPrefix(imp, "k8s.io/client-go/"), imp)
		for _, bad := range []string{"kontinue.dev/kontinue/reconciler", "kontinue.dev/kontinue/reconciler/stamp", "kontinue.dev/kontinue/tracking"} {
			assert.NotEqual(t, bad, imp)
		}
	}
}
