package main

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// Resources the bench reads and writes.
var (
	workloadGVR  = schema.GroupVersionResource{Group: "carto.run", Version: "v1alpha1", Resource: "workloads"}
	chainGVR     = schema.GroupVersionResource{Group: "carto.run", Version: "v1alpha1", Resource: "clustersupplychains"}
	configMapGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	namespaceGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

	gvrByKind = map[string]schema.GroupVersionResource{
		"Namespace":                namespaceGVR,
		"ClusterRole":              {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
		"RoleBinding":              {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
		"ClusterSourceTemplate":    {Group: "carto.run", Version: "v1alpha1", Resource: "clustersourcetemplates"},
		"ClusterImageTemplate":     {Group: "carto.run", Version: "v1alpha1", Resource: "clusterimagetemplates"},
		"ClusterTemplate":          {Group: "carto.run", Version: "v1alpha1", Resource: "clustertemplates"},
		"ClusterSupplyChain":       chainGVR,
		"Workload":                 workloadGVR,
		"CustomResourceDefinition": {Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
	}
)

const (
	benchNS   = "bench"
	floorNS   = "bench-floor"
	chainName = "bench"
	// chainLabel selects the bench's workloads; the floor's workloads do
	// not carry it.
	chainLabel = "bench.kontinue.dev/chain"
	// firstStep and lastStep are the steps whose ConfigMaps the
	// change-latency probe watches.
	firstStep = "source-provider"
	lastStep  = "app"
	// Labels Kontinue sets on what it stamps (the contract's).
	labelWorkloadName = "carto.run/workload-name"
	labelResourceName = "carto.run/resource-name"
	stampedSelector   = "kontinue.dev/stamped=true"
	registry          = "registry.example.com"
)

// chainYAML is one 3-step chain, source → image → template, that stamps
// ConfigMaps whose data hold the outputs, so that every step is Ready as
// soon as it is applied and nothing outside the API server is needed. A
// change of the workload's branch flows through all three steps.
const chainYAML = `
apiVersion: carto.run/v1alpha1
kind: ClusterSourceTemplate
metadata: {name: bench-source}
spec:
  urlPath: .data.url
  revisionPath: .data.revision
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-source}
    data:
      url: $(workload.spec.source.git.url)$
      revision: $(workload.spec.source.git.ref.branch)$
---
apiVersion: carto.run/v1alpha1
kind: ClusterImageTemplate
metadata: {name: bench-image}
spec:
  params: [{name: registry, default: ` + registry + `}]
  imagePath: .data.image
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-image}
    data:
      image: $(params.registry)$/$(workload.metadata.name)$:$(source.revision)$
      builtFrom: $(source.url)$
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: bench-app}
spec:
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-app}
    data:
      image: $(image)$
---
` + chainOnlyYAML

// chainOnlyYAML is the supply chain of both engines' templates.
const chainOnlyYAML = `
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: ` + chainName + `}
spec:
  selector: {` + chainLabel + `: ` + chainName + `}
  resources:
  - name: ` + firstStep + `
    templateRef: {kind: ClusterSourceTemplate, name: bench-source}
  - name: image-builder
    templateRef: {kind: ClusterImageTemplate, name: bench-image}
    sources: [{name: source, resource: ` + firstStep + `}]
  - name: ` + lastStep + `
    templateRef: {kind: ClusterTemplate, name: bench-app}
    images: [{name: image, resource: image-builder}]
`

// goTemplateChainYAML is chainYAML with goTemplate templates (-engine
// goTemplate): the same objects, rendered by the goTemplate engine, so that
// its cost (a render in a bounded child process, or from the cache) shows
// in the same figures.
const goTemplateChainYAML = `
apiVersion: carto.run/v1alpha1
kind: ClusterSourceTemplate
metadata: {name: bench-source}
spec:
  urlPath: .data.url
  revisionPath: .data.revision
  goTemplate: |
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: {{ .workload.metadata.name }}-source}
    data:
      url: {{ .workload.spec.source.git.url | quote }}
      revision: {{ .workload.spec.source.git.ref.branch | quote }}
---
apiVersion: carto.run/v1alpha1
kind: ClusterImageTemplate
metadata: {name: bench-image}
spec:
  params: [{name: registry, default: ` + registry + `}]
  imagePath: .data.image
  goTemplate: |
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: {{ .workload.metadata.name }}-image}
    data:
      image: {{ printf "%s/%s:%s" .params.registry .workload.metadata.name .source.revision | quote }}
      builtFrom: {{ .source.url | quote }}
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: bench-app}
spec:
  goTemplate: |
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: {{ .workload.metadata.name }}-app}
    data:
      image: {{ .image | quote }}
---
` + chainOnlyYAML

// benchChainYAML is the chain and its templates for the engine named by
// -engine.
func benchChainYAML(engine string) string {
	if engine == engineGoTemplate {
		return goTemplateChainYAML
	}
	return chainYAML
}

// Values of -engine.
const (
	engineSimple     = "template"
	engineGoTemplate = "goTemplate"
)

// stepsPerWorkload is the number of objects the chain stamps per workload.
const stepsPerWorkload = 3

// stamperRole is what the workloads' service account may do: the chain
// stamps ConfigMaps only.
const stamperRole = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: bench-stamper}
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch, create, update, patch, delete]
`

// namespaceYAML is a namespace whose default service account may stamp.
func namespaceYAML(ns string) string {
	return fmt.Sprintf(`
apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: bench-stamper, namespace: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: bench-stamper}
subjects: [{kind: ServiceAccount, name: default, namespace: %[1]s}]
`, ns)
}

func workloadName(i int) string { return fmt.Sprintf("w-%05d", i) }

// workload is workload i; with chain false it matches no chain (floor).
func workload(ns string, i int, chain bool) *unstructured.Unstructured {
	name := workloadName(i)
	labels := map[string]any{"app.kubernetes.io/part-of": name}
	if chain {
		labels[chainLabel] = chainName
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "carto.run/v1alpha1",
		"kind":       "Workload",
		"metadata":   map[string]any{"name": name, "namespace": ns, "labels": labels},
		"spec": map[string]any{
			"source": map[string]any{"git": map[string]any{
				"url": "https://git.example.com/" + name + ".git",
				"ref": map[string]any{"branch": "main"},
			}},
		},
	}}
}

// branchPatch changes a workload's branch: a merge patch.
func branchPatch(branch string) []byte {
	return []byte(`{"spec":{"source":{"git":{"ref":{"branch":"` + branch + `"}}}}}`)
}

// expectedImage is what the last step's ConfigMap holds once the branch
// has flowed through the chain.
func expectedImage(workload, branch string) string {
	return registry + "/" + workload + ":" + branch
}

// parseObjects parses a YAML stream.
func parseObjects(y string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(y, "\n---") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			return nil, err
		}
		if len(u.Object) == 0 {
			continue
		}
		out = append(out, u)
	}
	return out, nil
}
