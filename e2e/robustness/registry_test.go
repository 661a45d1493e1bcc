package robustness

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"

	"kontinue.dev/kontinue/e2e/robustness/check"
	"kontinue.dev/kontinue/reconciler/verify/verifytest"
)

// The run's OCI registry (issue 49, verify before use): go-containerregistry's,
// in the test process, on 127.0.0.1, with signatures where cosign keeps
// them (the sha256-<hex>.sig tag). Each tenant has a repository
// <prefix>/<tenant>/app with images
//
//	good1, good2  signed by the policy's key (the chain `verified` names its public half)
//	unsigned      not signed
//	wrongkey      signed by another key only
//	moved         signed by the policy's key, then the tag moved to an unsigned image
//	live          a tag the tenant moves between the four first (op retag)
//
// Kontinue reaches it at one address, whose repositories a registry fault
// (regdown: 503 for every request; reghang: no answer) makes fail for a
// tenant; the test pushes and moves tags at another address of the same
// storage, which never fails: an op of the test never waits on a fault.
type vregistry struct {
	faulty, clean *httptest.Server
	prefix        string
	key, other    *verifytest.Key
	closing       chan struct{}

	mu      sync.Mutex
	digests map[string]string    // digest → check.Digest*
	down    map[string]time.Time // tenant → 503 until
	hang    map[string]time.Time // tenant → no answer until
}

// vtags are the tags an owner of the verified chain may name.
var vtags = []string{"good1", "good2", "unsigned", "wrongkey", "moved", "live"}

// regRef is an image reference as an op writes it: @REG@ is the faulty
// address and the run's prefix (run.exec fills it in).
func regRef(tenant, tag string) string { return "@REG@/" + tenant + "/app:" + tag }

func newRegistry(prefix string) (*vregistry, error) {
	g := &vregistry{prefix: prefix, key: verifytest.NewKey("ecdsa"), other: verifytest.NewKey("ecdsa"), closing: make(chan struct{}),
		digests: map[string]string{}, down: map[string]time.Time{}, hang: map[string]time.Time{}}
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	g.clean = httptest.NewServer(reg)
	g.faulty = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if t := g.tenantOf(r.URL.Path); t != "" {
			g.mu.Lock()
			down, hang := g.down[t], g.hang[t]
			g.mu.Unlock()
			if d := time.Until(hang); d > 0 {
				select { // then answers: a registry that hung for a while
				case <-time.After(d):
				case <-r.Context().Done():
					return
				case <-g.closing:
					return
				}
			}
			if time.Now().Before(down) {
				http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
				return
			}
		}
		reg.ServeHTTP(w, r)
	}))
	for _, t := range tenants {
		if err := g.populate(t); err != nil {
			g.close()
			return nil, fmt.Errorf("the registry's images of %s: %w", t, err)
		}
	}
	return g, nil
}

// tenantOf is the tenant whose repository a request of the registry API
// reads ("" for another path).
func (g *vregistry) tenantOf(path string) string {
	rest, ok := strings.CutPrefix(path, "/v2/"+g.prefix+"/")
	if !ok {
		return ""
	}
	t, _, _ := strings.Cut(rest, "/")
	return t
}

func (g *vregistry) repo(srv *httptest.Server, tenant string) string {
	return strings.TrimPrefix(srv.URL, "http://") + "/" + g.prefix + "/" + tenant + "/app"
}

// base is what @REG@ stands for.
func (g *vregistry) base() string {
	return strings.TrimPrefix(g.faulty.URL, "http://") + "/" + g.prefix
}

// push pushes a random image to the tenant's repository at tag, signed by
// signers (the signature names the repository as Kontinue reads it).
func (g *vregistry) push(tenant, tag, what string, signers ...*verifytest.Key) (string, error) {
	clean := g.repo(g.clean, tenant)
	d, err := verifytest.Push(clean, tag)
	if err != nil {
		return "", err
	}
	for _, s := range signers {
		if err := verifytest.Attach(clean, d, "sig", s.Sign(g.repo(g.faulty, tenant), d)); err != nil {
			return "", err
		}
	}
	g.mu.Lock()
	g.digests[d] = what
	g.mu.Unlock()
	return d, nil
}

func (g *vregistry) populate(t string) error {
	for _, p := range []struct {
		tag, what string
		by        []*verifytest.Key
	}{
		{"good1", check.DigestSigned, []*verifytest.Key{g.key}},
		{"good2", check.DigestSigned, []*verifytest.Key{g.key}},
		{"unsigned", check.DigestUnsigned, nil},
		{"wrongkey", check.DigestOtherKey, []*verifytest.Key{g.other}},
		{"moved", check.DigestSigned, []*verifytest.Key{g.key}},
		{"moved", check.DigestUnsigned, nil}, // the tag moved after signing
	} {
		if _, err := g.push(t, p.tag, p.what, p.by...); err != nil {
			return err
		}
	}
	return g.retag(t, "good1", "live")
}

// retag moves the tenant's tag to to the image at from.
func (g *vregistry) retag(tenant, from, to string) error {
	return verifytest.Copy(g.repo(g.clean, tenant)+":"+from, g.repo(g.clean, tenant)+":"+to)
}

// fail makes the tenant's repository answer 503 (how "down") or nothing
// (how "hang") for d.
func (g *vregistry) fail(tenant, how string, d time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if how == "hang" {
		g.hang[tenant] = time.Now().Add(d)
	} else {
		g.down[tenant] = time.Now().Add(d)
	}
}

// keyJSON is the policy's public key, quoted for the chain's YAML.
func (g *vregistry) keyJSON() string {
	b, _ := json.Marshal(g.key.PublicPEM())
	return string(b)
}

// known is what the test made each digest (check.VerifyRule.Digests).
func (g *vregistry) known() map[string]string {
	if g == nil {
		return nil // a recheck: the kept run's digests.json, loaded by it
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[string]string, len(g.digests))
	for d, w := range g.digests {
		out[d] = w
	}
	return out
}

func (g *vregistry) close() {
	close(g.closing)
	g.faulty.Close()
	g.clean.Close()
}
