package render

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kontinue.dev/kontinue/reconciler/api"
)

// chartArchive packages a chart as `helm package` does: a gzipped tar whose
// entries sit under the chart's name. files may replace Chart.yaml.
func chartArchive(t testing.TB, name, version string, files map[string]string) []byte {
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

// appChart is the chart most tests render.
func appChart(t testing.TB, version string) []byte {
	return chartArchive(t, "app", version, map[string]string{
		"values.yaml":            "greeting: hello\nreplicas: 1\nimage: {tag: latest}\n",
		"templates/_helpers.tpl": `{{- define "app.fullname" -}}{{ .Release.Name }}-app{{- end }}`,
		"templates/configmap.yaml": `
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "app.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels: {chart: {{ .Chart.Name }}-{{ .Chart.Version }}}
data:
  greeting: {{ .Values.greeting | quote }}
  replicas: {{ .Values.replicas | quote }}
  image: {{ .Values.image.tag | quote }}
  kube: {{ .Capabilities.KubeVersion.Minor | quote }}
  lookup: {{ if lookup "v1" "Secret" "kube-system" "" }}found{{ else }}nothing{{ end }}
`,
		"templates/secret.yaml": `
apiVersion: v1
kind: Secret
metadata: {name: {{ .Release.Name }}-secret}
stringData: {token: abc}
`,
		"templates/NOTES.txt":           "Thanks for installing {{ .Release.Name }}",
		"templates/empty.yaml":          "{{- if false }}\napiVersion: v1\n{{- end }}\n",
		"templates/tests/test-pod.yaml": "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {{ .Release.Name }}-test\n  annotations: {helm.sh/hook: test}\nspec: {containers: [{name: t, image: busybox}]}\n",
	})
}

// fakeGetter serves ConfigMaps by namespace/name.
type fakeGetter map[string]*unstructured.Unstructured

func (f fakeGetter) Get(_ context.Context, gvr schema.GroupVersionResource, ns, name string) (*unstructured.Unstructured, error) {
	if o, ok := f[ns+"/"+name]; ok && gvr == configMapGVR {
		return o, nil
	}
	return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
}

func chartConfigMap(ns, name, key string, archive []byte) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"binaryData": map[string]any{key: base64.StdEncoding.EncodeToString(archive)},
		"data":       map[string]any{"text": "not a chart"},
	}}
}

func cmSpec(key string, values map[string]any) *api.TemplateSpec {
	return &api.TemplateSpec{Helm: &api.HelmSource{ConfigMapRef: &api.ConfigMapRef{Namespace: "charts", Name: "charts", Key: key}, Values: values}}
}

func helmCtx(archives map[string][]byte) context.Context {
	cm := chartConfigMap("charts", "charts", "", nil)
	bin := map[string]any{}
	for k, a := range archives {
		bin[k] = base64.StdEncoding.EncodeToString(a)
	}
	cm.Object["binaryData"] = bin
	return WithObjectGetter(context.Background(), fakeGetter{"charts/charts": cm})
}

func names(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	return out
}

func TestHelmRendersAChart(t *testing.T) {
	h := newHelmEngine(nil)
	ctx := helmCtx(map[string][]byte{"app.tgz": appChart(t, "1.2.3")})
	values := map[string]any{"greeting": "$(params.prefix)$", "replicas": "$(params.replicas)$", "image": map[string]any{"tag": "$(images.img.image)$"}}
	objs, err := h.Render(ctx, cmSpec("app.tgz", values), testContext())
	require.NoError(t, err)
	// Helm's install order (Secret before ConfigMap); no NOTES.txt, no
	// empty file, no test hook.
	assert.Equal(t, []string{"Secret/petclinic-secret", "ConfigMap/petclinic-app"}, names(objs))
	cm := objs[1]
	assert.Equal(t, "dev", cm.GetNamespace(), "the release namespace is the owner's")
	assert.Equal(t, map[string]string{"chart": "app-1.2.3"}, cm.GetLabels())
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	assert.Equal(t, map[string]string{"greeting": "registry.io/apps/", "replicas": "3", "image": "registry.io/x@sha256:1", "kube": helmCapabilities.KubeVersion.Minor, "lookup": "nothing"}, data)

	// Results are cached; what a caller does to them does not leak.
	cm.SetName("changed")
	again, err := h.Render(ctx, cmSpec("app.tgz", values), testContext())
	require.NoError(t, err)
	assert.Equal(t, "petclinic-app", again[1].GetName())

	// helm.releaseName replaces the owner's name.
	spec := cmSpec("app.tgz", nil)
	spec.Helm.ReleaseName = "shop"
	objs, err = h.Render(ctx, spec, testContext())
	require.NoError(t, err)
	assert.Equal(t, []string{"Secret/shop-secret", "ConfigMap/shop-app"}, names(objs))
	assert.Equal(t, "hello", objs[1].Object["data"].(map[string]any)["greeting"], "the chart's own values")
}

func TestHelmSubchartConditions(t *testing.T) {
	parent := chartArchive(t, "parent", "1.0.0", map[string]string{
		"Chart.yaml":                     "apiVersion: v2\nname: parent\nversion: 1.0.0\ndependencies:\n- {name: sub, version: 0.1.0, condition: sub.enabled}\n",
		"values.yaml":                    "sub: {enabled: false, color: red}\n",
		"templates/cm.yaml":              "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: parent}\n",
		"charts/sub/Chart.yaml":          "apiVersion: v2\nname: sub\nversion: 0.1.0\n",
		"charts/sub/templates/cm.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: sub-{{ .Values.color }}}\n",
		"charts/sub/templates/_skip.tpl": "{{ define \"x\" }}{{ end }}",
	})
	h := newHelmEngine(nil)
	ctx := helmCtx(map[string][]byte{"p.tgz": parent})
	objs, err := h.Render(ctx, cmSpec("p.tgz", nil), testContext())
	require.NoError(t, err)
	assert.Equal(t, []string{"ConfigMap/parent"}, names(objs))
	objs, err = h.Render(ctx, cmSpec("p.tgz", map[string]any{"sub": map[string]any{"enabled": true, "color": "$(params.list[1])$"}}), testContext())
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"ConfigMap/parent", "ConfigMap/sub-b"}, names(objs))
}

func TestHelmErrors(t *testing.T) {
	tmpl := func(body string) map[string]string { return map[string]string{"templates/x.yaml": body} }
	charts := map[string][]byte{
		"app.tgz":     appChart(t, "1.0.0"),
		"broken.tgz":  chartArchive(t, "broken", "1.0.0", tmpl("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: {{ required \"values.must is required\" .Values.must }}}\n")),
		"badcall.tgz": chartArchive(t, "badcall", "1.0.0", tmpl("{{ .Values.nope.deeper }}")),
		"parse.tgz":   chartArchive(t, "parse", "1.0.0", tmpl("{{ if }}")),
		"schema.tgz":  chartArchive(t, "schema", "1.0.0", map[string]string{"values.schema.json": `{"type": "object", "properties": {"replicas": {"type": "integer"}}}`, "templates/x.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"}),
		"library.tgz": chartArchive(t, "library", "1.0.0", map[string]string{"Chart.yaml": "apiVersion: v2\nname: library\nversion: 1.0.0\ntype: library\n"}),
		"deps.tgz":    chartArchive(t, "deps", "1.0.0", map[string]string{"Chart.yaml": "apiVersion: v2\nname: deps\nversion: 1.0.0\ndependencies: [{name: db, version: 1.0.0}]\n"}),
		"kube.tgz":    chartArchive(t, "kube", "1.0.0", map[string]string{"Chart.yaml": "apiVersion: v2\nname: kube\nversion: 1.0.0\nkubeVersion: '>= 2.0.0'\n"}),
		"yaml.tgz":    chartArchive(t, "yaml", "1.0.0", tmpl("apiVersion: v1\nkind: [ConfigMap\n")),
		"nokind.tgz":  chartArchive(t, "nokind", "1.0.0", tmpl("apiVersion: v1\nmetadata: {name: x}\n")),
		"notes.tgz":   chartArchive(t, "notes", "1.0.0", map[string]string{"templates/NOTES.txt": "hi"}),
		"notgzip.tgz": []byte("this is not a chart"),
		"nochart.tgz": chartArchive(t, "nochart", "1.0.0", map[string]string{"Chart.yaml": "name: [x\n"}),
	}
	ctx := helmCtx(charts)
	tests := []struct {
		name  string
		ctx   context.Context
		spec  *api.TemplateSpec
		parts []string
	}{
		{"required value", ctx, cmSpec("broken.tgz", nil), []string{"chart in ConfigMap [charts/charts] key [broken.tgz] failed to render", "values.must is required"}},
		{"nil pointer in template", ctx, cmSpec("badcall.tgz", nil), []string{"failed to render", "nil pointer evaluating interface {}.deeper"}},
		{"template does not parse", ctx, cmSpec("parse.tgz", nil), []string{"failed to render", "missing value for if"}},
		{"schema", ctx, cmSpec("schema.tgz", map[string]any{"replicas": "many"}), []string{"rejects its values", "replicas"}},
		{"library chart", ctx, cmSpec("library.tgz", nil), []string{"is a library chart"}},
		{"missing dependency", ctx, cmSpec("deps.tgz", nil), []string{"dependencies db are listed in Chart.yaml but missing from charts/"}},
		{"kubeVersion", ctx, cmSpec("kube.tgz", nil), []string{"requires Kubernetes >= 2.0.0"}},
		{"invalid YAML", ctx, cmSpec("yaml.tgz", nil), []string{"yaml/templates/x.yaml"}},
		{"no kind", ctx, cmSpec("nokind.tgz", nil), []string{"nokind/templates/x.yaml renders an object without apiVersion/kind"}},
		{"no object", ctx, cmSpec("notes.tgz", nil), []string{"rendered no object"}},
		{"not an archive", ctx, cmSpec("notgzip.tgz", nil), []string{"cannot be loaded", "gzip"}},
		{"bad Chart.yaml", ctx, cmSpec("nochart.tgz", nil), []string{"cannot be loaded"}},
		{"values tag", ctx, cmSpec("app.tgz", map[string]any{"image": map[string]any{"tag": "$(params.nope)$"}}), []string{"helm.values: unable to resolve $(params.nope)$ in image.tag"}},
		{"release name", ctx, &api.TemplateSpec{Helm: &api.HelmSource{ConfigMapRef: cmSpec("app.tgz", nil).Helm.ConfigMapRef, ReleaseName: "Bad_Name"}}, []string{"release name [Bad_Name] is not valid"}},
		{"ConfigMap not found", ctx, &api.TemplateSpec{Helm: &api.HelmSource{ConfigMapRef: &api.ConfigMapRef{Namespace: "charts", Name: "nope", Key: "x"}}}, []string{"ConfigMap [charts/nope] of helm.configMapRef not found"}},
		{"key not found", ctx, cmSpec("nope.tgz", nil), []string{"ConfigMap [charts/charts] has no binaryData key [nope.tgz]"}},
		{"key in data", WithObjectGetter(context.Background(), fakeGetter{"charts/charts": chartConfigMap("charts", "charts", "x", nil)}), cmSpec("text", nil), []string{"holds key [text] in data; a packaged chart (.tgz) belongs in binaryData"}},
		{"no getter", context.Background(), cmSpec("app.tgz", nil), []string{"was given no way to read ConfigMaps"}},
		{"incomplete configMapRef", ctx, &api.TemplateSpec{Helm: &api.HelmSource{ConfigMapRef: &api.ConfigMapRef{Name: "x"}}}, []string{"needs a namespace, a name and a key"}},
		{"both sources", ctx, &api.TemplateSpec{Helm: &api.HelmSource{Chart: &api.ChartRef{Repository: "https://x", Name: "a"}, ConfigMapRef: &api.ConfigMapRef{}}}, []string{"set exactly one"}},
		{"no source", ctx, &api.TemplateSpec{Helm: &api.HelmSource{}}, []string{"neither chart nor configMapRef"}},
		{"no helm", ctx, &api.TemplateSpec{}, []string{"helm is empty"}},
		{"bad scheme", ctx, &api.TemplateSpec{Helm: &api.HelmSource{Chart: &api.ChartRef{Repository: "ftp://x/charts", Name: "a"}}}, []string{"the scheme must be https or oci"}},
		{"not a URL", ctx, &api.TemplateSpec{Helm: &api.HelmSource{Chart: &api.ChartRef{Repository: "charts", Name: "a"}}}, []string{"is not a URL"}},
		{"no chart name", ctx, &api.TemplateSpec{Helm: &api.HelmSource{Chart: &api.ChartRef{Repository: "https://x"}}}, []string{"needs a repository and a name"}},
	}
	h := newHelmEngine(nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 2 { // the second time from the render cache
				objs, err := h.Render(tt.ctx, tt.spec, testContext())
				require.Error(t, err)
				assert.Nil(t, objs)
				var se *StampError
				require.ErrorAs(t, err, &se)
				assert.Equal(t, HelmName, se.Engine)
				for _, p := range tt.parts {
					assert.Contains(t, err.Error(), p)
				}
				assert.False(t, IsTransient(err))
			}
		})
	}
}

// repoServer is an http chart repository that counts requests by path.
type repoServer struct {
	*httptest.Server
	mu    sync.Mutex
	hits  map[string]int
	files map[string][]byte
	delay time.Duration
}

func newRepoServer(t *testing.T, tls bool) *repoServer {
	r := &repoServer{hits: map[string]int{}, files: map[string][]byte{}}
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.hits[req.URL.Path]++
		b, ok := r.files[req.URL.Path]
		delay := r.delay
		r.mu.Unlock()
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-req.Context().Done():
				return
			}
		}
		if !ok {
			http.NotFound(w, req)
			return
		}
		_, _ = w.Write(b)
	})
	if tls {
		r.Server = httptest.NewTLSServer(h)
	} else {
		r.Server = httptest.NewServer(h)
	}
	t.Cleanup(r.Close)
	return r
}

func (r *repoServer) set(path string, b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.files[path] = b
}

func (r *repoServer) count(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hits[path]
}

func repoSpec(repo, name, version string) *api.TemplateSpec {
	return &api.TemplateSpec{Helm: &api.HelmSource{Chart: &api.ChartRef{Repository: repo, Name: name, Version: version}}}
}

func chartLabel(t *testing.T, objs []*unstructured.Unstructured) string {
	t.Helper()
	for _, o := range objs {
		if l := o.GetLabels()["chart"]; l != "" {
			return l
		}
	}
	t.Fatalf("no object with a chart label in %v", names(objs))
	return ""
}

func TestHelmFromRepository(t *testing.T) {
	srv := newRepoServer(t, false)
	v1, v11, rc := appChart(t, "1.0.0"), appChart(t, "1.1.0"), appChart(t, "2.0.0-rc.1")
	srv.set("/charts/app-1.0.0.tgz", v1)
	srv.set("/other/app-1.1.0.tgz", v11)
	srv.set("/charts/app-2.0.0-rc.1.tgz", rc)
	srv.set("/charts/bad-1.0.0.tgz", v1)
	srv.set("/charts/index.yaml", []byte(fmt.Sprintf(`
apiVersion: v1
entries:
  app:
  - {name: app, version: 1.0.0, urls: [app-1.0.0.tgz], digest: %s}
  - {name: app, version: 1.1.0, urls: ["%s/other/app-1.1.0.tgz"]}
  - {name: app, version: 2.0.0-rc.1, urls: [/charts/app-2.0.0-rc.1.tgz]}
  bad:
  - {name: bad, version: 1.0.0, urls: [bad-1.0.0.tgz], digest: 0000}
`, digest(v1), srv.URL)))
	repo := srv.URL + "/charts/"
	h := newHelmEngine(nil)
	for _, c := range []struct{ version, want string }{
		{"", "app-1.1.0"}, {"1.0.0", "app-1.0.0"}, {"~1.0", "app-1.0.0"}, {"^1", "app-1.1.0"}, {">= 2.0.0-0", "app-2.0.0-rc.1"}, {"2.0.0-rc.1", "app-2.0.0-rc.1"},
	} {
		objs, err := h.Render(context.Background(), repoSpec(repo, "app", c.version), testContext())
		require.NoError(t, err, "version %q", c.version)
		assert.Equal(t, c.want, chartLabel(t, objs), "version %q", c.version)
	}
	// One index download (cached), each archive once.
	assert.Equal(t, 1, srv.count("/charts/index.yaml"))
	assert.Equal(t, 1, srv.count("/charts/app-1.0.0.tgz"))
	assert.Equal(t, 1, srv.count("/other/app-1.1.0.tgz"))

	_, err := h.Render(context.Background(), repoSpec(repo, "bad", "1.0.0"), testContext())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cannot fetch chart [bad 1.0.0] from ["+srv.URL+"/charts/]")
	assert.Contains(t, err.Error(), "does not match the digest")

	for _, c := range []struct{ name, version, part string }{
		{"app", "3.0.0", "chart [app] in repository [" + repo + "]: no version matches [3.0.0] (the repository has: 1.0.0, 1.1.0, 2.0.0-rc.1)"},
		{"app", "not a version", "version [not a version] is not in the repository and is not a version constraint"},
		{"nope", "", "chart [nope] is not in repository [" + repo + "]"},
	} {
		_, err := h.Render(context.Background(), repoSpec(repo, c.name, c.version), testContext())
		require.Error(t, err)
		assert.Contains(t, err.Error(), c.part)
		assert.False(t, IsTransient(err), err.Error())
	}

	// A repository that does not answer well is a transient failure.
	_, err = h.Render(context.Background(), repoSpec(srv.URL+"/missing", "app", "1.0.0"), testContext())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cannot fetch chart [app] from ["+srv.URL+"/missing]: GET "+srv.URL+"/missing/index.yaml: 404 Not Found")
	assert.True(t, IsTransient(err))

	// Credentials in the repository URL never reach a message.
	withUser := strings.Replace(repo, "http://", "http://user:s3cret@", 1)
	_, err = h.Render(context.Background(), repoSpec(withUser, "nope", ""), testContext())
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cret")
	assert.Contains(t, err.Error(), "chart [nope] is not in repository")
}

func TestHelmFromOCIRegistry(t *testing.T) {
	archive := appChart(t, "1.2.0")
	var host string
	var mu sync.Mutex
	tokens := 0
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" {
			mu.Lock()
			tokens++
			mu.Unlock()
			assert.Equal(t, "repository:charts/app:pull", r.URL.Query().Get("scope"))
			assert.Equal(t, "reg", r.URL.Query().Get("service"))
			_, _ = w.Write([]byte(`{"token": "t0k"}`))
			return
		}
		if r.Header.Get("Authorization") != "Bearer t0k" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="https://`+host+`/token",service="reg",scope="repository:charts/app:pull"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		layer := "sha256:" + digest(archive)
		switch r.URL.Path {
		case "/v2/charts/app/tags/list":
			_, _ = w.Write([]byte(`{"name": "charts/app", "tags": ["1.0.0", "1.2.0", "1.3.0-beta.1", "latest"]}`))
		case "/v2/charts/app/manifests/1.2.0":
			assert.Contains(t, r.Header.Get("Accept"), ociManifestType)
			_, _ = fmt.Fprintf(w, `{"schemaVersion": 2, "config": {"mediaType": "application/vnd.cncf.helm.config.v1+json", "digest": "sha256:00", "size": 2},
"layers": [{"mediaType": %q, "digest": %q, "size": %d}]}`, helmChartLayerType, layer, len(archive))
		case "/v2/charts/app/manifests/1.0.0":
			_, _ = w.Write([]byte(`{"schemaVersion": 2, "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": "sha256:11", "size": 1}]}`))
		case "/v2/charts/app/blobs/" + layer:
			_, _ = w.Write(archive)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	host = srv.Listener.Addr().String()
	h := newHelmEngine(srv.Client())

	for _, version := range []string{"", "1.2.0", "~1.2"} {
		objs, err := h.Render(context.Background(), repoSpec("oci://"+host+"/charts", "app", version), testContext())
		require.NoError(t, err, "version %q", version)
		assert.Equal(t, "app-1.2.0", chartLabel(t, objs))
	}
	_, err := h.Render(context.Background(), repoSpec("oci://"+host+"/charts", "app", "1.0.0"), testContext())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "[charts/app:1.0.0] in registry [oci://"+host+"/charts] is not a Helm chart")
	_, err = h.Render(context.Background(), repoSpec("oci://"+host+"/charts", "app", "5.0.0"), testContext())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "404")
	assert.True(t, IsTransient(err))
	_, err = h.Render(context.Background(), repoSpec("oci://"+host+"/charts", "app", ">= 3"), testContext())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no version matches [>= 3]")
}

func TestHelmBounds(t *testing.T) {
	many := func(n int) string {
		return fmt.Sprintf("{{ range $i := until %d }}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c{{ $i }}}\n{{ end }}", n)
	}
	charts := map[string][]byte{
		"many.tgz":   chartArchive(t, "many", "1.0.0", map[string]string{"templates/x.yaml": many(3)}),
		"big.tgz":    chartArchive(t, "big", "1.0.0", map[string]string{"templates/x.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: {{ repeat 2000 \"x\" }}}\n"}),
		"slow.tgz":   chartArchive(t, "slow", "1.0.0", map[string]string{"templates/x.yaml": "{{ range until 2000 }}{{ range until 2000 }}{{ end }}{{ end }}apiVersion: v1\nkind: ConfigMap\nmetadata: {name: slow}\n"}),
		"random.tgz": chartArchive(t, "random", "1.0.0", map[string]string{"templates/x.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: x}\nstringData: {password: {{ randAlphaNum 16 }}}\n"}),
	}
	var zeros bytes.Buffer
	zw := gzip.NewWriter(&zeros)
	_, _ = zw.Write(make([]byte, maxChartBytes+1))
	_ = zw.Close()
	charts["bomb.tgz"] = zeros.Bytes()
	ctx := helmCtx(charts)

	t.Run("objects", func(t *testing.T) {
		setLimits(t, 0, 0, 2)
		_, err := newHelmEngine(nil).Render(ctx, cmSpec("many.tgz", nil), testContext())
		require.Error(t, err)
		assert.Contains(t, err.Error(), "helm rendered more than 2 objects")
	})
	t.Run("bytes", func(t *testing.T) {
		setLimits(t, 0, 1024, 0)
		_, err := newHelmEngine(nil).Render(ctx, cmSpec("big.tgz", nil), testContext())
		require.Error(t, err)
		assert.Contains(t, err.Error(), "helm rendered more than 1024 bytes")
	})
	t.Run("decompressed size", func(t *testing.T) {
		_, err := newHelmEngine(nil).Render(ctx, cmSpec("bomb.tgz", nil), testContext())
		require.Error(t, err)
		assert.Contains(t, err.Error(), "decompresses to more than")
	})
	t.Run("render time", func(t *testing.T) {
		setLimits(t, 100*time.Millisecond, 0, 0)
		h := newHelmEngine(nil)
		start := time.Now()
		_, err := h.Render(ctx, cmSpec("slow.tgz", nil), testContext())
		require.Error(t, err)
		assert.Contains(t, err.Error(), "helm rendering did not finish within 100ms")
		assert.Less(t, time.Since(start), 2*time.Second)
		// The render's process is killed: its slot is free again at once,
		// not once the loop would have ended.
		start = time.Now()
		waitFlights(t)
		assert.Less(t, time.Since(start), 2*time.Second)
		assert.Empty(t, renderSlots, "no slot held")
	})
	t.Run("fetch time", func(t *testing.T) {
		setLimits(t, 100*time.Millisecond, 0, 0)
		srv := newRepoServer(t, false)
		srv.delay = 5 * time.Second
		start := time.Now()
		_, err := newHelmEngine(nil).Render(context.Background(), repoSpec(srv.URL, "app", "1.0.0"), testContext())
		require.Error(t, err)
		assert.Contains(t, err.Error(), "cannot fetch chart [app] from ["+srv.URL+"] within 100ms")
		assert.True(t, IsTransient(err))
		assert.Less(t, time.Since(start), 2*time.Second)
	})
	t.Run("download size", func(t *testing.T) {
		srv := newRepoServer(t, false)
		srv.set("/index.yaml", []byte("entries: {app: [{version: 1.0.0, urls: [app.tgz]}]}"))
		srv.set("/app.tgz", make([]byte, maxArchiveBytes+1))
		_, err := newHelmEngine(nil).Render(context.Background(), repoSpec(srv.URL, "app", "1.0.0"), testContext())
		require.Error(t, err)
		assert.Contains(t, err.Error(), fmt.Sprintf("more than the %d bytes allowed", maxArchiveBytes))
	})
	t.Run("random values are rendered once", func(t *testing.T) {
		h := newHelmEngine(nil)
		a, err := h.Render(ctx, cmSpec("random.tgz", nil), testContext())
		require.NoError(t, err)
		b, err := h.Render(ctx, cmSpec("random.tgz", nil), testContext())
		require.NoError(t, err)
		pa, _, _ := unstructured.NestedString(a[0].Object, "stringData", "password")
		assert.Len(t, pa, 16)
		assert.Equal(t, a[0].Object, b[0].Object)
	})
}

// Charts see the Kubernetes version of the client-go in go.mod.
func TestClientKubeVersionMatchesGoMod(t *testing.T) {
	mod, err := os.ReadFile("../../go.mod")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^\s*k8s.io/client-go v0\.(\d+)\.(\d+)`).FindSubmatch(mod)
	require.NotNil(t, m, "client-go in go.mod")
	assert.Equal(t, fmt.Sprintf("v1.%s.%s", m[1], m[2]), clientKubeVersion)
}

func TestParseChallenge(t *testing.T) {
	s, p := parseChallenge(`Bearer realm="https://auth.example.com/token",service="registry.example.com",scope="repository:a/b:pull,push"`)
	assert.Equal(t, "Bearer", s)
	assert.Equal(t, map[string]string{"realm": "https://auth.example.com/token", "service": "registry.example.com", "scope": "repository:a/b:pull,push"}, p)
	s, p = parseChallenge(`Basic realm=registry`)
	assert.Equal(t, "Basic", s)
	assert.Equal(t, map[string]string{"realm": "registry"}, p)
}

func TestPickVersion(t *testing.T) {
	versions := []string{"1.0.0", "1.10.0", "1.9.0", "2.0.0-rc.1", "v3"}
	for _, c := range []struct{ want, got, err string }{
		{"", "v3", ""},
		{"1.9.0", "1.9.0", ""},
		{"^1", "1.10.0", ""},
		{"< 1.5", "1.0.0", ""},
		{">= 2.0.0-0, < 3", "2.0.0-rc.1", ""},
		{"4.x", "", "no version matches [4.x]"},
		{"!!", "", "is not a version constraint"},
	} {
		got, err := pickVersion(versions, c.want)
		if c.err != "" {
			require.Error(t, err, c.want)
			assert.Contains(t, err.Error(), c.err)
			continue
		}
		require.NoError(t, err, c.want)
		assert.Equal(t, c.got, got, c.want)
	}
	_, err := pickVersion([]string{"1.0.0-alpha"}, "")
	assert.ErrorContains(t, err, "no released version")
}

// newHelmEngine is the engine of the unit tests: their servers listen on
// 127.0.0.1, often over plain http.
func newHelmEngine(client *http.Client) *helmEngine {
	return newHelmEngineWith(HelmOptions{AllowPrivateNetworks: true, AllowHTTP: true}, client)
}
