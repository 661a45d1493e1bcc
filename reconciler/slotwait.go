package reconciler

import (
	"sync"

	"kontinue.dev/kontinue/reconciler/render"
)

// slotWaiters are the owners whose last reconcile found their namespace's
// share of the render slots taken by renders that had not finished (a
// tenant's own templates or charts that take too long). Their failure is
// retried with backoff, which grows to minutes while the slow renders go
// on; when one of the namespace's renders gives its slot back, they are
// woken with their backoff reset instead (robustness seed 304: an owner
// beside a tenant's endless goTemplates recovered only on its next backoff,
// long after the slots were free). Only the namespace's own renders wake
// them, and each wakes every waiter once: at most one reconcile per waiter
// per render of that namespace that ends, never a timer.
type slotWaiters struct {
	mu   sync.Mutex
	keys map[string]map[Key]struct{}
	wake func(Key)
}

func (w *slotWaiters) add(ns string, k Key) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.keys == nil {
		w.keys = map[string]map[Key]struct{}{}
	}
	if w.keys[ns] == nil {
		w.keys[ns] = map[Key]struct{}{}
	}
	w.keys[ns][k] = struct{}{}
}

// freed wakes the waiters of ns (render.OnNamespaceSlotFreed: it must not
// block, and enqueueing does not).
func (w *slotWaiters) freed(ns string) {
	w.mu.Lock()
	ks := w.keys[ns]
	delete(w.keys, ns)
	w.mu.Unlock()
	for k := range ks {
		w.wake(k)
	}
}

// watch has w told of freed slots until the returned function is called.
func (w *slotWaiters) watch() func() { return render.OnNamespaceSlotFreed(w.freed) }
