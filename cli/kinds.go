package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"kontinue.dev/kontinue/reconciler/api"
)

// What a kind is to `get`.
const (
	catOwner    = "owner"
	catChain    = "chain"
	catTemplate = "template"
	catRunnable = "runnable"
)

// kindInfo is one carto.run kind as people name it on the command line.
type kindInfo struct {
	kind       string
	resource   string
	category   string
	namespaced bool
	// short are the CRD's short names (Cartographer's) and Kontinue's aliases.
	short []string
}

func (k kindInfo) gvr() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: api.Group, Version: api.Version, Resource: k.resource}
}

// singular is the lower-case kind, as kubectl's singular resource name.
func (k kindInfo) singular() string { return strings.ToLower(k.kind) }

// ownerKind is a Workload or Deliverable.
type ownerKind = kindInfo

var (
	kindWorkload    = kindInfo{api.KindWorkload, "workloads", catOwner, true, []string{"wld", "wl"}}
	kindDeliverable = kindInfo{api.KindDeliverable, "deliverables", catOwner, true, []string{"dlv"}}
	kindSupplyChain = kindInfo{"ClusterSupplyChain", "clustersupplychains", catChain, false, []string{"csc", "supplychain", "supplychains"}}
	kindDelivery    = kindInfo{"ClusterDelivery", "clusterdeliveries", catChain, false, []string{"cd", "delivery", "deliveries"}}
	kindRunnable    = kindInfo{api.KindRunnable, "runnables", catRunnable, true, []string{"run"}}
	templateKinds   = []kindInfo{
		{"ClusterSourceTemplate", "clustersourcetemplates", catTemplate, false, []string{"cst"}},
		{"ClusterImageTemplate", "clusterimagetemplates", catTemplate, false, []string{"cit"}},
		{"ClusterConfigTemplate", "clusterconfigtemplates", catTemplate, false, []string{"cct"}},
		{"ClusterDeploymentTemplate", "clusterdeploymenttemplates", catTemplate, false, []string{"cdt"}},
		{"ClusterTemplate", "clustertemplates", catTemplate, false, []string{"ct"}},
		{"ClusterRunTemplate", "clusterruntemplates", catTemplate, false, []string{"crt"}},
	}
	allKinds = append([]kindInfo{kindWorkload, kindDeliverable, kindSupplyChain, kindDelivery, kindRunnable}, templateKinds...)
)

// templatesWord names every template kind at once: `get templates`.
var templatesWord = []string{"templates", "template"}

// names are the names a kind answers to.
func (k kindInfo) names() []string {
	n := []string{k.singular(), k.resource, k.singular() + "." + api.Group, k.resource + "." + api.Group}
	return append(n, k.short...)
}

// parseKinds reads what `get` takes: one kind, or "templates" for all
// template kinds. Case does not matter, as with kubectl.
func parseKinds(s string) ([]kindInfo, error) {
	l := strings.ToLower(s)
	for _, w := range templatesWord {
		if l == w {
			return templateKinds, nil
		}
	}
	for _, k := range allKinds {
		for _, n := range k.names() {
			if l == n {
				return []kindInfo{k}, nil
			}
		}
	}
	msg := "unknown kind %q: want workloads, deliverables, clustersupplychains, clusterdeliveries, templates (or one template kind) or runnables"
	if near := suggest(l, kindWords()); len(near) > 0 {
		return nil, usagef(msg+"; did you mean %s?", s, strings.Join(near, " or "))
	}
	return nil, usagef(msg, s)
}

// parseOwnerKind accepts a Workload or Deliverable.
func parseOwnerKind(s string) (ownerKind, error) {
	ks, err := parseKinds(s)
	if err == nil && len(ks) == 1 && ks[0].category == catOwner {
		return ks[0], nil
	}
	return ownerKind{}, usagef("unknown kind %q: want workload or deliverable", s)
}

// kindWords are the names completion offers and suggestions come from.
func kindWords() []string {
	var out []string
	for _, k := range allKinds {
		out = append(out, k.resource)
		out = append(out, k.short...)
	}
	out = append(out, templatesWord[0])
	sort.Strings(out)
	return out
}

// ownerKindOf is the owner kind that walks chains of kind k.
func ownerKindOf(chain kindInfo) ownerKind {
	if chain.kind == kindDelivery.kind {
		return kindDeliverable
	}
	return kindWorkload
}

// getOwner reads the owner ns/name of kind k, saying so in people's words
// when it does not exist.
func getOwner(ctx context.Context, dyn dynamic.Interface, k ownerKind, ns, name string) (*unstructured.Unstructured, error) {
	obj, err := dyn.Resource(k.gvr()).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%s %s/%s not found", k.kind, ns, name)
	}
	return obj, err
}
