package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/notify/api"
	"kontinue.dev/kontinue/reconciler/dora"
	"kontinue.dev/kontinue/reconciler/netguard"
	"kontinue.dev/kontinue/reconciler/owner"
)

// Resources of the notification kinds.
var (
	ProviderGVR = schema.GroupVersionResource{Group: api.Group, Version: api.Version, Resource: "providers"}
	AlertGVR    = schema.GroupVersionResource{Group: api.Group, Version: api.Version, Resource: "alerts"}
	secretGVR   = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

// Options configure a Notifier.
type Options struct {
	// PlatformNamespaces: alerts there may watch owners of other
	// namespaces (AlertSpec.Namespaces).
	PlatformNamespaces []string
	// Dashboard is the dashboard's URL, linked from messages.
	Dashboard string
	// AllowPrivateNetworks lets providers' addresses be loopback or
	// private (never link-local/metadata, nor the API server).
	AllowPrivateNetworks bool
	// QueueSize bounds each provider's queue of events (default 1000):
	// beyond it, events are dropped and counted.
	QueueSize int
	// Group is how long a provider's sender waits after an event for
	// more, to send them as one message (default 2 s).
	Group time.Duration
	// Retry bounds each request's retries.
	Retry Retry
	// StatusInterval is how often alerts' counters are written (default
	// 10 s).
	StatusInterval time.Duration
	// OnSent and OnDropped, when set, are told of the messages a
	// provider's receiver accepted and of the events dropped, with why:
	// queue-full, failed, refused (an address Kontinue does not send to),
	// invalid (the provider cannot be used). Metrics.
	OnSent    func(namespace, provider string, n int)
	OnDropped func(namespace, provider, reason string, n int)
}

// Notifier sends owners' events to the providers of the alerts that match
// them.
type Notifier struct {
	cfg     *rest.Config
	dyn     dynamic.Interface
	opts    Options
	guard   netguard.Guard
	client  *http.Client
	factory dynamicinformer.DynamicSharedInformerFactory
	alerts  cache.SharedIndexInformer
	provs   cache.SharedIndexInformer

	ctx context.Context // set by Run; nil before

	mu      sync.Mutex
	queues  map[string]chan item // by provider namespace/name
	counts  map[string]*alertCount
	started bool
	// provWritten is the Ready condition last written on each provider
	// (namespace/name), so that a cache that lags our write does not
	// make us write it again.
	provWritten map[string]metav1.Condition

	// checks are the providers whose spec changed, to check and say on
	// their status.
	checks workqueue.TypedInterface[string]
	// writeProviderStatus writes a provider's status (the API server's
	// status subresource).
	writeProviderStatus func(ctx context.Context, u *unstructured.Unstructured) error
}

type alertCount struct {
	sent, dropped int64 // since the last status write
	lastDropped   time.Time
	reason, msg   string // the Ready condition when not True
	dirty         bool
}

// New makes a Notifier reading Providers, Alerts and (as each provider's
// service account) Secrets with cfg.
func New(cfg *rest.Config, opts Options) (*Notifier, error) {
	if opts.QueueSize <= 0 {
		opts.QueueSize = 1000
	}
	if opts.Group <= 0 {
		opts.Group = 2 * time.Second
	}
	if opts.StatusInterval <= 0 {
		opts.StatusInterval = 10 * time.Second
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	n := &Notifier{cfg: cfg, dyn: dyn, opts: opts, queues: map[string]chan item{}, counts: map[string]*alertCount{},
		provWritten: map[string]metav1.Condition{}, checks: workqueue.NewTyped[string]()}
	n.guard = netguard.Guard{AllowPrivate: opts.AllowPrivateNetworks, Deny: apiServer(cfg),
		Why: " (Kontinue's --notification-allow-private-networks allows loopback and private ones)"}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // the guard checks the receiver's address, not a proxy's
	tr.DialContext = n.guard.DialContext(nil)
	n.client = &http.Client{Transport: tr, Timeout: 15 * time.Second,
		// A receiver answers; it does not send Kontinue elsewhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	n.writeProviderStatus = func(ctx context.Context, u *unstructured.Unstructured) error {
		_, err := dyn.Resource(ProviderGVR).Namespace(u.GetNamespace()).UpdateStatus(ctx, u, metav1.UpdateOptions{})
		return err
	}
	n.factory = dynamicinformer.NewDynamicSharedInformerFactory(dyn, 10*time.Hour)
	n.alerts = n.factory.ForResource(AlertGVR).Informer()
	n.provs = n.factory.ForResource(ProviderGVR).Informer()
	// A provider is checked when it appears and when its spec changes (not
	// on its status writes, which keep its generation).
	if _, err := n.provs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { n.queueCheck(obj) },
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(*unstructured.Unstructured)
			u, ok2 := obj.(*unstructured.Unstructured)
			if ok1 && ok2 && o.GetGeneration() != u.GetGeneration() {
				n.queueCheck(obj)
			}
		},
	}); err != nil {
		return nil, err
	}
	return n, nil
}

func (n *Notifier) queueCheck(obj any) {
	if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
		n.checks.Add(key)
	}
}

// apiServer is the API server's host:port (refused as a provider address).
func apiServer(cfg *rest.Config) []string {
	u, err := url.Parse(cfg.Host)
	if err != nil || u.Host == "" {
		return nil
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	addrs := []string{net.JoinHostPort(host, port)}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return netguard.ResolveDeny(ctx, addrs...)
}

// Run starts the informers and the status writer, until ctx ends.
func (n *Notifier) Run(ctx context.Context) {
	n.mu.Lock()
	n.ctx = ctx
	n.started = true
	n.mu.Unlock()
	n.factory.Start(ctx.Done())
	n.factory.WaitForCacheSync(ctx.Done())
	go n.checkProviders(ctx)
	t := time.NewTicker(n.opts.StatusInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			n.checks.ShutDown()
			n.factory.Shutdown()
			return
		case <-t.C:
			n.writeStatuses(ctx)
		}
	}
}

// Synced reports whether the notifier knows the cluster's alerts.
func (n *Notifier) Synced() bool { return n.alerts.HasSynced() && n.provs.HasSynced() }

// Written is the hook after each owner's status write (owner.Env.Written):
// it derives the events and queues them for the providers of the alerts
// that match; it never waits (a full queue drops, and counts).
func (n *Notifier) Written(w owner.Written) {
	if w.Prev == nil || w.Next == nil || !n.Synced() {
		return
	}
	var steps map[string]bool
	if w.Spec != nil {
		steps = dora.Steps(w.Spec.Resources, w.Spec.DeploymentSteps)
	} else {
		steps = dora.StepsOf(w.Next.Resources, nil)
	}
	o := Owner{Kind: w.Kind, Namespace: w.Owner.GetNamespace(), Name: w.Owner.GetName(), UID: string(w.Owner.GetUID()),
		Chain: w.Chain, Labels: w.Owner.GetLabels()}
	evs := Derive(o, w.Prev.Resources, w.Next.Resources, steps, time.Now())
	if len(evs) == 0 {
		return
	}
	for _, a := range n.candidates(o.Namespace) {
		var spec api.AlertSpec
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(a.UnstructuredContent()["spec"].(map[string]any), &spec); err != nil {
			continue
		}
		platform := slices.Contains(n.opts.PlatformNamespaces, a.GetNamespace())
		key := a.GetNamespace() + "/" + a.GetName()
		for i := range evs {
			if Match(a.GetNamespace(), &spec, platform, &evs[i]) {
				n.enqueue(a.GetNamespace()+"/"+spec.ProviderRef.Name, item{alert: key, summary: spec.Summary, ev: evs[i]})
			}
		}
	}
}

// candidates are the alerts that may see owners of ns: its own, and the
// platform namespaces'.
func (n *Notifier) candidates(ns string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, space := range append([]string{ns}, n.opts.PlatformNamespaces...) {
		objs, _ := n.alerts.GetIndexer().ByIndex(cache.NamespaceIndex, space)
		for _, o := range objs {
			if u, ok := o.(*unstructured.Unstructured); ok {
				if _, ok := u.Object["spec"].(map[string]any); ok {
					out = append(out, u)
				}
			}
		}
		if space == ns && slices.Contains(n.opts.PlatformNamespaces, ns) {
			break
		}
	}
	return out
}

func (n *Notifier) enqueue(provider string, it item) {
	n.mu.Lock()
	q, ok := n.queues[provider]
	if !ok && n.ctx != nil {
		q = make(chan item, n.opts.QueueSize)
		n.queues[provider] = q
		go n.deliver(n.ctx, provider, q)
	}
	n.mu.Unlock()
	if q == nil {
		return
	}
	select {
	case q <- it:
	default:
		n.dropped(provider, it.alert, 1, "QueueFull", fmt.Sprintf("the queue of provider [%s] is full (%d events)", provider, n.opts.QueueSize))
	}
}

// deliver sends what provider's queue holds, grouping what arrives within
// opts.Group, until ctx ends.
func (n *Notifier) deliver(ctx context.Context, provider string, q chan item) {
	for {
		var batch []item
		select {
		case <-ctx.Done():
			return
		case it := <-q:
			batch = append(batch, it)
		}
		t := time.NewTimer(n.opts.Group)
	collect:
		for len(batch) < 5000 {
			select {
			case it := <-q:
				batch = append(batch, it)
			case <-t.C:
				break collect
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
		t.Stop()
		n.sendBatch(ctx, provider, batch)
	}
}

// sendBatch sends one provider's batch, alert by alert.
func (n *Notifier) sendBatch(ctx context.Context, provider string, batch []item) {
	byAlert := map[string][]Event{}
	summary := map[string]string{}
	var order []string
	for _, it := range batch {
		if _, ok := byAlert[it.alert]; !ok {
			order = append(order, it.alert)
		}
		byAlert[it.alert] = append(byAlert[it.alert], it.ev)
		summary[it.alert] = it.summary
	}
	target, reason, err := n.resolve(ctx, provider)
	if err != nil {
		n.providerReady(ctx, provider, reason, err.Error())
	}
	for _, a := range order {
		evs := byAlert[a]
		if err != nil {
			n.dropped(provider, a, len(evs), reason, err.Error())
			continue
		}
		reqs, rerr := Requests(target, summary[a], evs)
		if rerr != nil {
			n.dropped(provider, a, len(evs), "ProviderInvalid", rerr.Error())
			continue
		}
		failed := 0
		var last error
		for _, r := range reqs {
			if err := send(ctx, n.client, r, n.opts.Retry, func(err error) { n.failing(a, err) }); err != nil {
				failed++
				last = err
			}
		}
		if failed > 0 {
			reason := "DeliveryFailing"
			var refused *netguard.RefusedError
			if errors.As(last, &refused) {
				reason = "AddressRefused"
				n.providerReady(ctx, provider, reason, refused.Error())
			}
			klog.V(2).InfoS("notification not delivered", "provider", provider, "alert", a, "err", last)
			n.dropped(provider, a, len(evs), reason, last.Error())
			continue
		}
		n.sent(provider, a, len(evs), len(reqs))
		if len(reqs) > 0 {
			n.providerReady(ctx, provider, "", "")
		}
	}
}

// checkProviders checks the providers queued by the informer's handler,
// until ctx ends.
func (n *Notifier) checkProviders(ctx context.Context) {
	for {
		key, shutdown := n.checks.Get()
		if shutdown {
			return
		}
		n.checkProvider(ctx, key)
		n.checks.Done(key)
	}
}

// checkProvider says on a provider's status whether it can be used: its
// spec, its Secret (as its service account) and its address.
func (n *Notifier) checkProvider(ctx context.Context, key string) {
	t, reason, err := n.resolve(ctx, key)
	if err == nil && t.Address != "" {
		u, _ := url.Parse(t.Address) // resolve checked it
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if rerr := n.guard.CheckHost(cctx, u.Hostname(), port); rerr != nil {
			reason, err = "AddressRefused", rerr
		}
		cancel()
	}
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	n.providerReady(ctx, key, reason, msg)
}

// providerCondition is a provider's Ready condition for its generation:
// True when reason is "", else False with reason and msg.
func providerCondition(reason, msg string, generation int64) metav1.Condition {
	if reason == "" {
		return metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready",
			Message: "the provider can be used", ObservedGeneration: generation}
	}
	return metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: reason, Message: msg, ObservedGeneration: generation}
}

// sameReady reports whether status (a provider's) already says c.
func sameReady(status map[string]any, c metav1.Condition) bool {
	var s api.ProviderStatus
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(status, &s); err != nil {
		return false
	}
	old := meta.FindStatusCondition(s.Conditions, c.Type)
	return s.ObservedGeneration == c.ObservedGeneration && old != nil && old.Status == c.Status &&
		old.Reason == c.Reason && old.Message == c.Message && old.ObservedGeneration == c.ObservedGeneration
}

// providerReady writes a provider's Ready condition, when it changes.
func (n *Notifier) providerReady(ctx context.Context, key, reason, msg string) {
	obj, ok, _ := n.provs.GetIndexer().GetByKey(key)
	if !ok {
		return // ProviderNotFound: said on the alerts
	}
	u := obj.(*unstructured.Unstructured)
	c := providerCondition(reason, msg, u.GetGeneration())
	status, _ := u.Object["status"].(map[string]any)
	n.mu.Lock()
	last, wrote := n.provWritten[key]
	n.mu.Unlock()
	if sameReady(status, c) || wrote && last == c {
		return
	}
	u = u.DeepCopy()
	var s api.ProviderStatus
	_ = runtime.DefaultUnstructuredConverter.FromUnstructured(status, &s)
	s.ObservedGeneration = c.ObservedGeneration
	meta.SetStatusCondition(&s.Conditions, c)
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&s)
	if err != nil {
		return
	}
	u.Object["status"] = m
	if err := n.writeProviderStatus(ctx, u); err != nil {
		// A conflict is a newer provider: its check or next delivery says.
		klog.V(2).InfoS("provider status not written", "provider", key, "err", err)
		return
	}
	n.mu.Lock()
	n.provWritten[key] = c
	n.mu.Unlock()
}

// resolve reads the provider and its Secret (as its service account).
func (n *Notifier) resolve(ctx context.Context, provider string) (Target, string, error) {
	obj, ok, _ := n.provs.GetIndexer().GetByKey(provider)
	if !ok {
		return Target{}, "ProviderNotFound", fmt.Errorf("provider [%s] not found", provider)
	}
	u := obj.(*unstructured.Unstructured)
	var spec api.ProviderSpec
	raw, _ := u.Object["spec"].(map[string]any)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &spec); err != nil {
		return Target{}, "ProviderInvalid", fmt.Errorf("provider [%s]: %w", provider, err)
	}
	if spec.Suspend {
		return Target{}, "ProviderSuspended", fmt.Errorf("provider [%s] is suspended", provider)
	}
	t := Target{Type: spec.Type, Address: spec.Address, Repository: spec.Repository, Dashboard: n.opts.Dashboard}
	if spec.SecretRef != nil {
		sa := spec.ServiceAccountName
		if sa == "" {
			sa = "default"
		}
		cfg := rest.CopyConfig(n.cfg)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + u.GetNamespace() + ":" + sa}
		cl, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return Target{}, "SecretNotReadable", err
		}
		s, err := cl.Resource(secretGVR).Namespace(u.GetNamespace()).Get(ctx, spec.SecretRef.Name, metav1.GetOptions{})
		if err != nil {
			why := err.Error()
			if apierrors.IsForbidden(err) {
				why = fmt.Sprintf("service account [%s] may not read secret [%s]", sa, spec.SecretRef.Name)
			}
			return Target{}, "SecretNotReadable", fmt.Errorf("provider [%s]: %s", provider, why)
		}
		data, _, _ := unstructured.NestedStringMap(s.Object, "data")
		if v := decode(data["address"]); v != "" {
			t.Address = v
		}
		t.Token = decode(data["token"])
	}
	if t.Address != "" {
		if u, err := url.Parse(t.Address); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return Target{}, "ProviderInvalid", fmt.Errorf("provider [%s]: address is not an http(s) URL", provider)
		}
	} else if t.Type != api.TypeGitHub && t.Type != api.TypeGitLab {
		return Target{}, "ProviderInvalid", fmt.Errorf("provider [%s] has no address", provider)
	}
	return t, "", nil
}

func decode(b64 string) string {
	var b []byte
	if err := json.Unmarshal([]byte(`"`+b64+`"`), &b); err != nil {
		return ""
	}
	return string(b)
}

func (n *Notifier) count(alert string) *alertCount {
	c := n.counts[alert]
	if c == nil {
		c = &alertCount{}
		n.counts[alert] = c
	}
	return c
}

func (n *Notifier) sent(provider, alert string, k, messages int) {
	if n.opts.OnSent != nil && messages > 0 {
		ns, name, _ := strings.Cut(provider, "/")
		n.opts.OnSent(ns, name, messages)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.count(alert)
	c.sent += int64(k)
	c.reason, c.msg, c.dirty = "", "", true
}

// metricReason is the metric's reason of a condition's.
var metricReason = map[string]string{"QueueFull": "queue-full", "DeliveryFailing": "failed", "AddressRefused": "refused"}

func (n *Notifier) dropped(provider, alert string, k int, reason, msg string) {
	if n.opts.OnDropped != nil {
		why := metricReason[reason]
		if why == "" {
			why = "invalid"
		}
		ns, name, _ := strings.Cut(provider, "/")
		n.opts.OnDropped(ns, name, why, k)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.count(alert)
	c.dropped += int64(k)
	c.lastDropped = time.Now()
	c.reason, c.msg, c.dirty = reason, msg, true
}

// failing says on alert's status that its delivery is being retried
// (nothing dropped yet).
func (n *Notifier) failing(alert string, err error) {
	msg := "retrying: " + err.Error()
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.count(alert)
	if c.reason != "DeliveryFailing" || c.msg != msg {
		c.reason, c.msg, c.dirty = "DeliveryFailing", msg, true
	}
}

// writeStatuses writes the alerts whose counters changed.
func (n *Notifier) writeStatuses(ctx context.Context) {
	n.mu.Lock()
	type w struct {
		key string
		c   alertCount
	}
	var todo []w
	for k, c := range n.counts {
		if c.dirty {
			// Counters are deltas since the last write: added to the
			// status, they survive a restart.
			todo = append(todo, w{k, *c})
			c.dirty, c.sent, c.dropped = false, 0, 0
		}
	}
	n.mu.Unlock()
	for _, t := range todo {
		obj, ok, _ := n.alerts.GetIndexer().GetByKey(t.key)
		if !ok {
			n.mu.Lock()
			delete(n.counts, t.key)
			n.mu.Unlock()
			continue
		}
		u := obj.(*unstructured.Unstructured).DeepCopy()
		var s api.AlertStatus
		raw, _ := u.Object["status"].(map[string]any)
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &s)
		s.ObservedGeneration = u.GetGeneration()
		s.Sent += t.c.sent
		s.Dropped += t.c.dropped
		if !t.c.lastDropped.IsZero() {
			s.LastDropped = &metav1.Time{Time: t.c.lastDropped.Truncate(time.Second)}
		}
		cond := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Delivered", Message: "events are delivered",
			ObservedGeneration: u.GetGeneration()}
		if t.c.reason != "" {
			cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, t.c.reason, t.c.msg
		}
		meta.SetStatusCondition(&s.Conditions, cond)
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&s)
		if err != nil {
			continue
		}
		u.Object["status"] = m
		if _, err := n.dyn.Resource(AlertGVR).Namespace(u.GetNamespace()).UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
			klog.V(2).InfoS("alert status not written", "alert", t.key, "err", err)
			n.mu.Lock()
			c := n.count(t.key)
			c.sent += t.c.sent
			c.dropped += t.c.dropped
			c.dirty = true
			n.mu.Unlock()
		}
	}
}
