package e2ereal

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The kinds Cartographer's examples stamp whose controllers cannot run
// here: Flux's source-controller fetches from the network, kpack builds
// images with a registry, kapp-controller deploys to a cluster with
// Knative. Their CRDs (exampleCRDs) are minimal: any spec, any status, a
// status subresource, as the real ones have. Their status is played by
// statusPlayer with the shapes those controllers write.
var (
	gitRepositoryGVR = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1beta1", Resource: "gitrepositories"}
	kpackImageGVR    = schema.GroupVersionResource{Group: "kpack.io", Version: "v1alpha2", Resource: "images"}
	kappAppGVR       = schema.GroupVersionResource{Group: "kappctrl.k14s.io", Version: "v1alpha1", Resource: "apps"}
)

// exampleCRDs are the minimal CRDs of the kinds above and of kpack's
// cluster-scoped builder kinds, which the examples' shared/cluster files
// create (nothing reads them here).
const exampleCRDs = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gitrepositories.source.toolkit.fluxcd.io}
spec:
  group: source.toolkit.fluxcd.io
  names: {kind: GitRepository, listKind: GitRepositoryList, plural: gitrepositories, singular: gitrepository, shortNames: [gitrepo]}
  scope: Namespaced
  versions:
  - name: v1beta1
    served: true
    storage: true
    subresources: {status: {}}
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: images.kpack.io}
spec:
  group: kpack.io
  names: {kind: Image, listKind: ImageList, plural: images, singular: image, shortNames: [cnbimage, cnbimages]}
  scope: Namespaced
  versions:
  - name: v1alpha2
    served: true
    storage: true
    subresources: {status: {}}
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: clusterstores.kpack.io}
spec:
  group: kpack.io
  names: {kind: ClusterStore, listKind: ClusterStoreList, plural: clusterstores, singular: clusterstore}
  scope: Cluster
  versions:
  - name: v1alpha2
    served: true
    storage: true
    subresources: {status: {}}
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: clusterstacks.kpack.io}
spec:
  group: kpack.io
  names: {kind: ClusterStack, listKind: ClusterStackList, plural: clusterstacks, singular: clusterstack}
  scope: Cluster
  versions:
  - name: v1alpha2
    served: true
    storage: true
    subresources: {status: {}}
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: clusterbuilders.kpack.io}
spec:
  group: kpack.io
  names: {kind: ClusterBuilder, listKind: ClusterBuilderList, plural: clusterbuilders, singular: clusterbuilder}
  scope: Cluster
  versions:
  - name: v1alpha2
    served: true
    storage: true
    subresources: {status: {}}
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: apps.kappctrl.k14s.io}
spec:
  group: kappctrl.k14s.io
  names: {kind: App, listKind: AppList, plural: apps, singular: app}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources: {status: {}}
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

// commitOf is the commit a played Git repository's ref points at: a
// stable function of the URL and the ref, as a real repository's branch
// is a stable commit while nobody pushes.
func commitOf(url string, ref any) string {
	sum := sha1.Sum([]byte(fmt.Sprintf("%s %v", url, ref)))
	return hex.EncodeToString(sum[:])
}

func sha256Of(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// playedArtifact is what the played source-controller stores for a
// GitRepository: Flux's revision format (<branch>@sha1:<commit>) and the
// artifact URL source-controller serves.
func playedArtifact(ns, name, url string, ref map[string]any) (revision, artifactURL string) {
	branch, _ := ref["branch"].(string)
	if branch == "" {
		branch = "master"
	}
	commit := commitOf(url, ref)
	return branch + "@sha1:" + commit,
		fmt.Sprintf("http://source-controller.flux-system.svc.cluster.local./gitrepository/%s/%s/%s.tar.gz", ns, name, commit)
}

// playedImage is the image the played kpack builds for an Image: its tag
// at a digest of what it was built from.
func playedImage(tag string, source any) string {
	return tag + "@sha256:" + sha256Of(fmt.Sprint(source))
}

// statusPlayer plays source-controller, kpack and kapp-controller for the
// objects of one namespace. Each new generation goes through two status
// writes, as the real controllers make them: first in progress (Flux's and
// kpack's Ready=Unknown, kapp's Reconciling) with observedGeneration
// already current, then done a poll later. Nothing is written for a
// generation that is done.
type statusPlayer struct {
	ns     string
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	seen  map[string]int64 // object UID: generation whose in-progress status was written
	build map[string]int64 // kpack Image UID: build counter
}

func playStatuses(t *testing.T, ns string) *statusPlayer {
	ctx, cancel := context.WithCancel(context.Background())
	p := &statusPlayer{ns: ns, cancel: cancel, done: make(chan struct{}), seen: map[string]int64{}, build: map[string]int64{}}
	go func() {
		defer close(p.done)
		tick := time.NewTicker(300 * time.Millisecond)
		defer tick.Stop()
		for {
			for _, gvr := range []schema.GroupVersionResource{gitRepositoryGVR, kpackImageGVR, kappAppGVR} {
				if err := p.round(ctx, gvr); err != nil && ctx.Err() == nil {
					t.Logf("status player: %s: %v", gvr.Resource, err)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-p.done })
	return p
}

func (p *statusPlayer) round(ctx context.Context, gvr schema.GroupVersionResource) error {
	r := env.dyn.Resource(gvr).Namespace(p.ns)
	l, err := r.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range l.Items {
		u := &l.Items[i]
		if u.GetDeletionTimestamp() != nil {
			continue
		}
		gen := u.GetGeneration()
		status, _ := u.Object["status"].(map[string]any)
		observed, _ := status["observedGeneration"].(int64)
		p.mu.Lock()
		inProgress := p.seen[string(u.GetUID())] == gen
		p.mu.Unlock()
		if observed == gen && !inProgress {
			continue // done for this generation
		}
		var next map[string]any
		if !inProgress {
			next = p.progressing(gvr, u, status)
		} else {
			next = p.finished(gvr, u, status)
		}
		next["observedGeneration"] = gen
		u.Object["status"] = next
		if _, err := r.UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: "e2e-real-player"}); err != nil {
			return err
		}
		p.mu.Lock()
		if inProgress {
			delete(p.seen, string(u.GetUID()))
		} else {
			p.seen[string(u.GetUID())] = gen
		}
		p.mu.Unlock()
	}
	return nil
}

func playedCondition(typ, status, reason, message string, gen int64) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": message,
		"observedGeneration": gen, "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
}

// progressing is the first status of a new generation: what was there
// (a previous artifact or image stays), with conditions saying work is
// under way.
func (p *statusPlayer) progressing(gvr schema.GroupVersionResource, u *unstructured.Unstructured, old map[string]any) map[string]any {
	next := map[string]any{}
	for k, v := range old {
		next[k] = v
	}
	gen := u.GetGeneration()
	switch gvr {
	case gitRepositoryGVR:
		next["conditions"] = []any{
			playedCondition("Reconciling", "True", "Progressing", "building artifact", gen),
			playedCondition("Ready", "Unknown", "Progressing", "reconciliation in progress", gen),
		}
	case kpackImageGVR:
		next["conditions"] = []any{
			playedCondition("Ready", "Unknown", "", "", gen),
			playedCondition("BuilderReady", "True", "", "", gen),
		}
	case kappAppGVR:
		next["conditions"] = []any{map[string]any{"type": "Reconciling", "status": "True"}}
		next["friendlyDescription"] = "Reconciling"
	}
	return next
}

// finished is the status once the played controller's work is done.
func (p *statusPlayer) finished(gvr schema.GroupVersionResource, u *unstructured.Unstructured, old map[string]any) map[string]any {
	gen := u.GetGeneration()
	now := time.Now().UTC().Format(time.RFC3339)
	switch gvr {
	case gitRepositoryGVR:
		url, _, _ := unstructured.NestedString(u.Object, "spec", "url")
		ref, _, _ := unstructured.NestedMap(u.Object, "spec", "ref")
		revision, artifactURL := playedArtifact(u.GetNamespace(), u.GetName(), url, ref)
		commit := commitOf(url, ref)
		msg := fmt.Sprintf("stored artifact for revision '%s'", revision)
		return map[string]any{
			"artifact": map[string]any{
				"path":           fmt.Sprintf("gitrepository/%s/%s/%s.tar.gz", u.GetNamespace(), u.GetName(), commit),
				"url":            artifactURL,
				"revision":       revision,
				"digest":         "sha256:" + sha256Of(artifactURL),
				"lastUpdateTime": now,
				"size":           int64(1024),
			},
			"url": fmt.Sprintf("http://source-controller.flux-system.svc.cluster.local./gitrepository/%s/%s/latest.tar.gz", u.GetNamespace(), u.GetName()),
			"conditions": []any{
				playedCondition("Ready", "True", "Succeeded", msg, gen),
				playedCondition("ArtifactInStorage", "True", "Succeeded", msg, gen),
			},
		}
	case kpackImageGVR:
		tag, _, _ := unstructured.NestedString(u.Object, "spec", "tag")
		source, _, _ := unstructured.NestedMap(u.Object, "spec", "source")
		p.mu.Lock()
		p.build[string(u.GetUID())]++
		n := p.build[string(u.GetUID())]
		p.mu.Unlock()
		return map[string]any{
			"latestImage":                playedImage(tag, source),
			"latestBuildRef":             fmt.Sprintf("%s-build-%d", u.GetName(), n),
			"latestBuildReason":          "CONFIG",
			"latestBuildImageGeneration": gen,
			"latestStack":                "io.buildpacks.stacks.bionic",
			"buildCounter":               n,
			"buildCacheName":             u.GetName() + "-cache",
			"conditions": []any{
				playedCondition("Ready", "True", "", "", gen),
				playedCondition("BuilderReady", "True", "", "", gen),
			},
		}
	case kappAppGVR:
		n, _ := old["consecutiveReconcileSuccesses"].(int64)
		return map[string]any{
			"conditions":                    []any{map[string]any{"type": "ReconcileSucceeded", "status": "True"}},
			"friendlyDescription":           "Reconcile succeeded",
			"consecutiveReconcileSuccesses": n + 1,
			"fetch":                         map[string]any{"exitCode": int64(0), "startedAt": now, "updatedAt": now},
			"template":                      map[string]any{"exitCode": int64(0), "updatedAt": now},
			"deploy":                        map[string]any{"exitCode": int64(0), "finished": true, "startedAt": now, "updatedAt": now},
			"inspect":                       map[string]any{"exitCode": int64(0), "updatedAt": now},
		}
	}
	return map[string]any{}
}
