package main

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"kontinue.dev/kontinue/hack/localcluster"
)

func resource(dyn dynamic.Interface, u *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvr, ok := gvrByKind[u.GetKind()]
	if !ok {
		return nil, fmt.Errorf("bench does not know kind %s", u.GetKind())
	}
	if ns := u.GetNamespace(); ns != "" {
		return dyn.Resource(gvr).Namespace(ns), nil
	}
	return dyn.Resource(gvr), nil
}

// applyAll server-side applies objects in order.
func applyAll(ctx context.Context, dyn dynamic.Interface, objs []*unstructured.Unstructured) error {
	for _, u := range objs {
		r, err := resource(dyn, u)
		if err != nil {
			return err
		}
		if _, err := r.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "bench", Force: true}); err != nil {
			return fmt.Errorf("apply %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

func create(ctx context.Context, dyn dynamic.Interface, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	r, err := resource(dyn, u)
	if err != nil {
		return nil, err
	}
	return r.Create(ctx, u, metav1.CreateOptions{})
}

// waitChainReady waits until Kontinue has found the chain's templates, so
// that the convergence clock measures workloads, not the chain.
func waitChainReady(ctx context.Context, dyn dynamic.Interface, name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		u, err := dyn.Resource(chainGVR).Get(ctx, name, metav1.GetOptions{})
		if err == nil && isReadyAnyGeneration(u) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ClusterSupplyChain %s not Ready after %s (last error: %v)", name, timeout, err)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

func isReadyAnyGeneration(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" {
			return m["status"] == "True"
		}
	}
	return false
}

// apiserverScraper reads the API server's /metrics as the admin.
type apiserverScraper struct {
	client *http.Client
	url    string
}

func newAPIServerScraper(c *localcluster.Cluster) (*apiserverScraper, error) {
	client, err := c.HTTPClient()
	if err != nil {
		return nil, err
	}
	return &apiserverScraper{client: client, url: c.Host + "/metrics"}, nil
}

func (a *apiserverScraper) scrape(ctx context.Context) (metrics, error) {
	return scrapeURL(ctx, a.client, a.url)
}

// runChanges makes o.changes branch changes on random workloads at
// o.changeRate per second, never two at once on one workload, and returns
// each change's latency in seconds (sent → last step's ConfigMap updated,
// as seen by the bench's informer), the part of it until the first step's
// ConfigMap was updated, and how many were never seen.
func runChanges(ctx context.Context, dyn dynamic.Interface, w *watcher, o options) (lat, first []float64, lost int, err error) {
	rng := rand.New(rand.NewPCG(o.seed, 0x6b6f6e74))
	interval := time.Duration(float64(time.Second) / o.changeRate)
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	next := time.Now()
	for k := 0; k < o.changes; k++ {
		var c *change
		var branch string
		for c == nil {
			name := workloadName(rng.IntN(o.n))
			branch = fmt.Sprintf("%s%d", cmp.Or(o.branchPrefix, "change-"), k)
			var ok bool
			if c, ok = w.expect(name, branch); !ok {
				c = nil
				if err := sleep(ctx, time.Millisecond); err != nil { // every workload busy (tiny -n)
					return nil, nil, 0, err
				}
			}
		}
		c.sent = time.Now()
		wg.Add(1)
		go func(c *change, branch string) {
			defer wg.Done()
			_, err := dyn.Resource(workloadGVR).Namespace(benchNS).Patch(ctx, c.workload, types.MergePatchType,
				branchPatch(branch), metav1.PatchOptions{FieldManager: "bench"})
			if err != nil {
				w.forget(c)
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("changing %s: %w", c.workload, err)
				}
				mu.Unlock()
				return
			}
			select {
			case <-c.done:
				mu.Lock()
				lat = append(lat, c.seen.Sub(c.sent).Seconds())
				if !c.first.IsZero() {
					first = append(first, c.first.Sub(c.sent).Seconds())
				}
				mu.Unlock()
			case <-time.After(o.changeTimeout):
				w.forget(c)
				mu.Lock()
				lost++
				mu.Unlock()
			case <-ctx.Done():
			}
		}(c, branch)
		next = next.Add(interval)
		if err := sleep(ctx, time.Until(next)); err != nil {
			return nil, nil, 0, err
		}
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil, nil, 0, ctx.Err()
	}
	return lat, first, lost, firstErr
}
