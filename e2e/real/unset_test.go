package e2ereal

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// unsetChain reads, in templates written for Cartographer, Workload and
// Runnable fields the owner leaves unset, as Cartographer's kpack and
// Tekton example templates do and as `tanzu apps workload create` leaves
// them unless asked: a kpack Image whose image output nobody writes (no
// kpack here), a Runnable's TaskRun, and a chain whose every step names
// what Cartographer fails on.
func unsetChain(ns string) string {
	return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterImageTemplate
metadata: {name: %[1]s}
spec:
  imagePath: .status.latestImage
  template:
    apiVersion: kpack.io/v1alpha2
    kind: Image
    metadata: {name: $(workload.metadata.name)$}
    spec:
      tag: registry.example.com/$(workload.metadata.name)$
      serviceAccountName: "sa-$(workload.spec.serviceAccountName)$"
      generateName: "[$(workload.metadata.generateName)$]"
      source:
        git:
          url: $(workload.spec.source.git.url)$
          tag: $(workload.spec.source.git.ref.tag)$
          branch: $(workload.spec.source.git.ref.branch)$
        subPath: $(workload.spec.source.subPath)$
      build:
        env: $(workload.spec.build.env)$
        settings: $(workload.spec.build)$
        appEnv: $(workload.spec.env)$
        image: $(workload.spec.image)$
        resources: $(workload.spec.resources)$
        claims: $(workload.spec.serviceClaims)$
        annotations: $(workload.metadata.annotations)$
---
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: %[2]s}
spec:
  selector: {app.example.com/chain: %[2]s}
  resources:
  - name: image
    templateRef: {kind: ClusterImageTemplate, name: %[1]s}
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[3]s-field}
spec:
  template: {apiVersion: v1, kind: ConfigMap, metadata: {name: $(workload.metadata.name)$-field}, data: {v: $(workload.spec.nope)$}}
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[3]s-label}
spec:
  template: {apiVersion: v1, kind: ConfigMap, metadata: {name: $(workload.metadata.name)$-label}, data: {v: $(workload.metadata.labels.nope)$}}
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[3]s-annotation}
spec:
  template: {apiVersion: v1, kind: ConfigMap, metadata: {name: $(workload.metadata.name)$-annotation}, data: {v: $(workload.metadata.annotations.nope)$}}
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[3]s-param}
spec:
  template: {apiVersion: v1, kind: ConfigMap, metadata: {name: $(workload.metadata.name)$-param}, data: {v: $(params.nope)$}}
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[3]s-null}
spec:
  template: {apiVersion: v1, kind: ConfigMap, metadata: {name: $(workload.metadata.name)$-null}, data: {v: "image-$(workload.spec.image)$"}}
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[3]s-below-null}
spec:
  template: {apiVersion: v1, kind: ConfigMap, metadata: {name: $(workload.metadata.name)$-below}, data: {v: $(workload.spec.resources.limits)$}}
---
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: %[3]s}
spec:
  selector: {app.example.com/chain: %[3]s}
  resources:
  - {name: field, templateRef: {kind: ClusterTemplate, name: %[3]s-field}}
  - {name: label, templateRef: {kind: ClusterTemplate, name: %[3]s-label}}
  - {name: annotation, templateRef: {kind: ClusterTemplate, name: %[3]s-annotation}}
  - {name: param, templateRef: {kind: ClusterTemplate, name: %[3]s-param}}
  - {name: "null", templateRef: {kind: ClusterTemplate, name: %[3]s-null}}
  - {name: below-null, templateRef: {kind: ClusterTemplate, name: %[3]s-below-null}}
---
apiVersion: carto.run/v1alpha1
kind: ClusterRunTemplate
metadata: {name: %[4]s}
spec:
  template:
    apiVersion: tekton.dev/v1
    kind: TaskRun
    metadata:
      generateName: $(runnable.metadata.name)$-
      annotations: {sa: "sa-$(runnable.spec.serviceAccountName)$"}
    spec:
      podTemplate: $(runnable.spec.selector)$
      taskSpec:
        steps: [{name: run, image: registry.example.com/runner, command: ["true"]}]
---
apiVersion: carto.run/v1alpha1
kind: Runnable
metadata: {name: run}
spec:
  runTemplateRef: {name: %[4]s}
---
apiVersion: carto.run/v1alpha1
kind: Workload
metadata:
  name: app
  labels: {app.example.com/chain: %[2]s}
spec:
  source:
    git:
      url: https://git.example.com/app.git
      ref: {tag: v1}
---
apiVersion: carto.run/v1alpha1
kind: Workload
metadata:
  name: bad
  labels: {app.example.com/chain: %[3]s}
spec:
  source:
    git:
      url: https://git.example.com/bad.git
      ref: {tag: v1}
`, uniq(ns, "image"), uniq(ns, "chain"), uniq(ns, "bad"), uniq(ns, "run"))
}

// unsetResult is what a controller made of unsetChain.
type unsetResult struct {
	image   map[string]any // the kpack Image's spec
	taskRun map[string]any // the Runnable's TaskRun: its spec and annotation sa
	bad     map[string]string
}

// runUnsetChain applies unsetChain in a new namespace and reads what the
// running controller made of it.
func runUnsetChain(t *testing.T, who string) unsetResult {
	t.Helper()
	ns := newNamespace(t)
	apply(t, ns, `
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: kpack-images}
rules: [{apiGroups: [kpack.io], resources: [images], verbs: [get, list, watch, create, update, patch, delete]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: kpack-images}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: kpack-images}
subjects: [{kind: ServiceAccount, name: default, namespace: `+ns+`}]
`)
	apply(t, ns, unsetChain(ns))
	const timeout = 90 * time.Second
	imageGVR := deploymentGVR
	imageGVR.Group, imageGVR.Version, imageGVR.Resource = "kpack.io", "v1alpha2", "images"
	var res unsetResult
	res.image = nested(waitFor(t, imageGVR, ns, "app", timeout, func(map[string]any) string { return "" }).Object, "spec").(map[string]any)
	want := "waiting to read value [.status.latestImage] from object [images.kpack.io/app] in namespace [" + ns + "]"
	w := waitFor(t, workloadGVR, ns, "app", timeout, func(o map[string]any) string {
		if m := condition(o, "Ready")["message"]; m != want {
			return fmt.Sprintf("%s: Ready message %q, want %q", who, m, want)
		}
		return ""
	})
	assert.Equal(t, "MissingValueAtPath", condition(w.Object, "Ready")["reason"], who)
	assert.Equal(t, "Unknown", condition(w.Object, "Ready")["status"], who)
	assert.Equal(t, "", condition(w.Object, "ResourcesHealthy")["message"], "%s: the image step's Healthy (OutputNotAvailable) has no message", who)

	res.bad = map[string]string{}
	steps := []string{"field", "label", "annotation", "param", "null", "below-null"}
	b := waitFor(t, workloadGVR, ns, "bad", timeout, func(o map[string]any) string {
		u := &unstructured.Unstructured{Object: o}
		for _, s := range steps {
			if stepCondition(u, s, "ResourceSubmitted") == nil {
				return "step " + s + " not reported yet"
			}
		}
		return ""
	})
	for _, s := range steps {
		c := stepCondition(b, s, "ResourceSubmitted")
		res.bad[s] = fmt.Sprintf("%v/%v", c["status"], c["reason"])
	}
	assert.Equal(t, "False", condition(b.Object, "Ready")["status"], who)
	assert.Equal(t, "TemplateStampFailure", condition(b.Object, "Ready")["reason"], who)
	assert.Empty(t, list(t, configMapGVR, ns, "carto.run/workload-name=bad"), "%s: nothing stamped where a tag fails", who)

	var tr unstructured.Unstructured
	eventually(t, timeout, func() string {
		runs := list(t, taskRunGVR, ns, "carto.run/runnable-name=run")
		if len(runs) == 0 {
			return who + ": no TaskRun for the Runnable yet"
		}
		tr = runs[0]
		return ""
	})
	res.taskRun = map[string]any{"sa": tr.GetAnnotations()["sa"], "podTemplate": nested(tr.Object, "spec", "podTemplate")}
	return res
}

// TestRealUnsetOwnerFields renders, with Cartographer v0.8.11's own
// controller and then with Kontinue, templates naming Workload and
// Runnable fields the owner leaves unset: both stamp the same objects
// (the field's zero value: "" for a string, {} for a struct, nothing for
// a pointer, a list or a map), both fail the same steps (an unknown field,
// a label, an annotation, a param, a null inside a string, below a null),
// and both say the same while a step waits for its output.
func TestRealUnsetOwnerFields(t *testing.T) {
	waitOtherNamespacesGone(t, "")
	stopKontinue(t)
	useCartographerCRDs(t)
	carto := startCartographer(t, "unset")
	cartographer := runUnsetChain(t, "Cartographer")
	carto.stop()

	installKontinueCRDs(t)
	startKontinueNow(t)
	kontinue := runUnsetChain(t, "Kontinue")

	// What Cartographer stamps: every unset field its zero value, nulls kept.
	assert.Equal(t, map[string]any{
		"tag":                "registry.example.com/app",
		"serviceAccountName": "sa-",
		"generateName":       "[]",
		"source":             map[string]any{"git": map[string]any{"url": "https://git.example.com/app.git", "tag": "v1", "branch": nil}, "subPath": nil},
		"build": map[string]any{"env": nil, "settings": map[string]any{}, "appEnv": nil, "image": nil, "resources": nil, "claims": nil,
			"annotations": nil},
	}, cartographer.image, "Cartographer's Image")
	assert.Equal(t, cartographer.image, kontinue.image, "the Image, Cartographer's and Kontinue's")
	assert.Equal(t, map[string]any{"sa": "sa-", "podTemplate": nil}, cartographer.taskRun, "Cartographer's TaskRun")
	assert.Equal(t, cartographer.taskRun, kontinue.taskRun, "the Runnable's TaskRun, Cartographer's and Kontinue's")
	for s, got := range cartographer.bad {
		assert.Equal(t, "False/TemplateStampFailure", got, "Cartographer's step %s", s)
	}
	assert.Equal(t, cartographer.bad, kontinue.bad, "the steps that fail")
}
