package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"kontinue.dev/kontinue/reconciler"
	"kontinue.dev/kontinue/reconciler/api"
)

// settled waits until key was not reconciled (by the in-process Kontinue)
// for d, and returns how many times it was.
func settled(t testing.TB, key reconciler.Key, d time.Duration) int {
	t.Helper()
	eventually(t, time.Minute, func() string {
		if at := reconciles.since(key, time.Now().Add(-d)); len(at) > 0 {
			return fmt.Sprintf("%s reconciled %s ago", key, time.Since(at[len(at)-1]))
		}
		return ""
	})
	return reconciles.get(key)
}

// What Kontinue writes is no news to it: the reconcile that stamps an
// object decides on the object the API server returned, so the watch
// event of that write wakes nobody (stamp.Echoes, judged when a worker
// takes the key). A Workload on a three-step chain of ConfigMaps (outputs
// flowing from step to step) converges in one reconcile and takes a change
// in one more; a hand edit of a stamped object, which is news, is still
// undone. A gated step (observedCompletion) does not take what its object
// reports in the reconcile that wrote it: it must look again, and becomes
// Ready (a ConfigMap has no controller: only the write's own event, or the
// step's progress-deadline timer, brings it back).
func TestOwnWritesAreNoNews(t *testing.T) {
	if env.external {
		t.Skip("counts the in-process Kontinue's reconciles")
	}
	k := newKit(t)
	name := k.name("echo")
	k.apply(fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterSourceTemplate
metadata: {name: %[1]s-src}
spec:
  urlPath: data.url
  revisionPath: data.rev
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-src}
    data:
      url: $(workload.spec.source.git.url)$
      rev: $(workload.spec.source.git.ref.branch)$
---
apiVersion: carto.run/v1alpha1
kind: ClusterImageTemplate
metadata: {name: %[1]s-img}
spec:
  imagePath: data.image
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-img}
    data: {image: "registry.example.com/app:$(source.revision)$"}
---
apiVersion: carto.run/v1alpha1
kind: ClusterConfigTemplate
metadata: {name: %[1]s-cfg}
spec:
  configPath: data.config
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-cfg}
    data: {config: "image=$(image)$"}
---
apiVersion: carto.run/v1alpha1
kind: ClusterConfigTemplate
metadata: {name: %[1]s-gate}
spec:
  configPath: data.config
  observedCompletion:
    succeeded: {key: data.state, value: ok}
    failed: {key: data.state, value: bad}
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-gate}
    data: {config: $(config)$, state: ok}
---
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: %[1]s}
spec:
  selector: {app.example.com/chain: %[1]s}
  resources:
  - name: src
    templateRef: {kind: ClusterSourceTemplate, name: %[1]s-src}
  - name: img
    templateRef: {kind: ClusterImageTemplate, name: %[1]s-img}
    sources: [{name: source, resource: src}]
  - name: cfg
    templateRef: {kind: ClusterConfigTemplate, name: %[1]s-cfg}
    images: [{name: image, resource: img}]
---
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: %[1]s-gated}
spec:
  selector: {app.example.com/chain: %[1]s-gated}
  resources:
  - name: src
    templateRef: {kind: ClusterSourceTemplate, name: %[1]s-src}
  - name: img
    templateRef: {kind: ClusterImageTemplate, name: %[1]s-img}
    sources: [{name: source, resource: src}]
  - name: cfg
    templateRef: {kind: ClusterConfigTemplate, name: %[1]s-cfg}
    images: [{name: image, resource: img}]
  - name: gate
    templateRef: {kind: ClusterConfigTemplate, name: %[1]s-gate}
    configs: [{name: config, resource: cfg}]
`, name))
	k.waitChain(name, "Ready", "True", "Ready")
	k.waitChain(name+"-gated", "Ready", "True", "Ready")

	// Another Workload on the chain first, so that the watch of stamped
	// ConfigMaps is running and synced: an owner whose reconcile starts
	// that watch looks again once it has synced, for objects applied but
	// never recorded (owner/cleanup.go), a reconcile that is not an echo's.
	workload := func(app string) string {
		return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: Workload
metadata:
  name: %[2]s
  labels: {app.example.com/chain: %[1]s}
spec:
  source:
    git: {url: "https://git.example.com/%[2]s.git", ref: {branch: main}}
`, name, app)
	}
	k.apply(workload("warm"))
	k.waitOwner("warm", "Ready", "True", "")

	k.apply(workload("app"))
	wl := reconciler.Key{Kind: api.KindWorkload, NamespacedName: types.NamespacedName{Namespace: k.ns, Name: "app"}}
	k.waitOwner("app", "Ready", "True", "")
	k.waitObj(configMapGVR, "app-cfg", k.dataIs("config", "image=registry.example.com/app:main"))
	require.Equal(t, 1, settled(t, wl, 2*time.Second), "reconciles of a new Workload: its create, and no echo of the three objects it stamped")

	k.update(workloadGVR, k.ns, "app", func(u *unstructured.Unstructured) {
		require.NoError(t, unstructured.SetNestedField(u.Object, "feature", "spec", "source", "git", "ref", "branch"))
	})
	k.waitObj(configMapGVR, "app-cfg", k.dataIs("config", "image=registry.example.com/app:feature"))
	k.waitOwner("app", "Ready", "True", "")
	require.Equal(t, 2, settled(t, wl, 2*time.Second), "reconciles after a change of branch: one more")

	// A hand edit is news: the owner is woken and undoes it.
	k.update(configMapGVR, k.ns, "app-img", func(u *unstructured.Unstructured) {
		require.NoError(t, unstructured.SetNestedField(u.Object, "registry.example.com/app:edited", "data", "image"))
	})
	k.waitObj(configMapGVR, "app-img", k.dataIs("image", "registry.example.com/app:feature"))
	require.Equal(t, 3, settled(t, wl, 2*time.Second), "reconciles after a hand edit of a stamped object: one more, that undid it")

	// The gated chain: Ready on the gate's own write's event.
	k.workload("gated", name+"-gated", "")
	gated := reconciler.Key{Kind: api.KindWorkload, NamespacedName: types.NamespacedName{Namespace: k.ns, Name: "gated"}}
	k.waitStep("gated", "gate", "Ready", "True", "Ready")
	k.waitOwner("gated", "Ready", "True", "")
	require.GreaterOrEqual(t, settled(t, gated, 2*time.Second), 2, "reconciles of a Workload whose last step is gated: its create, and its gate's look again")
}
