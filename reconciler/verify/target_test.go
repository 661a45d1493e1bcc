package verify_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kontinue.dev/kontinue/reconciler/verify"
)

func TestPinned(t *testing.T) {
	const d = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	const other = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	for _, tt := range []struct{ value, digest, want string }{
		{"registry.example.com/app:v1", d, "registry.example.com/app@" + d},
		{"localhost:5000/team/app:v1", d, "localhost:5000/team/app@" + d},
		{"localhost:5000/team/app", d, "localhost:5000/team/app@" + d},
		// A Docker Hub short name keeps its spelling (not index.docker.io/library/nginx).
		{"nginx:1.27", d, "nginx@" + d},
		{"nginx@" + d, d, "nginx@" + d},
		{"nginx:1.27@" + d, d, "nginx:1.27@" + d},
		{"registry.example.com/app@" + other, d, "registry.example.com/app@" + d},
		{"registry.example.com/app:v1", "", "registry.example.com/app:v1"},
	} {
		target, err := verify.TargetOf(verify.TypeImage, "app", tt.value)
		require.NoError(t, err, tt.value)
		assert.Equal(t, tt.want, target.Pinned(tt.digest), tt.value)
	}
}
