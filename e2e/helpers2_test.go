package e2e

// Helpers of the issue-3 tests (params, bad input, selection, fan-out,
// service accounts, orphans, health rules). They are methods of kit so that
// their names cannot collide with helpers other test files add to the
// package.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kontinue.dev/kontinue/reconciler/history"
)

// kit is one test's namespace and the helpers that work in it.
type kit struct {
	t  testing.TB
	ns string
}

func newKit(t testing.TB) *kit { return &kit{t: t, ns: newNamespace(t)} }

// name makes a cluster-scoped name unique to the test.
func (k *kit) name(base string) string { return uniq(k.ns, base) }

// apply applies YAML in the kit's namespace.
func (k *kit) apply(y string) { k.t.Helper(); apply(k.t, k.ns, y) }

// templateYAML is a template of kind whose spec is body (YAML indented by
// two spaces, starting with a newline).
func (k *kit) templateYAML(kind, name, body string) string {
	return fmt.Sprintf("\napiVersion: carto.run/v1alpha1\nkind: %s\nmetadata: {name: %s}\nspec:%s\n", kind, name, body)
}

// cmTemplate is a ClusterTemplate that stamps ConfigMap
// <workload>-<suffix> with data (a YAML flow map).
func (k *kit) cmTemplate(name, suffix, data string) string {
	return k.templateYAML("ClusterTemplate", name, fmt.Sprintf(`
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-%s}
    data: %s`, suffix, data))
}

// chainYAML is a ClusterSupplyChain selecting app.example.com/chain=<name>
// (what workloadYAML sets), with extra spec fields and steps, both YAML
// indented by two spaces and starting with a newline.
func (k *kit) chainYAML(name, extra, steps string) string {
	return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: %s}
spec:
  selector: {app.example.com/chain: %s}%s
  resources:%s
`, name, name, extra, steps)
}

// step is a chain step using a template, with extra fields (YAML such as
// "params: [...]", further lines indented by four spaces).
func (k *kit) step(name, kind, tmpl, extra string) string {
	s := fmt.Sprintf("\n  - name: %s\n    templateRef: {kind: %s, name: %s}", name, kind, tmpl)
	if extra != "" {
		s += "\n    " + extra
	}
	return s
}

// workload applies a workload on chain; extra are spec fields indented by
// two spaces.
func (k *kit) workload(name, chain, extra string) {
	k.t.Helper()
	k.apply(workloadYAML(k.ns, name, chain, extra))
}

// stepCond returns the condition typ of a step of an owner.
func (k *kit) stepCond(u *unstructured.Unstructured, step, typ string) map[string]any {
	s := stepStatus(u, step)
	if s == nil {
		return nil
	}
	return condition(s, typ)
}

// waitStep waits until the workload's step has condition typ with status
// and reason (any reason if ""), and returns the workload.
func (k *kit) waitStep(owner, step, typ, status, reason string) *unstructured.Unstructured {
	k.t.Helper()
	var u *unstructured.Unstructured
	eventually(k.t, 30*time.Second, func() string {
		got, err := tryGet(workloadGVR, k.ns, owner)
		if err != nil {
			return err.Error()
		}
		u = got
		c := k.stepCond(got, step, typ)
		if c == nil {
			return fmt.Sprintf("step %s of %s has no %s condition; status: %v", step, owner, typ, got.Object["status"])
		}
		if c["status"] != status || (reason != "" && c["reason"] != reason) {
			return fmt.Sprintf("step %s condition %s is %v/%v (%v), want %s/%s", step, typ, c["status"], c["reason"], c["message"], status, reason)
		}
		return ""
	})
	return u
}

// waitOwner waits for a workload condition in the kit's namespace.
func (k *kit) waitOwner(owner, typ, status, reason string) *unstructured.Unstructured {
	k.t.Helper()
	return waitOwner(k.t, workloadGVR, k.ns, owner, typ, status, reason)
}

// assertCond checks a condition's status and reason and that its message
// contains every part.
func (k *kit) assertCond(c map[string]any, status, reason string, parts ...string) {
	k.t.Helper()
	if !assert.NotNil(k.t, c, "condition missing") {
		return
	}
	assert.Equal(k.t, status, c["status"], "status of %v", c["type"])
	assert.Equal(k.t, reason, c["reason"], "reason of %v (%v)", c["type"], c["message"])
	msg, _ := c["message"].(string)
	for _, p := range parts {
		assert.Contains(k.t, msg, p, "message of %v", c["type"])
	}
}

// objRef names an object for resourceVersion snapshots.
type objRef struct {
	gvr      schema.GroupVersionResource
	ns, name string
}

func (k *kit) wl(name string) objRef  { return objRef{workloadGVR, k.ns, name} }
func (k *kit) cm(name string) objRef  { return objRef{configMapGVR, k.ns, name} }
func (k *kit) csc(name string) objRef { return objRef{chainGVR, "", name} }
func (k *kit) cluster(gvr schema.GroupVersionResource, name string) objRef {
	return objRef{gvr, "", name}
}

// rvs returns the resourceVersion of each object; all must exist.
func (k *kit) rvs(refs ...objRef) map[string]string {
	k.t.Helper()
	out := map[string]string{}
	for _, r := range refs {
		u, err := tryGet(r.gvr, r.ns, r.name)
		key := r.gvr.Resource + "/" + r.ns + "/" + r.name
		require.NoError(k.t, err, key)
		out[key] = u.GetResourceVersion()
	}
	return out
}

// assertStable proves that nothing writes to refs for d: no status churn,
// no hot loop, no re-apply.
func (k *kit) assertStable(d time.Duration, refs ...objRef) {
	k.t.Helper()
	before := k.rvs(refs...)
	time.Sleep(d)
	assert.Equal(k.t, before, k.rvs(refs...), "resourceVersions changed within %s", d)
}

// assertQuiet is assertStable over the window the issue asks for.
func (k *kit) assertQuiet(refs ...objRef) {
	k.t.Helper()
	k.assertStable(3*time.Second, refs...)
}

// tmplGVR is the resource of a template kind, e.g. "clustertemplates".
func (k *kit) tmplGVR(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "carto.run", Version: "v1alpha1", Resource: resource}
}

// names returns the sorted keys of m.
func (k *kit) names(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// objects lists the ConfigMaps and Tests of ns as resource/name →
// resourceVersion: what a bad input must not have written.
func (k *kit) objects(ns string) map[string]string {
	k.t.Helper()
	out := map[string]string{}
	for _, gvr := range []schema.GroupVersionResource{configMapGVR, testGVR} {
		l, err := env.dyn.Resource(gvr).Namespace(ns).List(context.Background(), metav1.ListOptions{})
		require.NoError(k.t, err)
		for _, u := range l.Items {
			// The owners' history (reconciler/history) is Kontinue's
			// record, not a stamped object: TestHistory checks it.
			if u.GetName() == "kube-root-ca.crt" || u.GetLabels()[history.LabelHistory] != "" {
				continue
			}
			out[gvr.Resource+"/"+u.GetName()] = u.GetResourceVersion()
		}
	}
	return out
}

// update changes an object with f, retrying on conflicts.
func (k *kit) update(gvr schema.GroupVersionResource, ns, name string, f func(u *unstructured.Unstructured)) {
	k.t.Helper()
	eventually(k.t, 10*time.Second, func() string {
		u, err := tryGet(gvr, ns, name)
		if err != nil {
			return err.Error()
		}
		f(u)
		if ns != "" {
			_, err = env.dyn.Resource(gvr).Namespace(ns).Update(context.Background(), u, metav1.UpdateOptions{})
		} else {
			_, err = env.dyn.Resource(gvr).Update(context.Background(), u, metav1.UpdateOptions{})
		}
		if err != nil {
			return err.Error()
		}
		return ""
	})
}

// setSpec replaces spec.<path> of a cluster-scoped object.
func (k *kit) setSpec(gvr schema.GroupVersionResource, name string, value any, path ...string) {
	k.t.Helper()
	k.update(gvr, "", name, func(u *unstructured.Unstructured) {
		require.NoError(k.t, unstructured.SetNestedField(u.Object, value, append([]string{"spec"}, path...)...))
	})
}

// poke changes an annotation of the workload, which makes Kontinue
// reconcile it.
func (k *kit) poke(owner string) {
	k.t.Helper()
	k.update(workloadGVR, k.ns, owner, func(u *unstructured.Unstructured) {
		ann := u.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann["e2e.kontinue.dev/poke"] = fmt.Sprint(time.Now().UnixNano())
		u.SetAnnotations(ann)
	})
}

// waitObj waits until the object exists and check (if not nil) returns "".
func (k *kit) waitObj(gvr schema.GroupVersionResource, name string, check func(u *unstructured.Unstructured) string) *unstructured.Unstructured {
	k.t.Helper()
	var u *unstructured.Unstructured
	eventually(k.t, 30*time.Second, func() string {
		got, err := tryGet(gvr, k.ns, name)
		if err != nil {
			return err.Error()
		}
		u = got
		if check == nil {
			return ""
		}
		return check(got)
	})
	return u
}

// waitObjStatus waits until check accepts the workload.
func (k *kit) waitObjStatus(owner string, check func(u *unstructured.Unstructured) string) *unstructured.Unstructured {
	k.t.Helper()
	return k.waitObj(workloadGVR, owner, check)
}

// waitAbsent waits until the object in the kit's namespace is gone.
func (k *kit) waitAbsent(gvr schema.GroupVersionResource, name string) {
	k.t.Helper()
	eventually(k.t, 30*time.Second, func() string {
		if !gone(gvr, k.ns, name) {
			return fmt.Sprintf("%s %s/%s still exists", gvr.Resource, k.ns, name)
		}
		return ""
	})
}

// dataIs checks a ConfigMap key.
func (k *kit) dataIs(key, want string) func(*unstructured.Unstructured) string {
	return func(u *unstructured.Unstructured) string {
		if got := nested(u.Object, "data", key); got != want {
			return fmt.Sprintf("%s data.%s = %v, want %s", u.GetName(), key, got, want)
		}
		return ""
	}
}

// events lists the core/v1 events recorded on an object of the kit's
// namespace, as "Reason: message", oldest first.
func (k *kit) events(name string) []string {
	k.t.Helper()
	return eventsIn(k.t, k.ns, name)
}

// eventsIn is events in namespace ns: "default" holds the events of
// cluster-scoped objects (chains).
func eventsIn(t testing.TB, ns, name string) []string {
	t.Helper()
	l, err := env.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "events"}).Namespace(ns).
		List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	require.NoError(t, err)
	items := l.Items
	sort.SliceStable(items, func(i, j int) bool {
		return items[i].GetCreationTimestamp().Time.Before(items[j].GetCreationTimestamp().Time)
	})
	var out []string
	for _, e := range items {
		out = append(out, fmt.Sprintf("%v: %v", e.Object["reason"], e.Object["message"]))
	}
	return out
}

// waitEvent waits for an event with reason on the named object whose
// message contains every part.
func (k *kit) waitEvent(name, reason string, parts ...string) {
	k.t.Helper()
	k.waitEventIn(k.ns, name, reason, parts...)
}

// waitEventIn is waitEvent in namespace ns.
func (k *kit) waitEventIn(ns, name, reason string, parts ...string) {
	k.t.Helper()
	waitEventIn(k.t, ns, name, reason, parts...)
}

func waitEventIn(t testing.TB, ns, name, reason string, parts ...string) {
	t.Helper()
	eventually(t, 30*time.Second, func() string {
		evs := eventsIn(t, ns, name)
		for _, e := range evs {
			if !strings.HasPrefix(e, reason+": ") {
				continue
			}
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(e, p)
			}
			if ok {
				return ""
			}
		}
		return fmt.Sprintf("no %s event containing %q on %s; events: %q", reason, parts, name, evs)
	})
}

// waitChain waits for a ClusterSupplyChain condition and returns it.
func (k *kit) waitChain(name, typ, status, reason string) map[string]any {
	k.t.Helper()
	var c map[string]any
	eventually(k.t, 30*time.Second, func() string {
		u, err := tryGet(chainGVR, "", name)
		if err != nil {
			return err.Error()
		}
		c = ownerCondition(u, typ)
		if c == nil || c["status"] != status || c["reason"] != reason {
			return fmt.Sprintf("chain %s condition %s = %v, want %s/%s", name, typ, c, status, reason)
		}
		return ""
	})
	return c
}
