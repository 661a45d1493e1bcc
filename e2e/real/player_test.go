package e2ereal

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
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

// commitOf is the commit a played Git repository's branch points at
// until the test pushes: a stable function of the URL and the branch.
func commitOf(url, branch string) string {
	sum := sha1.Sum([]byte(url + " " + branch))
	return hex.EncodeToString(sum[:])
}

func branchOf(ref map[string]any) string {
	if b, _ := ref["branch"].(string); b != "" {
		return b
	}
	return "master" // Flux's default
}

func sha256Of(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// artifact is what the played source-controller stores for a
// GitRepository at the head of its branch: Flux's revision format
// (<branch>@sha1:<commit>) and the artifact URL source-controller serves.
func (p *statusPlayer) artifact(name, url string, ref map[string]any) (revision, artifactURL string) {
	branch := branchOf(ref)
	p.mu.Lock()
	commit, pushed := p.heads[url+" "+branch]
	p.mu.Unlock()
	if !pushed {
		commit = commitOf(url, branch)
	}
	return branch + "@sha1:" + commit,
		fmt.Sprintf("http://source-controller.flux-system.svc.cluster.local./gitrepository/%s/%s/%s.tar.gz", p.ns, name, commit)
}

// push moves a played repository's branch to commit: every GitRepository
// of it gets the new artifact, as source-controller's next fetch would
// give it (a new status with the same generation).
func (p *statusPlayer) push(url, branch, commit string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.heads[url+" "+branch] = commit
	p.pushes++
}

// playedImage is the image the played kpack builds for an Image: its tag
// at a digest of what it was built from.
func playedImage(tag string, source any) string {
	return tag + "@sha256:" + sha256Of(fmt.Sprint(source))
}

// statusPlayer plays source-controller, kpack and kapp-controller for the
// objects of one namespace. Each new generation (and, for a
// GitRepository, each push) goes through two status writes, as the real
// controllers make them: first in progress (Flux's and kpack's
// Ready=Unknown, kapp's Reconciling) with observedGeneration already
// current, then done a poll later. Nothing is written for what is done.
type statusPlayer struct {
	ns     string
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	state  map[string]string // object UID: "progress " or "done " + what was played (generation, pushes)
	build  map[string]int64  // kpack Image UID: build counter
	heads  map[string]string // "url branch": commit pushed
	pushes int
}

func playStatuses(t *testing.T, ns string) *statusPlayer {
	ctx, cancel := context.WithCancel(context.Background())
	p := &statusPlayer{ns: ns, cancel: cancel, done: make(chan struct{}),
		state: map[string]string{}, build: map[string]int64{}, heads: map[string]string{}}
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
		p.mu.Lock()
		key := fmt.Sprint(gen)
		if gvr == gitRepositoryGVR {
			key += fmt.Sprintf("/%d", p.pushes)
		}
		state := p.state[string(u.GetUID())]
		p.mu.Unlock()
		if state == "done "+key {
			continue
		}
		inProgress := state == "progress "+key
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
			p.state[string(u.GetUID())] = "done " + key
		} else {
			p.state[string(u.GetUID())] = "progress " + key
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
		revision, artifactURL := p.artifact(u.GetName(), url, ref)
		commit := revision[strings.LastIndex(revision, ":")+1:]
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
