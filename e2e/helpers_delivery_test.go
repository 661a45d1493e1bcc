package e2e

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ownerFlavor lets one test body run for a Workload walking a
// ClusterSupplyChain and for a Deliverable walking a ClusterDelivery.
type ownerFlavor struct {
	name       string // subtest name
	ownerKind  string
	chainKind  string
	ownerGVR   schema.GroupVersionResource
	prefix     string // the seed's key prefix: "workload" or "deliverable"
	noun       string // how messages name the chain kind
	chainReady string // the owner's chain condition
	// Labels on stamped objects.
	labelOwner, labelOwnerNS, labelChain string
}

var (
	supplyChainFlavor = ownerFlavor{
		name: "SupplyChain", ownerKind: "Workload", chainKind: "ClusterSupplyChain", ownerGVR: workloadGVR,
		prefix: "workload", noun: "supply chain", chainReady: "SupplyChainReady",
		labelOwner: "carto.run/workload-name", labelOwnerNS: "carto.run/workload-namespace", labelChain: "carto.run/supply-chain-name",
	}
	deliveryFlavor = ownerFlavor{
		name: "Delivery", ownerKind: "Deliverable", chainKind: "ClusterDelivery", ownerGVR: deliverableGVR,
		prefix: "deliverable", noun: "delivery", chainReady: "DeliveryReady",
		labelOwner: "carto.run/deliverable-name", labelOwnerNS: "carto.run/deliverable-namespace", labelChain: "carto.run/delivery-name",
	}
	bothFlavors = []ownerFlavor{supplyChainFlavor, deliveryFlavor}
)

// chainYAML is a chain of the flavor selected by the label
// app.example.com/chain=<name>; resources is the YAML list of steps,
// indented by two spaces.
func (f ownerFlavor) chainYAML(name, resources string) string {
	return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: %s
metadata: {name: %s}
spec:
  selector: {app.example.com/chain: %s}
  resources:
%s`, f.chainKind, name, name, resources)
}

// ownerYAML is an owner of the flavor. labels are extra labels besides the
// chain selector label (chain may be empty: no labels at all when labels is
// empty too); spec is the spec body indented by two spaces.
func (f ownerFlavor) ownerYAML(name, chain string, labels map[string]string, spec string) string {
	all := map[string]string{}
	for k, v := range labels {
		all[k] = v
	}
	if chain != "" {
		all["app.example.com/chain"] = chain
	}
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var l strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&l, "    %s: %q\n", k, all[k])
	}
	labelBlock := ""
	if l.Len() > 0 {
		labelBlock = "  labels:\n" + l.String()
	}
	return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: %s
metadata:
  name: %s
%sspec:
%s`, f.ownerKind, name, labelBlock, spec)
}

// gitSpec is an owner spec with a git source and params (YAML list items
// "- {name: x, value: y}", or "").
func gitSpec(params ...string) string {
	s := "  source:\n    git: {url: \"https://git.example.com/app.git\", ref: {branch: main}}\n"
	if len(params) > 0 {
		s += "  params:\n"
		for _, p := range params {
			s += "  " + p + "\n"
		}
	}
	return s
}

// stepCondition returns condition typ of step in an owner's status.
func stepCondition(u *unstructured.Unstructured, step, typ string) map[string]any {
	s := stepStatus(u, step)
	if s == nil {
		return nil
	}
	return condition(s, typ)
}

// waitStep waits until the step's condition typ has status (and reason, if
// not empty) and returns the owner.
func waitStep(t testing.TB, gvr schema.GroupVersionResource, ns, name, step, typ, status, reason string) *unstructured.Unstructured {
	t.Helper()
	var u *unstructured.Unstructured
	eventually(t, 30*time.Second, func() string {
		got, err := tryGet(gvr, ns, name)
		if err != nil {
			return err.Error()
		}
		u = got
		c := stepCondition(got, step, typ)
		if c == nil {
			return fmt.Sprintf("%s step %s has no %s condition; status: %v", name, step, typ, got.Object["status"])
		}
		if c["status"] != status || (reason != "" && c["reason"] != reason) {
			return fmt.Sprintf("%s step %s condition %s is %v/%v (%v), want %s/%s", name, step, typ, c["status"], c["reason"], c["message"], status, reason)
		}
		return ""
	})
	return u
}

// conditionTypes lists the types of a conditions list, in order.
func conditionTypes(conds []any) []string {
	var out []string
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok {
			out = append(out, fmt.Sprint(m["type"]))
		}
	}
	return out
}

// outputsOf maps a step's outputs by name to their preview.
func outputsOf(step map[string]any) map[string]any {
	out := map[string]any{}
	list, _ := step["outputs"].([]any)
	for _, o := range list {
		if m, ok := o.(map[string]any); ok {
			out[fmt.Sprint(m["name"])] = m["preview"]
		}
	}
	return out
}

// waitTemplate waits until the step's status names the template want ("" for
// none, as with passThrough) and returns the owner. Waiting for an owner
// condition alone can return a status written before the change.
func waitTemplate(t testing.TB, gvr schema.GroupVersionResource, ns, name, step, want string) *unstructured.Unstructured {
	t.Helper()
	return waitFor(t, gvr, ns, name, func(u *unstructured.Unstructured) string {
		got := nested(stepStatus(u, step), "templateRef", "name")
		if (want == "" && got != nil) || (want != "" && got != want) {
			return fmt.Sprintf("%s step %s templateRef.name = %v, want %q", name, step, got, want)
		}
		return ""
	})
}
