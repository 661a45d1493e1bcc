package render

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/Masterminds/semver/v3"
)

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

// pull pulls chart name of the registry repo, oci://host/path: reg's
// repository is path/name and the tag the version ('+' written '_', as
// Helm pushes it).
func (reg *ociClient) pull(ctx context.Context, repo *url.URL, name, want string) ([]byte, string, error) {
	h, path, cr := reg.h, reg.repo, reg.creds
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
