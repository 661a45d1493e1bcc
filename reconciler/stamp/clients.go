package stamp

import (
	"container/list"
	"context"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"kontinue.dev/kontinue/tracking"
)

// Clients hands out dynamic clients that impersonate service accounts, one
// per account. They share one budget and one bound: every client takes its
// requests from the base config's rate limiter (none when the base has
// none), so that many accounts do not multiply Kontinue's rate to the API
// server; and at most Max clients are kept, the least recently used
// dropped first and made again when asked for, so that a cluster with many
// namespaces (or a tenant naming many accounts) does not grow Kontinue's
// memory for good.
type Clients struct {
	base *rest.Config
	max  int
	mu   sync.Mutex
	ll   *list.List // most recently used first; values are *saClient
	m    map[string]*list.Element
	// Exists, when set, says whether a service account exists (from a
	// cache): For refuses an account that does not, since the API server
	// lets Kontinue act as a deleted account whose RoleBindings remain.
	Exists func(namespace, name string) bool
}

// ServiceAccountNotFound is For's error for an account that does not exist.
type ServiceAccountNotFound struct{ Namespace, Name string }

func (e *ServiceAccountNotFound) Error() string {
	return NotFoundMessage(e.Namespace, e.Name)
}

// NotFoundMessage says that a service account does not exist, in
// Cartographer's words (its ServiceAccountError message).
func NotFoundMessage(namespace, name string) string {
	return fmt.Sprintf("failed to get service account object from api server [%[1]s/%[2]s]: failed to get object [%[1]s/%[2]s] from api server: serviceaccounts %[3]q not found", namespace, name, name)
}

type saClient struct {
	key string
	cl  dynamic.Interface
}

// DefaultMaxClients is how many impersonating clients are kept.
const DefaultMaxClients = 256

// NewClients returns a pool on top of the controller's own config, keeping
// at most max clients (DefaultMaxClients when max <= 0). The base's
// RateLimiter is shared by every client: a base with a positive QPS and no
// RateLimiter gets one here (SharedRateLimiter).
func NewClients(base *rest.Config, max int) *Clients {
	if max <= 0 {
		max = DefaultMaxClients
	}
	base = SharedRateLimiter(base)
	return &Clients{base: base, max: max, ll: list.New(), m: map[string]*list.Element{}}
}

// SharedRateLimiter returns cfg, copied, with one token bucket every client
// made from it shares (client-go would give each client its own): none
// when cfg.QPS is negative (no client-side limit), client-go's default
// rate when it is 0.
func SharedRateLimiter(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	if cfg.RateLimiter != nil || cfg.QPS < 0 {
		return cfg
	}
	qps, burst := cfg.QPS, cfg.Burst
	if qps == 0 {
		qps = rest.DefaultQPS
	}
	if burst <= 0 {
		burst = rest.DefaultBurst
	}
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
	return cfg
}

// ServiceAccountUser is the user name of a service account.
func ServiceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// For returns a client acting as the service account namespace/name (an
// error if Exists says it does not exist). It
// sends no groups: the API server then gives the account its own groups
// (system:serviceaccounts, system:serviceaccounts:<ns>, system:authenticated),
// so RBAC bindings to them keep working, and Kontinue needs `impersonate` on
// serviceaccounts only, not on groups (which would reach system:masters).
func (c *Clients) For(namespace, name string) (dynamic.Interface, error) {
	if c.Exists != nil && !c.Exists(namespace, name) {
		return nil, &ServiceAccountNotFound{Namespace: namespace, Name: name}
	}
	return c.Unchecked(namespace, name)
}

// Unchecked is For without asking Exists: for the watches that list as an
// account (tracking makes them under its lock, which Exists takes too).
// Their users check the account before they ask for such a watch.
func (c *Clients) Unchecked(namespace, name string) (dynamic.Interface, error) {
	key := namespace + "/" + name
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[key]; ok {
		c.ll.MoveToFront(el)
		return el.Value.(*saClient).cl, nil
	}
	cl, err := tracking.NewDynamic(c.configFor(namespace, name))
	if err != nil {
		return nil, err
	}
	c.m[key] = c.ll.PushFront(&saClient{key: key, cl: cl})
	for c.ll.Len() > c.max {
		el := c.ll.Back()
		c.ll.Remove(el)
		delete(c.m, el.Value.(*saClient).key)
	}
	return cl, nil
}

// Len is how many clients are kept (metrics, tests).
func (c *Clients) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}

// configFor is the config of the account's client: the base's, rate
// limiter included, impersonating the account.
func (c *Clients) configFor(namespace, name string) *rest.Config {
	cfg := rest.CopyConfig(c.base)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: ServiceAccountUser(namespace, name)}
	return cfg
}

// ServerSideApply server-side applies obj as Kontinue's field manager, forcing
// ownership of the fields it sets.
func ServerSideApply(ctx context.Context, cl dynamic.Interface, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, fieldManager string) (*unstructured.Unstructured, error) {
	ri := cl.Resource(gvr)
	var r dynamic.ResourceInterface = ri
	if ns := obj.GetNamespace(); ns != "" {
		r = ri.Namespace(ns)
	}
	return r.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
}

// deleteObject deletes an object only if it is still the one we know (UID
// precondition), in the background so the garbage collector removes its
// dependents.
func deleteObject(ctx context.Context, cl dynamic.Interface, gvr schema.GroupVersionResource, namespace, name string, uid types.UID) error {
	ri := cl.Resource(gvr)
	var r dynamic.ResourceInterface = ri
	if namespace != "" {
		r = ri.Namespace(namespace)
	}
	bg := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &bg}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	return r.Delete(ctx, name, opts)
}
