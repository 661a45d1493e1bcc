package check

// The I/O edge: the policy's material as Kontinue (the platform team's
// namespace), the evidence as the workload's service account (its
// imagePullSecrets for the registry, its rights for the history
// ConfigMaps), never with Kontinue's own rights.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	kauth "github.com/google/go-containerregistry/pkg/authn/kubernetes"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"kontinue.dev/kontinue/attest"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/history"
	"kontinue.dev/kontinue/reconciler/verify"
)

var (
	secrets         = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	configMaps      = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	serviceAccounts = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
)

// Bounds of what one fetch reads.
const (
	maxLayers     = 20
	maxLayerBytes = 1 << 20
	maxReferrers  = 20
)

// Edge is the Fetcher that talks to the API server and registries.
type Edge struct {
	// Kontinue reads the policy's keys and roots (the platform's
	// namespace, named by the cluster-scoped chain).
	Kontinue dynamic.Interface
	// As returns a client acting as a service account.
	As func(namespace, name string) (dynamic.Interface, error)
	// Key is Kontinue's attestation key (nil: none).
	Key *attest.Key
	// Transport reaches registries (nil: http.DefaultTransport).
	Transport http.RoundTripper
	// Keychain, when set, is what registries are read with instead of the
	// service account's imagePullSecrets: `kontinue verify`'s, the user's
	// docker configuration. The controller leaves it nil.
	Keychain authn.Keychain
	// MaterialTTL is how long keys and roots read are kept (default 1m).
	MaterialTTL time.Duration
	// AccountTTL is how long an account's registry credentials, as read,
	// are used before they are read again (default 10s); Accounts bounds
	// how many accounts' are kept (default 256).
	AccountTTL time.Duration
	Accounts   int

	// credentials reads an account's registry credentials (keychain;
	// tests: their own).
	credentials func(ctx context.Context, as dynamic.Interface, acct api.ServiceAccountRef) (authn.Keychain, string, error)

	mu       sync.Mutex
	material map[verify.Ref]cached
	accounts map[api.ServiceAccountRef]*account
}

// account is what a service account reaches registries with: a Puller
// (go-containerregistry's: one ping and token per repository, reused by
// every fetch) made from the credentials its imagePullSecrets held at
// version.
type account struct {
	version    string    // the account's and its pull Secrets' resourceVersions
	read       time.Time // when they were read
	made       time.Time
	puller     *remote.Puller
	refreshing bool // read again off the fetches' path (refresh)
}

// pullerAge bounds how long one Puller is used: it keeps an
// authentication per repository it reached, and a token may expire.
const pullerAge = 10 * time.Minute

type cached struct {
	b     []byte
	found bool
	at    time.Time
}

// Material reads refs, each kept for MaterialTTL.
func (e *Edge) Material(ctx context.Context, refs []verify.Ref) (verify.Material, error) {
	m := verify.Material{Data: map[verify.Ref][]byte{}, Kontinue: e.Key}
	ttl := e.MaterialTTL
	if ttl <= 0 {
		ttl = time.Minute
	}
	for _, r := range refs {
		e.mu.Lock()
		c, ok := e.material[r]
		e.mu.Unlock()
		if !ok || time.Since(c.at) > ttl {
			b, found, err := readKey(ctx, e.Kontinue, r)
			if err != nil {
				return m, err
			}
			c = cached{b: b, found: found, at: time.Now()}
			e.mu.Lock()
			if e.material == nil {
				e.material = map[verify.Ref]cached{}
			}
			e.material[r] = c
			e.mu.Unlock()
		}
		if c.found {
			m.Data[r] = c.b
		}
	}
	return m, nil
}

// readKey reads a key of a Secret or ConfigMap; found is false when it is
// not there (the policy then refuses, saying so).
func readKey(ctx context.Context, cl dynamic.Interface, r verify.Ref) ([]byte, bool, error) {
	gvr := configMaps
	if r.Secret {
		gvr = secrets
	}
	u, err := cl.Resource(gvr).Namespace(r.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", r, err)
	}
	if r.Secret {
		var s corev1.Secret
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &s); err != nil {
			return nil, false, fmt.Errorf("%s: %w", r, err)
		}
		b, ok := s.Data[r.Key]
		return b, ok, nil
	}
	var cm corev1.ConfigMap
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &cm); err != nil {
		return nil, false, fmt.Errorf("%s: %w", r, err)
	}
	if s, ok := cm.Data[r.Key]; ok {
		return []byte(s), true, nil
	}
	b, ok := cm.BinaryData[r.Key]
	return b, ok, nil
}

// Evidence reads, as req's service account, what the policy needs: the
// digest a tag names, cosign's signature and attestation tags and the
// Sigstore bundles referring to the digest (registry), and Kontinue's
// statements in the histories the request names.
func (e *Edge) Evidence(ctx context.Context, req Request, t verify.Target, registry bool) (verify.Evidence, error) {
	var ev verify.Evidence
	as, err := e.As(req.Account.Namespace, req.Account.Name)
	if err != nil {
		return ev, err
	}
	if registry {
		if ev, err = e.registry(ctx, as, req, t); err != nil {
			return ev, err
		}
	}
	if req.Policy.Kontinue != nil {
		ev.Producers = req.Producers
		for _, p := range req.Producers {
			h := history.Name(p.Kind, p.Name)
			u, err := as.Resource(configMaps).Namespace(req.Owner.Namespace).Get(ctx, h, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return ev, fmt.Errorf("history ConfigMap %s: %w", h, err)
			}
			data, _, _ := unstructuredStrings(u.Object, "data")
			for k, v := range data {
				if strings.HasPrefix(k, attest.DataKeyPrefix) {
					// A step's last few statements: an earlier set's
					// output a later step still holds is named there.
					for _, env := range attest.Envelopes(v) {
						ev.Statements = append(ev.Statements, []byte(env))
					}
				}
			}
		}
	}
	return ev, nil
}

func unstructuredStrings(obj map[string]any, field string) (map[string]string, bool, error) {
	m, ok := obj[field].(map[string]any)
	if !ok {
		return nil, false, nil
	}
	out := map[string]string{}
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out, true, nil
}

// keychain is the service account's: its imagePullSecrets, read as the
// account (an account that may not read them pulls anonymously), and the
// resourceVersions they were read at.
func keychain(ctx context.Context, as dynamic.Interface, acct api.ServiceAccountRef) (authn.Keychain, string, error) {
	u, err := as.Resource(serviceAccounts).Namespace(acct.Namespace).Get(ctx, acct.Name, metav1.GetOptions{})
	if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
		return authn.NewMultiKeychain(), "-", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("service account %s/%s: %w", acct.Namespace, acct.Name, err)
	}
	var sa corev1.ServiceAccount
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &sa); err != nil {
		return nil, "", err
	}
	version := sa.ResourceVersion
	var pull []corev1.Secret
	for _, ref := range sa.ImagePullSecrets {
		s, err := as.Resource(secrets).Namespace(acct.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
			version += "," + ref.Name + "=-"
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("pull secret %s/%s: %w", acct.Namespace, ref.Name, err)
		}
		var sec corev1.Secret
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(s.Object, &sec); err != nil {
			return nil, "", err
		}
		version += "," + ref.Name + "=" + sec.ResourceVersion
		pull = append(pull, sec)
	}
	if len(pull) == 0 {
		return authn.NewMultiKeychain(), version, nil
	}
	kc, err := kauth.NewFromPullSecrets(ctx, pull)
	return kc, version, err
}

// puller is the account's Puller: kept AccountTTL after its credentials
// were read; then they are read again (as the account) and the Puller is
// kept only if none of them changed (a rotated or revoked Secret is not
// used once that read saw it). Past half the TTL a fetch still uses the
// Puller and the credentials are read again beside it (refresh), so that
// an account in steady use never has a fetch wait for that read (it
// showed in the tail of verification's latency, once per TTL).
func (e *Edge) puller(ctx context.Context, as dynamic.Interface, acct api.ServiceAccountRef) (*remote.Puller, error) {
	ttl := e.ttl()
	e.mu.Lock()
	a := e.accounts[acct]
	if a != nil && time.Since(a.read) < ttl {
		if time.Since(a.read) >= ttl/2 && !a.refreshing {
			a.refreshing = true
			go e.refresh(as, acct, a)
		}
		e.mu.Unlock()
		return a.puller, nil
	}
	e.mu.Unlock()
	kc, version, err := e.read(ctx, as, acct)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if a = e.accounts[acct]; a != nil && a.version == version && time.Since(a.made) < pullerAge {
		a.read = time.Now()
		return a.puller, nil
	}
	p, err := e.newPuller(kc)
	if err != nil {
		return nil, err
	}
	if e.accounts == nil {
		e.accounts = map[api.ServiceAccountRef]*account{}
	}
	max := e.Accounts
	if max <= 0 {
		max = 256
	}
	for k := range e.accounts {
		if len(e.accounts) < max {
			break
		}
		delete(e.accounts, k) // any one: it is read again when used
	}
	now := time.Now()
	e.accounts[acct] = &account{version: version, read: now, made: now, puller: p}
	return p, nil
}

// refresh reads a's credentials again: unchanged, a is kept another TTL;
// changed (or a Puller past its age), it is dropped and the next fetch
// makes one from what it reads; a failed read changes nothing (the next
// fetch past the TTL reads itself).
func (e *Edge) refresh(as dynamic.Interface, acct api.ServiceAccountRef, a *account) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, version, err := e.read(ctx, as, acct)
	e.mu.Lock()
	defer e.mu.Unlock()
	a.refreshing = false
	if err != nil || e.accounts[acct] != a {
		return
	}
	if version != a.version || time.Since(a.made) >= pullerAge {
		delete(e.accounts, acct)
		return
	}
	a.read = time.Now()
}

func (e *Edge) ttl() time.Duration {
	if e.AccountTTL <= 0 {
		return 10 * time.Second
	}
	return e.AccountTTL
}

// read reads acct's registry credentials as the account.
func (e *Edge) read(ctx context.Context, as dynamic.Interface, acct api.ServiceAccountRef) (authn.Keychain, string, error) {
	if e.credentials != nil {
		return e.credentials(ctx, as, acct)
	}
	return keychain(ctx, as, acct)
}

// forget drops the account's Puller after a registry call failed: the
// Puller keeps a repository's first authentication, failed or not, so the
// next fetch starts anew (and reads the credentials again).
func (e *Edge) forget(acct api.ServiceAccountRef) {
	e.mu.Lock()
	delete(e.accounts, acct)
	e.mu.Unlock()
}

// newPuller reads registries with kc, through e.Transport when set.
func (e *Edge) newPuller(kc authn.Keychain) (*remote.Puller, error) {
	opts := []remote.Option{remote.WithAuthFromKeychain(kc)}
	if e.Transport != nil {
		opts = append(opts, remote.WithTransport(e.Transport))
	}
	return remote.NewPuller(opts...)
}

// registry reads the registry's evidence of t.
func (e *Edge) registry(ctx context.Context, as dynamic.Interface, req Request, t verify.Target) (verify.Evidence, error) {
	var p *remote.Puller
	var err error
	if e.Keychain != nil {
		// `kontinue verify`: the user's keychain, one fetch, nothing kept.
		p, err = e.newPuller(e.Keychain)
	} else {
		p, err = e.puller(ctx, as, req.Account)
	}
	if err != nil {
		return verify.Evidence{}, err
	}
	ev, err := evidence(ctx, p, req, t)
	if err != nil {
		e.forget(req.Account)
	}
	return ev, err
}

// evidence reads the registry's evidence of t through p.
func evidence(ctx context.Context, p *remote.Puller, req Request, t verify.Target) (verify.Evidence, error) {
	var ev verify.Evidence
	opts := []remote.Option{remote.WithContext(ctx), remote.Reuse(p)}
	repo, err := name.NewRepository(t.Repository, name.Insecure)
	if err != nil {
		return ev, err
	}
	ev.Digest = t.Digest
	if ev.Digest == "" {
		// A tag is resolved once: the decision and the step's render use
		// this digest, whatever the tag names later.
		ref, err := name.ParseReference(t.Ref, name.Insecure)
		if err != nil {
			return ev, err
		}
		desc, err := p.Head(ctx, ref)
		if err != nil {
			return ev, fmt.Errorf("resolving %s: %w", t.Ref, err)
		}
		ev.Digest = desc.Digest.String()
	}
	// The signatures, the attestations and the referrers are read side by
	// side: each is a round trip or more once the digest is known, and a
	// change waits for the slowest, not for their sum.
	tag := strings.Replace(ev.Digest, ":", "-", 1)
	var g errgroup.Group
	if req.Policy.Keys != nil || req.Policy.Keyless != nil {
		g.Go(func() (err error) { ev.Signatures, err = layers(repo.Tag(tag+".sig"), opts); return err })
	}
	if len(req.Policy.Attestations) > 0 {
		g.Go(func() (err error) { ev.Attestations, err = layers(repo.Tag(tag+".att"), opts); return err })
	}
	g.Go(func() (err error) { ev.Bundles, err = bundles(repo.Digest(ev.Digest), opts); return err })
	if err := g.Wait(); err != nil {
		return verify.Evidence{Digest: ev.Digest}, err
	}
	return ev, nil
}

// notFound: the registry has no such manifest (no signature of that kind).
func notFound(err error) bool {
	var te *transport.Error
	if errors.As(err, &te) {
		return te.StatusCode == http.StatusNotFound
	}
	return false
}

// layers reads the layers of a cosign tag, with their annotations.
func layers(tag name.Tag, opts []remote.Option) ([]verify.Layer, error) {
	img, err := remote.Image(tag, opts...)
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tag, err)
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tag, err)
	}
	var out []verify.Layer
	for i, d := range m.Layers {
		if i >= maxLayers {
			break
		}
		b, err := blob(img, d)
		if err != nil {
			return nil, fmt.Errorf("%s: layer %d: %w", tag, i, err)
		}
		out = append(out, verify.Layer{MediaType: string(d.MediaType), Payload: b, Annotations: d.Annotations})
	}
	return out, nil
}

func blob(img v1.Image, d v1.Descriptor) ([]byte, error) {
	if d.Size > maxLayerBytes {
		return nil, fmt.Errorf("%d bytes: more than %d", d.Size, maxLayerBytes)
	}
	l, err := img.LayerByDigest(d.Digest)
	if err != nil {
		return nil, err
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(io.LimitReader(rc, maxLayerBytes))
}

// bundles reads the Sigstore bundles attached to d as OCI 1.1 referrers
// (or the referrers tag schema, for a registry without the API).
func bundles(d name.Digest, opts []remote.Option) ([][]byte, error) {
	idx, err := remote.Referrers(d, opts...)
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("referrers of %s: %w", d, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for i, desc := range im.Manifests {
		if i >= maxReferrers {
			break
		}
		if !strings.HasPrefix(desc.ArtifactType, verify.MediaTypeBundlePrefix) {
			continue
		}
		img, err := remote.Image(d.Context().Digest(desc.Digest.String()), opts...)
		if err != nil {
			return nil, fmt.Errorf("referrer %s: %w", desc.Digest, err)
		}
		m, err := img.Manifest()
		if err != nil || len(m.Layers) == 0 {
			continue
		}
		b, err := blob(img, m.Layers[0])
		if err != nil {
			return nil, fmt.Errorf("referrer %s: %w", desc.Digest, err)
		}
		out = append(out, b)
	}
	return out, nil
}
