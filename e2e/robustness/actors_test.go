package robustness

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"
)

// The run's world before the traffic: the platform's catalog, the
// tenants' namespaces with their accounts and grants, the canary; and the
// widget controller, which plays the controller of the test's Widgets.

// setup makes what every run has, as the admin and as the platform team.
func (r *run) setup(ctx context.Context) error {
	a := r.api
	// Who may do what: people administer their namespace, the platform
	// team and the controllers the test plays act cluster-wide.
	var b strings.Builder
	for _, u := range []string{"platform", "rogue", "widget-controller"} {
		fmt.Fprintf(&b, `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: robustness-%[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: %[1]s}]
---`, u)
	}
	// What a stamping account may do: full, or write without reading
	// (create, update, patch, delete, but no get, list or watch).
	resources := `
- apiGroups: [""]
  resources: [configmaps]
  verbs: [%[1]s]
- apiGroups: [robustness.kontinue.dev]
  resources: [widgets]
  verbs: [%[1]s]
- apiGroups: [apps]
  resources: [deployments]
  verbs: [%[1]s]
- apiGroups: [batch]
  resources: [jobs]
  verbs: [%[1]s]
- apiGroups: [carto.run]
  resources: [runnables, deliverables]
  verbs: [%[1]s]`
	for role, verbs := range map[string]string{"full": "get, list, watch, create, update, patch, delete", "noget": "create, update, patch, delete"} {
		fmt.Fprintf(&b, `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: %s-%s}
rules:%s
---`, r.prefix, role, fmt.Sprintf(resources, verbs))
	}
	if err := a.applyYAML(ctx, b.String(), "robustness"); err != nil {
		return err
	}
	for _, t := range append(append([]string{}, tenants...), "canary") {
		ns := r.prefix + "-" + t
		if _, err := a.do(ctx, http.MethodPost, resourcePath("Namespace", ""), "application/json",
			[]byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":%q}}`, ns))); err != nil {
			return err
		}
		var nb strings.Builder
		fmt.Fprintf(&nb, `
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: person-admin, namespace: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: person-%[2]s}]
---`, ns, t)
		for _, sa := range []string{"builder", "writer", "default"} {
			fmt.Fprintf(&nb, `
apiVersion: v1
kind: ServiceAccount
metadata: {name: %s, namespace: %s}
---`, sa, ns)
		}
		for _, g := range [][2]string{{"builder", "full"}, {"writer", "noget"}, {"default", "full"}} {
			fmt.Fprintf(&nb, `
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: %[1]s-%[2]s, namespace: %[3]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: %[4]s-%[2]s}
subjects: [{kind: ServiceAccount, name: %[1]s, namespace: %[3]s}]
---`, g[0], g[1], ns, r.prefix)
		}
		if err := a.applyYAML(ctx, nb.String(), "robustness"); err != nil {
			return err
		}
	}
	// The catalog, as the platform team.
	p := a.as("platform")
	for _, n := range templateNames() {
		if err := p.applyYAML(ctx, render(catalogDocs[n], r.prefix, 1, r.pauseOnFailure), "platform"); err != nil {
			return err
		}
	}
	for _, n := range chainNames {
		doc := render(chainDocs[n], r.prefix, 1, r.pauseOnFailure)
		if n == "verified" {
			doc = strings.ReplaceAll(doc, "@VKEY@", r.reg.keyJSON())
		}
		if err := p.applyYAML(ctx, doc, "platform"); err != nil {
			return err
		}
	}
	// The canary: a quiet tenant whose param changes every few seconds.
	return r.createOwner(ctx, Op{Actor: "person-canary", Do: "create", Tenant: "canary", Kind: "Workload", Name: "canary",
		Args: map[string]string{"chain": "canary", "sa": "builder", "labels": "{}", "commit": "c0",
			"params": `[{"name":"tick","value":"k0"}]`}})
}

// widgetController plays the controller of Widgets: some time after a
// Widget's generation changes it reports on it (observedGeneration, ready
// unless spec.fail is true), never for spec.hang true. It lists with raw
// JSON read by gjson, so that a Widget 10,000 levels deep does not blind
// it: the test's own controller must not be what stalls a tenant.
type widgetController struct {
	r    *run
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

const widgetDelay = 400 * time.Millisecond

func (r *run) startWidgetController() *widgetController {
	w := &widgetController{r: r, stop: make(chan struct{}), done: make(chan struct{})}
	go w.loop()
	return w
}

func (w *widgetController) loop() {
	defer close(w.done)
	seen := map[string]time.Time{} // ns/name@gen → first seen
	a := w.r.api.as("widget-controller")
	for {
		select {
		case <-w.stop:
			return
		case <-time.After(250 * time.Millisecond):
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		now := time.Now()
		// Namespace by namespace: a tenant's Widget too deep for a list
		// blinds that namespace's list, not the canary's.
		for _, t := range append(append([]string{}, tenants...), "canary") {
			items, err := listObjects(ctx, w.r.api, "Widget", w.r.prefix+"-"+t)
			if err != nil {
				continue
			}
			for _, raw := range items {
				item := gjson.ParseBytes(raw)
				ns, name := item.Get("metadata.namespace").String(), item.Get("metadata.name").String()
				gen := item.Get("metadata.generation").Int()
				if item.Get("status.observedGeneration").Int() == gen || item.Get("spec.hang").Bool() {
					continue
				}
				key := fmt.Sprintf("%s/%s@%d", ns, name, gen)
				first, ok := seen[key]
				if !ok {
					seen[key] = now
					first = now
				}
				if now.Sub(first) < widgetDelay {
					continue
				}
				st := fmt.Sprintf(`{"status":{"observedGeneration":%d,"ready":%t}}`, gen, !item.Get("spec.fail").Bool())
				_, _ = a.do(ctx, http.MethodPatch, objectPath("Widget", ns, name)+"/status", mergePatch, []byte(st))
			}
		}
		cancel()
	}
}

func (w *widgetController) close() {
	w.once.Do(func() { close(w.stop) })
	<-w.done
}
