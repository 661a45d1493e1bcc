package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"kontinue.dev/kontinue/cli/view"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/history"
)

// A step's stamped object and its events, on demand: one GET or one LIST
// with the dashboard's identity when a viewer asks, never watched.

var (
	dnsName    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)
	objectName = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9._:]*[A-Za-z0-9])?$`)
	kindName   = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
	version    = regexp.MustCompile(`^v[0-9][a-z0-9]*$`)
)

// objectQuery is what /api/object reads: apiVersion, resource (the plural,
// with its group or not, as a step's status names it), namespace (empty for
// a cluster-scoped object) and name.
type objectQuery struct {
	gvr       schema.GroupVersionResource
	namespace string
	name      string
}

// parseObjectQuery checks a query strictly: the values become a URL path
// on the API server.
func parseObjectQuery(q url.Values) (objectQuery, error) {
	var o objectQuery
	group, ver, ok := strings.Cut(q.Get("apiVersion"), "/")
	if !ok {
		group, ver = "", group
	}
	if !version.MatchString(ver) || (group != "" && !dnsName.MatchString(group)) {
		return o, fmt.Errorf("apiVersion %q", q.Get("apiVersion"))
	}
	plural, rgroup, _ := strings.Cut(q.Get("resource"), ".")
	if !dnsName.MatchString(plural) || strings.Contains(plural, ".") || rgroup != group {
		return o, fmt.Errorf("resource %q of apiVersion %q", q.Get("resource"), q.Get("apiVersion"))
	}
	o.gvr = schema.GroupVersionResource{Group: group, Version: ver, Resource: plural}
	o.namespace, o.name = q.Get("namespace"), q.Get("name")
	if o.namespace != "" && !dnsName.MatchString(o.namespace) {
		return o, fmt.Errorf("namespace %q", o.namespace)
	}
	if !objectName.MatchString(o.name) {
		return o, fmt.Errorf("name %q", o.name)
	}
	return o, nil
}

// object serves a stamped object as YAML, without managedFields, and with
// a Secret's values left out.
func (s *Server) object(w http.ResponseWriter, r *http.Request) {
	q, err := parseObjectQuery(r.URL.Query())
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want apiVersion, resource, namespace and name: " + err.Error()})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
	defer cancel()
	u, err := s.dyn.Resource(q.gvr).Namespace(q.namespace).Get(ctx, q.name, metav1.GetOptions{})
	if err != nil {
		writeAPIError(w, err)
		return
	}
	u.SetManagedFields(nil)
	if q.gvr.Group == "" && q.gvr.Resource == "secrets" {
		for _, f := range []string{"data", "stringData"} {
			if m, ok := u.Object[f].(map[string]any); ok {
				for k := range m {
					m[k] = "(hidden)"
				}
			}
		}
	}
	b, err := yaml.Marshal(u.Object)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write(b)
}

// Event is one event of an object, as the page lists it.
type Event struct {
	Type     string `json:"type"`
	Reason   string `json:"reason"`
	Message  string `json:"message"`
	Count    int32  `json:"count,omitempty"`
	LastSeen string `json:"lastSeen,omitempty"`
	From     string `json:"from,omitempty"`
}

// objectEvents serves the events of one object, oldest first: one LIST of its
// namespace's events by involved object (a cluster-scoped object's events
// are in default).
func (s *Server) objectEvents(w http.ResponseWriter, r *http.Request) {
	qv := r.URL.Query()
	ns, kind, name := qv.Get("namespace"), qv.Get("kind"), qv.Get("name")
	if (ns != "" && !dnsName.MatchString(ns)) || !kindName.MatchString(kind) || !objectName.MatchString(name) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want the namespace, kind and name of an object"})
		return
	}
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
	defer cancel()
	l, err := s.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "events"}).Namespace(ns).List(ctx,
		metav1.ListOptions{FieldSelector: fields.Set{"involvedObject.kind": kind, "involvedObject.name": name}.String()})
	if err != nil {
		writeAPIError(w, err)
		return
	}
	type seen struct {
		at time.Time
		e  Event
	}
	var evs []seen
	for i := range l.Items {
		var e corev1.Event
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(l.Items[i].Object, &e); err != nil {
			continue
		}
		at := view.LastSeen(e)
		from := e.Source.Component
		if from == "" {
			from = e.ReportingController
		}
		evs = append(evs, seen{at, Event{Type: e.Type, Reason: e.Reason, Message: e.Message, Count: e.Count, LastSeen: at.UTC().Format(time.RFC3339), From: from}})
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].at.Before(evs[j].at) })
	out := make([]Event, 0, len(evs))
	for _, e := range evs {
		out = append(out, e.e)
	}
	writeJSON(w, http.StatusOK, out)
}

// writeAPIError answers with the API server's code (403 when the identity
// may not read it, 404 when it is gone) and its message.
func writeAPIError(w http.ResponseWriter, err error) {
	code := http.StatusBadGateway
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code != 0 {
		code = int(status.Status().Code)
	}
	writeJSON(w, code, map[string]string{"error": err.Error()})
}

// Timeline is what /api/history serves: an owner's revisions (its history
// ConfigMap folded with its status, as `kontinue history`), newest first.
type Timeline struct {
	Steps     []string           `json:"steps"`
	Revisions []history.Revision `json:"revisions"`
	Note      string             `json:"note,omitempty"`
}

// ownerHistory serves an owner's timeline: one GET of the owner and one of
// its history ConfigMap with the dashboard's identity, when the page asks
// (an owner page open, and again when that owner changes).
func (s *Server) ownerHistory(w http.ResponseWriter, r *http.Request) {
	qv := r.URL.Query()
	ns, kind, name := qv.Get("namespace"), qv.Get("kind"), qv.Get("name")
	resource := map[string]string{api.KindWorkload: "workloads", api.KindDeliverable: "deliverables"}[kind]
	if resource == "" || !dnsName.MatchString(ns) || !objectName.MatchString(name) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want kind Workload or Deliverable, a namespace and a name"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
	defer cancel()
	u, err := s.dyn.Resource(schema.GroupVersionResource{Group: api.Group, Version: api.Version, Resource: resource}).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		writeAPIError(w, err)
		return
	}
	owner, err := view.DecodeTraceOwner(u)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": "unreadable status: " + err.Error()})
		return
	}
	var out Timeline
	h, err := history.Get(ctx, s.dyn, kind, ns, name)
	if err != nil {
		out.Note = "the history ConfigMap " + history.Name(kind, name) + " cannot be read (" + err.Error() + "): only the revisions the status shows"
	}
	out.Revisions = history.View(h, owner.Status.Resources, 0).Revisions
	if out.Revisions == nil {
		out.Revisions = []history.Revision{}
	}
	for _, res := range owner.Status.Resources {
		out.Steps = append(out.Steps, res.Name)
	}
	writeJSON(w, http.StatusOK, out)
}

// chainDora serves a chain's DORA numbers per namespace (view.DORA, as
// `kontinue dora --chain` prints them) over the last `days` (30 unless
// given): the owners and the chain from the informers' caches, one GET
// of each owner's history ConfigMap with the dashboard's identity, when
// the chain's page asks.
func (s *Server) chainDora(w http.ResponseWriter, r *http.Request) {
	qv := r.URL.Query()
	kind, name := qv.Get("kind"), qv.Get("name")
	ownerResource := map[string]string{api.KindClusterSupplyChain: "workloads", api.KindClusterDelivery: "deliverables"}[kind]
	days := 30
	if d := qv.Get("days"); d != "" {
		n, err := strconv.Atoi(d)
		if days = n; err != nil || n < 1 || n > 366 {
			ownerResource = ""
		}
	}
	if ownerResource == "" || !objectName.MatchString(name) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want kind ClusterSupplyChain or ClusterDelivery, a name and days from 1 to 366"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	var owners []*unstructured.Unstructured
	var chain *unstructured.Unstructured
	for _, k := range s.kinds {
		switch {
		case k.Resource == ownerResource:
			for _, o := range k.informer.GetStore().List() {
				if u := asUnstructured(o); u != nil {
					owners = append(owners, u)
				}
			}
		case k.Kind == kind:
			if o, ok, _ := k.informer.GetStore().GetByKey(name); ok {
				chain = asUnstructured(o)
			}
		}
	}
	now := time.Now()
	out := view.DORA(owners, name, now.Add(-time.Duration(days)*24*time.Hour), now, view.DoraReads{
		History: func(kind, namespace, name string) (history.History, error) {
			return history.Get(ctx, s.dyn, kind, namespace, name)
		},
		DeploymentSteps: func(string, string) []string {
			if chain == nil {
				return nil
			}
			steps, _, _ := unstructured.NestedStringSlice(chain.Object, "spec", "deploymentSteps")
			return steps
		},
	})
	writeJSON(w, http.StatusOK, out)
}
