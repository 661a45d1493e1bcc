package objdiff

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

func obj(t *testing.T, y string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(y), &m))
	return m
}

func TestProject(t *testing.T) {
	for _, tc := range []struct {
		name       string
		live, want string
		shapes     []string
	}{
		{
			name:   "server fields and status go",
			live:   `{metadata: {name: a, uid: u1, resourceVersion: "7", labels: {x: "1"}}, data: {k: v}, status: {ok: true}}`,
			shapes: []string{`{metadata: {name: a, labels: {x: "1"}}, data: {k: v2}}`},
			want:   `{metadata: {name: a, labels: {x: "1"}}, data: {k: v}}`,
		},
		{
			name:   "a field only the old render set stays (the new one drops it)",
			live:   `{data: {k: v, old: o}}`,
			shapes: []string{`{data: {k: v}}`, `{data: {k: v, old: o}}`},
			want:   `{data: {k: v, old: o}}`,
		},
		{
			name:   "list elements projected by index, defaults dropped, extra live elements kept",
			live:   `{spec: {containers: [{name: c, image: i, terminationMessagePath: /dev/x}, {name: d}]}}`,
			shapes: []string{`{spec: {containers: [{name: c, image: i2}]}}`},
			want:   `{spec: {containers: [{name: c, image: i}, {name: d}]}}`,
		},
		{
			name:   "a scalar where the shape has a map stays",
			live:   `{data: "text"}`,
			shapes: []string{`{data: {k: v}}`},
			want:   `{data: "text"}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var shapes []map[string]any
			for _, s := range tc.shapes {
				shapes = append(shapes, obj(t, s))
			}
			require.Equal(t, obj(t, tc.want), Project(obj(t, tc.live), shapes...))
		})
	}
}

func TestChanges(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, new string
		want     []Change
	}{
		{name: "equal", old: `{a: {b: 1}}`, new: `{a: {b: 1.0}}`},
		{
			name: "a value, a new key, a removed key, dotted keys quoted",
			old:  `{data: {image: v1, gone: x}, metadata: {labels: {app.kubernetes.io/name: a}}}`,
			new:  `{data: {image: v2, extra: "y"}, metadata: {labels: {app.kubernetes.io/name: b}}}`,
			want: []Change{
				{Path: "data.extra", Op: OpAdded, New: "y"},
				{Path: "data.gone", Op: OpRemoved, Old: "x"},
				{Path: "data.image", Op: OpChanged, Old: "v1", New: "v2"},
				{Path: `metadata.labels["app.kubernetes.io/name"]`, Op: OpChanged, Old: "a", New: "b"},
			},
		},
		{
			name: "list grows and elements change",
			old:  `{env: [{name: A, value: "1"}]}`,
			new:  `{env: [{name: A, value: "2"}, {name: B, value: "3"}]}`,
			want: []Change{
				{Path: "env[0].value", Op: OpChanged, Old: "1", New: "2"},
				{Path: "env[1]", Op: OpAdded, New: map[string]any{"name": "B", "value": "3"}},
			},
		},
		{
			name: "type change",
			old:  `{a: {b: 1}}`,
			new:  `{a: "s"}`,
			want: []Change{{Path: "a", Op: OpChanged, Old: map[string]any{"b": float64(1)}, New: "s"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Changes(obj(t, tc.old), obj(t, tc.new)))
		})
	}
}

func TestUnified(t *testing.T) {
	d, err := Unified("live", "new", obj(t, `{kind: ConfigMap, data: {image: v1, k: same}}`), obj(t, `{kind: ConfigMap, data: {image: v2, k: same}}`))
	require.NoError(t, err)
	require.Equal(t, "--- live\n+++ new\n@@ -1,4 +1,4 @@\n data:\n-  image: v1\n+  image: v2\n   k: same\n kind: ConfigMap\n", d)

	d, err = Unified("live", "new", obj(t, `{a: 1}`), obj(t, `{a: 1}`))
	require.NoError(t, err)
	require.Empty(t, d)

	d, err = Unified("live", "new", nil, obj(t, `{a: 1}`))
	require.NoError(t, err)
	require.Contains(t, d, "+a: 1\n")
}

func TestSummary(t *testing.T) {
	r := strings.NewReplacer("app-a", "<name>")
	require.Equal(t, "a: 1 → 2, b added: {…}, c removed, d: reg/<name>:v1 → null, e added: 012345678901234567890123456789012345678…",
		Summary([]Change{
			{Path: "a", Op: OpChanged, Old: int64(1), New: float64(2)},
			{Path: "b", Op: OpAdded, New: map[string]any{"x": "y"}},
			{Path: "c", Op: OpRemoved, Old: "x"},
			{Path: "d", Op: OpChanged, Old: "reg/app-a:v1"},
			{Path: "e", Op: OpAdded, New: strings.Repeat("0123456789", 5)},
		}, r))
}

func TestGroupOwners(t *testing.T) {
	owner := func(ns, name, uid string, objs ...Object) Owner {
		return Owner{Ref: Ref{Kind: "Workload", Namespace: ns, Name: name, UID: uid}, Objects: objs}
	}
	tag := func(name, from, to string) Object {
		return Object{Step: "config", APIVersion: "v1", Kind: "ConfigMap", Namespace: "dev", Name: name + "-config", Op: OpChanged,
			Changes: []Change{{Path: "data.image", Op: OpChanged, Old: "reg/" + name + ":" + from, New: "reg/" + name + ":" + to}}}
	}
	withEnv := func(o Object) Object {
		o.Changes = append([]Change{{Path: "data.env", Op: OpAdded, New: "X=1"}}, o.Changes...)
		return o
	}
	ref := func(o Owner) Ref { return o.Ref }

	a := owner("dev", "app-a", "uid-a", tag("app-a", "v1", "v2"))
	b := owner("dev", "app-b", "uid-b", tag("app-b", "v1", "v2"))
	c := owner("dev", "app-c", "uid-c", withEnv(tag("app-c", "v1", "v2")))
	d := owner("dev", "app-d", "uid-d", tag("app-d", "v1", "v3")) // another tag: another group
	e := owner("dev", "app-e", "uid-e")                           // nothing changes
	f := owner("dev", "app-f", "uid-f")
	f.Failures = []Failure{{Step: "config", Reason: "TemplateStampFailure", Message: "boom"}}
	g := owner("dev", "app-g", "uid-g", tag("app-g", "v1", "v2"))
	g.Failures = []Failure{{Step: "deploy", Reason: "TemplateStampFailure", Message: "boom"}}

	groups := GroupOwners([]Owner{a, c, b, d, e, f, g})
	require.Len(t, groups, 4, "%+v", groups)
	require.Equal(t, []Ref{ref(a), ref(b), ref(g)}, groups[0].Owners, "the largest group first; owners in the order given; a failure elsewhere does not split")
	require.Equal(t, "step [config] ConfigMap: data.image: reg/<name>:v1 → reg/<name>:v2", groups[0].Summary)
	require.Equal(t, a.Objects, groups[0].Objects, "the first owner's objects are shown")
	require.Equal(t, []Ref{ref(c)}, groups[1].Owners)
	require.Equal(t, "step [config] ConfigMap: data.env added: X=1, data.image: reg/<name>:v1 → reg/<name>:v2", groups[1].Summary)
	require.Equal(t, []Ref{ref(d)}, groups[2].Owners)
	require.Equal(t, []Ref{ref(e)}, groups[3].Owners)
	require.Equal(t, NoChange, groups[3].Summary)

	// A name that holds the namespace, and an object added or dropped.
	x := owner("team", "team-web", "u1", Object{Step: "s", Kind: "Service", Name: "team-web", Op: OpAdded})
	y := owner("ops", "ops-web", "u2", Object{Step: "s", Kind: "Service", Name: "ops-web", Op: OpAdded})
	z := owner("ops", "ops-api", "u3", Object{Step: "s", Kind: "Service", Name: "ops-api", Op: OpRemoved})
	groups = GroupOwners([]Owner{x, y, z})
	require.Len(t, groups, 2)
	require.Equal(t, []Ref{ref(x), ref(y)}, groups[0].Owners)
	require.Equal(t, "step [s] Service: a new object", groups[0].Summary)
	require.Equal(t, "step [s] Service: no longer stamped", groups[1].Summary)

	// A generated name (a runnable step's ClusterRunTemplate: the owner's
	// namespace, name and a hash of them) groups, in the object's name and
	// where another object names it.
	gen := func(ns, name, hash string) Owner {
		crt := ns + "-" + name + "-lint-" + hash
		o := owner(ns, name, "u-"+name,
			Object{Step: "lint", Kind: "ClusterRunTemplate", Name: crt, Op: OpAdded,
				Changes: []Change{{Path: "metadata.annotations.kontinue.dev/generated-for", Op: OpAdded, New: "Workload " + ns + "/" + name + " step lint"}}},
			Object{Step: "lint", Kind: "Runnable", Namespace: ns, Name: name + "-linter", Op: OpAdded,
				Changes: []Change{{Path: "spec.runTemplateRef.name", Op: OpAdded, New: crt}}})
		o.Generated = []string{crt}
		return o
	}
	p, q := gen("dev", "app-p", "0a1b2c3d4e"), gen("dev", "app-q", "9f8e7d6c5b")
	groups = GroupOwners([]Owner{p, q})
	require.Len(t, groups, 1, "%+v", groups)
	require.Equal(t, []Ref{ref(p), ref(q)}, groups[0].Owners)
	p.Generated, q.Generated = nil, nil
	require.Len(t, GroupOwners([]Owner{p, q}), 2, "without the generated names set aside the hashes differ")
}
