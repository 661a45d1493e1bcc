package render

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kontinue.dev/kontinue/reconciler/api"
)

func TestPublicIP(t *testing.T) {
	for _, c := range []struct {
		ip     string
		public bool
	}{
		{"8.8.8.8", true}, {"2606:4700::1111", true},
		{"127.0.0.1", false}, {"::1", false}, {"10.1.2.3", false}, {"172.16.0.1", false}, {"192.168.1.1", false},
		{"169.254.169.254", false}, {"fe80::1", false}, {"fd00::1", false}, {"0.0.0.0", false}, {"::", false},
		{"100.64.0.1", false}, {"::ffff:127.0.0.1", false}, {"::ffff:10.0.0.1", false}, {"224.0.0.1", false}, {"64:ff9b::a00:1", false},
	} {
		assert.Equal(t, c.public, publicIP(net.ParseIP(c.ip)), c.ip)
	}
}

// guarded is an engine with the production client and options, trusting
// httptest's certificate.
func guarded(t *testing.T, o HelmOptions, tlsSrv *httptest.Server) *helmEngine {
	c := helmHTTPClient(o)
	if tlsSrv != nil {
		pool := x509.NewCertPool()
		pool.AddCert(tlsSrv.Certificate())
		c.Transport.(*http.Transport).TLSClientConfig.RootCAs = pool
	}
	return newHelmEngineWith(o, c)
}

func TestHelmSourceBounds(t *testing.T) {
	archive := appChart(t, "1.0.0")
	repo := newRepoServer(t, false)
	repo.set("/index.yaml", []byte("entries: {app: [{version: 1.0.0, urls: [app-1.0.0.tgz]}]}"))
	repo.set("/app-1.0.0.tgz", archive)
	tlsRepo := newRepoServer(t, true)
	tlsRepo.set("/index.yaml", []byte("entries: {app: [{version: 1.0.0, urls: [app-1.0.0.tgz]}]}"))
	tlsRepo.set("/app-1.0.0.tgz", archive)

	t.Run("private addresses are refused by default", func(t *testing.T) {
		_, err := guarded(t, HelmOptions{}, tlsRepo.Server).Render(context.Background(), repoSpec(tlsRepo.URL, "app", "1.0.0"), testContext())
		require.Error(t, err)
		assert.Contains(t, err.Error(), "is at 127.0.0.1, a loopback, private or link-local address: charts are fetched only from public addresses unless Kontinue runs with --helm-allow-private-networks")
		assert.False(t, IsTransient(err), "only a change of the template or the flags helps")
		assert.Zero(t, tlsRepo.count("/index.yaml"), "nothing was sent")
	})
	t.Run("the flag allows them", func(t *testing.T) {
		objs, err := guarded(t, HelmOptions{AllowPrivateNetworks: true}, tlsRepo.Server).Render(context.Background(), repoSpec(tlsRepo.URL, "app", "1.0.0"), testContext())
		require.NoError(t, err)
		assert.Equal(t, "app-1.0.0", chartLabel(t, objs))
	})
	t.Run("http is refused by default", func(t *testing.T) {
		_, err := guarded(t, HelmOptions{AllowPrivateNetworks: true}, nil).Render(context.Background(), repoSpec(repo.URL, "app", "1.0.0"), testContext())
		require.Error(t, err)
		assert.Contains(t, err.Error(), "plain http is refused: use https (or run Kontinue with --helm-allow-http)")
	})
	t.Run("an index entry on http is refused", func(t *testing.T) {
		r := newRepoServer(t, true)
		r.set("/index.yaml", []byte(fmt.Sprintf("entries: {app: [{version: 1.0.0, urls: [%s/app-1.0.0.tgz]}]}", repo.URL)))
		_, err := guarded(t, HelmOptions{AllowPrivateNetworks: true}, r.Server).Render(context.Background(), repoSpec(r.URL, "app", "1.0.0"), testContext())
		require.Error(t, err)
		assert.Contains(t, err.Error(), "plain http is refused")
	})
}

func TestHelmRedirects(t *testing.T) {
	archive := appChart(t, "1.0.0")
	var mu sync.Mutex
	auth := map[string]string{}
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth[r.URL.Path] = r.Header.Get("Authorization")
		mu.Unlock()
		_, _ = w.Write(archive)
	}))
	defer other.Close()
	var self string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/same/index.yaml":
			http.Redirect(w, r, self+"/real/index.yaml", http.StatusFound)
		case "/real/index.yaml", "/creds/index.yaml":
			_, _ = w.Write([]byte("entries: {app: [{version: 1.0.0, urls: [app-1.0.0.tgz]}]}"))
		case "/same/app-1.0.0.tgz", "/real/app-1.0.0.tgz":
			_, _ = w.Write(archive)
		case "/away/index.yaml":
			http.Redirect(w, r, other.URL+"/index.yaml", http.StatusFound)
		case "/elsewhere/index.yaml":
			_, _ = fmt.Fprintf(w, "entries: {app: [{version: 1.0.0, urls: [%s/charts/app-1.0.0.tgz]}]}", other.URL)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	self = srv.URL
	o := HelmOptions{AllowPrivateNetworks: true, AllowHTTP: true}

	_, err := guarded(t, o, nil).Render(context.Background(), repoSpec(srv.URL+"/same", "app", "1.0.0"), testContext())
	require.NoError(t, err, "a redirect on the same host is followed")

	_, err = guarded(t, o, nil).Render(context.Background(), repoSpec(srv.URL+"/away", "app", "1.0.0"), testContext())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "redirects to another host ["+strings.TrimPrefix(other.URL, "http://")+"]: chart downloads follow redirects only on the same host")
	assert.False(t, IsTransient(err))

	// Index entries may name another host, but the repository's
	// credentials stay with the repository.
	u := strings.Replace(srv.URL, "http://", "http://user:secret@", 1)
	_, err = guarded(t, o, nil).Render(context.Background(), repoSpec(u+"/elsewhere", "app", "1.0.0"), testContext())
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	assert.Contains(t, auth, "/charts/app-1.0.0.tgz")
	assert.Empty(t, auth["/charts/app-1.0.0.tgz"], "no credentials to another host")
}

// A registry's token goes to the registry only: not to the storage a blob
// redirects to.
func TestHelmOCITokenStaysWithTheRegistry(t *testing.T) {
	archive := appChart(t, "1.2.0")
	layer := "sha256:" + digest(archive)
	var mu sync.Mutex
	var storageAuth []string
	storage := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		storageAuth = append(storageAuth, r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = w.Write(archive)
	}))
	defer storage.Close()
	var host string
	reg := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" {
			_, _ = w.Write([]byte(`{"token": "t0k"}`))
			return
		}
		if r.Header.Get("Authorization") != "Bearer t0k" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="https://`+host+`/token",service="reg"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/v2/charts/app/manifests/1.2.0":
			_, _ = fmt.Fprintf(w, `{"schemaVersion": 2, "layers": [{"mediaType": %q, "digest": %q, "size": %d}]}`, helmChartLayerType, layer, len(archive))
		case "/v2/charts/app/blobs/" + layer:
			http.Redirect(w, r, storage.URL+"/blob", http.StatusTemporaryRedirect)
		default:
			http.NotFound(w, r)
		}
	}))
	defer reg.Close()
	host = reg.Listener.Addr().String()
	objs, err := guarded(t, HelmOptions{AllowPrivateNetworks: true}, reg).Render(context.Background(), repoSpec("oci://"+host+"/charts", "app", "1.2.0"), testContext())
	require.NoError(t, err)
	assert.Equal(t, "app-1.2.0", chartLabel(t, objs))
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{""}, storageAuth, "the blob was fetched without the registry's token")
}

// secretGetter serves one Secret in namespace dev.
type secretGetter map[string]map[string]string

func (s secretGetter) Get(_ context.Context, gvr schema.GroupVersionResource, ns, name string) (*unstructured.Unstructured, error) {
	d, ok := s[name]
	if !ok || ns != "dev" || gvr != secretGVR {
		return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
	}
	data := map[string]any{}
	for k, v := range d {
		data[k] = base64.StdEncoding.EncodeToString([]byte(v))
	}
	return &unstructured.Unstructured{Object: map[string]any{"data": data}}, nil
}

// Credentials of helm.chart.secretRef go to the repository's host only,
// and what they fetched is not served to an owner without them.
func TestHelmPrivateRepository(t *testing.T) {
	archive := appChart(t, "1.0.0")
	var mu sync.Mutex
	otherAuth := []string{}
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		otherAuth = append(otherAuth, r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = w.Write(archive)
	}))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "bot" || p != "s3cret" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/index.yaml":
			_, _ = fmt.Fprintf(w, "entries: {app: [{version: 1.0.0, urls: [app.tgz]}], ext: [{version: 1.0.0, urls: [%s/ext.tgz]}]}", other.URL)
		case "/app.tgz":
			_, _ = w.Write(archive)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	h := newHelmEngine(nil)
	spec := func(chart, secret string) *api.TemplateSpec {
		s := repoSpec(srv.URL, chart, "1.0.0")
		if secret != "" {
			s.Helm.Chart.SecretRef = &api.SecretRef{Name: secret}
		}
		return s
	}
	ctx := WithServiceAccountGetter(context.Background(), secretGetter{"creds": {"username": "bot", "password": "s3cret"}, "half": {"username": "bot"}})

	objs, err := h.Render(ctx, spec("app", "creds"), testContext())
	require.NoError(t, err)
	assert.Equal(t, "app-1.0.0", chartLabel(t, objs))
	_, err = h.Render(ctx, spec("ext", "creds"), testContext())
	require.NoError(t, err)
	mu.Lock()
	assert.Equal(t, []string{""}, otherAuth, "no credentials to another host")
	mu.Unlock()

	_, err = h.Render(ctx, spec("app", ""), testContext())
	require.Error(t, err, "not from the cache without the credentials")
	assert.Contains(t, err.Error(), "401")
	_, err = h.Render(ctx, spec("app", "missing"), testContext())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Secret [missing] of helm.chart.secretRef not found in namespace [dev]")
	_, err = h.Render(ctx, spec("app", "half"), testContext())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Secret [half] of helm.chart.secretRef needs the keys username and password")
}

// A private OCI registry: the credentials go to the token service it names
// (Bearer) or to the registry itself (Basic); the token to the registry.
func TestHelmPrivateOCIRegistry(t *testing.T) {
	archive := appChart(t, "1.2.0")
	layer := "sha256:" + digest(archive)
	for _, scheme := range []string{"Bearer", "Basic"} {
		t.Run(scheme, func(t *testing.T) {
			var host string
			reg := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				u, p, basic := r.BasicAuth()
				if r.URL.Path == "/token" {
					if !basic || u != "bot" || p != "s3cret" {
						w.WriteHeader(http.StatusUnauthorized)
						return
					}
					_, _ = w.Write([]byte(`{"token": "private"}`))
					return
				}
				authorized := r.Header.Get("Authorization") == "Bearer private"
				if scheme == "Basic" {
					authorized = basic && u == "bot" && p == "s3cret"
				}
				if !authorized {
					if scheme == "Basic" {
						w.Header().Set("WWW-Authenticate", `Basic realm="reg"`)
					} else {
						w.Header().Set("WWW-Authenticate", `Bearer realm="https://`+host+`/token",service="reg"`)
					}
					w.WriteHeader(http.StatusUnauthorized)
					return
				}
				switch r.URL.Path {
				case "/v2/charts/app/manifests/1.2.0":
					_, _ = fmt.Fprintf(w, `{"schemaVersion": 2, "layers": [{"mediaType": %q, "digest": %q, "size": %d}]}`, helmChartLayerType, layer, len(archive))
				case "/v2/charts/app/blobs/" + layer:
					_, _ = w.Write(archive)
				default:
					http.NotFound(w, r)
				}
			}))
			defer reg.Close()
			host = reg.Listener.Addr().String()
			h := guarded(t, HelmOptions{AllowPrivateNetworks: true}, reg)
			spec := repoSpec("oci://"+host+"/charts", "app", "1.2.0")
			spec.Helm.Chart.SecretRef = &api.SecretRef{Name: "creds"}
			ctx := WithServiceAccountGetter(context.Background(), secretGetter{"creds": {"username": "bot", "password": "s3cret"}})
			objs, err := h.Render(ctx, spec, testContext())
			require.NoError(t, err)
			assert.Equal(t, "app-1.2.0", chartLabel(t, objs))
			spec.Helm.Chart.SecretRef = nil
			_, err = h.Render(ctx, spec, testContext())
			require.Error(t, err, "not from the cache without the credentials")
		})
	}
}
