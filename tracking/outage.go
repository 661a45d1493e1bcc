package tracking

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"
)

// Outage is an outage of the API server as the controllers see it
// (reconciler/gate.APIGate). A list or watch that finds the server unreachable
// waits for it here and tries again at once when it answers, rather than
// returning the error to client-go's reflector, which would back off on
// its own (0.8 s doubling to 30 s): a watch would then come back up to half
// a minute after the server, and reconciles would read a stale cache
// meanwhile.
type Outage interface {
	// Fail reports whether err, of a call started at started, says that
	// the API server is unreachable, and takes note of the outage.
	Fail(err error, started time.Time) bool
	// WaitServer blocks while the server is away (or until ctx ends).
	WaitServer(ctx context.Context)
}

// WaitOutages makes the tracker's lists and watches wait out outages at o.
// Call before Start.
func (t *Tracker) WaitOutages(o Outage) { t.outage = o }

// Reconnecting is the number of lists and watches waiting for the API
// server, or trying again since it answered.
func (t *Tracker) Reconnecting() int { return int(t.waiting.Load()) }

// AwaitReconnect blocks until no list or watch waits for the API server any
// more (every one that waited has listed or is watching again), or ctx
// ends.
func (t *Tracker) AwaitReconnect(ctx context.Context) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for t.waiting.Load() > 0 {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// throughOutage calls call until it succeeds or fails otherwise than by an
// unreachable API server, waiting for the server in between (t nil, or no
// Outage: once).
func throughOutage[T any](t *Tracker, ctx context.Context, what string, call func(context.Context) (T, error)) (T, error) {
	var o Outage
	if t != nil {
		o = t.outage
	}
	waited := false
	var first, back time.Time
	defer func() {
		if waited {
			t.waiting.Add(-1)
			klog.V(2).InfoS("back after an outage of the API server", "call", what, "waited", time.Since(first).Round(time.Millisecond).String(),
				"sinceAnswered", time.Since(back).Round(time.Millisecond).String())
		}
	}()
	for {
		started := time.Now()
		v, err := call(ctx)
		if err == nil || o == nil || ctx.Err() != nil || answer(err) || !o.Fail(err, started) {
			return v, err
		}
		if !waited {
			waited = true
			first = time.Now()
			t.waiting.Add(1)
		}
		o.WaitServer(ctx)
		back = time.Now()
	}
}

// answer reports whether err is an answer of the API server (a status, even
// 503 from an aggregated API that is down): the server is there, and the
// call goes back to the reflector, which backs off. Waiting at the gate for
// such an error would close it for every controller, and the server
// answering the gate's probe would not open it for this call.
func answer(err error) bool {
	var s apierrors.APIStatus
	return errors.As(err, &s)
}

// gated wraps client so that the lists and watches a dynamic informer
// makes through it wait out outages at t's Outage (t nil: client as is).
func gated(client dynamic.Interface, t *Tracker, what string) dynamic.Interface {
	if t == nil {
		return client
	}
	return gatedClient{client, t, what}
}

type gatedClient struct {
	dynamic.Interface
	t    *Tracker
	what string
}

func (c gatedClient) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return gatedResource{c.Interface.Resource(gvr), c.t, c.what}
}

type gatedResource struct {
	dynamic.NamespaceableResourceInterface
	t    *Tracker
	what string
}

func (r gatedResource) Namespace(ns string) dynamic.ResourceInterface {
	return gatedList{r.NamespaceableResourceInterface.Namespace(ns), r.t, r.what}
}

func (r gatedResource) List(ctx context.Context, o metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	return gatedList{r.NamespaceableResourceInterface, r.t, r.what}.List(ctx, o)
}

func (r gatedResource) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return gatedList{r.NamespaceableResourceInterface, r.t, r.what}.Watch(ctx, o)
}

// gatedList is a resource whose List and Watch go through throughOutage.
type gatedList struct {
	dynamic.ResourceInterface
	t    *Tracker
	what string
}

func (r gatedList) List(ctx context.Context, o metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	return throughOutage(r.t, ctx, "list "+r.what, func(ctx context.Context) (*unstructured.UnstructuredList, error) {
		return r.ResourceInterface.List(ctx, o)
	})
}

func (r gatedList) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return throughOutage(r.t, ctx, "watch "+r.what, func(ctx context.Context) (watch.Interface, error) {
		return r.ResourceInterface.Watch(ctx, o)
	})
}
