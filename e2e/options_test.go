package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// markerTemplate is a ClusterTemplate stamping a ConfigMap named
// <owner>-<params.step>-<marker>, so that each step and option stamps its
// own object.
func markerTemplate(name, marker string) string {
	return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %s}
spec:
  params: [{name: step, default: none}]
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-$(params.step)$-%s}
    data: {template: %s}
`, name, marker, marker)
}

// optionStep is a ClusterTemplate step choosing between the special
// template (selector sel, a YAML flow mapping) and a fallback with an empty
// selector.
func optionStep(step, special, fallback, sel string) string {
	return fmt.Sprintf(`  - name: %s
    templateRef:
      kind: ClusterTemplate
      options:
      - name: %s
        selector: %s
      - name: %s
        selector: {}
    params: [{name: step, value: %s}]
`, step, special, sel, fallback, step)
}

// Each kind of selector term picks an option, for supply chains and
// deliveries, with both key spellings and numbers and strings as values.
func TestOptionsChooseBySelector(t *testing.T) {
	for _, f := range bothFlavors {
		t.Run(f.name, func(t *testing.T) {
			ns := newNamespace(t)
			special, fallback, chain := uniq(ns, "special"), uniq(ns, "fallback"), uniq(ns, "chain")
			p := f.prefix
			steps := []struct{ name, sel string }{
				{"in-string", `{matchFields: [{key: '` + p + `.spec.params[?(@.name=="tier")].value', operator: In, values: [gold, platinum]}]}`},
				{"in-number", `{matchFields: [{key: 'spec.params[?(@.name=="replicas")].value', operator: In, values: [1, 3]}]}`},
				{"in-number-as-text", `{matchFields: [{key: '.spec.params[?(@.name=="replicas")].value', operator: In, values: ["3"]}]}`},
				{"in-bool", `{matchFields: [{key: '` + p + `.spec.params[?(@.name=="debug")].value', operator: In, values: [true]}]}`},
				{"notin", `{matchFields: [{key: ` + p + `.spec.source.git.ref.branch, operator: NotIn, values: [main, develop]}]}`},
				{"exists", `{matchFields: [{key: ` + p + `.spec.source.git.ref.tag, operator: Exists}]}`},
				{"doesnotexist", `{matchFields: [{key: spec.source.subPath, operator: DoesNotExist}]}`},
				{"labels", `{matchLabels: {tier: gold}}`},
				{"expressions", `{matchExpressions: [{key: team, operator: In, values: [red, blue]}, {key: legacy, operator: DoesNotExist}]}`},
				{"metadata", `{matchFields: [{key: "metadata.labels['tier']", operator: In, values: [gold]}, {key: ` + p + `.metadata.name, operator: In, values: [picky]}]}`},
			}
			var res strings.Builder
			for _, s := range steps {
				res.WriteString(optionStep(s.name, special, fallback, s.sel))
			}
			apply(t, ns, markerTemplate(special, "special")+"---"+markerTemplate(fallback, "fallback")+"---"+f.chainYAML(chain, res.String()))

			// picky matches every special selector; plain matches none.
			apply(t, ns, f.ownerYAML("picky", chain, map[string]string{"tier": "gold", "team": "red"}, `  source:
    git: {url: "https://git.example.com/app.git", ref: {branch: release, tag: v1}}
  params:
  - {name: tier, value: gold}
  - {name: replicas, value: 3}
  - {name: debug, value: true}
`))
			apply(t, ns, f.ownerYAML("plain", chain, map[string]string{"tier": "bronze", "team": "green", "legacy": "yes"}, `  source:
    git: {url: "https://git.example.com/app.git", ref: {branch: main}}
    subPath: sub
  params:
  - {name: tier, value: bronze}
  - {name: replicas, value: "2"}
  - {name: debug, value: false}
`))
			for owner, want := range map[string]string{"picky": "special", "plain": "fallback"} {
				u := waitOwner(t, f.ownerGVR, ns, owner, "Ready", "True", "Ready")
				tmpl := map[string]string{"special": special, "fallback": fallback}[want]
				for _, s := range steps {
					st := stepStatus(u, s.name)
					require.NotNil(t, st, "%s step %s", owner, s.name)
					assert.Equal(t, map[string]any{"apiVersion": "carto.run/v1alpha1", "kind": "ClusterTemplate", "name": tmpl}, st["templateRef"], "%s step %s", owner, s.name)
					cmName := fmt.Sprintf("%s-%s-%s", owner, s.name, want)
					assert.Equal(t, cmName, nested(st, "stampedRef", "name"), "%s step %s", owner, s.name)
					cm, err := tryGet(configMapGVR, ns, cmName)
					if assert.NoError(t, err, "%s step %s", owner, s.name) {
						assert.Equal(t, tmpl, cm.GetLabels()["carto.run/cluster-template-name"])
						assert.Equal(t, s.name, cm.GetLabels()["carto.run/resource-name"])
						assert.Equal(t, owner, cm.GetLabels()[f.labelOwner])
					}
					other := map[string]string{"special": "fallback", "fallback": "special"}[want]
					assert.True(t, gone(configMapGVR, ns, fmt.Sprintf("%s-%s-%s", owner, s.name, other)), "%s step %s stamped the other option too", owner, s.name)
				}
			}
		})
	}
}

// passThrough forwards an input; switching between a template and
// passThrough on a live owner removes the object of the template and feeds
// the downstream step from whichever is chosen now.
func TestOptionsPassThroughAndSwitch(t *testing.T) {
	for _, f := range bothFlavors {
		t.Run(f.name, func(t *testing.T) {
			ns := newNamespace(t)
			src, transform, consumer, chain := uniq(ns, "src"), uniq(ns, "transform"), uniq(ns, "consumer"), uniq(ns, "chain")
			apply(t, ns, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterSourceTemplate
metadata: {name: %[1]s}
spec:
  urlPath: .status.url
  revisionPath: .status.revision
  template:
    apiVersion: test.run/v1alpha1
    kind: Test
    metadata: {name: $(workload.metadata.name)$-source}
    spec: {}
---
apiVersion: carto.run/v1alpha1
kind: ClusterSourceTemplate
metadata: {name: %[2]s}
spec:
  urlPath: .status.url
  revisionPath: .status.revision
  template:
    apiVersion: test.run/v1alpha1
    kind: Test
    metadata: {name: $(workload.metadata.name)$-transform}
    spec: {from: $(source.url)$}
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[3]s}
spec:
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-consumer}
    data: {url: $(source.url)$, revision: $(source.revision)$}
---
`, src, transform, consumer)+f.chainYAML(chain, fmt.Sprintf(`  - name: source-provider
    templateRef: {kind: ClusterSourceTemplate, name: %[1]s}
  - name: transformer
    templateRef:
      kind: ClusterSourceTemplate
      options:
      - name: %[2]s
        selector: {matchLabels: {transform: "yes"}}
      - passThrough: source
        selector: {}
    sources: [{name: source, resource: source-provider}]
  - name: consumer
    templateRef: {kind: ClusterTemplate, name: %[3]s}
    sources: [{name: source, resource: transformer}]
`, src, transform, consumer)))
			plain := f.ownerYAML("app", chain, nil, gitSpec())
			apply(t, ns, plain)
			u := waitStep(t, f.ownerGVR, ns, "app", "transformer", "ResourceSubmitted", "Unknown", "MissingValueAtPath")
			assert.Contains(t, fmt.Sprint(stepCondition(u, "transformer", "ResourceSubmitted")["message"]), "source-provider")
			setStatus(t, testGVR, ns, "app-source", map[string]any{"url": "https://src/1", "revision": "s1"})

			// passThrough: nothing stamped, the input is the output.
			u = waitOwner(t, f.ownerGVR, ns, "app", "Ready", "True", "Ready")
			tr := stepStatus(u, "transformer")
			assert.Equal(t, "PassThrough", condition(tr, "ResourceSubmitted")["reason"])
			assert.Equal(t, "True", condition(tr, "ResourceSubmitted")["status"])
			assert.Nil(t, condition(tr, "Healthy"), "a pass-through step has no Healthy condition, as in Cartographer")
			assert.Equal(t, "True", condition(tr, "Ready")["status"])
			assert.Nil(t, tr["stampedRef"])
			assert.Nil(t, tr["templateRef"])
			assert.Equal(t, []any{map[string]any{"name": "source-provider"}}, tr["inputs"])
			assert.Equal(t, map[string]any{"url": "https://src/1\n", "revision": "s1\n"}, outputsOf(tr))
			assert.True(t, gone(testGVR, ns, "app-transform"))
			cm := waitFor(t, configMapGVR, ns, "app-consumer", fieldIs("https://src/1", "data", "url"))
			assert.Equal(t, "s1", nested(cm.Object, "data", "revision"))

			// Switch to the template: it is stamped from the same input;
			// downstream keeps the passed-through value until it reports.
			apply(t, ns, f.ownerYAML("app", chain, map[string]string{"transform": "yes"}, gitSpec()))
			waitFor(t, testGVR, ns, "app-transform", fieldIs("https://src/1", "spec", "from"))
			u = waitStep(t, f.ownerGVR, ns, "app", "transformer", "ResourceSubmitted", "Unknown", "MissingValueAtPath")
			tr = stepStatus(u, "transformer")
			assert.Equal(t, map[string]any{"apiVersion": "carto.run/v1alpha1", "kind": "ClusterSourceTemplate", "name": transform}, tr["templateRef"])
			assert.Equal(t, "app-transform", nested(tr, "stampedRef", "name"))
			l := get(t, testGVR, ns, "app-transform").GetLabels()
			assert.Equal(t, transform, l["carto.run/cluster-template-name"])
			assert.Equal(t, "transformer", l["carto.run/resource-name"])
			assert.Equal(t, "https://src/1", nested(get(t, configMapGVR, ns, "app-consumer").Object, "data", "url"))

			setStatus(t, testGVR, ns, "app-transform", map[string]any{"url": "https://transformed/1", "revision": "t1"})
			waitFor(t, configMapGVR, ns, "app-consumer", fieldIs("https://transformed/1", "data", "url"))
			waitOwner(t, f.ownerGVR, ns, "app", "Ready", "True", "Ready")

			// Back to passThrough: the template's object is removed, and the
			// consumer is fed from the source again.
			apply(t, ns, plain)
			waitGone(t, testGVR, ns, "app-transform")
			waitFor(t, configMapGVR, ns, "app-consumer", fieldIs("https://src/1", "data", "url"))
			waitTemplate(t, f.ownerGVR, ns, "app", "transformer", "")
			u = waitOwner(t, f.ownerGVR, ns, "app", "Ready", "True", "Ready")
			tr = stepStatus(u, "transformer")
			assert.Nil(t, tr["stampedRef"])
			assert.Nil(t, tr["templateRef"])
			assert.Equal(t, "PassThrough", condition(tr, "ResourceSubmitted")["reason"])
			assert.Len(t, u.Object["status"].(map[string]any)["resources"], 3, "no leftover entries")
			assertEvent(t, ns, "app", "StampedObjectRemoved", "app-transform")
		})
	}
}

// Switching between two named templates that stamp different objects.
// A value that matches no option keeps the last object (a bad input never
// deletes) and says why.
func TestOptionsSwitchTemplatesOnLiveOwner(t *testing.T) {
	for _, f := range bothFlavors {
		t.Run(f.name, func(t *testing.T) {
			ns := newNamespace(t)
			a, b, app, chain := uniq(ns, "cfg-a"), uniq(ns, "cfg-b"), uniq(ns, "app"), uniq(ns, "chain")
			cfg := func(name, variant string) string {
				return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterConfigTemplate
metadata: {name: %s}
spec:
  configPath: .data
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(%s.metadata.name)$-cfg-%s}
    data: {variant: %s}
---
`, name, f.prefix, variant, variant)
			}
			apply(t, ns, cfg(a, "a")+cfg(b, "b")+fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %s}
spec:
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-app}
    data: {variant: $(config.variant)$}
---
`, app)+f.chainYAML(chain, fmt.Sprintf(`  - name: config-provider
    templateRef:
      kind: ClusterConfigTemplate
      options:
      - name: %[1]s
        selector:
          matchFields:
          - {key: '%[4]s.spec.params[?(@.name=="variant")].value', operator: In, values: [a]}
      - name: %[2]s
        selector:
          matchFields:
          - {key: 'spec.params[?(@.name=="variant")].value', operator: In, values: [b]}
  - name: app
    templateRef: {kind: ClusterTemplate, name: %[3]s}
    configs: [{name: config, resource: config-provider}]
`, a, b, app, f.prefix)))
			owner := func(v string) string { return f.ownerYAML("w", chain, nil, gitSpec("- {name: variant, value: "+v+"}")) }

			apply(t, ns, owner("a"))
			u := waitOwner(t, f.ownerGVR, ns, "w", "Ready", "True", "Ready")
			assert.Equal(t, a, nested(stepStatus(u, "config-provider"), "templateRef", "name"))
			assert.Equal(t, "a", nested(get(t, configMapGVR, ns, "w-app").Object, "data", "variant"))
			assert.Equal(t, a, get(t, configMapGVR, ns, "w-cfg-a").GetLabels()["carto.run/cluster-template-name"])

			apply(t, ns, owner("b"))
			waitFor(t, configMapGVR, ns, "w-app", fieldIs("b", "data", "variant"))
			waitGone(t, configMapGVR, ns, "w-cfg-a")
			waitTemplate(t, f.ownerGVR, ns, "w", "config-provider", b)
			u = waitOwner(t, f.ownerGVR, ns, "w", "Ready", "True", "Ready")
			st := stepStatus(u, "config-provider")
			assert.Equal(t, map[string]any{"apiVersion": "carto.run/v1alpha1", "kind": "ClusterConfigTemplate", "name": b}, st["templateRef"])
			assert.Equal(t, "w-cfg-b", nested(st, "stampedRef", "name"))
			assert.Equal(t, b, get(t, configMapGVR, ns, "w-cfg-b").GetLabels()["carto.run/cluster-template-name"])
			assertEvent(t, ns, "w", "StampedObjectRemoved", "w-cfg-a")

			// No option matches: the step fails and keeps what it had.
			apply(t, ns, owner("c"))
			u = waitOwner(t, f.ownerGVR, ns, "w", "Ready", "False", "TemplateOptionsMatchError")
			want := fmt.Sprintf("expected exactly 1 option to match, found [0] matching options [] for resource [config-provider] in %s [%s]", f.noun, chain)
			assert.Equal(t, want, stepCondition(u, "config-provider", "ResourceSubmitted")["message"])
			assert.Equal(t, "w-cfg-b", nested(stepStatus(u, "config-provider"), "stampedRef", "name"))
			time.Sleep(time.Second) // prove that nothing is removed
			_, err := tryGet(configMapGVR, ns, "w-cfg-b")
			assert.NoError(t, err, "a step with no matching option deleted its object")
			assert.Equal(t, "b", nested(get(t, configMapGVR, ns, "w-app").Object, "data", "variant"))

			// And back.
			apply(t, ns, owner("a"))
			waitFor(t, configMapGVR, ns, "w-app", fieldIs("a", "data", "variant"))
			waitGone(t, configMapGVR, ns, "w-cfg-b")
			waitOwner(t, f.ownerGVR, ns, "w", "Ready", "True", "Ready")
		})
	}
}

// Zero and two equally specific matches are TemplateOptionsMatchError with
// Cartographer's message; a more specific option beats a less specific one;
// a selector that cannot be evaluated is ResolveTemplateOptionsError.
func TestOptionsMatchErrors(t *testing.T) {
	for _, f := range bothFlavors {
		t.Run(f.name, func(t *testing.T) {
			ns := newNamespace(t)
			ta, tb, tc, chain := uniq(ns, "opt-a"), uniq(ns, "opt-b"), uniq(ns, "opt-c"), uniq(ns, "chain")
			apply(t, ns, markerTemplate(ta, "a")+"---"+markerTemplate(tb, "b")+"---"+markerTemplate(tc, "c")+"---"+
				f.chainYAML(chain, fmt.Sprintf(`  - name: pick
    templateRef:
      kind: ClusterTemplate
      options:
      - name: %[1]s
        selector: {matchLabels: {pick-a: "yes"}}
      - name: %[2]s
        selector:
          matchFields:
          - {key: '%[4]s.spec.params[?(@.name=="b")].value', operator: In, values: [true]}
      - name: %[3]s
        selector:
          matchLabels: {pick-a: "yes"}
          matchFields:
          - {key: spec.source.git.ref.branch, operator: In, values: [special]}
    params: [{name: step, value: pick}]
  - name: multi
    templateRef:
      kind: ClusterTemplate
      options:
      - name: %[1]s
        selector:
          matchFields:
          - {key: 'spec.params[*].value', operator: In, values: ["x"]}
      - name: %[2]s
        selector: {}
    params: [{name: step, value: multi}]
`, ta, tb, tc, f.prefix)))

			apply(t, ns, f.ownerYAML("none", chain, nil, gitSpec("- {name: only, value: x}")))
			apply(t, ns, f.ownerYAML("both", chain, map[string]string{"pick-a": "yes"}, gitSpec("- {name: b, value: true}")))
			apply(t, ns, f.ownerYAML("specific", chain, map[string]string{"pick-a": "yes"},
				"  source:\n    git: {url: \"https://git.example.com/app.git\", ref: {branch: special}}\n  params:\n  - {name: only, value: x}\n"))

			u := waitOwner(t, f.ownerGVR, ns, "none", "Ready", "False", "TemplateOptionsMatchError")
			want0 := fmt.Sprintf("expected exactly 1 option to match, found [0] matching options [] for resource [pick] in %s [%s]", f.noun, chain)
			c := stepCondition(u, "pick", "ResourceSubmitted")
			assert.Equal(t, "False", c["status"])
			assert.Equal(t, "TemplateOptionsMatchError", c["reason"])
			assert.Equal(t, want0, c["message"])
			assert.Equal(t, want0, ownerCondition(u, "ResourcesSubmitted")["message"])
			assert.Equal(t, "TemplateOptionsMatchError", ownerCondition(u, "ResourcesSubmitted")["reason"])
			assert.Equal(t, want0, ownerCondition(u, "Ready")["message"])
			assert.Nil(t, stepStatus(u, "pick")["stampedRef"])
			assert.Nil(t, stepStatus(u, "pick")["templateRef"])

			u = waitOwner(t, f.ownerGVR, ns, "both", "Ready", "False", "TemplateOptionsMatchError")
			want2 := fmt.Sprintf("expected exactly 1 option to match, found [2] matching options [%s, %s] for resource [pick] in %s [%s]", ta, tb, f.noun, chain)
			assert.Equal(t, want2, stepCondition(u, "pick", "ResourceSubmitted")["message"])

			// The most specific wins (c: two terms, a: one).
			u = waitStep(t, f.ownerGVR, ns, "specific", "pick", "Ready", "True", "Ready")
			assert.Equal(t, tc, nested(stepStatus(u, "pick"), "templateRef", "name"))
			_, err := tryGet(configMapGVR, ns, "specific-pick-c")
			assert.NoError(t, err)
			for _, n := range []string{"none-pick-a", "none-pick-b", "none-pick-c", "both-pick-a", "both-pick-b", "specific-pick-a"} {
				assert.True(t, gone(configMapGVR, ns, n), "%s stamped", n)
			}

			// A path yielding several values cannot be evaluated; with a
			// single param it can.
			apply(t, ns, f.ownerYAML("many", chain, nil, gitSpec("- {name: one, value: x}", "- {name: two, value: y}")))
			u = waitStep(t, f.ownerGVR, ns, "many", "multi", "ResourceSubmitted", "False", "ResolveTemplateOptionsError")
			msg := fmt.Sprint(stepCondition(u, "multi", "ResourceSubmitted")["message"])
			for _, s := range []string{ta, "[multi]", f.noun + " [" + chain + "]", "spec.params[*].value"} {
				assert.Contains(t, msg, s)
			}
			u = waitStep(t, f.ownerGVR, ns, "none", "multi", "Ready", "True", "Ready")
			assert.Equal(t, ta, nested(stepStatus(u, "multi"), "templateRef", "name"))
		})
	}
}

// An option key that is not a valid path is ResolveTemplateOptionsError,
// naming the option and the key.
func TestOptionsInvalidKey(t *testing.T) {
	for _, f := range bothFlavors {
		t.Run(f.name, func(t *testing.T) {
			ns := newNamespace(t)
			ta, tb, chain := uniq(ns, "opt-a"), uniq(ns, "opt-b"), uniq(ns, "chain")
			apply(t, ns, markerTemplate(ta, "a")+"---"+markerTemplate(tb, "b")+"---"+
				f.chainYAML(chain, fmt.Sprintf(`  - name: pick
    templateRef:
      kind: ClusterTemplate
      options:
      - name: %[1]s
        selector: {}
      - name: %[2]s
        selector:
          matchFields:
          - {key: 'spec.params[?(@.name==', operator: Exists}
`, ta, tb)))
			apply(t, ns, f.ownerYAML("w", chain, nil, gitSpec()))
			u := waitStep(t, f.ownerGVR, ns, "w", "pick", "ResourceSubmitted", "False", "ResolveTemplateOptionsError")
			msg := fmt.Sprint(stepCondition(u, "pick", "ResourceSubmitted")["message"])
			for _, s := range []string{tb, "[pick]", f.noun + " [" + chain + "]", "spec.params[?(@.name=="} {
				assert.Contains(t, msg, s)
			}
			assert.Equal(t, "ResolveTemplateOptionsError", ownerCondition(u, "Ready")["reason"])
		})
	}
}

// The schema rejects malformed options at admission, on both chain kinds.
func TestOptionsSchemaRejections(t *testing.T) {
	ns := newNamespace(t)
	cases := []struct{ name, options, want string }{
		{"OneOption", `[{name: a, selector: {}}]`, "should have at least 2 items"},
		{"DuplicateNames", `[{name: a, selector: {}}, {name: a, selector: {matchLabels: {x: "y"}}}]`, "option names must be unique"},
		{"NameAndPassThrough", `[{name: a, passThrough: source, selector: {}}, {name: b, selector: {}}]`, "exactly one of name or passThrough"},
		{"NeitherNameNorPassThrough", `[{selector: {}}, {name: b, selector: {}}]`, "exactly one of name or passThrough"},
		{"TwoPassThroughs", `[{passThrough: source, selector: {}}, {passThrough: source, selector: {matchLabels: {x: "y"}}}, {name: c, selector: {}}]`, "at most one option may be a passThrough"},
		{"NoSelector", `[{name: a}, {name: b, selector: {}}]`, "selector: Required value"},
		{"InWithoutValues", `[{name: a, selector: {matchFields: [{key: spec.x, operator: In}]}}, {name: b, selector: {}}]`, "values"},
		{"ExistsWithValues", `[{name: a, selector: {matchFields: [{key: spec.x, operator: Exists, values: [x]}]}}, {name: b, selector: {}}]`, "values"},
		{"UnknownOperator", `[{name: a, selector: {matchFields: [{key: spec.x, operator: Equals, values: [x]}]}}, {name: b, selector: {}}]`, "operator"},
	}
	for _, f := range bothFlavors {
		for _, c := range cases {
			t.Run(f.name+"/"+c.name, func(t *testing.T) {
				y := fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: %s
metadata: {name: bad}
spec:
  selector: {a: b}
  resources:
  - {name: src, templateRef: {kind: ClusterSourceTemplate, name: s}}
  - name: pick
    templateRef: {kind: ClusterSourceTemplate, options: %s}
    sources: [{name: source, resource: src}]
`, f.chainKind, c.options)
				err := applyErr(t, ns, y)
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.want)
			})
		}
		t.Run(f.name+"/NameAndOptions", func(t *testing.T) {
			err := applyErr(t, ns, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: %s
metadata: {name: bad}
spec:
  selector: {a: b}
  resources:
  - name: pick
    templateRef: {kind: ClusterTemplate, name: x, options: [{name: a, selector: {}}, {name: b, selector: {}}]}
`, f.chainKind))
			require.Error(t, err)
			assert.Contains(t, err.Error(), "exactly one of name or options")
		})
	}
	// The valid counterpart passes, so the cases above fail for their reason.
	for _, f := range bothFlavors {
		require.NoError(t, applyErr(t, ns, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: %s
metadata: {name: good}
spec:
  selector: {a: b}
  resources:
  - {name: src, templateRef: {kind: ClusterSourceTemplate, name: s}}
  - name: pick
    templateRef: {kind: ClusterSourceTemplate, options: [{name: a, selector: {matchFields: [{key: spec.x, operator: In, values: [1, "x"]}]}}, {passThrough: source, selector: {}}]}
    sources: [{name: source, resource: src}]
`, f.chainKind)), f.name)
	}
}

// assertEvent waits for an event with reason on the owner whose message
// contains part.
func assertEvent(t *testing.T, ns, owner, reason, part string) {
	t.Helper()
	eventually(t, 10*time.Second, func() string {
		l, err := env.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "events"}).Namespace(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		var seen []string
		for _, e := range l.Items {
			if nested(e.Object, "involvedObject", "name") != owner || e.Object["reason"] != reason {
				continue
			}
			m := fmt.Sprint(e.Object["message"])
			if strings.Contains(m, part) {
				return ""
			}
			seen = append(seen, m)
		}
		return fmt.Sprintf("no %s event on %s mentioning %s; seen %v", reason, owner, part, seen)
	})
}

// Two options stamping the same object: switching updates it in place (no
// delete and re-create), drops the fields only the old template set, and
// relabels it with the new template's name.
func TestOptionsSwitchBetweenTemplatesStampingTheSameObject(t *testing.T) {
	for _, f := range bothFlavors {
		t.Run(f.name, func(t *testing.T) {
			ns := newNamespace(t)
			one, two, chain := uniq(ns, "one"), uniq(ns, "two"), uniq(ns, "chain")
			tmpl := func(name, data string) string {
				return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %s}
spec:
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-same}
    data: %s
---
`, name, data)
			}
			apply(t, ns, tmpl(one, `{from: one, onlyOne: "yes"}`)+tmpl(two, `{from: two}`)+f.chainYAML(chain, fmt.Sprintf(`  - name: pick
    templateRef:
      kind: ClusterTemplate
      options:
      - name: %s
        selector: {matchLabels: {pick: one}}
      - name: %s
        selector: {matchLabels: {pick: two}}
`, one, two)))
			apply(t, ns, f.ownerYAML("w", chain, map[string]string{"pick": "one"}, gitSpec()))
			waitOwner(t, f.ownerGVR, ns, "w", "Ready", "True", "Ready")
			before := get(t, configMapGVR, ns, "w-same")
			assert.Equal(t, one, before.GetLabels()["carto.run/cluster-template-name"])

			apply(t, ns, f.ownerYAML("w", chain, map[string]string{"pick": "two"}, gitSpec()))
			after := waitFor(t, configMapGVR, ns, "w-same", fieldIs("two", "data", "from"))
			assert.Equal(t, before.GetUID(), after.GetUID(), "re-created instead of updated")
			assert.Nil(t, nested(after.Object, "data", "onlyOne"), "a field only the old template set stays")
			assert.Equal(t, two, after.GetLabels()["carto.run/cluster-template-name"])
			waitTemplate(t, f.ownerGVR, ns, "w", "pick", two)
			waitOwner(t, f.ownerGVR, ns, "w", "Ready", "True", "Ready")
			time.Sleep(time.Second) // prove that the shared object is not removed as an orphan
			_, err := tryGet(configMapGVR, ns, "w-same")
			assert.NoError(t, err)
		})
	}
}
