package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// watcher sees, through its own informers, when workloads become Ready and
// when the last step's ConfigMap of a workload carries a changed value.
type watcher struct {
	want int // workloads expected

	mu       sync.Mutex
	readyAt  map[string]time.Time // first time each workload was Ready
	allReady chan struct{}
	pending  map[string]*change // by workload name
	// wave: the value of data.wave the last step's ConfigMaps are waited
	// for (-fairness: a template edit re-renders them all).
	wave     string
	waveSeen map[string]bool
	waveDone chan struct{}

	workloads cache.SharedIndexInformer
	stop      context.CancelFunc
	// imageOf is the image the last step holds once a branch has flowed
	// through (expectedImage; -verify: pinned to the image's digest).
	imageOf func(workload, branch string) string
}

// change is one workload spec change waiting to reach the last step.
type change struct {
	workload string
	branch   string // the first step's ConfigMap holds it as data.revision
	image    string // the value the last step's ConfigMap will hold
	sent     time.Time
	first    time.Time // first step updated (zero until seen)
	seen     time.Time // last step updated
	done     chan struct{}
}

func newWatcher(ctx context.Context, dyn dynamic.Interface, ns string, want int) (*watcher, error) {
	w := &watcher{want: want, readyAt: map[string]time.Time{}, allReady: make(chan struct{}), pending: map[string]*change{}, imageOf: expectedImage}
	ctx, w.stop = context.WithCancel(ctx)

	wf := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, ns, nil)
	w.workloads = wf.ForResource(workloadGVR).Informer()
	_ = w.workloads.SetTransform(dropManagedFields)
	if _, err := w.workloads.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.workloadSeen(o) },
		UpdateFunc: func(_, o any) { w.workloadSeen(o) },
	}); err != nil {
		return nil, err
	}

	cf := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, ns, func(o *metav1.ListOptions) {
		o.LabelSelector = labelResourceName + " in (" + firstStep + "," + lastStep + ")"
	})
	cms := cf.ForResource(configMapGVR).Informer()
	_ = cms.SetTransform(dropManagedFields)
	if _, err := cms.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.configMapSeen(o) },
		UpdateFunc: func(_, o any) { w.configMapSeen(o) },
	}); err != nil {
		return nil, err
	}
	wf.Start(ctx.Done())
	cf.Start(ctx.Done())
	for _, inf := range []cache.SharedIndexInformer{w.workloads, cms} {
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return nil, fmt.Errorf("bench informers did not sync")
		}
	}
	return w, nil
}

func dropManagedFields(o any) (any, error) {
	if u, ok := o.(*unstructured.Unstructured); ok {
		if md, ok := u.Object["metadata"].(map[string]any); ok {
			delete(md, "managedFields")
		}
	}
	return o, nil
}

// isReady: Ready=True for the current generation.
func isReady(u *unstructured.Unstructured) bool {
	og, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	if og != u.GetGeneration() {
		return false
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" {
			return m["status"] == "True"
		}
	}
	return false
}

func (w *watcher) workloadSeen(o any) {
	u, ok := o.(*unstructured.Unstructured)
	if !ok || !isReady(u) {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, seen := w.readyAt[u.GetName()]; seen {
		return
	}
	w.readyAt[u.GetName()] = now
	if len(w.readyAt) == w.want {
		close(w.allReady)
	}
}

// expectReady waits for n workloads Ready in all (noisy's create wave):
// the channel closes when they are, and later waves wait for n last
// steps.
func (w *watcher) expectReady(n int) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	// No wave is waited for meanwhile: the new workloads' last steps
	// carry the last wave's value, and its channel is closed.
	w.wave, w.want, w.allReady = "", n, make(chan struct{})
	if len(w.readyAt) >= n {
		close(w.allReady)
	}
	return w.allReady
}

func (w *watcher) configMapSeen(o any) {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return
	}
	name := u.GetLabels()[labelWorkloadName]
	step := u.GetLabels()[labelResourceName]
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.pending[name]
	switch step {
	case firstStep:
		if c == nil {
			return
		}
		if rev, _, _ := unstructured.NestedString(u.Object, "data", "revision"); rev == c.branch && c.first.IsZero() {
			c.first = now
		}
	case lastStep:
		if w.wave != "" && !w.waveSeen[name] {
			if v, _, _ := unstructured.NestedString(u.Object, "data", "wave"); v == w.wave {
				w.waveSeen[name] = true
				if len(w.waveSeen) == w.want {
					close(w.waveDone)
				}
			}
		}
		if c == nil {
			return
		}
		if image, _, _ := unstructured.NestedString(u.Object, "data", "image"); image == c.image {
			c.seen = now
			delete(w.pending, name)
			close(c.done)
		}
	}
}

// startWave waits for every workload's last step to hold data.wave =
// value; the channel closes when they all do.
func (w *watcher) startWave(value string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.wave, w.waveSeen, w.waveDone = value, map[string]bool{}, make(chan struct{})
	return w.waveDone
}

// waveCount is how many last steps hold the wave's value so far.
func (w *watcher) waveCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.waveSeen)
}

// readyCount is the number of workloads seen Ready so far.
func (w *watcher) readyCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.readyAt)
}

// expect registers a change before it is sent; false if one is already
// pending for that workload.
func (w *watcher) expect(workload, branch string) (*change, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pending[workload] != nil {
		return nil, false
	}
	c := &change{workload: workload, branch: branch, image: w.imageOf(workload, branch), done: make(chan struct{})}
	w.pending[workload] = c
	return c, true
}

// forget drops a change that was never sent or timed out.
func (w *watcher) forget(c *change) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pending[c.workload] == c {
		delete(w.pending, c.workload)
	}
}

// workload returns the cached workload, or nil.
func (w *watcher) workload(ns, name string) *unstructured.Unstructured {
	o, ok, _ := w.workloads.GetStore().GetByKey(ns + "/" + name)
	if !ok {
		return nil
	}
	u, _ := o.(*unstructured.Unstructured)
	return u
}
