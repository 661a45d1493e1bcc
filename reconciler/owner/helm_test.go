package owner

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/render"
	st "kontinue.dev/kontinue/reconciler/status"
)

// A helm step's release is kept per owner kind, owner and step; a render
// that made no new release writes nothing (the Env has no clients: asking
// for one would panic).
func TestHelmReleaseNames(t *testing.T) {
	op, _ := foldPass(t, &world{}, Env{}, st.OwnerStatus{})
	h := &helm{op}
	assert.Equal(t, render.ReleaseSecretName(api.KindWorkload, "app", "chart"), h.releaseSecretName("chart"))
	assert.NotEqual(t, h.releaseSecretName("chart"), h.releaseSecretName("other"))
	assert.NoError(t, h.keepRelease("chart", &helmRecord{uid: "u-secret"}))
}
