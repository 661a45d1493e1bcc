package render

import (
	"context"
	"encoding/base64"
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
		reg := &ociClient{h: h, host: repo.Host, repo: strings.Trim(strings.Trim(repo.Path, "/")+"/"+c.Name, "/"), creds: cr}
		data, version, err = reg.pull(ctx, repo, c.Name, c.Version)
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
