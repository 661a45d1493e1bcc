package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"kontinue.dev/kontinue/reconciler"
	"kontinue.dev/kontinue/reconciler/api"
)

// keySpy records when each key was last reconciled, for every controller
// of a Manager.
type keySpy struct {
	mu   sync.Mutex
	last map[reconciler.Key]time.Time
}

// since is when key was last reconciled, if after t.
func (s *keySpy) since(key reconciler.Key, t time.Time) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.last[key]
	return at, ok && at.After(t)
}

type spied struct {
	r   reconciler.Reconciler
	spy *keySpy
}

func (r *spied) Reconcile(ctx context.Context, key reconciler.Key) (reconciler.Result, error) {
	r.spy.mu.Lock()
	r.spy.last[key] = time.Now()
	r.spy.mu.Unlock()
	return r.r.Reconcile(ctx, key)
}

// A ClusterSupplyChain and a ClusterDelivery share a name: a change to one
// wakes the owners of its own kind, never the other's. The queues are
// watched on a second Kontinue in this process, which sees the same events
// as the suite's and computes the same statuses.
func TestSameNamedChainsWakeOnlyTheirOwners(t *testing.T) {
	k := newKit(t)
	name := k.name("same")
	wtmpl, dtmpl := k.name("same-w"), k.name("same-d")
	k.apply(k.cmTemplate(wtmpl, "w", `{kind: workload}`))
	k.apply(k.templateYAML("ClusterTemplate", dtmpl, `
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(deliverable.metadata.name)$-d}
    data: {kind: deliverable}`))
	k.apply(k.chainYAML(name, "", k.step("cm", "ClusterTemplate", wtmpl, "")))
	k.apply(fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterDelivery
metadata: {name: %[1]s}
spec:
  selector: {app.example.com/delivery: %[1]s}
  resources:
  - name: cm
    templateRef: {kind: ClusterTemplate, name: %[2]s}
`, name, dtmpl))
	k.workload("app", name, "")
	k.apply(fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: Deliverable
metadata:
  name: app
  labels: {app.example.com/delivery: %s}
spec:
  source: {git: {url: "https://git.example.com/app.git", ref: {branch: main}}}
`, name))
	k.waitOwner("app", "Ready", "True", "")
	waitOwner(t, deliverableGVR, k.ns, "app", "Ready", "True", "")

	m, err := reconciler.NewManager(env.cfg, reconciler.Options{Workers: 2, Resync: 10 * time.Hour, ShutdownGrace: time.Second})
	require.NoError(t, err)
	spy := &keySpy{last: map[reconciler.Key]time.Time{}}
	for _, c := range m.Controllers() {
		c.R = &spied{r: c.R, spy: spy} // before Run: no worker reads R yet
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = m.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	wl := reconciler.Key{Kind: api.KindWorkload, NamespacedName: types.NamespacedName{Namespace: k.ns, Name: "app"}}
	dl := reconciler.Key{Kind: api.KindDeliverable, NamespacedName: types.NamespacedName{Namespace: k.ns, Name: "app"}}
	// The second Kontinue has reconciled both owners once (its index
	// knows their chains) and is quiet.
	start := time.Now().Add(-time.Hour)
	eventually(t, time.Minute, func() string {
		for _, key := range []reconciler.Key{wl, dl} {
			at, ok := spy.since(key, start)
			if !ok {
				return key.String() + " not reconciled yet"
			}
			if time.Since(at) < 2*time.Second {
				return key.String() + " still busy"
			}
		}
		return ""
	})

	for _, tc := range []struct {
		change       string
		gvr          schema.GroupVersionResource
		woken, quiet reconciler.Key
	}{
		{"ClusterSupplyChain", chainGVR, wl, dl},
		{"ClusterDelivery", deliveryGVR, dl, wl},
	} {
		t0 := time.Now()
		// A spec change no step reads: the owners' statuses stay as they are.
		k.setSpec(tc.gvr, name, []any{map[string]any{"name": "unused", "value": t0.Format(time.RFC3339Nano)}}, "params")
		eventually(t, 30*time.Second, func() string {
			if _, ok := spy.since(tc.woken, t0); !ok {
				return fmt.Sprintf("a change to the %s did not wake %s", tc.change, tc.woken)
			}
			return ""
		})
		time.Sleep(2 * time.Second)
		if at, ok := spy.since(tc.quiet, t0); ok {
			t.Fatalf("a change to the %s named %s woke %s (at %s)", tc.change, name, tc.quiet, at.Sub(t0))
		}
	}
}
