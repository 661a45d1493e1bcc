package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Names of the objects deliveryChain creates.
type deliveryNames struct {
	source, deploy, notify, delivery string
}

func newDeliveryNames(ns string) deliveryNames {
	return deliveryNames{source: uniq(ns, "dsource"), deploy: uniq(ns, "deploy"), notify: uniq(ns, "notify"), delivery: uniq(ns, "delivery")}
}

// deliveryChain is source → deployment → template. The source and the
// deployment stamp Test objects whose status the test writes, playing a
// config-repo poller and a deployer (kapp-controller, Argo, …). The
// deployment template declares success and failure with observedCompletion,
// or with deployRule when it is not empty.
func deliveryChain(n deliveryNames, deployRule string) string {
	if deployRule == "" {
		deployRule = `
  observedCompletion:
    succeeded: {key: 'status.conditions[?(@.type=="Ready")].status', value: "True"}
    failed: {key: 'status.conditions[?(@.type=="Ready")].status', value: "False"}`
	}
	return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterSourceTemplate
metadata: {name: %[1]s}
spec:
  urlPath: .status.url
  revisionPath: .status.revision
  template:
    apiVersion: test.run/v1alpha1
    kind: Test
    metadata: {name: $(deliverable.metadata.name)$-source}
    spec:
      git: $(deliverable.spec.source.git)$
---
apiVersion: carto.run/v1alpha1
kind: ClusterDeploymentTemplate
metadata: {name: %[2]s}
spec:%[5]s
  template:
    apiVersion: test.run/v1alpha1
    kind: Test
    metadata: {name: $(deliverable.metadata.name)$-deploy}
    spec:
      url: $(deployment.url)$
      revision: $(deployment.revision)$
      app: $(workload.metadata.name)$
      env: $(deliverable.spec.params[0].value)$
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[3]s}
spec:
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(deliverable.metadata.name)$-notify}
    data:
      url: $(sources.deployed.url)$
      revision: $(source.revision)$
---
apiVersion: carto.run/v1alpha1
kind: ClusterDelivery
metadata: {name: %[4]s}
spec:
  selector: {app.example.com/delivery: %[4]s}
  resources:
  - name: source-provider
    templateRef: {kind: ClusterSourceTemplate, name: %[1]s}
  - name: deployer
    templateRef: {kind: ClusterDeploymentTemplate, name: %[2]s}
    deployment: {resource: source-provider}
  - name: notifier
    templateRef: {kind: ClusterTemplate, name: %[3]s}
    sources: [{name: deployed, resource: deployer}]
`, n.source, n.deploy, n.notify, n.delivery, deployRule)
}

func deliverableYAML(name, delivery string) string {
	return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: Deliverable
metadata:
  name: %s
  labels: {app.example.com/delivery: %s}
spec:
  source:
    git: {url: "https://git.example.com/config.git", ref: {branch: main}}
  params: [{name: env, value: prod}]
`, name, delivery)
}

// readyCondition is a status whose Ready condition is s, as a deployer
// would write it, having observed generation gen.
func readyCondition(s string, gen int64) map[string]any {
	return map[string]any{
		"observedGeneration": gen,
		"conditions":         []any{map[string]any{"type": "Ready", "status": s, "reason": "Test", "message": "set by the test"}},
	}
}

// A delivery goes Ready only once the deployed object reports completion
// for the generation Kontinue stamped; until then the downstream step waits.
// A new revision starts the wait over.
func TestDeliveryReadyOnlyAfterDeploymentCompletes(t *testing.T) {
	ns := newNamespace(t)
	n := newDeliveryNames(ns)
	apply(t, ns, deliveryChain(n, ""))
	apply(t, ns, deliverableYAML("app", n.delivery))

	// Nothing to deploy before the source reports an artifact.
	waitOwner(t, deliverableGVR, ns, "app", "ResourcesSubmitted", "Unknown", "MissingValueAtPath")
	assert.True(t, gone(testGVR, ns, "app-deploy"), "deployment stamped before its input exists")

	setStatus(t, testGVR, ns, "app-source", map[string]any{"url": "https://artifacts/config-1.tgz", "revision": "rev1"})
	dep := waitFor(t, testGVR, ns, "app-deploy", fieldIs("rev1", "spec", "revision"))
	assert.Equal(t, "https://artifacts/config-1.tgz", nested(dep.Object, "spec", "url"), "$(deployment.url)$")
	assert.Equal(t, "app", nested(dep.Object, "spec", "app"), "$(workload...)$ is the deliverable too")
	assert.Equal(t, "prod", nested(dep.Object, "spec", "env"), "$(deliverable...)$")

	// The deployed object has no status yet: the condition's path is missing.
	// ResourceSubmitted says it in Cartographer's words; Healthy explains.
	d := waitStep(t, deliverableGVR, ns, "app", "deployer", "ResourceSubmitted", "Unknown", "ConditionNotMet")
	assert.Equal(t, "resource [deployer] condition not met: failed to evaluate status.observedGeneration: jsonpath returned empty list: status.observedGeneration",
		stepCondition(d, "deployer", "ResourceSubmitted")["message"])
	msg := fmt.Sprint(stepCondition(d, "deployer", "Healthy")["message"])
	assert.Contains(t, msg, "observedGeneration")
	assert.Contains(t, msg, `status.conditions[?(@.type=="Ready")].status`)
	assert.Contains(t, msg, "missing")
	d = waitOwner(t, deliverableGVR, ns, "app", "ResourcesSubmitted", "Unknown", "ConditionNotMet")
	assert.Equal(t, "Unknown", ownerCondition(d, "Ready")["status"])
	assert.Equal(t, "ConditionNotMet", ownerCondition(d, "Ready")["reason"])
	assert.Equal(t, "MissingValueAtPath", stepCondition(d, "notifier", "ResourceSubmitted")["reason"], "downstream waits")
	assert.Nil(t, stepStatus(d, "deployer")["outputs"], "no outputs before the condition holds")

	// Ready=True for an older generation is not completion.
	gen := dep.GetGeneration()
	setStatus(t, testGVR, ns, "app-deploy", readyCondition("True", gen-1))
	eventually(t, 30*time.Second, func() string {
		d := get(t, deliverableGVR, ns, "app")
		c := stepCondition(d, "deployer", "Healthy")
		m := fmt.Sprint(c["message"])
		if c["reason"] != "ConditionNotMet" || !strings.Contains(m, "observedGeneration") {
			return fmt.Sprintf("deployer: %v/%v (%v), want ConditionNotMet naming observedGeneration", c["status"], c["reason"], m)
		}
		if !strings.Contains(m, fmt.Sprintf("[%d]", gen-1)) || !strings.Contains(m, fmt.Sprintf("[%d]", gen)) {
			return "message does not show both generations: " + m
		}
		return ""
	})
	assert.True(t, gone(configMapGVR, ns, "app-notify"), "downstream step stamped before completion")

	setStatus(t, testGVR, ns, "app-deploy", readyCondition("True", gen))
	d = waitOwner(t, deliverableGVR, ns, "app", "Ready", "True", "Ready")
	assert.Equal(t, "SucceededConditionMet", stepCondition(d, "deployer", "Healthy")["reason"])
	assert.Equal(t, "ResourceSubmissionComplete", stepCondition(d, "deployer", "ResourceSubmitted")["reason"])
	assert.Equal(t, map[string]any{"url": "https://artifacts/config-1.tgz\n", "revision": "rev1\n"}, outputsOf(stepStatus(d, "deployer")),
		"a deployment step's output is its deployment input")
	cm := get(t, configMapGVR, ns, "app-notify")
	assert.Equal(t, "https://artifacts/config-1.tgz", nested(cm.Object, "data", "url"))
	assert.Equal(t, "rev1", nested(cm.Object, "data", "revision"))

	// A new revision changes the deployed object's spec (a new generation):
	// the step waits for the deployer to observe it, downstream keeps rev1.
	setStatus(t, testGVR, ns, "app-source", map[string]any{"url": "https://artifacts/config-2.tgz", "revision": "rev2"})
	dep = waitFor(t, testGVR, ns, "app-deploy", fieldIs("rev2", "spec", "revision"))
	require.Greater(t, dep.GetGeneration(), gen)
	waitOwner(t, deliverableGVR, ns, "app", "Ready", "Unknown", "ConditionNotMet")
	assert.Equal(t, "rev1", nested(get(t, configMapGVR, ns, "app-notify").Object, "data", "revision"), "downstream fed before the new revision completed")

	setStatus(t, testGVR, ns, "app-deploy", readyCondition("True", dep.GetGeneration()))
	waitFor(t, configMapGVR, ns, "app-notify", fieldIs("rev2", "data", "revision"))
	waitOwner(t, deliverableGVR, ns, "app", "Ready", "True", "Ready")
}

// Two deployment templates in a row, each released by observedMatches: the
// second deploys what the first passed on.
func TestDeliveryChainOfTwoDeploymentTemplates(t *testing.T) {
	ns := newNamespace(t)
	n := newDeliveryNames(ns)
	second := uniq(ns, "deploy2")
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
    metadata: {name: $(deliverable.metadata.name)$-source}
    spec: {}
---
apiVersion: carto.run/v1alpha1
kind: ClusterDeploymentTemplate
metadata: {name: %[2]s}
spec:
  observedMatches:
  - {input: spec.revision, output: status.appliedRevision}
  template:
    apiVersion: test.run/v1alpha1
    kind: Test
    metadata: {name: $(deliverable.metadata.name)$-staging}
    spec:
      url: $(deployment.url)$
      revision: $(deployment.revision)$
---
apiVersion: carto.run/v1alpha1
kind: ClusterDeploymentTemplate
metadata: {name: %[3]s}
spec:
  observedMatches:
  - {input: spec.revision, output: status.appliedRevision}
  - {input: spec.url, output: status.appliedURL}
  template:
    apiVersion: test.run/v1alpha1
    kind: Test
    metadata: {name: $(deliverable.metadata.name)$-prod}
    spec:
      url: $(deployment.url)$
      revision: $(deployment.revision)$
---
apiVersion: carto.run/v1alpha1
kind: ClusterDelivery
metadata: {name: %[4]s}
spec:
  selector: {app.example.com/delivery: %[4]s}
  resources:
  - name: source-provider
    templateRef: {kind: ClusterSourceTemplate, name: %[1]s}
  - name: staging
    templateRef: {kind: ClusterDeploymentTemplate, name: %[2]s}
    deployment: {resource: source-provider}
  - name: prod
    templateRef: {kind: ClusterDeploymentTemplate, name: %[3]s}
    deployment: {resource: staging}
`, n.source, n.deploy, second, n.delivery))
	apply(t, ns, deliverableYAML("app", n.delivery))
	waitOwner(t, deliverableGVR, ns, "app", "ResourcesSubmitted", "Unknown", "MissingValueAtPath")
	setStatus(t, testGVR, ns, "app-source", map[string]any{"url": "https://a/1", "revision": "r1"})

	waitFor(t, testGVR, ns, "app-staging", fieldIs("r1", "spec", "revision"))
	d := waitStep(t, deliverableGVR, ns, "app", "staging", "ResourceSubmitted", "Unknown", "ConditionNotMet")
	assert.Contains(t, fmt.Sprint(stepCondition(d, "staging", "Healthy")["message"]), "output [status.appliedRevision] is missing")
	assert.Equal(t, "resource [staging] condition not met: could not find value on output [status.appliedRevision]: jsonpath returned empty list: status.appliedRevision",
		stepCondition(d, "staging", "ResourceSubmitted")["message"])
	assert.True(t, gone(testGVR, ns, "app-prod"), "second deployment before the first matched")

	setStatus(t, testGVR, ns, "app-staging", map[string]any{"appliedRevision": "r1"})
	prod := waitFor(t, testGVR, ns, "app-prod", fieldIs("r1", "spec", "revision"))
	assert.Equal(t, "https://a/1", nested(prod.Object, "spec", "url"))
	// One of two matches holds: still waiting, and the message says which not.
	setStatus(t, testGVR, ns, "app-prod", map[string]any{"appliedRevision": "r1"})
	eventually(t, 30*time.Second, func() string {
		c := stepCondition(get(t, deliverableGVR, ns, "app"), "prod", "Healthy")
		if c["reason"] != "ConditionNotMet" || !strings.Contains(fmt.Sprint(c["message"]), "output [status.appliedURL] is missing") {
			return fmt.Sprintf("prod: %v/%v (%v)", c["status"], c["reason"], c["message"])
		}
		return ""
	})
	setStatus(t, testGVR, ns, "app-prod", map[string]any{"appliedRevision": "r1", "appliedURL": "https://a/1"})
	d = waitOwner(t, deliverableGVR, ns, "app", "Ready", "True", "Ready")
	assert.Equal(t, "ObservedMatchesMet", stepCondition(d, "prod", "Healthy")["reason"])
	assert.Equal(t, map[string]any{"url": "https://a/1\n", "revision": "r1\n"}, outputsOf(stepStatus(d, "prod")))
	assert.Equal(t, []any{map[string]any{"name": "staging"}}, stepStatus(d, "prod")["inputs"])
}

// Each bad input of a deployment step ends as a clear condition.
func TestDeploymentStepBadInputs(t *testing.T) {
	t.Run("OutputPathMissing", func(t *testing.T) {
		ns := newNamespace(t)
		n := newDeliveryNames(ns)
		apply(t, ns, deliveryChain(n, `
  observedMatches:
  - {input: spec.revision, output: status.appliedRevision}`))
		apply(t, ns, deliverableYAML("app", n.delivery))
		setStatus(t, testGVR, ns, "app-source", map[string]any{"url": "u", "revision": "r1"})
		waitFor(t, testGVR, ns, "app-deploy", nil)
		// The deployer writes a status, but not the output path.
		setStatus(t, testGVR, ns, "app-deploy", map[string]any{"somethingElse": "r1"})
		d := waitOwner(t, deliverableGVR, ns, "app", "Ready", "Unknown", "ConditionNotMet")
		assert.Equal(t, "resource [deployer] condition not met: could not find value on output [status.appliedRevision]: jsonpath returned empty list: status.appliedRevision",
			ownerCondition(d, "Ready")["message"])
		msg := fmt.Sprint(stepCondition(d, "deployer", "Healthy")["message"])
		assert.Contains(t, msg, "input [spec.revision] is [r1]")
		assert.Contains(t, msg, "output [status.appliedRevision] is missing")
		assert.Equal(t, "Unknown", stepCondition(d, "deployer", "Healthy")["status"])
		assert.True(t, gone(configMapGVR, ns, "app-notify"))
	})

	t.Run("NeverMatches", func(t *testing.T) {
		ns := newNamespace(t)
		n := newDeliveryNames(ns)
		apply(t, ns, deliveryChain(n, `
  observedMatches:
  - {input: spec.revision, output: status.appliedRevision}`))
		apply(t, ns, deliverableYAML("app", n.delivery))
		setStatus(t, testGVR, ns, "app-source", map[string]any{"url": "u", "revision": "r1"})
		waitFor(t, testGVR, ns, "app-deploy", nil)
		setStatus(t, testGVR, ns, "app-deploy", map[string]any{"appliedRevision": "r0"})
		var d *unstructured.Unstructured
		eventually(t, 30*time.Second, func() string {
			d = get(t, deliverableGVR, ns, "app")
			c := stepCondition(d, "deployer", "Healthy")
			if c["status"] != "Unknown" || c["reason"] != "ConditionNotMet" || !strings.Contains(fmt.Sprint(c["message"]), "[r0]") {
				return fmt.Sprintf("deployer: %v/%v (%v)", c["status"], c["reason"], c["message"])
			}
			return ""
		})
		msg := fmt.Sprint(stepCondition(d, "deployer", "Healthy")["message"])
		for _, s := range []string{"spec.revision", "[r1]", "status.appliedRevision", "[r0]"} {
			assert.Contains(t, msg, s)
		}
		assert.Equal(t, "resource [deployer] condition not met: input [spec.revision] and output [status.appliedRevision] do not match: r1 != r0",
			stepCondition(d, "deployer", "ResourceSubmitted")["message"])
		assert.Equal(t, "ConditionNotMet", ownerCondition(d, "ResourcesSubmitted")["reason"])
		assert.Equal(t, "Unknown", ownerCondition(d, "ResourcesSubmitted")["status"])
		assert.True(t, gone(configMapGVR, ns, "app-notify"))
	})

	t.Run("FailedCondition", func(t *testing.T) {
		ns := newNamespace(t)
		n := newDeliveryNames(ns)
		apply(t, ns, deliveryChain(n, ""))
		apply(t, ns, deliverableYAML("app", n.delivery))
		setStatus(t, testGVR, ns, "app-source", map[string]any{"url": "u", "revision": "r1"})
		dep := waitFor(t, testGVR, ns, "app-deploy", nil)
		setStatus(t, testGVR, ns, "app-deploy", readyCondition("False", dep.GetGeneration()))
		d := waitOwner(t, deliverableGVR, ns, "app", "Ready", "False", "FailedConditionMet")
		assert.Equal(t, "False", ownerCondition(d, "ResourcesSubmitted")["status"])
		assert.Equal(t, "FailedConditionMet", ownerCondition(d, "ResourcesSubmitted")["reason"])
		assert.Equal(t, "False", ownerCondition(d, "ResourcesHealthy")["status"])
		c := stepCondition(d, "deployer", "ResourceSubmitted")
		assert.Equal(t, "False", c["status"])
		assert.Equal(t, `resource [deployer] failed condition met: deployment failure condition [status.conditions[?(@.type=="Ready")].status] was: False`, c["message"])
		assert.Contains(t, fmt.Sprint(stepCondition(d, "deployer", "Healthy")["message"]), `status.conditions[?(@.type=="Ready")].status`)
		assert.Equal(t, "False", stepCondition(d, "deployer", "Healthy")["status"])
		assert.Equal(t, "FailedConditionMet", stepCondition(d, "deployer", "Healthy")["reason"])
		assert.True(t, gone(configMapGVR, ns, "app-notify"))

		// Recovery: the deployer succeeds on a later attempt.
		setStatus(t, testGVR, ns, "app-deploy", readyCondition("True", dep.GetGeneration()))
		waitOwner(t, deliverableGVR, ns, "app", "Ready", "True", "Ready")
	})

	// A deployment step reading from itself passes admission (the CEL rule
	// checks only the kind of the named step) and ends as a clear condition.
	t.Run("DeploymentFromItself", func(t *testing.T) {
		ns := newNamespace(t)
		n := newDeliveryNames(ns)
		apply(t, ns, deliveryChain(n, ""))
		apply(t, ns, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterDelivery
metadata: {name: %[1]s}
spec:
  selector: {app.example.com/delivery: %[1]s}
  resources:
  - name: deployer
    templateRef: {kind: ClusterDeploymentTemplate, name: %[2]s}
    deployment: {resource: deployer}
`, n.delivery, n.deploy))
		apply(t, ns, deliverableYAML("app", n.delivery))
		d := waitOwner(t, deliverableGVR, ns, "app", "Ready", "False", "")
		c := stepCondition(d, "deployer", "ResourceSubmitted")
		require.NotNil(t, c)
		assert.Equal(t, "False", c["status"])
		assert.Equal(t, "TemplateStampFailure", c["reason"])
		assert.Contains(t, fmt.Sprint(c["message"]), "not an earlier step")
		assert.True(t, gone(testGVR, ns, "app-deploy"))
	})
}

// The schema rejects deployment where it cannot be used, at admission.
func TestDeploymentSchemaRejections(t *testing.T) {
	ns := newNamespace(t)
	tmpl := uniq(ns, "t")
	cases := []struct {
		name, yaml, want string
	}{
		{"DeploymentOnClusterTemplate", `
apiVersion: carto.run/v1alpha1
kind: ClusterDelivery
metadata: {name: bad}
spec:
  selector: {a: b}
  resources:
  - {name: src, templateRef: {kind: ClusterSourceTemplate, name: ` + tmpl + `}}
  - {name: app, templateRef: {kind: ClusterTemplate, name: ` + tmpl + `}, deployment: {resource: src}}
`, "step app: only a ClusterDeploymentTemplate step receives deployment"},
		{"DeploymentTemplateWithoutDeployment", `
apiVersion: carto.run/v1alpha1
kind: ClusterDelivery
metadata: {name: bad}
spec:
  selector: {a: b}
  resources:
  - {name: deploy, templateRef: {kind: ClusterDeploymentTemplate, name: ` + tmpl + `}}
`, "step deploy: a ClusterDeploymentTemplate step must set deployment"},
		{"DeploymentFromConfigStep", `
apiVersion: carto.run/v1alpha1
kind: ClusterDelivery
metadata: {name: bad}
spec:
  selector: {a: b}
  resources:
  - {name: cfg, templateRef: {kind: ClusterConfigTemplate, name: ` + tmpl + `}}
  - {name: deploy, templateRef: {kind: ClusterDeploymentTemplate, name: ` + tmpl + `}, deployment: {resource: cfg}}
`, "every deployment.resource must name a step"},
		{"DeploymentInSupplyChain", `
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: bad}
spec:
  selector: {a: b}
  resources:
  - {name: src, templateRef: {kind: ClusterSourceTemplate, name: ` + tmpl + `}}
  - {name: app, templateRef: {kind: ClusterTemplate, name: ` + tmpl + `}, deployment: {resource: src}}
`, "cannot receive deployment"},
		{"BothObservedMatchesAndCompletion", `
apiVersion: carto.run/v1alpha1
kind: ClusterDeploymentTemplate
metadata: {name: bad}
spec:
  observedMatches: [{input: spec.a, output: status.a}]
  observedCompletion: {succeeded: {key: status.done, value: "true"}}
  template: {apiVersion: v1, kind: ConfigMap, metadata: {name: x}}
`, "only one of observedMatches or observedCompletion"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := applyErr(t, ns, c.yaml)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

// The Deliverable's status matches the contract field by field, and stamped
// objects carry the deliverable's labels.
func TestDeliverableStatusContract(t *testing.T) {
	ns := newNamespace(t)
	n := newDeliveryNames(ns)
	apply(t, ns, deliveryChain(n, ""))
	apply(t, ns, deliverableYAML("app", n.delivery))
	setStatus(t, testGVR, ns, "app-source", map[string]any{"url": "u", "revision": "r"})
	dep := waitFor(t, testGVR, ns, "app-deploy", nil)
	setStatus(t, testGVR, ns, "app-deploy", readyCondition("True", dep.GetGeneration()))
	d := waitOwner(t, deliverableGVR, ns, "app", "Ready", "True", "Ready")

	st := d.Object["status"].(map[string]any)
	assert.EqualValues(t, d.GetGeneration(), st["observedGeneration"])
	assert.Equal(t, map[string]any{"kind": "ClusterDelivery", "name": n.delivery}, st["deliveryRef"])
	assert.NotContains(t, st, "supplyChainRef")
	conds := st["conditions"].([]any)
	assert.Equal(t, []string{"DeliveryReady", "ResourcesSubmitted", "ResourcesHealthy", "Ready"}, conditionTypes(conds))
	for _, c := range conds {
		c := c.(map[string]any)
		assert.Equal(t, "True", c["status"], "condition %s", c["type"])
		assert.NotEmpty(t, c["lastTransitionTime"])
		assert.EqualValues(t, d.GetGeneration(), c["observedGeneration"])
	}
	assert.Equal(t, "Ready", ownerCondition(d, "DeliveryReady")["reason"])
	assert.Equal(t, "ResourceSubmissionComplete", ownerCondition(d, "ResourcesSubmitted")["reason"])
	assert.Equal(t, "HealthyConditionRule", ownerCondition(d, "ResourcesHealthy")["reason"])

	res := st["resources"].([]any)
	require.Len(t, res, 3)
	src := res[0].(map[string]any)
	assert.Equal(t, "source-provider", src["name"])
	assert.Equal(t, map[string]any{"apiVersion": "test.run/v1alpha1", "kind": "Test", "namespace": ns, "name": "app-source", "resource": "tests.test.run"}, src["stampedRef"])
	assert.Equal(t, map[string]any{"apiVersion": "carto.run/v1alpha1", "kind": "ClusterSourceTemplate", "name": n.source}, src["templateRef"])
	assert.Nil(t, src["inputs"])
	deployer := res[1].(map[string]any)
	assert.Equal(t, "deployer", deployer["name"])
	assert.Equal(t, map[string]any{"apiVersion": "test.run/v1alpha1", "kind": "Test", "namespace": ns, "name": "app-deploy", "resource": "tests.test.run"}, deployer["stampedRef"])
	assert.Equal(t, map[string]any{"apiVersion": "carto.run/v1alpha1", "kind": "ClusterDeploymentTemplate", "name": n.deploy}, deployer["templateRef"])
	assert.Equal(t, []any{map[string]any{"name": "source-provider"}}, deployer["inputs"])
	outs := deployer["outputs"].([]any)
	require.Len(t, outs, 2)
	for _, o := range outs {
		o := o.(map[string]any)
		assert.Equal(t, "sha256:"+sha256hex(o["preview"].(string)), o["digest"])
		assert.NotEmpty(t, o["lastTransitionTime"])
	}
	assert.Equal(t, []string{"ResourceSubmitted", "Healthy", "Ready"}, conditionTypes(deployer["conditions"].([]any)))
	notifier := res[2].(map[string]any)
	assert.Equal(t, []any{map[string]any{"name": "deployer"}}, notifier["inputs"])
	assert.Equal(t, "configmaps", nested(notifier, "stampedRef", "resource"))
	assert.Equal(t, "AlwaysHealthy", condition(notifier, "Healthy")["reason"])

	for _, o := range []*unstructured.Unstructured{get(t, testGVR, ns, "app-source"), get(t, testGVR, ns, "app-deploy"), get(t, configMapGVR, ns, "app-notify")} {
		l := o.GetLabels()
		assert.Equal(t, "app", l["carto.run/deliverable-name"], o.GetName())
		assert.Equal(t, ns, l["carto.run/deliverable-namespace"], o.GetName())
		assert.Equal(t, n.delivery, l["carto.run/delivery-name"], o.GetName())
		assert.NotContains(t, l, "carto.run/workload-name", o.GetName())
		assert.NotContains(t, l, "carto.run/supply-chain-name", o.GetName())
		refs := o.GetOwnerReferences()
		require.Len(t, refs, 1)
		assert.Equal(t, "Deliverable", refs[0].Kind)
		assert.Equal(t, d.GetUID(), refs[0].UID)
	}
	l := get(t, testGVR, ns, "app-deploy").GetLabels()
	assert.Equal(t, "deployer", l["carto.run/resource-name"])
	assert.Equal(t, "ClusterDeploymentTemplate", l["carto.run/template-kind"])
	assert.Equal(t, n.deploy, l["carto.run/cluster-template-name"])
	assert.Equal(t, "mutable", l["carto.run/template-lifecycle"])
}

// Delivery selection: no labels, no match, two equally specific matches.
func TestDeliverableSelection(t *testing.T) {
	ns := newNamespace(t)
	n := newDeliveryNames(ns)
	apply(t, ns, deliveryChain(n, ""))

	apply(t, ns, `
apiVersion: carto.run/v1alpha1
kind: Deliverable
metadata: {name: nolabels}
spec: {source: {git: {url: "https://git.example.com/c.git", ref: {branch: main}}}}
`)
	d := waitOwner(t, deliverableGVR, ns, "nolabels", "DeliveryReady", "False", "DeliverableLabelsMissing")
	assert.Equal(t, "DeliverableLabelsMissing", ownerCondition(d, "Ready")["reason"])
	assert.Equal(t, "False", ownerCondition(d, "Ready")["status"])
	assert.Equal(t, "deliverable has no labels to match to delivery", ownerCondition(d, "DeliveryReady")["message"])
	assert.Nil(t, nested(d.Object, "status", "deliveryRef"))

	apply(t, ns, deliverableYAML("nomatch", uniq(ns, "nothing")))
	d = waitOwner(t, deliverableGVR, ns, "nomatch", "DeliveryReady", "False", "DeliveryNotFound")
	assert.Equal(t, "DeliveryNotFound", ownerCondition(d, "Ready")["reason"])
	assert.Contains(t, fmt.Sprint(ownerCondition(d, "DeliveryReady")["message"]), "delivery")
	assert.Nil(t, nested(d.Object, "status", "deliveryRef"))

	// A second delivery with an equally specific selector.
	twin := uniq(ns, "twin")
	apply(t, ns, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterDelivery
metadata: {name: %s}
spec:
  selector: {app.example.com/delivery: %s}
  resources:
  - name: source-provider
    templateRef: {kind: ClusterSourceTemplate, name: %s}
`, twin, n.delivery, n.source))
	// Kontinue has seen the twin once it reports on it: only then is the
	// deliverable's choice ambiguous from the start.
	waitFor(t, deliveryGVR, "", twin, func(u *unstructured.Unstructured) string {
		if ownerCondition(u, "Ready") == nil {
			return "no Ready condition on " + twin
		}
		return ""
	})
	apply(t, ns, deliverableYAML("two", n.delivery))
	d = waitOwner(t, deliverableGVR, ns, "two", "DeliveryReady", "False", "MultipleDeliveryMatches")
	assert.Equal(t, "MultipleDeliveryMatches", ownerCondition(d, "Ready")["reason"])
	assert.Equal(t, "deliverable may only match a single delivery's selector", ownerCondition(d, "DeliveryReady")["message"])
	waitEventIn(t, ns, "two", "MultipleDeliveryMatches", n.delivery, twin)
	assert.True(t, gone(testGVR, ns, "two-source"), "nothing stamped for an ambiguous deliverable")
	for _, name := range []string{"nolabels", "nomatch", "two"} {
		assert.Nil(t, nested(get(t, deliverableGVR, ns, name).Object, "status", "resources"), name)
	}
}

// A deployment step may choose between a deployment template and passing
// its deployment input through (for deliverables that need no deployer).
func TestDeliveryDeploymentOptionWithPassThrough(t *testing.T) {
	ns := newNamespace(t)
	n := newDeliveryNames(ns)
	apply(t, ns, deliveryChain(n, ""))
	apply(t, ns, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterDelivery
metadata: {name: %[1]s}
spec:
  selector: {app.example.com/delivery: %[1]s}
  resources:
  - name: source-provider
    templateRef: {kind: ClusterSourceTemplate, name: %[2]s}
  - name: deployer
    templateRef:
      kind: ClusterDeploymentTemplate
      options:
      - name: %[3]s
        selector:
          matchFields:
          - {key: 'deliverable.spec.params[?(@.name=="env")].value', operator: In, values: [prod]}
      - passThrough: deployment
        selector: {}
    deployment: {resource: source-provider}
  - name: notifier
    templateRef: {kind: ClusterTemplate, name: %[4]s}
    sources: [{name: deployed, resource: deployer}]
`, n.delivery, n.source, n.deploy, n.notify))
	apply(t, ns, strings.Replace(deliverableYAML("app", n.delivery), "value: prod", "value: dev", 1))
	setStatus(t, testGVR, ns, "app-source", map[string]any{"url": "https://a/1", "revision": "r1"})

	d := waitOwner(t, deliverableGVR, ns, "app", "Ready", "True", "Ready")
	assert.Equal(t, "PassThrough", stepCondition(d, "deployer", "ResourceSubmitted")["reason"])
	assert.Nil(t, stepStatus(d, "deployer")["stampedRef"])
	assert.True(t, gone(testGVR, ns, "app-deploy"))
	assert.Equal(t, "r1", nested(get(t, configMapGVR, ns, "app-notify").Object, "data", "revision"))

	// prod goes through the deployer, and waits for it.
	apply(t, ns, deliverableYAML("app", n.delivery))
	dep := waitFor(t, testGVR, ns, "app-deploy", fieldIs("r1", "spec", "revision"))
	d = waitOwner(t, deliverableGVR, ns, "app", "Ready", "Unknown", "ConditionNotMet")
	assert.Equal(t, n.deploy, nested(stepStatus(d, "deployer"), "templateRef", "name"))
	setStatus(t, testGVR, ns, "app-deploy", readyCondition("True", dep.GetGeneration()))
	waitOwner(t, deliverableGVR, ns, "app", "Ready", "True", "Ready")

	// Back to dev: the deployed object is removed.
	apply(t, ns, strings.Replace(deliverableYAML("app", n.delivery), "value: prod", "value: dev", 1))
	waitGone(t, testGVR, ns, "app-deploy")
	d = waitStep(t, deliverableGVR, ns, "app", "deployer", "ResourceSubmitted", "True", "PassThrough")
	assert.Equal(t, map[string]any{"url": "https://a/1\n", "revision": "r1\n"}, outputsOf(stepStatus(d, "deployer")))
}
