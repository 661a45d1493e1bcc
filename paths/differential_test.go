package paths

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/util/jsonpath"

	"kontinue.dev/kontinue/jsonvalue"
)

// corpusDocs are Kubernetes-style objects the differential test, the fuzz
// tests and the benchmarks run on.
var corpusDocs = map[string]string{
	"workload": workload,
	"deployment": `{
  "apiVersion": "apps/v1", "kind": "Deployment",
  "metadata": {"name": "petclinic", "namespace": "dev", "generation": 4,
    "labels": {"app.kubernetes.io/name": "petclinic", "app.kubernetes.io/part-of": "spring", "app": "petclinic"},
    "annotations": {"deployment.kubernetes.io/revision": "3"}},
  "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "petclinic"}},
    "template": {"metadata": {"labels": {"app": "petclinic"}}, "spec": {"containers": [
      {"name": "app", "image": "registry.example.com/petclinic:v1",
       "ports": [{"containerPort": 8080, "name": "http"}, {"containerPort": 8443, "name": "https"}],
       "env": [{"name": "JAVA_OPTS", "value": "-Xmx512m"}, {"name": "SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]},
      {"name": "sidecar", "image": "registry.example.com/proxy:v2", "ports": [{"containerPort": 15001, "name": "proxy"}]}]}}},
  "status": {"observedGeneration": 4, "replicas": 2, "readyReplicas": 2,
    "conditions": [
      {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "lastTransitionTime": "2024-01-01T00:00:00Z"},
      {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable", "lastTransitionTime": "2024-01-01T00:00:00Z"}]}
}`,
	"pod": `{
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": "petclinic-7d9f", "namespace": "dev", "labels": {"app": "petclinic", "pod-template-hash": "7d9f"}, "ownerReferences": [{"kind": "ReplicaSet", "name": "petclinic-7d9f", "controller": true}]},
  "spec": {"containers": [{"name": "app", "image": "registry.example.com/petclinic:v1", "ports": [{"containerPort": 8080}]}], "nodeName": null},
  "status": {"phase": "Running", "podIP": "10.0.0.7",
    "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}, {"type": "ContainersReady", "status": "False", "reason": "ContainersNotReady"}],
    "containerStatuses": [
      {"name": "app", "ready": true, "restartCount": 0, "state": {"running": {"startedAt": "2024-01-01T00:00:00Z"}}},
      {"name": "init", "ready": false, "restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}
}`,
	"image": `{
  "apiVersion": "kpack.io/v1alpha2", "kind": "Image",
  "metadata": {"name": "petclinic", "namespace": "dev", "generation": 2, "labels": {"app.kubernetes.io/component": "build"}},
  "spec": {"tag": "registry.example.com/petclinic", "builder": {"kind": "ClusterBuilder", "name": "default"}, "source": {"blob": {"url": "http://source/x.tar.gz"}}},
  "status": {"observedGeneration": 2, "latestImage": "registry.example.com/petclinic@sha256:0123", "buildCounter": 5, "latestBuildRef": "petclinic-build-5",
    "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2024-01-01T00:00:00Z"}, {"type": "BuilderReady", "status": "True", "reason": "BuilderReady"}]}
}`,
	"gitrepository": `{
  "apiVersion": "source.toolkit.fluxcd.io/v1beta2", "kind": "GitRepository",
  "metadata": {"name": "petclinic", "namespace": "dev", "generation": 1},
  "spec": {"url": "https://github.com/x/petclinic", "interval": "1m0s", "ref": {"branch": "main"}, "gitImplementation": "go-git", "ignore": "!.git"},
  "status": {"observedGeneration": 1, "url": "http://source-controller/gitrepository/dev/petclinic/latest.tar.gz",
    "artifact": {"path": "gitrepository/dev/petclinic/abc.tar.gz", "revision": "main/abc123", "url": "http://source-controller/abc.tar.gz", "checksum": "deadbeef", "size": 12345},
    "conditions": [{"type": "Ready", "status": "True", "reason": "Succeeded", "message": "stored artifact for revision 'main/abc123'"}, {"type": "ArtifactInStorage", "status": "True", "reason": "Succeeded"}]}
}`,
	"knative": `{
  "apiVersion": "serving.knative.dev/v1", "kind": "Service",
  "metadata": {"name": "petclinic", "namespace": "dev", "labels": {"app.kubernetes.io/part-of": "petclinic", "carto.run/workload-name": "petclinic"}},
  "spec": {"template": {"spec": {"containers": [{"image": "registry.example.com/petclinic@sha256:0123", "ports": [{"containerPort": 8080}]}]}}},
  "status": {"url": "http://petclinic.dev.example.com", "latestReadyRevisionName": "petclinic-00003",
    "traffic": [{"revisionName": "petclinic-00003", "percent": 90, "latestRevision": true},
                {"revisionName": "petclinic-00002", "percent": 10, "latestRevision": false, "tag": "previous"}],
    "conditions": [{"type": "ConfigurationsReady", "status": "True"}, {"type": "Ready", "status": "True"}, {"type": "RoutesReady", "status": "True"}]}
}`,
	"configmap": `{
  "apiVersion": "v1", "kind": "ConfigMap",
  "metadata": {"name": "petclinic-config", "namespace": "dev", "labels": {"app.kubernetes.io/name": "petclinic"}},
  "data": {"config.yaml": "server:\n  port: 8080\n", "application.properties": "a=b", "delivery.yml": "kind: Deliverable", "plain": "x"}
}`,
	"taskrun": `{
  "apiVersion": "tekton.dev/v1beta1", "kind": "TaskRun",
  "metadata": {"generateName": "petclinic-test-", "name": "petclinic-test-abcde", "namespace": "dev"},
  "spec": {"params": [{"name": "source-url", "value": "http://source/x.tar.gz"}, {"name": "source-revision", "value": "abc123"}, {"name": "verbose", "value": true}]},
  "status": {"podName": "petclinic-test-abcde-pod", "startTime": "2024-01-01T00:00:00Z",
    "results": [{"name": "digest", "value": "sha256:0123"}, {"name": "url", "value": "registry.example.com/petclinic"}],
    "conditions": [{"type": "Succeeded", "status": "True", "reason": "Succeeded"}]}
}`,
	"runnable-list": `{
  "apiVersion": "v1", "kind": "List",
  "items": [
    {"apiVersion": "carto.run/v1alpha1", "kind": "Runnable", "metadata": {"name": "r1"}, "status": {"outputs": {"url": "http://a", "revision": "1"}, "conditions": [{"type": "Ready", "status": "True"}]}},
    {"apiVersion": "carto.run/v1alpha1", "kind": "Runnable", "metadata": {"name": "r2"}, "status": {"outputs": {"url": "http://b"}, "conditions": [{"type": "Ready", "status": "False", "reason": "Failed"}]}}],
  "metadata": {"resourceVersion": "123"}
}`,
	"supplychain": `{
  "apiVersion": "carto.run/v1alpha1", "kind": "ClusterSupplyChain",
  "metadata": {"name": "source-to-url", "generation": 3},
  "spec": {"selector": {"apps.tanzu.vmware.com/workload-type": "web"},
    "params": [{"name": "registry", "default": {"server": "registry.example.com", "repository": "apps"}}, {"name": "port", "value": 8080}],
    "resources": [
      {"name": "source-provider", "templateRef": {"kind": "ClusterSourceTemplate", "name": "source"}},
      {"name": "image-builder", "templateRef": {"kind": "ClusterImageTemplate", "name": "kpack"}, "sources": [{"resource": "source-provider", "name": "source"}], "params": [{"name": "clusterBuilder", "default": "default"}]},
      {"name": "deployer", "templateRef": {"kind": "ClusterTemplate", "name": "app-deploy"}, "images": [{"resource": "image-builder", "name": "image"}]}]},
  "status": {"observedGeneration": 3, "conditions": [{"type": "Ready", "status": "True"}, {"type": "TemplatesReady", "status": "True"}]}
}`,
	"odd": `{
  "kind": "Odd",
  "metadata": {"name": "odd", "labels": {}, "annotations": null},
  "spec": {"replicas": 0, "enabled": false, "ratio": 0.5, "negative": -3, "params": [], "matrix": [[], [null], [[1]]], "source": null},
  "status": {"latestImage": "", "observedGeneration": 1.5,
    "conditions": [{"type": 1, "status": "True"}, {"status": "Unknown"}, {"type": "Ready", "status": null}, "not-an-object", null],
    "empty": [], "nothing": null}
}`,
}

// diffPaths are compared on every corpus document. clientGo, when set, is
// how client-go spells the same path: client-go re-parses a bracket key
// `['a.b']` as `.a.b` (splitting it at the dots) and rejects `["a"]`, so it
// needs kubectl's backslash escapes for keys with dots. This is the only
// syntax difference; the path itself is also in the list in that spelling.
var diffPaths = []struct{ path, clientGo string }{
	{path: ".status.latestImage"},
	{path: "status.latestImage"},
	{path: "$.status.latestImage"},
	{path: ".kind"},
	{path: "['kind']"},
	{path: ".apiVersion"},
	{path: ".metadata.name"},
	{path: "metadata.namespace"},
	{path: ".metadata.generation"},
	{path: ".metadata.annotations"},
	{path: ".metadata.labels.app"},
	{path: `.metadata.labels.app\.kubernetes\.io/name`},
	{path: `metadata.labels['app.kubernetes.io/name']`, clientGo: `.metadata.labels.app\.kubernetes\.io/name`},
	{path: `metadata.labels["app.kubernetes.io/part-of"]`, clientGo: `.metadata.labels.app\.kubernetes\.io/part-of`},
	{path: `metadata['labels']['app']`},
	{path: `.metadata.annotations.deployment\.kubernetes\.io/revision`},
	{path: `.data.config\.yaml`},
	{path: `data['config.yaml']`, clientGo: `.data.config\.yaml`},
	{path: `.data.plain`},
	{path: ".status.observedGeneration"},
	{path: ".status.conditions[0].type"},
	{path: ".status.conditions[1].status"},
	{path: ".status.conditions[-1].type"},
	{path: ".status.conditions[-2].reason"},
	{path: ".status.conditions[7].type"},
	{path: ".status.conditions[-9].type"},
	{path: ".status.conditions[*].type"},
	{path: ".status.conditions[*].reason"},
	{path: ".status.conditions[*].lastTransitionTime"},
	{path: `.status.conditions[?(@.type=="Ready")].status`},
	{path: `.status.conditions[?(@.type=='Ready')].reason`},
	{path: `.status.conditions[?(@.type == "Ready")]`},
	{path: `.status.conditions[?(@.type!="Ready")].type`},
	{path: `.status.conditions[?(@.status=="True")].type`},
	{path: `.status.conditions[?(@.status=="False")].reason`},
	{path: `.status.conditions[?(@.reason)].type`},
	{path: `.status.conditions[?(@.type=="Ready")].missing`},
	{path: `.status.conditions[?(@.priority>=2)].type`},
	{path: `.status.conditions[?(@.priority<2)].type`},
	{path: `.status.conditions[?(@.meta.owner=="carto")].type`},
	{path: ".spec.replicas"},
	{path: ".spec.enabled"},
	{path: ".spec.source.git.url"},
	{path: ".spec.source.git.ref.branch"},
	{path: ".spec.source.blob.url"},
	{path: ".spec.template.spec.containers[0].image"},
	{path: `.spec.template.spec.containers[?(@.name=="app")].image`},
	{path: `.spec.template.spec.containers[?(@.name=="app")].ports[?(@.containerPort==8080)].name`},
	{path: ".spec.template.spec.containers[*].image"},
	{path: ".spec.template.spec.containers[*].ports[*].containerPort"},
	{path: ".spec.template.spec.containers[-1].ports[0].containerPort"},
	{path: `.spec.template.spec.containers[0].env[?(@.name=="JAVA_OPTS")].value`},
	{path: `.spec.template.spec.containers[0].env[?(@.name=="SECRET")].valueFrom.secretKeyRef.key`},
	{path: `.spec.params[?(@.name=="port")].value`},
	{path: `.spec.params[?(@.name=="verbose")].value`},
	{path: `.spec.params[?(@.value==true)].name`},
	{path: `.spec.params[?(@.value==8080)].name`},
	{path: `.spec.params[?(@.name=="registry")].default.server`},
	{path: ".spec.params[*].name"},
	{path: ".spec.params[0].value"},
	{path: ".spec.params[-1].value"},
	{path: ".spec.matrix[1][1][0]"},
	{path: ".spec.matrix[*][0]"},
	{path: ".spec.matrix[-1][0]"},
	{path: `.spec.resources[?(@.name=="image-builder")].templateRef.kind`},
	{path: `.spec.resources[?(@.templateRef.kind=="ClusterTemplate")].images[0].resource`},
	{path: `.spec.resources[*].sources[*].resource`},
	{path: `.spec.selector.apps\.tanzu\.vmware\.com/workload-type`},
	{path: `.status.sources.source-provider.url`},
	{path: `.status.images.image-builder.image`},
	{path: ".status.artifact.url"},
	{path: ".status.artifact.revision"},
	{path: ".status.artifact.size"},
	{path: ".status.url"},
	{path: `.status.traffic[?(@.percent==90)].revisionName`},
	{path: `.status.traffic[?(@.percent>50)].revisionName`},
	{path: `.status.traffic[?(@.percent<=90)].revisionName`},
	{path: `.status.traffic[?(@.latestRevision==true)].revisionName`},
	{path: `.status.traffic[?(@.latestRevision!=true)].percent`},
	{path: `.status.traffic[?(@.tag)].tag`},
	{path: `.status.results[?(@.name=="digest")].value`},
	{path: `.status.containerStatuses[?(@.ready==false)].name`},
	{path: `.status.containerStatuses[?(@.restartCount>0)].state.waiting.reason`},
	{path: ".status.containerStatuses[0].state.running.startedAt"},
	{path: ".items[0].metadata.name"},
	{path: ".items[*].status.outputs.revision"},
	{path: `.items[?(@.metadata.name=="r2")].status.conditions[0].reason`},
	{path: `.items[*].status.conditions[?(@.status=="False")].reason`},
	{path: ".status.empty[0]"},
	{path: ".status.empty[*]"},
	{path: ".status.nothing"},
	{path: ".status.nothing.x"},
	{path: ".spec.missing.deep"},
	{path: ".spec.replicas.deep"},
	{path: ".spec.ratio"},
	{path: ".spec.negative"},
}

// Outcome kinds.
const (
	kindFound    = "found"
	kindNotFound = "not found"
	kindSeveral  = "several"
)

type outcome struct {
	kind  string
	count int
	value any
	err   error // client-go's error, if any
}

func clientGoExpr(path string) string {
	if strings.HasPrefix(path, ".") || strings.HasPrefix(path, "[") || strings.HasPrefix(path, "$") {
		return "{" + path + "}"
	}
	return "{." + path + "}"
}

func newClientGo(t testing.TB, path string, allowMissing bool) *jsonpath.JSONPath {
	t.Helper()
	jp := jsonpath.New("diff").AllowMissingKeys(allowMissing)
	require.NoError(t, jp.Parse(clientGoExpr(path)), "client-go cannot parse %q", path)
	return jp
}

func clientGoOutcome(t testing.TB, jp *jsonpath.JSONPath, obj any) outcome {
	t.Helper()
	res, err := jp.FindResults(obj)
	if err != nil {
		// Missing keys, indexes out of range, indexing a non-array...:
		// there is no value.
		return outcome{kind: kindNotFound, err: err}
	}
	require.Len(t, res, 1)
	switch n := len(res[0]); n {
	case 0:
		return outcome{kind: kindNotFound}
	case 1:
		return outcome{kind: kindFound, count: 1, value: res[0][0].Interface()}
	default:
		return outcome{kind: kindSeveral, count: n}
	}
}

func ourOutcome(t testing.TB, p *Path, doc []byte) outcome {
	t.Helper()
	v, err := p.Value(doc)
	if err == nil {
		return outcome{kind: kindFound, count: 1, value: v}
	}
	if IsNotFound(err) {
		return outcome{kind: kindNotFound}
	}
	var amb *AmbiguousError
	require.ErrorAs(t, err, &amb)
	return outcome{kind: kindSeveral, count: amb.Count}
}

// decodeUnstructured decodes like Kubernetes unstructured objects do:
// integers as int64, other numbers as float64.
func decodeUnstructured(t testing.TB, doc string) any {
	t.Helper()
	var v any
	require.NoError(t, jsonvalue.Unmarshal([]byte(doc), &v))
	return v
}

func TestDifferentialClientGo(t *testing.T) {
	require.GreaterOrEqual(t, len(corpusDocs), 10)
	require.GreaterOrEqual(t, len(diffPaths), 40)

	kinds := map[string]int{}
	var compared, retriedAllowMissing, excluded int
	for _, dp := range diffPaths {
		p, err := Compile(dp.path)
		require.NoError(t, err)
		cgPath := dp.path
		if dp.clientGo != "" {
			cgPath = dp.clientGo
		}
		strict := newClientGo(t, cgPath, false)
		lenient := newClientGo(t, cgPath, true)
		for name, doc := range corpusDocs {
			obj := decodeUnstructured(t, doc)
			want := clientGoOutcome(t, strict, obj)
			isFilter := strings.Contains(cgPath, "[?(")

			// Exclusion 1 (retry): with AllowMissingKeys(false), client-go
			// aborts a whole filter as soon as one element lacks the compared
			// field ("x is not found"). Here such an element just does not
			// match, which is what client-go does with AllowMissingKeys(true),
			// so compare with that. (Outside filters both settings give "no
			// value", as an error or as an empty result.)
			if want.err != nil && isFilter && strings.HasSuffix(want.err.Error(), "is not found") {
				want = clientGoOutcome(t, lenient, obj)
				retriedAllowMissing++
			}
			// Exclusion 2 (skip): client-go fails a filter comparing values of
			// different kinds (string vs number, int vs float, null): its
			// comparisons come from text/template. Here such an element does
			// not match (and 3 == 3.0). Skip these pairs.
			if want.err != nil && isFilter && strings.Contains(want.err.Error(), "for comparison") {
				excluded++
				t.Logf("excluded %s on %s: client-go: %v", dp.path, name, want.err)
				continue
			}
			// Exclusion 3 (skip): after [*] or a filter, client-go fails the
			// whole expression when one element is too short for a following
			// index, although it skips elements that lack a following key.
			// Here both kinds of elements are skipped alike.
			fanOut := isFilter || strings.Contains(cgPath, "[*]")
			if want.err != nil && fanOut && strings.HasPrefix(want.err.Error(), "array index out of bounds") {
				excluded++
				t.Logf("excluded %s on %s: client-go: %v", dp.path, name, want.err)
				continue
			}

			got := ourOutcome(t, p, []byte(doc))
			compared++
			kinds[got.kind]++
			if !assert.Equal(t, want.kind, got.kind, "%s on %s (client-go err: %v)", dp.path, name, want.err) {
				continue
			}
			assert.Equal(t, want.count, got.count, "%s on %s", dp.path, name)
			if want.kind == kindFound {
				assert.Equal(t, want.value, got.value, "%s on %s", dp.path, name)
				wantJSON, err := json.Marshal(want.value)
				require.NoError(t, err)
				r, err := p.Get([]byte(doc))
				require.NoError(t, err)
				var compact bytes.Buffer
				require.NoError(t, json.Compact(&compact, []byte(r.Raw)))
				assert.JSONEq(t, string(wantJSON), compact.String(), "%s on %s", dp.path, name)
			}
		}
	}
	t.Logf("compared %d pairs (%v); %d compared with AllowMissingKeys(true); %d excluded", compared, kinds, retriedAllowMissing, excluded)
	// The corpus must exercise every outcome, and the exclusions stay rare.
	assert.GreaterOrEqual(t, kinds[kindFound], 100)
	assert.GreaterOrEqual(t, kinds[kindNotFound], 100)
	assert.GreaterOrEqual(t, kinds[kindSeveral], 15)
	assert.Less(t, excluded, compared/50)
}

// TestDifferentialBracketKeys pins the one syntax difference: client-go
// splits a quoted bracket key at its dots, this package does not.
func TestDifferentialBracketKeys(t *testing.T) {
	doc := corpusDocs["configmap"]
	obj := decodeUnstructured(t, doc)
	got := ourOutcome(t, MustCompile(`data['config.yaml']`), []byte(doc))
	assert.Equal(t, outcome{kind: kindFound, count: 1, value: "server:\n  port: 8080\n"}, got)
	want := clientGoOutcome(t, newClientGo(t, `data['config.yaml']`, false), obj)
	assert.Equal(t, kindNotFound, want.kind, "client-go looks up data.config.yaml")
	jp := jsonpath.New("dq")
	assert.Error(t, jp.Parse(`{.data["config.yaml"]}`), "client-go rejects double-quoted keys")
}

// fallbackPaths are valid JSONPath beyond the compiled subset: client-go
// evaluates them (as in Cartographer), with the same "exactly one value"
// rule as the subset.
var fallbackPaths = []string{
	"..name",
	".metadata..name",
	"..conditions[0].type",
	".status.conditions[0:2].type",
	".status.conditions[:1].type",
	".status.conditions[1:].status",
	".status.conditions[0,1].type",
	".metadata['name','namespace']",
	".metadata.labels.*",
	".spec.*",
	`.status.conditions[?(@.type==@.type)].status`,
	`.status.conditions[?(@.type=="Ready")]..status`,
	".spec.template.spec.containers[*].ports[0:1].containerPort",
	".status.traffic[0:1].percent",
}

func TestFallbackMatchesClientGo(t *testing.T) {
	for _, expr := range fallbackPaths {
		t.Run(expr, func(t *testing.T) {
			_, err := compile(expr)
			require.Error(t, err, "inside the compiled subset: not a fallback test")
			p, err := Compile(expr)
			require.NoError(t, err)
			require.NotNil(t, p.fallback)
			cg := newClientGo(t, expr, true)
			for name, doc := range corpusDocs {
				want := clientGoOutcome(t, cg, decodeUnstructured(t, doc))
				got := ourOutcome(t, p, []byte(doc))
				assert.Equal(t, want.kind, got.kind, "%s on %s", expr, name)
				assert.Equal(t, want.count, got.count, "%s on %s", expr, name)
				assert.Equal(t, want.value, got.value, "%s on %s", expr, name)
				exists, err := p.Exists([]byte(doc))
				require.NoError(t, err)
				assert.Equal(t, want.kind != kindNotFound, exists, "%s on %s", expr, name)
			}
		})
	}
}

func TestFallbackKeepsMalformedPathsErrors(t *testing.T) {
	for _, expr := range []string{"a b", "a.", "a$", "{a}{b}", "", "{}", "a[0:2", "x..", "a[?(@.b=1)]"} {
		_, err := Compile(expr)
		var se *SyntaxError
		assert.ErrorAs(t, err, &se, "%q must stay a syntax error", expr)
	}
}
