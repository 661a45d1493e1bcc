package render

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"kontinue.dev/kontinue/reconciler/api"
)

// Bounds of what the helm engine downloads.
const (
	maxArchiveBytes  = 8 << 20  // a packaged chart
	maxIndexBytes    = 32 << 20 // a repository's index.yaml
	maxManifestBytes = 1 << 20  // an OCI manifest or tag list
	indexTTL         = 5 * time.Minute
)

var configMapGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// chart returns the packaged chart of hs and a description of it for
// messages.
func (h *helmEngine) chart(ctx context.Context, hs *api.HelmSource, ns string) ([]byte, string, error) {
	switch {
	case hs.Chart != nil && hs.ConfigMapRef != nil:
		return nil, "", &StampError{Engine: HelmName, Message: "helm sets both chart and configMapRef: set exactly one"}
	case hs.ConfigMapRef != nil:
		return h.fromConfigMap(ctx, hs.ConfigMapRef)
	case hs.Chart == nil:
		return nil, "", &StampError{Engine: HelmName, Message: "helm sets neither chart nor configMapRef: set exactly one"}
	}
	c := hs.Chart
	if c.Name == "" || c.Repository == "" {
		return nil, "", &StampError{Engine: HelmName, Message: "helm.chart needs a repository and a name"}
	}
	repo, err := url.Parse(c.Repository)
	if err != nil || repo.Host == "" {
		return nil, "", &StampError{Engine: HelmName, Message: fmt.Sprintf("helm.chart.repository [%s] is not a URL", c.Repository)}
	}
	cr, err := credentialsOf(ctx, c.SecretRef, ns)
	if err != nil {
		return nil, "", err
	}
	var data []byte
	var version string
	switch repo.Scheme {
	case "https", "http":
		if err := checkScheme(repo.Scheme, h.opts); err != nil {
			return nil, "", &StampError{Engine: HelmName, Message: fmt.Sprintf("helm.chart.repository [%s]: %v", repo.Redacted(), err)}
		}
		data, version, err = h.fromRepository(ctx, repo, c.Name, c.Version, cr)
	case "oci":
		data, version, err = h.fromOCI(ctx, repo, c.Name, c.Version, cr)
	default:
		return nil, "", &StampError{Engine: HelmName, Message: fmt.Sprintf("helm.chart.repository [%s]: the scheme must be https or oci", repo.Redacted())}
	}
	origin := fmt.Sprintf("chart [%s %s] from [%s]", c.Name, version, repo.Redacted())
	if err != nil {
		if version == "" {
			origin = fmt.Sprintf("chart [%s] from [%s]", c.Name, repo.Redacted())
		}
		var se *StampError
		if errors.As(err, &se) {
			return nil, "", se
		}
		if r, ok := isRefused(err); ok {
			return nil, "", &StampError{Engine: HelmName, Message: "cannot fetch " + origin, Err: r}
		}
		if ctx.Err() != nil {
			return nil, "", &StampError{Engine: HelmName, Message: fmt.Sprintf("cannot fetch %s within %s", origin, limits.timeout), Err: transientError{ctx.Err()}}
		}
		return nil, "", &StampError{Engine: HelmName, Message: "cannot fetch " + origin, Err: transientError{err}}
	}
	return data, origin, nil
}

// fromConfigMap reads a packaged chart from a ConfigMap's binaryData.
func (h *helmEngine) fromConfigMap(ctx context.Context, ref *api.ConfigMapRef) ([]byte, string, error) {
	origin := fmt.Sprintf("chart in ConfigMap [%s/%s] key [%s]", ref.Namespace, ref.Name, ref.Key)
	fail := func(msg string, err error) ([]byte, string, error) {
		return nil, "", &StampError{Engine: HelmName, Message: msg, Err: err}
	}
	if ref.Namespace == "" || ref.Name == "" || ref.Key == "" {
		return fail("helm.configMapRef needs a namespace, a name and a key", nil)
	}
	g := ObjectGetterFrom(ctx)
	if g == nil {
		return fail("cannot read the "+origin+": the helm engine was given no way to read ConfigMaps", nil)
	}
	cm, err := g.Get(ctx, configMapGVR, ref.Namespace, ref.Name)
	switch {
	case apierrors.IsNotFound(err):
		return fail(fmt.Sprintf("ConfigMap [%s/%s] of helm.configMapRef not found", ref.Namespace, ref.Name), nil)
	case apierrors.IsForbidden(err):
		return fail("cannot read the "+origin, err)
	case err != nil:
		return fail("cannot read the "+origin, transientError{err})
	}
	bin, _ := cm.Object["binaryData"].(map[string]any)
	s, ok := bin[ref.Key].(string)
	if !ok {
		if data, _ := cm.Object["data"].(map[string]any); data[ref.Key] != nil {
			return fail(fmt.Sprintf("ConfigMap [%s/%s] holds key [%s] in data; a packaged chart (.tgz) belongs in binaryData", ref.Namespace, ref.Name, ref.Key), nil)
		}
		return fail(fmt.Sprintf("ConfigMap [%s/%s] has no binaryData key [%s]", ref.Namespace, ref.Name, ref.Key), nil)
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return fail("the "+origin+" is not base64", err)
	}
	return b, origin, nil
}

// repoIndex is the part of a chart repository's index.yaml the engine reads.
type repoIndex struct {
	Entries map[string][]indexEntry `json:"entries"`
}

type indexEntry struct {
	Version string   `json:"version"`
	URLs    []string `json:"urls"`
	Digest  string   `json:"digest"`
}

// fromRepository fetches a chart from an http(s) chart repository. It
// returns the version it found, also with an error once it knows it.
func (h *helmEngine) fromRepository(ctx context.Context, repo *url.URL, name, want string, cr *credentials) ([]byte, string, error) {
	base := strings.TrimSuffix(repo.String(), "/")
	// Charts and indexes of a private repository are cached by the
	// credentials that fetched them: an owner without them does not get
	// them from the cache.
	ck := cr.key()
	if v, ok := h.charts.get(ck + base + "|" + name + "|" + want); ok {
		return v.([]byte), want, nil
	}
	idx, err := h.index(ctx, base, cr)
	if err != nil {
		return nil, "", err
	}
	entries := idx.Entries[name]
	if len(entries) == 0 {
		return nil, "", &StampError{Engine: HelmName, Message: fmt.Sprintf("chart [%s] is not in repository [%s]", name, repo.Redacted())}
	}
	versions := make([]string, len(entries))
	for i, e := range entries {
		versions[i] = e.Version
	}
	version, err := pickVersion(versions, want)
	if err != nil {
		return nil, "", &StampError{Engine: HelmName, Message: fmt.Sprintf("chart [%s] in repository [%s]: %v", name, repo.Redacted(), err)}
	}
	key := ck + base + "|" + name + "|" + version
	if v, ok := h.charts.get(key); ok {
		return v.([]byte), version, nil
	}
	var e indexEntry
	for _, c := range entries {
		if c.Version == version {
			e = c
			break
		}
	}
	if len(e.URLs) == 0 {
		return nil, version, &StampError{Engine: HelmName, Message: fmt.Sprintf("chart [%s %s] in repository [%s] has no URL", name, version, repo.Redacted())}
	}
	u, err := url.Parse(e.URLs[0])
	if err != nil {
		return nil, version, &StampError{Engine: HelmName, Message: fmt.Sprintf("chart [%s %s] in repository [%s] has a bad URL", name, version, repo.Redacted()), Err: err}
	}
	// Relative URLs are relative to the repository, as in Helm.
	u = (&url.URL{Scheme: repo.Scheme, User: repo.User, Host: repo.Host, Path: strings.TrimSuffix(repo.Path, "/") + "/"}).ResolveReference(u)
	if err := checkScheme(u.Scheme, h.opts); err != nil {
		return nil, version, &StampError{Engine: HelmName, Message: fmt.Sprintf("chart [%s %s] in repository [%s] has URL [%s]: %v", name, version, repo.Redacted(), u.Redacted(), err)}
	}
	// Credentials of the repository URL go to the repository's host only,
	// as Helm does without --pass-credentials.
	if u.Host != repo.Host {
		u.User = nil
	}
	data, err := h.get(ctx, u.String(), cr.basicFor(u.Host, repo.Host), maxArchiveBytes)
	if err != nil {
		return nil, version, err
	}
	if e.Digest != "" && !strings.EqualFold(digest(data), strings.TrimPrefix(e.Digest, "sha256:")) {
		return nil, version, fmt.Errorf("the downloaded chart does not match the digest of the repository's index")
	}
	h.charts.add(key, data, int64(len(data)), 0)
	return data, version, nil
}

func (h *helmEngine) index(ctx context.Context, base string, cr *credentials) (*repoIndex, error) {
	if v, ok := h.indexes.get(cr.key() + base); ok {
		return v.(*repoIndex), nil
	}
	data, err := h.get(ctx, base+"/index.yaml", cr.basic(), maxIndexBytes)
	if err != nil {
		return nil, err
	}
	idx := &repoIndex{}
	if err := yaml.Unmarshal(data, idx); err != nil {
		return nil, &StampError{Engine: HelmName, Message: "the index.yaml of repository [" + redact(base) + "] is not valid", Err: err}
	}
	h.indexes.add(cr.key()+base, idx, int64(len(data)), indexTTL)
	return idx, nil
}

func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return raw
}

// pickVersion chooses among a chart's versions: the one named, else the
// highest matching a semver constraint, else (want empty) the highest that
// is not a pre-release, as Helm does.
func pickVersion(versions []string, want string) (string, error) {
	for _, v := range versions {
		if v == want && want != "" {
			return v, nil
		}
	}
	var c *semver.Constraints
	if want != "" {
		var err error
		if c, err = semver.NewConstraint(want); err != nil {
			return "", fmt.Errorf("version [%s] is not in the repository and is not a version constraint", want)
		}
	}
	var best *semver.Version
	bestRaw := ""
	for _, raw := range versions {
		v, err := semver.NewVersion(raw)
		if err != nil {
			continue
		}
		if c == nil && v.Prerelease() != "" {
			continue
		}
		if c != nil && !c.Check(v) {
			continue
		}
		if best == nil || v.GreaterThan(best) {
			best, bestRaw = v, raw
		}
	}
	if best == nil {
		have := append([]string(nil), versions...)
		sort.Strings(have)
		if len(have) > 10 {
			have = append(have[:10], "…")
		}
		if want == "" {
			return "", fmt.Errorf("no released version (the repository has: %s)", strings.Join(have, ", "))
		}
		return "", fmt.Errorf("no version matches [%s] (the repository has: %s)", want, strings.Join(have, ", "))
	}
	return bestRaw, nil
}

// get downloads url with at most max bytes of body.
func (h *helmEngine) get(ctx context.Context, u string, header http.Header, max int64) ([]byte, error) {
	resp, err := h.do(ctx, u, header)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", redact(u), resp.Status)
	}
	return readBounded(resp, max)
}

func (h *helmEngine) do(ctx context.Context, u string, header http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if err := h.checkProxied(req); err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	return h.client.Do(req)
}

func readBounded(resp *http.Response, max int64) ([]byte, error) {
	if resp.ContentLength > max {
		return nil, fmt.Errorf("GET %s: %d bytes is more than the %d allowed", redact(resp.Request.URL.String()), resp.ContentLength, max)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("GET %s: more than the %d bytes allowed", redact(resp.Request.URL.String()), max)
	}
	return data, nil
}

// OCI registries (the distribution API, with anonymous bearer tokens).

const (
	ociManifestType    = "application/vnd.oci.image.manifest.v1+json"
	helmChartLayerType = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
)

type ociManifest struct {
	Layers []struct {
		MediaType string `json:"mediaType"`
		Digest    string `json:"digest"`
		Size      int64  `json:"size"`
	} `json:"layers"`
}

// fromOCI pulls a chart from oci://host/path: the repository is path/name
// and the tag the version ('+' written '_', as Helm pushes it).
func (h *helmEngine) fromOCI(ctx context.Context, repo *url.URL, name, want string, cr *credentials) ([]byte, string, error) {
	path := strings.Trim(strings.Trim(repo.Path, "/")+"/"+name, "/")
	reg := &ociClient{h: h, host: repo.Host, repo: path, creds: cr}
	version := want
	if _, err := semver.StrictNewVersion(want); err != nil {
		// Not an exact version: choose among the tags.
		body, err := reg.get(ctx, "/tags/list", "application/json", maxManifestBytes)
		if err != nil {
			return nil, "", err
		}
		var tags struct {
			Tags []string `json:"tags"`
		}
		if err := json.Unmarshal(body, &tags); err != nil {
			return nil, "", fmt.Errorf("tag list of %s: %w", path, err)
		}
		versions := make([]string, len(tags.Tags))
		for i, t := range tags.Tags {
			versions[i] = strings.ReplaceAll(t, "_", "+")
		}
		if version, err = pickVersion(versions, want); err != nil {
			return nil, "", &StampError{Engine: HelmName, Message: fmt.Sprintf("chart [%s] in registry [%s]: %v", name, repo.Redacted(), err)}
		}
	}
	key := cr.key() + "oci://" + repo.Host + "/" + path + "|" + version
	if v, ok := h.charts.get(key); ok {
		return v.([]byte), version, nil
	}
	body, err := reg.get(ctx, "/manifests/"+strings.ReplaceAll(version, "+", "_"), ociManifestType, maxManifestBytes)
	if err != nil {
		return nil, version, err
	}
	var m ociManifest
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, version, fmt.Errorf("manifest of %s:%s: %w", path, version, err)
	}
	for _, l := range m.Layers {
		if l.MediaType != helmChartLayerType {
			continue
		}
		if l.Size > maxArchiveBytes {
			return nil, version, &StampError{Engine: HelmName, Message: fmt.Sprintf("chart [%s %s] is %d bytes, more than the %d allowed", name, version, l.Size, maxArchiveBytes)}
		}
		// Registries redirect blobs to storage elsewhere; the content is
		// checked against its digest.
		data, err := reg.get(allowCrossHost(ctx), "/blobs/"+l.Digest, "", maxArchiveBytes)
		if err != nil {
			return nil, version, err
		}
		if "sha256:"+digest(data) != l.Digest {
			return nil, version, fmt.Errorf("the chart layer of %s:%s does not match its digest", path, version)
		}
		h.charts.add(key, data, int64(len(data)), 0)
		return data, version, nil
	}
	return nil, version, &StampError{Engine: HelmName, Message: fmt.Sprintf("[%s:%s] in registry [%s] is not a Helm chart (no layer of type %s)", path, version, repo.Redacted(), helmChartLayerType)}
}

type ociClient struct {
	h     *helmEngine
	host  string
	repo  string
	creds *credentials
	token string
	basic bool // the registry asked for Basic credentials
}

// get GETs /v2/<repo><suffix>, fetching an anonymous token when the
// registry asks for one.
func (c *ociClient) get(ctx context.Context, suffix, accept string, max int64) ([]byte, error) {
	u := "https://" + c.host + "/v2/" + c.repo + suffix
	for attempt := 0; ; attempt++ {
		header := http.Header{}
		if accept != "" {
			header.Set("Accept", accept)
		}
		if c.token != "" {
			header.Set("Authorization", "Bearer "+c.token)
		} else if c.basic {
			for k, v := range c.creds.basic() {
				header[k] = v
			}
		}
		resp, err := c.h.do(ctx, u, header)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode == http.StatusUnauthorized && attempt == 0 {
			challenge := resp.Header.Get("WWW-Authenticate")
			_ = resp.Body.Close()
			if err := c.login(ctx, challenge); err != nil {
				return nil, fmt.Errorf("GET %s: %w", u, err)
			}
			continue
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
		}
		return readBounded(resp, max)
	}
}

// login gets an anonymous pull token from the realm of a Bearer challenge.
func (c *ociClient) login(ctx context.Context, challenge string) error {
	scheme, params := parseChallenge(challenge)
	if strings.EqualFold(scheme, "basic") && c.creds != nil {
		c.basic = true
		return nil
	}
	if !strings.EqualFold(scheme, "bearer") || params["realm"] == "" {
		return fmt.Errorf("the registry requires credentials (challenge %q)", challenge)
	}
	realm, err := url.Parse(params["realm"])
	if err != nil || realm.Host == "" {
		return fmt.Errorf("bad token realm %q", params["realm"])
	}
	if err := checkScheme(realm.Scheme, c.h.opts); err != nil {
		return fmt.Errorf("token realm [%s]: %w", realm.Redacted(), err)
	}
	q := realm.Query()
	if s := params["service"]; s != "" {
		q.Set("service", s)
	}
	scope := params["scope"]
	if scope == "" {
		scope = "repository:" + c.repo + ":pull"
	}
	q.Set("scope", scope)
	realm.RawQuery = q.Encode()
	// The credentials go to the token service the registry names, as
	// docker and helm send them; the token comes back to the registry only.
	body, err := c.h.get(ctx, realm.String(), c.creds.basic(), maxManifestBytes)
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	var tok struct {
		Token       string `json:"token"`
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(body, &tok); err != nil {
		return fmt.Errorf("token: %w", err)
	}
	c.token = tok.Token
	if c.token == "" {
		c.token = tok.AccessToken
	}
	if c.token == "" {
		return errors.New("token: the realm returned no token")
	}
	return nil
}

// parseChallenge splits `Bearer realm="…",service="…"` into the scheme and
// its parameters.
func parseChallenge(h string) (string, map[string]string) {
	scheme, rest, _ := strings.Cut(strings.TrimSpace(h), " ")
	params := map[string]string{}
	for rest = strings.TrimSpace(rest); rest != ""; {
		k, after, ok := strings.Cut(rest, "=")
		if !ok {
			break
		}
		k = strings.TrimSpace(strings.TrimLeft(k, ", "))
		var v string
		if strings.HasPrefix(after, `"`) {
			end := strings.Index(after[1:], `"`)
			if end < 0 {
				v, rest = after[1:], ""
			} else {
				v, rest = after[1:1+end], after[2+end:]
			}
		} else {
			v, rest, _ = strings.Cut(after, ",")
		}
		params[strings.ToLower(k)] = v
		rest = strings.TrimLeft(rest, ", ")
	}
	return scheme, params
}

// checkProxied checks the address of a request that goes through a proxy:
// the dialer then sees only the proxy's address.
func (h *helmEngine) checkProxied(req *http.Request) error {
	tr, ok := h.client.Transport.(*http.Transport)
	if h.opts.AllowPrivateNetworks || !ok || tr.Proxy == nil {
		return nil
	}
	if p, err := tr.Proxy(req); err != nil || p == nil {
		return err
	}
	host := req.URL.Hostname()
	ips, err := net.DefaultResolver.LookupIPAddr(req.Context(), host)
	if err != nil {
		return err
	}
	for _, ip := range ips {
		if !publicIP(ip.IP) {
			return refuse("host [%s] is at %s, a loopback, private or link-local address: charts are fetched only from public addresses unless Kontinue runs with --helm-allow-private-networks", host, ip.IP)
		}
	}
	return nil
}

// credentials of a private chart repository or registry.
type credentials struct{ username, password string }

// key prefixes cache keys of what was fetched with cr ("" without).
func (cr *credentials) key() string {
	if cr == nil {
		return ""
	}
	return digest([]byte(cr.username + "\x00" + cr.password))[:16] + "@"
}

// basic is the Authorization header of cr (nil without).
func (cr *credentials) basic() http.Header {
	if cr == nil {
		return nil
	}
	req := &http.Request{Header: http.Header{}}
	req.SetBasicAuth(cr.username, cr.password)
	return req.Header
}

// basicFor is basic() for a request to host, and nothing for another host
// than the repository's.
func (cr *credentials) basicFor(host, repoHost string) http.Header {
	if host != repoHost {
		return nil
	}
	return cr.basic()
}

var secretGVR = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

type saGetterKey struct{}

// WithServiceAccountGetter returns ctx carrying g, which reads as the
// owner's service account: the helm engine reads helm.chart.secretRef with
// it.
func WithServiceAccountGetter(ctx context.Context, g ObjectGetter) context.Context {
	return context.WithValue(ctx, saGetterKey{}, g)
}

// credentialsOf reads the Secret of helm.chart.secretRef in the owner's
// namespace as the owner's service account.
func credentialsOf(ctx context.Context, ref *api.SecretRef, ns string) (*credentials, error) {
	if ref == nil {
		return nil, nil
	}
	fail := func(msg string, err error) (*credentials, error) {
		return nil, &StampError{Engine: HelmName, Message: msg, Err: err}
	}
	if ref.Name == "" {
		return fail("helm.chart.secretRef needs a name", nil)
	}
	g, _ := ctx.Value(saGetterKey{}).(ObjectGetter)
	if g == nil {
		return fail("cannot read Secret ["+ref.Name+"] of helm.chart.secretRef: the helm engine was given no service account to read it as", nil)
	}
	s, err := g.Get(ctx, secretGVR, ns, ref.Name)
	switch {
	case apierrors.IsNotFound(err):
		return fail(fmt.Sprintf("Secret [%s] of helm.chart.secretRef not found in namespace [%s]", ref.Name, ns), nil)
	case apierrors.IsForbidden(err):
		return fail(fmt.Sprintf("the service account may not read Secret [%s] of helm.chart.secretRef", ref.Name), err)
	case err != nil:
		return fail(fmt.Sprintf("cannot read Secret [%s] of helm.chart.secretRef", ref.Name), transientError{err})
	}
	data, _ := s.Object["data"].(map[string]any)
	val := func(k string) string {
		v, _ := data[k].(string)
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return ""
		}
		return string(b)
	}
	cr := &credentials{username: val("username"), password: val("password")}
	if cr.username == "" || cr.password == "" {
		return fail(fmt.Sprintf("Secret [%s] of helm.chart.secretRef needs the keys username and password", ref.Name), nil)
	}
	return cr, nil
}
