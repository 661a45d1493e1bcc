package reconciler

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/runtime/schema"

	st "kontinue.dev/kontinue/reconciler/status"
)

func TestKeepSet(t *testing.T) {
	img := st.StampedRef{APIVersion: "kpack.io/v1alpha2", Kind: "Image", Namespace: "ns", Name: "app", Resource: "images.kpack.io"}
	cm := st.StampedRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "app", Resource: "configmaps"}
	shadow := st.StampedRef{APIVersion: "kpack.io/v1alpha2", Kind: "Image", Namespace: "ns", Name: "app-last-good", Resource: "images.kpack.io"}
	assert.Equal(t, refKey{gvr: schema.GroupVersionResource{Group: "kpack.io", Version: "v1alpha2", Resource: "images"}, namespace: "ns", name: "app"}, refKeyOf(img))
	assert.Equal(t, "images.kpack.io", resourceString(refKeyOf(img).gvr))
	assert.Equal(t, "configmaps", resourceString(refKeyOf(cm).gvr))

	k := newKeepSet()
	k.resources([]st.Resource{{Name: "build", StampedRef: &img, ShadowRef: &shadow}})
	assert.True(t, k.has(refKeyOf(img)))
	assert.True(t, k.has(refKeyOf(shadow)), "a shadow the status names stays")
	assert.False(t, k.has(refKeyOf(cm)))

	k.resources([]st.Resource{{Name: "config", StampedRef: &cm}})
	assert.False(t, k.has(refKeyOf(img)), "what the steps point at now, only")

	runGVR := schema.GroupVersionResource{Group: "tekton.dev", Version: "v1", Resource: "taskruns"}
	k.reach("test")
	k.run(st.StampedRef{APIVersion: "tekton.dev/v1", Kind: "TaskRun", Namespace: "ns", Name: "r2", Resource: "taskruns.tekton.dev"})
	assert.True(t, k.has(refKey{gvr: runGVR, namespace: "ns", name: "r2"}))
	assert.False(t, k.has(refKey{gvr: runGVR, namespace: "ns", name: "r1"}), "retention has it")
	assert.True(t, k.reached["test"])
	assert.False(t, k.reached["build"])
}
