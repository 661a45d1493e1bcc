package main

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// -alerts: an Alert on every owner of the bench's namespace, sending to a
// receiver that is dead, so that every status write of the change-latency
// measure enqueues notifications nobody takes (issue 50: "change latency
// within 1.2× of none").
const (
	// alertsRefused: a loopback port nothing listens on: every try fails at
	// once (connection refused) and is retried with backoff.
	alertsRefused = "refused"
	// alertsBlackhole: a listener that accepts and never answers: every
	// try waits for the notifier's request timeout (15 s).
	alertsBlackhole = "blackhole"
	// alertsDead: both, each with its Provider and Alert.
	alertsDead = "dead"
)

var alertModes = []string{alertsRefused, alertsBlackhole, alertsDead}

var (
	providerGVR = schema.GroupVersionResource{Group: "notification.kontinue.dev", Version: "v1alpha1", Resource: "providers"}
	alertGVR    = schema.GroupVersionResource{Group: "notification.kontinue.dev", Version: "v1alpha1", Resource: "alerts"}
)

func init() {
	gvrByKind["Provider"] = providerGVR
	gvrByKind["Alert"] = alertGVR
}

// deadReceivers are the addresses the -alerts providers send to; stop
// closes the blackhole.
type deadReceivers struct {
	addrs map[string]string // provider name → URL
	stop  func()
}

// startDeadReceivers makes the receivers of mode.
func startDeadReceivers(mode string) (*deadReceivers, error) {
	d := &deadReceivers{addrs: map[string]string{}, stop: func() {}}
	if mode == alertsRefused || mode == alertsDead {
		// A port that was free: nothing listens on it once freePorts
		// returns.
		ports, err := freePorts(1)
		if err != nil {
			return nil, err
		}
		d.addrs["dead-refused"] = fmt.Sprintf("http://127.0.0.1:%d/hook", ports[0])
	}
	if mode == alertsBlackhole || mode == alertsDead {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		var mu sync.Mutex
		var conns []net.Conn
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				// Held open, never read nor answered.
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		}()
		d.addrs["dead-blackhole"] = "http://" + l.Addr().String() + "/hook"
		d.stop = func() {
			l.Close()
			<-done
			mu.Lock()
			defer mu.Unlock()
			for _, c := range conns {
				c.Close()
			}
		}
	}
	return d, nil
}

// alertObjects are a generic-webhook Provider per dead receiver and an
// Alert on it selecting every owner and every event.
func (d *deadReceivers) alertObjects() ([]*unstructured.Unstructured, error) {
	var names []string
	for name := range d.addrs {
		names = append(names, name)
	}
	slices.Sort(names)
	var docs []string
	for _, name := range names {
		docs = append(docs, fmt.Sprintf(`
apiVersion: notification.kontinue.dev/v1alpha1
kind: Provider
metadata: {name: %[1]s, namespace: %[2]s}
spec: {type: generic, address: %[3]q}
---
apiVersion: notification.kontinue.dev/v1alpha1
kind: Alert
metadata: {name: %[1]s, namespace: %[2]s}
spec: {providerRef: {name: %[1]s}}`, name, benchNS, d.addrs[name]))
	}
	return parseObjects(strings.Join(docs, "\n---"))
}

// startAlerts starts -alerts' receivers and creates their providers and
// alerts, before the change-latency measure.
func (b *bench) startAlerts(ctx context.Context) error {
	d, err := startDeadReceivers(b.o.alerts)
	if err != nil {
		return err
	}
	b.dead = d
	objs, err := d.alertObjects()
	if err != nil {
		return err
	}
	if err := applyAll(ctx, b.dyn, objs); err != nil {
		return err
	}
	logf("alerts on every workload, sending to dead receivers (%s): %v", b.o.alerts, d.addrs)
	// The notifier's informers see them within a watch event; a second
	// lets them, before the first change.
	return sleep(ctx, time.Second)
}

// alertFigures records what the notifier did with the events of the
// changes: sent, dropped by reason (queue-full, failed, ...), and what
// each alert's Ready says (DeliveryFailing "retrying: ..." while the
// first request is retried: the events were queued).
func (b *bench) alertFigures(ctx context.Context, m metrics) {
	a := &b.res.Alerts
	a.Mode = b.o.alerts
	a.Sent = int(m.sum("kontinue_notifications_sent_total", nil))
	a.Dropped = map[string]int{}
	for _, s := range m {
		if s.name == "kontinue_notifications_dropped_total" {
			a.Dropped[s.labels["reason"]] += int(s.value)
		}
	}
	a.Ready = map[string]string{}
	for name := range b.dead.addrs {
		u, err := b.dyn.Resource(alertGVR).Namespace(benchNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			a.Ready[name] = err.Error()
			continue
		}
		a.Ready[name] = "no status"
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if c, _ := c.(map[string]any); c["type"] == "Ready" {
				a.Ready[name] = fmt.Sprintf("%v %v: %v", c["status"], c["reason"], c["message"])
			}
		}
	}
	logf("notifications: %d sent, dropped %v; alerts: %v", a.Sent, a.Dropped, a.Ready)
}
