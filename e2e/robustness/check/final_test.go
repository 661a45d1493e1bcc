package check

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOneRunPerSet(t *testing.T) {
	job := func(uid, digest string, extra ...func(obj)) obj {
		return object("Job", "t1", "app-test-"+uid, uid, append([]func(obj){stamped("test", LabelInputDigest, digest, LabelLifecycle, "immutable")}, extra...)...)
	}
	b := newBuilder()
	b.write(1, "create", kontinue, sa, "jobs.batch", 201, job("j1", "d1"))
	b.write(2, "create", kontinue, sa, "jobs.batch", 500, nil)
	// A retry asked with a token is one more run.
	b.write(3, "create", kontinue, sa, "jobs.batch", 201, job("j2", "d1", annotations(AnnotationRetry, "tok")))
	// Other inputs, then back to the first ones: run again.
	b.write(4, "create", kontinue, sa, "jobs.batch", 201, job("j3", "d2"))
	b.write(5, "create", kontinue, sa, "jobs.batch", 201, job("j4", "d1"))
	vs, _ := OneRunPerSet(b.h)
	assert.Empty(t, vs)
	// A second replica (or a restart) creates another for the same set.
	b.write(6, "create", kontinue, sa, "jobs.batch", 201, job("j5", "d1"))
	vs, _ = OneRunPerSet(b.h)
	require.Len(t, vs, 1)
	assert.Contains(t, vs[0].Message, "a second run")
	assert.Contains(t, vs[0].Message, "app-test-j5")
	assert.Contains(t, vs[0].Message, "right after app-test-j4")

	// After the owner's deletion, a cache a moment behind creates one
	// more, which the garbage collector removes: counted apart.
	b = newBuilder()
	b.write(1, "create", kontinue, sa, "jobs.batch", 201, job("j1", "d1"))
	b.write(2, "delete", "admin", "person-a", "workloads.carto.run", 200, object("Workload", "t1", "app", "w1"))
	b.write(2.1, "create", kontinue, sa, "jobs.batch", 201, job("j2", "d1"))
	vs, late := OneRunPerSet(b.h)
	assert.Empty(t, vs)
	assert.Equal(t, 1, late)
	// The same after the namespace's owners are deleted at once.
	b = newBuilder()
	b.write(1, "create", kontinue, sa, "jobs.batch", 201, job("j1", "d1"))
	b.write(2, "deletecollection", "admin", "", "workloads.carto.run", 200, nil).Namespace = "t1"
	b.write(2.1, "create", kontinue, sa, "jobs.batch", 201, job("j2", "d1"))
	vs, late = OneRunPerSet(b.h)
	assert.Empty(t, vs)
	assert.Equal(t, 1, late)
}

// snap builds a snapshot of objects.
func snap(objs ...obj) *Snapshot {
	s := &Snapshot{At: at(900)}
	for _, o := range objs {
		raw, err := json.Marshal(o)
		if err != nil {
			panic(err)
		}
		group, resource := "", map[string]string{"ConfigMap": "configmaps", "Workload": "workloads", "Deployment": "deployments",
			"Widget": "widgets"}[o["kind"].(string)]
		switch o["kind"] {
		case "Workload":
			group = OwnGroup
		case "Deployment":
			group = "apps"
		case "Widget":
			group = "robustness.kontinue.dev"
		}
		s.Put(group, resource, raw)
	}
	return s
}

// workload is Workload app (uid w1) at generation 2 with a status of that
// generation holding steps, and params.
func workload(steps []any, params ...any) obj {
	return object("Workload", "t1", "app", "w1", generation(2),
		with("spec", map[string]any{"params": params}),
		with("status", map[string]any{"observedGeneration": 2, "resources": steps}))
}

func stepEntry(name string, fields map[string]any, conds ...string) map[string]any {
	st := map[string]any{"name": name}
	for k, v := range fields {
		st[k] = v
	}
	var cs []any
	for i := 0; i+1 < len(conds); i += 2 {
		cs = append(cs, map[string]any{"type": conds[i], "status": conds[i+1]})
	}
	st["conditions"] = cs
	return st
}

func ref(kind, name, resource string) map[string]any {
	return map[string]any{"kind": kind, "name": name, "namespace": "t1", "resource": resource}
}

func TestLifetimes(t *testing.T) {
	b := newBuilder()
	b.write(1, "create", kontinue, sa, "configmaps", 201, object("ConfigMap", "t1", "app-src", "c1", stamped("src")))
	b.write(2, "create", kontinue, sa, "configmaps", 201, object("ConfigMap", "t1", "app-old", "c2", stamped("src")))
	b.write(3, "create", kontinue, sa, "deployments.apps", 201, object("Deployment", "t1", "app-last-good", "d2", stamped("app", LabelShadow, "true")))
	b.write(4, "create", "admin", "person-a", "configmaps", 201, object("ConfigMap", "t1", "mine", "p1", stamped("src")))
	final := snap(
		workload([]any{
			stepEntry("src", map[string]any{"stampedRef": ref("ConfigMap", "app-src", "configmaps")}, "Ready", "True", "ResourceSubmitted", "True"),
			stepEntry("app", map[string]any{"stampedRef": ref("Deployment", "app", "deployments.apps"),
				"shadowRef": ref("Deployment", "app-last-good", "deployments.apps")}, "Healthy", "True"),
		}),
		object("ConfigMap", "t1", "app-src", "c1", stamped("src")),
		object("ConfigMap", "t1", "app-old", "c2", stamped("src")),
		object("Deployment", "t1", "app-last-good", "d2", stamped("app", LabelShadow, "true")),
		object("ConfigMap", "t1", "mine", "p1", stamped("src")), // a person's: not judged
	)
	b.write(0.5, "create", "admin", "person-a", "workloads.carto.run", 201, object("Workload", "t1", "app", "w1"))
	b.write(5, "create", kontinue, sa, "configmaps", 201, object("ConfigMap", "t1", "stray", "c3", stamped("src"), controlledBy("Workload", "app", "w9")))
	afterGC := snap(object("ConfigMap", "t1", "app-src", "c1", stamped("src")), object("ConfigMap", "t1", "mine", "p1", stamped("src")),
		object("ConfigMap", "t1", "stray", "c3", stamped("src"), controlledBy("Workload", "app", "w9")))
	vs, gcLag := Lifetimes(b.h, final, afterGC, nil)
	assert.Equal(t, 1, gcLag, "app-src names an owner that was: the garbage collector's to remove")
	require.Len(t, vs, 3, "%v", vs)
	msgs := Summary(vs, 10)
	assert.Contains(t, msgs, "configmaps/t1/stray: left after the owners were deleted, with no owner reference")
	assert.Contains(t, msgs, "configmaps/t1/app-old: stamped by Kontinue for")
	assert.Contains(t, msgs, "deployments.apps/t1/app-last-good: a shadow of")

	// Named in orphans; the shadow named while the primary fails.
	final = snap(
		workload([]any{
			stepEntry("src", map[string]any{"stampedRef": ref("ConfigMap", "app-src", "configmaps")}, "Ready", "True"),
			stepEntry("app", map[string]any{"stampedRef": ref("Deployment", "app", "deployments.apps"),
				"shadowRef": ref("Deployment", "app-last-good", "deployments.apps")}, "Healthy", "False"),
		}),
		object("ConfigMap", "t1", "app-src", "c1", stamped("src")),
		object("Deployment", "t1", "app-last-good", "d2", stamped("app", LabelShadow, "true")),
	)
	final.Objects[Key{Group: OwnGroup, Resource: "workloads", Namespace: "t1", Name: "app"}] = func() []byte {
		o := workload([]any{
			stepEntry("src", map[string]any{"stampedRef": ref("ConfigMap", "app-src", "configmaps")}, "Ready", "True"),
			stepEntry("app", map[string]any{"stampedRef": ref("Deployment", "app", "deployments.apps"),
				"shadowRef": ref("Deployment", "app-last-good", "deployments.apps")}, "Healthy", "False"),
		})
		o["status"].(map[string]any)["orphans"] = []any{ref("ConfigMap", "app-old", "configmaps")}
		raw, _ := json.Marshal(o)
		return raw
	}()
	final.Put("", "configmaps", mustJSON(object("ConfigMap", "t1", "app-old", "c2", stamped("src"))))
	vs, _ = Lifetimes(b.h, final, nil, nil)
	assert.Empty(t, vs)

	// The primary succeeded, and the shadow's removal was refused (seed
	// 1401: RBAC revoked): status.orphans lists it.
	recovered := func(orphans ...any) []byte {
		o := workload([]any{stepEntry("app", map[string]any{"stampedRef": ref("Deployment", "app", "deployments.apps")}, "Healthy", "True")})
		o["status"].(map[string]any)["orphans"] = orphans
		raw, _ := json.Marshal(o)
		return raw
	}
	shadow := object("Deployment", "t1", "app-last-good", "d2", stamped("app", LabelShadow, "true"))
	final = snap(shadow)
	final.Objects[Key{Group: OwnGroup, Resource: "workloads", Namespace: "t1", Name: "app"}] = recovered(ref("Deployment", "app-last-good", "deployments.apps"))
	vs, _ = Lifetimes(b.h, final, nil, nil)
	assert.Empty(t, vs)
	final = snap(shadow)
	final.Objects[Key{Group: OwnGroup, Resource: "workloads", Namespace: "t1", Name: "app"}] = recovered(ref("Deployment", "other-last-good", "deployments.apps"))
	vs, _ = Lifetimes(b.h, final, nil, nil)
	require.Len(t, vs, 1, "another object in orphans does not excuse it")
	assert.Contains(t, vs[0].Message, `whose status has shadowRef "" and Healthy "True"`)

	// No chain selects the owner (seed 1322: it left its chain during the
	// walk that stamped app-old, whose status write was refused): what it
	// stamped stays, named or not.
	unselected := func(reason string) []byte {
		o := workload(nil)
		o["status"].(map[string]any)["conditions"] = []any{map[string]any{"type": "Ready", "status": "False", "reason": reason}}
		raw, _ := json.Marshal(o)
		return raw
	}
	for reason, want := range map[string]int{"SupplyChainNotFound": 0, "WorkloadLabelsMissing": 0, "TemplateStampFailure": 1} {
		final = snap(object("ConfigMap", "t1", "app-old", "c2", stamped("src")))
		final.Objects[Key{Group: OwnGroup, Resource: "workloads", Namespace: "t1", Name: "app"}] = unselected(reason)
		vs, _ = Lifetimes(b.h, final, nil, nil)
		assert.Len(t, vs, want, reason)
	}
	// An owner no replica serves is not judged.
	vs, _ = Lifetimes(b.h, snap(object("Workload", "t1", "app", "w1", labels(LabelShard, "nowhere")),
		object("ConfigMap", "t1", "app-old", "c2", stamped("src"))), nil, func(s string) bool { return s == "" })
	assert.Empty(t, vs)
}

func mustJSON(o obj) []byte {
	raw, err := json.Marshal(o)
	if err != nil {
		panic(err)
	}
	return raw
}

func TestExactValues(t *testing.T) {
	rules := []ValueRule{{Template: "tmpl-w", Param: "value", Path: "spec.value"}}
	b := newBuilder()
	widget := func(v json.RawMessage) obj {
		return object("Widget", "t1", "app-w", "x1", stamped("w"), func(o obj) {
			o.md()["labels"].(map[string]any)[LabelTemplate] = "tmpl-w"
		}, with("spec", map[string]any{"value": v}))
	}
	b.write(1, "create", kontinue, sa, "widgets.robustness.kontinue.dev", 201, widget(json.RawMessage("1")))
	owner := func(v string, cond string) obj {
		return workload([]any{stepEntry("w", nil, "ResourceSubmitted", cond)}, map[string]any{"name": "value", "value": json.RawMessage(v)})
	}
	for _, c := range []struct {
		param, stamped, cond string
		want                 int
	}{
		{"9007199254740993", "9007199254740993", "True", 0},
		{"9007199254740993", "9007199254740992", "True", 1},
		{"9223372036854775807", "9223372036854776000", "True", 1},
		{"1.7976931348623157e+308", "1.7976931348623157e+308", "True", 0},
		{`{"b":[1,"é\u2028"],"a":0.1}`, `{"a":0.1,"b":[1,"é\u2028"]}`, "True", 0},
		{"9007199254740993", "9007199254740992", "Unknown", 0}, // held or failing: not judged
	} {
		final := snap(owner(c.param, c.cond), widget(json.RawMessage(c.stamped)))
		vs := ExactValues(b.h, final, rules, nil)
		assert.Len(t, vs, c.want, "%s → %s: %v", c.param, c.stamped, vs)
	}
	// Robustness seed 103: the owner's service account was deleted, so its
	// steps were not walked for its last generation; their conditions are
	// of generation 1 while the owner is at 2: not judged. Observed at 2,
	// the same values are.
	for gen, want := range map[int]int{1: 0, 2: 1} {
		o := owner("true", "True")
		o["status"].(map[string]any)["resources"].([]any)[0].(map[string]any)["conditions"].([]any)[0].(map[string]any)["observedGeneration"] = gen
		vs := ExactValues(b.h, snap(o, widget(json.RawMessage(`"old"`))), rules, nil)
		assert.Len(t, vs, want, "step observed at generation %d: %v", gen, vs)
	}
}

func TestTruthfulStatus(t *testing.T) {
	outputs := Outputs{"tmpl-src": {"url": "data.url", "revision": "data.revision"}}
	src := object("ConfigMap", "t1", "app-src", "c1", stamped("src"), with("data", map[string]any{"url": "https://x", "revision": "r2"}))
	out := func(rev string) map[string]any {
		return map[string]any{"stampedRef": ref("ConfigMap", "app-src", "configmaps"),
			"outputs": []any{map[string]any{"name": "revision", "preview": rev + "\n"}}}
	}
	assert.Empty(t, TruthfulStatus(snap(workload([]any{stepEntry("src", out("r2"), "Ready", "True")}), src), outputs, nil))

	vs := TruthfulStatus(snap(workload([]any{stepEntry("src", out("r1"), "Ready", "True")}), src), outputs, nil)
	require.Len(t, vs, 1)
	assert.Contains(t, vs[0].Message, `output revision "r1", but configmaps/t1/app-src holds "r2"`)

	vs = TruthfulStatus(snap(workload([]any{stepEntry("src", out("r2"), "Ready", "True")})), outputs, nil)
	require.Len(t, vs, 1)
	assert.Contains(t, vs[0].Message, "which does not exist")
	// Its write failing (seed 200: deleted by a person, the account may
	// no longer create it), the step names the last object it stamped and
	// says why it is not there: true.
	assert.Empty(t, TruthfulStatus(snap(workload([]any{stepEntry("src", out("r2"), "ResourceSubmitted", "False", "Ready", "False")})), outputs, nil))
	// Not walked for the owner's generation (seed 214: it left every
	// chain): the entry is of generation 1, the owner at 2.
	old := stepEntry("src", out("r2"), "ResourceSubmitted", "True")
	old["conditions"].([]any)[0].(map[string]any)["observedGeneration"] = 1
	assert.Empty(t, TruthfulStatus(snap(workload([]any{old})), outputs, nil))

	// No chain selects the owner (seed 300: it left every chain by a
	// label, the generation as it was): the entries are the last walk's.
	unselected := workload([]any{stepEntry("src", out("r2"), "Ready", "True")})
	unselected["status"].(map[string]any)["conditions"] = []any{map[string]any{"type": "Ready", "status": "False", "reason": "SupplyChainNotFound"}}
	assert.Empty(t, TruthfulStatus(snap(unselected), outputs, nil))

	stale := workload(nil)
	stale.md()["generation"] = 3
	vs = TruthfulStatus(snap(stale), outputs, nil)
	require.Len(t, vs, 1)
	assert.Contains(t, vs[0].Message, "status describes generation 2, the owner is at 3")

	refused := func(msg string) obj {
		st := stepEntry("src", nil)
		st["conditions"] = []any{map[string]any{"type": "ResourceSubmitted", "status": "False", "reason": "StampedObjectNotOwned", "message": msg}}
		return workload([]any{st})
	}
	msg := "ConfigMap [t1/app-src] already exists and was not stamped by this Workload; Kontinue does not take it over"
	person := object("ConfigMap", "t1", "app-src", "p1")
	assert.Empty(t, TruthfulStatus(snap(refused(msg), person), outputs, nil), "the person's object still blocks")
	vs = TruthfulStatus(snap(refused(msg)), outputs, nil)
	require.Len(t, vs, 1)
	assert.Contains(t, vs[0].Message, "does not exist any more")
	vs = TruthfulStatus(snap(refused(msg), object("ConfigMap", "t1", "app-src", "p1", annotations(AnnotationAdoptBy, "Workload/app"))), outputs, nil)
	require.Len(t, vs, 1)
	assert.Contains(t, vs[0].Message, "handed over")
	// The owner's service account is gone (seed 700): nothing is walked,
	// the refusal is the last walk's.
	noAccount := refused(msg)
	noAccount["status"].(map[string]any)["conditions"] = []any{map[string]any{"type": "ResourcesSubmitted", "status": "False", "reason": "ServiceAccountError"}}
	assert.Empty(t, TruthfulStatus(snap(noAccount, object("ConfigMap", "t1", "app-src", "p1", annotations(AnnotationAdoptBy, "Workload/app"))), outputs, nil))
	other := object("ConfigMap", "t1", "app-src", "c9", stamped("config"))
	assert.Empty(t, TruthfulStatus(snap(refused(msg), other), outputs, nil), "another step's object blocks")

	// (e) shadowRef names the owner's shadow.
	shadowed := func(conds ...string) obj {
		return workload([]any{stepEntry("src", map[string]any{"stampedRef": ref("ConfigMap", "app-src", "configmaps"),
			"shadowRef": ref("ConfigMap", "app-src-last-good", "configmaps")}, conds...)})
	}
	shadow := object("ConfigMap", "t1", "app-src-last-good", "c2", stamped("src", LabelShadow, "true"))
	assert.Empty(t, TruthfulStatus(snap(shadowed("ResourceSubmitted", "True", "Healthy", "False"), src, shadow), outputs, nil))
	vs = TruthfulStatus(snap(shadowed("ResourceSubmitted", "True", "Healthy", "False"), src), outputs, nil)
	require.Len(t, vs, 1)
	assert.Contains(t, vs[0].Message, "step src names configmaps/t1/app-src-last-good as its shadow, which does not exist")
	vs = TruthfulStatus(snap(shadowed("ResourceSubmitted", "True", "Healthy", "False"), src, object("ConfigMap", "t1", "app-src-last-good", "p2")), outputs, nil)
	require.Len(t, vs, 1)
	assert.Contains(t, vs[0].Message, "which is not controlled by the owner")
	vs = TruthfulStatus(snap(shadowed("ResourceSubmitted", "True", "Healthy", "False"), src, object("ConfigMap", "t1", "app-src-last-good", "c2", stamped("src"))), outputs, nil)
	require.Len(t, vs, 1)
	assert.Contains(t, vs[0].Message, "which is not labelled one")
	// Refused or waiting, the entry names the last shadow it stamped.
	assert.Empty(t, TruthfulStatus(snap(shadowed("ResourceSubmitted", "Unknown", "Healthy", "Unknown"), src), outputs, nil))
	unstamped := shadowed("ResourceSubmitted", "True", "Healthy", "False")
	unstamped["status"].(map[string]any)["resources"].([]any)[0].(map[string]any)["conditions"].([]any)[1].(map[string]any)["message"] = "failed; shadow could not be stamped: forbidden"
	assert.Empty(t, TruthfulStatus(snap(unstamped, src), outputs, nil), "its Healthy says why it is not there")
}
