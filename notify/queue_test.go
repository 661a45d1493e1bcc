package notify

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"kontinue.dev/kontinue/notify/api"
)

// notifier is a Notifier without an API server: its providers in an
// indexer the test fills.
func notifier(t *testing.T, opts Options, providers ...*unstructured.Unstructured) *Notifier {
	t.Helper()
	if opts.QueueSize == 0 {
		opts.QueueSize = 1000
	}
	if opts.Group == 0 {
		opts.Group = 50 * time.Millisecond
	}
	n := &Notifier{opts: opts, queues: map[string]chan item{}, counts: map[string]*alertCount{}, client: http.DefaultClient,
		provWritten: map[string]metav1.Condition{}}
	n.writeProviderStatus = func(context.Context, *unstructured.Unstructured) error { return nil }
	n.provs = cache.NewSharedIndexInformer(&cache.ListWatch{}, &unstructured.Unstructured{}, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, p := range providers {
		require.NoError(t, n.provs.GetIndexer().Add(p))
	}
	return n
}

func provider(ns, name, typ, address string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": api.Group + "/" + api.Version, "kind": api.KindProvider,
		"spec": map[string]any{"type": typ, "address": address}}}
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// A full queue drops and counts; enqueueing never waits, whatever the
// receiver does.
func TestQueueFullDropsAndNeverBlocks(t *testing.T) {
	var dropped []string
	n := notifier(t, Options{QueueSize: 2, OnDropped: func(ns, p, reason string, k int) {
		dropped = append(dropped, ns+"/"+p+" "+reason)
	}})
	n.queues["team/slack"] = make(chan item, 2) // no sender: a receiver that never answers
	n.ctx = context.Background()
	done := make(chan struct{})
	go func() {
		for range 5 {
			n.enqueue("team/slack", item{alert: "team/a", ev: failed})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("enqueue blocked")
	}
	assert.Equal(t, []string{"team/slack queue-full", "team/slack queue-full", "team/slack queue-full"}, dropped)
	assert.Equal(t, int64(3), n.counts["team/a"].dropped)
	assert.Equal(t, "QueueFull", n.counts["team/a"].reason)
}

// A wave of events for one alert is one chat message.
func TestWaveIsOneMessage(t *testing.T) {
	var mu sync.Mutex
	var texts []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]string
		_ = json.Unmarshal(b, &m)
		mu.Lock()
		texts = append(texts, m["text"])
		mu.Unlock()
	}))
	defer srv.Close()
	var sent int
	// The events are all queued before the sender starts: the batch is
	// full (5000) at once, whatever the group window. A window as short
	// as the other tests' (50 ms) was shorter than draining 5000 events
	// takes on a loaded machine (seen: 1451 + 3549 in two messages).
	n := notifier(t, Options{Group: time.Minute, OnSent: func(_, _ string, k int) { sent += k }}, provider("team", "slack", api.TypeSlack, srv.URL))
	q := make(chan item, 5000)
	for range 5000 {
		q <- item{alert: "team/a", summary: "wave", ev: failed}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n.deliver(ctx, "team/slack", q)
	require.Eventually(t, func() bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		c := n.counts["team/a"]
		return c != nil && c.sent == 5000
	}, 30*time.Second, 10*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, texts, 1, "5000 events, one message")
	assert.Contains(t, texts[0], "and 4980 more events")
	assert.Equal(t, 1, sent)
}

// A provider that does not exist, or is suspended, drops with why.
func TestProviderMissing(t *testing.T) {
	s := provider("team", "off", api.TypeSlack, "https://hooks.example/x")
	s.Object["spec"].(map[string]any)["suspend"] = true
	n := notifier(t, Options{}, s)
	n.sendBatch(context.Background(), "team/none", []item{{alert: "team/a", ev: failed}})
	assert.Equal(t, "ProviderNotFound", n.counts["team/a"].reason)
	n.sendBatch(context.Background(), "team/off", []item{{alert: "team/b", ev: failed}})
	assert.Equal(t, "ProviderSuspended", n.counts["team/b"].reason)
}

// statusWrites records the provider status writes of n; with cacheLags
// false, the informer's cache sees each at once.
func statusWrites(t *testing.T, n *Notifier, cacheLags bool) func() []metav1.Condition {
	var mu sync.Mutex
	var conds []metav1.Condition
	n.writeProviderStatus = func(_ context.Context, u *unstructured.Unstructured) error {
		mu.Lock()
		defer mu.Unlock()
		var s api.ProviderStatus
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object["status"].(map[string]any), &s))
		conds = append(conds, s.Conditions...)
		if !cacheLags {
			require.NoError(t, n.provs.GetIndexer().Update(u))
		}
		return nil
	}
	return func() []metav1.Condition {
		mu.Lock()
		defer mu.Unlock()
		return append([]metav1.Condition(nil), conds...)
	}
}

// A provider's Ready is written when it changes, and only then: a second
// delivery, or a check that finds the same, writes nothing, also when the
// cache has not seen the write yet.
func TestProviderReadyWrittenOnChange(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	for _, lag := range []bool{false, true} {
		p := provider("team", "hook", api.TypeGeneric, srv.URL)
		p.SetGeneration(3)
		n := notifier(t, Options{}, p, provider("team", "empty", api.TypeGeneric, ""))
		n.guard.AllowPrivate = true // the test's receiver is on loopback
		writes := statusWrites(t, n, lag)
		ctx := context.Background()
		n.sendBatch(ctx, "team/hook", []item{{alert: "team/a", ev: failed}})
		n.sendBatch(ctx, "team/hook", []item{{alert: "team/a", ev: failed}})
		n.checkProvider(ctx, "team/hook")
		got := writes()
		require.Len(t, got, 1, "cache lags: %v", lag)
		assert.Equal(t, metav1.ConditionTrue, got[0].Status)
		assert.Equal(t, int64(3), got[0].ObservedGeneration)

		n.checkProvider(ctx, "team/empty")
		n.sendBatch(ctx, "team/empty", []item{{alert: "team/b", ev: failed}})
		got = writes()
		require.Len(t, got, 2, "cache lags: %v", lag)
		assert.Equal(t, "ProviderInvalid", got[1].Reason)
		assert.Contains(t, got[1].Message, "has no address")
	}
}
