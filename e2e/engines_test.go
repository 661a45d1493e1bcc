package e2e

// Render engines (issue 9, seed 003): the same step written with each
// engine, Helm charts from a local chart repository and from a ConfigMap,
// and engine failures.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

var secretGVR = configMapGVR.GroupVersion().WithResource("secrets")

// packChart packages a chart as `helm package` does: a gzipped tar whose
// entries sit under the chart's name.
func packChart(t testing.TB, name, version string, files map[string]string) []byte {
	t.Helper()
	all := map[string]string{"Chart.yaml": fmt.Sprintf("apiVersion: v2\nname: %s\nversion: %s\n", name, version)}
	for k, v := range files {
		all[k] = v
	}
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, k := range keys {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: name + "/" + k, Mode: 0o644, Size: int64(len(all[k])), Typeflag: tar.TypeReg}))
		_, err := tw.Write([]byte(all[k]))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, gz.Close())
	return buf.Bytes()
}

// chartRepo is a Helm chart repository on 127.0.0.1: an index.yaml and
// the packaged charts, served over HTTP to the in-process Kontinue.
type chartRepo struct {
	srv    *httptest.Server
	mu     sync.Mutex
	files  map[string][]byte
	charts map[string][]string // name -> index entries
}

func newChartRepo(t *testing.T) *chartRepo {
	t.Helper()
	if env.external {
		t.Skip("the chart repository listens on 127.0.0.1 of the test process")
	}
	r := &chartRepo{files: map[string][]byte{}, charts: map[string][]string{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		b, ok := r.files[req.URL.Path]
		r.mu.Unlock()
		if !ok {
			http.NotFound(w, req)
			return
		}
		_, _ = w.Write(b)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// add publishes a chart version and rewrites the index.
func (r *chartRepo) add(t testing.TB, name, version string, files map[string]string) {
	archive := packChart(t, name, version, files)
	sum := sha256.Sum256(archive)
	r.mu.Lock()
	defer r.mu.Unlock()
	file := fmt.Sprintf("%s-%s.tgz", name, version)
	r.files["/"+file] = archive
	r.charts[name] = append(r.charts[name], fmt.Sprintf("  - {name: %s, version: %s, urls: [%s], digest: %s}\n", name, version, file, hex.EncodeToString(sum[:])))
	idx := "apiVersion: v1\nentries:\n"
	for n, entries := range r.charts {
		idx += "  " + n + ":\n" + strings.Join(entries, "")
	}
	r.files["/index.yaml"] = []byte(idx)
}

// helmTemplate is a ClusterTemplate rendering chart name@version of the
// repository with values (a YAML flow mapping) and extra helm fields.
func helmTemplate(name, repo, chart, version, values, extra string) string {
	return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %s}
spec:
  helm:
    chart: {repository: %q, name: %s, version: %q}
    values: %s%s
`, name, repo, chart, version, values, extra)
}

// The same step written with each engine stamps the same ConfigMap.
func TestEnginesStampTheSameObject(t *testing.T) {
	repo := newChartRepo(t)
	repo.add(t, "cfg", "1.0.0", map[string]string{"templates/cm.yaml": `
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-cfg
  namespace: {{ .Release.Namespace }}
  labels: {tier: {{ .Values.tier }}}
data:
  owner: {{ .Values.owner | quote }}
  greeting: {{ .Values.greeting | quote }}
  replicas: {{ .Values.replicas | quote }}
`})
	bodies := map[string]string{
		"simple": `
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: $(workload.metadata.name)$-cfg
      labels: {tier: $(params.tier)$}
    data:
      owner: $(workload.metadata.name)$
      greeting: $(params.greeting)$
      replicas: n=$(params.replicas)$`,
		"goTemplate": `
  goTemplate: |
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: {{ .workload.metadata.name }}-cfg
      labels: {tier: {{ .params.tier }}}
    data:
      owner: {{ .workload.metadata.name | quote }}
      greeting: {{ .params.greeting | quote }}
      replicas: "n={{ .params.replicas }}"`,
		"helm": fmt.Sprintf(`
  helm:
    chart: {repository: %q, name: cfg, version: 1.0.0}
    values:
      owner: $(workload.metadata.name)$
      greeting: $(params.greeting)$
      replicas: n=$(params.replicas)$
      tier: $(params.tier)$`, repo.srv.URL),
		"ytt": `
  ytt: |
    #@ load("@ytt:data", "data")
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: #@ data.values.workload.metadata.name + "-cfg"
      labels:
        tier: #@ data.values.params.tier
    data:
      owner: #@ data.values.workload.metadata.name
      greeting: #@ data.values.params.greeting
      replicas: #@ "n={}".format(data.values.params.replicas)`,
	}
	stamped := map[string]*unstructured.Unstructured{}
	var mu sync.Mutex
	t.Run("engines", func(t *testing.T) {
		for engine, body := range bodies {
			t.Run(engine, func(t *testing.T) {
				t.Parallel()
				k := newKit(t)
				tmpl, chain := k.name("cfg-"+strings.ToLower(engine)), k.name("chain")
				k.apply(k.templateYAML("ClusterTemplate", tmpl, "\n  params: [{name: tier, default: backend}]"+body))
				k.apply(k.chainYAML(chain, "\n  params: [{name: replicas, value: 3}]", k.step("cfg", "ClusterTemplate", tmpl, "")))
				k.workload("app", chain, "  params: [{name: greeting, value: hello}]\n")
				k.waitStep("app", "cfg", "ResourceSubmitted", "True", "ResourceSubmissionComplete")
				cm := k.waitObj(configMapGVR, "app-cfg", nil)
				assert.Equal(t, "Workload", cm.GetOwnerReferences()[0].Kind)
				mu.Lock()
				stamped[engine] = cm
				mu.Unlock()
			})
		}
	})
	require.Len(t, stamped, len(bodies))
	norm := func(u *unstructured.Unstructured) map[string]any {
		o := u.DeepCopy()
		for _, f := range []string{"namespace", "uid", "resourceVersion", "creationTimestamp", "managedFields", "ownerReferences", "annotations"} {
			unstructured.RemoveNestedField(o.Object, "metadata", f)
		}
		l := o.GetLabels()
		for key := range l {
			// Say which namespace, chain and template: they differ by construction.
			if strings.HasSuffix(key, "workload-namespace") || strings.HasSuffix(key, "supply-chain-name") || strings.HasSuffix(key, "template-name") {
				delete(l, key)
			}
		}
		o.SetLabels(l)
		return o.Object
	}
	want := norm(stamped["simple"])
	assert.Equal(t, map[string]any{"owner": "app", "greeting": "hello", "replicas": "n=3"}, want["data"])
	assert.Equal(t, "backend", stamped["simple"].GetLabels()["tier"])
	assert.Equal(t, want, norm(stamped["goTemplate"]), "goTemplate")
	assert.Equal(t, want, norm(stamped["helm"]), "helm")
	assert.Equal(t, want, norm(stamped["ytt"]), "ytt")
}

// A chart from an HTTP chart repository deploys all its objects into the
// workload's namespace, upgrades them when a param changes, and prunes the
// one that a new chart version drops.
func TestHelmChartFromHTTPRepository(t *testing.T) {
	repo := newChartRepo(t)
	files := map[string]string{
		"values.yaml":            "color: red\n",
		"templates/_helpers.tpl": `{{- define "shop.name" -}}{{ .Release.Name }}{{- end }}`,
		"templates/config.yaml": `
apiVersion: v1
kind: ConfigMap
metadata: {name: {{ include "shop.name" . }}-config}
data: {color: {{ .Values.color | quote }}, version: {{ .Chart.Version | quote }}}
`,
		"templates/secret.yaml":  "apiVersion: v1\nkind: Secret\nmetadata: {name: {{ .Release.Name }}-secret}\nstringData: {token: abc}\n",
		"templates/extra.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ .Release.Name }}-extra}\ndata: {x: extra}\n",
		"templates/NOTES.txt":    "Thanks for installing {{ .Release.Name }}.",
		"templates/tests/t.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-test\n  annotations: {helm.sh/hook: test}\n",
	}
	repo.add(t, "shop", "1.0.0", files)
	delete(files, "templates/extra.yaml")
	repo.add(t, "shop", "2.0.0", files)

	k := newKit(t)
	tmpl, chain := k.name("shop"), k.name("shop-chain")
	k.apply(helmTemplate(tmpl, repo.srv.URL, "shop", "1.0.0", "{color: $(params.color)$}", "\n  primary: {kind: ConfigMap, name: app-config}"))
	k.apply(k.chainYAML(chain, "", k.step("shop", "ClusterTemplate", tmpl, "")))
	k.workload("app", chain, "  params: [{name: color, value: blue}]\n")

	w := k.waitStep("app", "shop", "ResourceSubmitted", "True", "ResourceSubmissionComplete")
	k.waitOwner("app", "Ready", "True", "")
	cfg := k.waitObj(configMapGVR, "app-config", k.dataIs("color", "blue"))
	assert.Equal(t, "1.0.0", nested(cfg.Object, "data", "version"))
	secret := k.waitObj(secretGVR, "app-secret", nil)
	k.waitObj(configMapGVR, "app-extra", nil)
	for _, o := range []*unstructured.Unstructured{cfg, secret} {
		assert.Equal(t, k.ns, o.GetNamespace())
		assert.Equal(t, "app", o.GetOwnerReferences()[0].Name)
		assert.Equal(t, "true", o.GetLabels()["kontinue.dev/stamped"])
	}
	assert.True(t, gone(configMapGVR, k.ns, "app-test"), "test hooks are not stamped")
	step := stepStatus(w, "shop")
	assert.Equal(t, "app-config", nested(step, "stampedRef", "name"), "the primary object")
	assert.ElementsMatch(t, []string{"Secret/app-secret", "ConfigMap/app-config", "ConfigMap/app-extra"}, refNames(step["stampedObjects"]))

	// A param change upgrades what it changes, and only that.
	secretRV := secret.GetResourceVersion()
	k.update(workloadGVR, k.ns, "app", func(u *unstructured.Unstructured) {
		require.NoError(t, unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "color", "value": "green"}}, "spec", "params"))
	})
	k.waitObj(configMapGVR, "app-config", k.dataIs("color", "green"))
	secret = get(t, secretGVR, k.ns, "app-secret")
	assert.Equal(t, secretRV, secret.GetResourceVersion(), "an unchanged object is not applied again")
	// Whenever it was read: only Kontinue's create wrote the Secret (its
	// stringData is applied as the data the API server keeps).
	require.Len(t, secret.GetManagedFields(), 1)
	assert.Equal(t, "kontinue", secret.GetManagedFields()[0].Manager)
	assert.Equal(t, "Update", string(secret.GetManagedFields()[0].Operation))

	// Version 2.0.0 drops app-extra: it is pruned.
	k.setSpec(k.tmplGVR("clustertemplates"), tmpl, "2.0.0", "helm", "chart", "version")
	k.waitObj(configMapGVR, "app-config", k.dataIs("version", "2.0.0"))
	k.waitAbsent(configMapGVR, "app-extra")
	w = k.waitObjStatus("app", func(u *unstructured.Unstructured) string {
		if got := refNames(stepStatus(u, "shop")["stampedObjects"]); len(got) != 2 {
			return fmt.Sprintf("stampedObjects %v", got)
		}
		return ""
	})
	assert.ElementsMatch(t, []string{"Secret/app-secret", "ConfigMap/app-config"}, refNames(stepStatus(w, "shop")["stampedObjects"]))
	assert.Equal(t, "green", nested(get(t, configMapGVR, k.ns, "app-config").Object, "data", "color"))
	k.assertQuiet(k.wl("app"), k.cm("app-config"), objRef{secretGVR, k.ns, "app-secret"})
}

// A packaged chart in a ConfigMap (air-gapped clusters) is read with the
// controller's credentials.
func TestHelmChartFromConfigMap(t *testing.T) {
	k := newKit(t)
	charts := newNamespace(t)
	archive := packChart(t, "local", "0.1.0", map[string]string{
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ .Release.Name }}-local}\ndata: {from: {{ .Values.from | quote }}}\n",
	})
	apply(t, charts, fmt.Sprintf(`
apiVersion: v1
kind: ConfigMap
metadata: {name: charts}
binaryData: {local.tgz: %s}
`, base64.StdEncoding.EncodeToString(archive)))
	tmpl, chain := k.name("local"), k.name("local-chain")
	k.apply(k.templateYAML("ClusterTemplate", tmpl, fmt.Sprintf(`
  helm:
    configMapRef: {namespace: %s, name: charts, key: local.tgz}
    releaseName: rel
    values: {from: $(workload.metadata.name)$}`, charts)))
	k.apply(k.chainYAML(chain, "", k.step("local", "ClusterTemplate", tmpl, "")))
	k.workload("app", chain, "")
	k.waitStep("app", "local", "ResourceSubmitted", "True", "ResourceSubmissionComplete")
	k.waitObj(configMapGVR, "rel-local", k.dataIs("from", "app"))
}

// A broken Go template, a chart that fails to render and the like end as
// TemplateStampFailure with the engine's message.
func TestEngineFailuresAreStampFailures(t *testing.T) {
	repo := newChartRepo(t)
	repo.add(t, "broken", "1.0.0", map[string]string{
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: {{ required \"values.must is required\" .Values.must | quote }}}\n",
	})
	cases := []struct{ name, body, part string }{
		{"go template does not parse", "\n  goTemplate: \"kind: {{ .workload.metadata.name \"", "goTemplate does not parse"},
		{"go template missing key", "\n  goTemplate: \"{apiVersion: v1, kind: ConfigMap, metadata: {name: {{ .params.nope }}}}\"", `map has no entry for key "nope"`},
		{"chart fails to render", fmt.Sprintf("\n  helm: {chart: {repository: %q, name: broken, version: 1.0.0}}", repo.srv.URL), "values.must is required"},
		{"chart version missing", fmt.Sprintf("\n  helm: {chart: {repository: %q, name: broken, version: 9.9.9}}", repo.srv.URL), "no version matches [9.9.9]"},
		{"ytt missing param", "\n  ytt: |\n    #@ load('@ytt:data', 'data')\n    apiVersion: v1\n    kind: ConfigMap\n    metadata:\n      name: #@ data.values.params['nope']", "unable to apply ytt template: ytt: Error: \n- key \"nope\" not in struct"},
		{"ytt load of a file", "\n  ytt: |\n    #@ load('/etc/passwd', 'x')\n    a: 1", "cannot load /etc/passwd"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			k := newKit(t)
			tmpl, chain := k.name("bad"), k.name("bad-chain")
			k.apply(k.templateYAML("ClusterTemplate", tmpl, c.body))
			k.apply(k.chainYAML(chain, "", k.step("deploy", "ClusterTemplate", tmpl, "")))
			k.workload("app", chain, "")
			w := k.waitStep("app", "deploy", "ResourceSubmitted", "False", "TemplateStampFailure")
			parts := []string{"resource [deploy]", "ClusterTemplate/" + tmpl, c.part}
			k.assertCond(k.stepCond(w, "deploy", "ResourceSubmitted"), "False", "TemplateStampFailure", parts...)
			k.assertCond(ownerCondition(w, "Ready"), "False", "TemplateStampFailure", parts...)
			assert.Empty(t, k.objects(k.ns), "nothing stamped")
			k.assertQuiet(k.wl("app"))
		})
	}
}

// refNames lists stampedObjects as Kind/name.
func refNames(v any) []string {
	list, _ := v.([]any)
	var out []string
	for _, r := range list {
		m, _ := r.(map[string]any)
		out = append(out, fmt.Sprintf("%v/%v", m["kind"], m["name"]))
	}
	return out
}
