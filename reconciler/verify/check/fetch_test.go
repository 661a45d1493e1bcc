package check

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/dynamic"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/verify"
	vt "kontinue.dev/kontinue/reconciler/verify/verifytest"
)

// testRegistry is go-containerregistry's registry, in process, behind a
// door that counts pings (GET /v2/, one per authentication), may ask for a
// password, and may refuse a few requests (403: not retried by
// go-containerregistry, unlike a 5xx).
type testRegistry struct {
	h     http.Handler
	mu    sync.Mutex
	pass  string // "": open
	fail  int    // requests still answered 503
	pings int
}

func (r *testRegistry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	if req.URL.Path == "/v2/" {
		r.pings++
	}
	fail, pass := r.fail > 0, r.pass
	if fail {
		r.fail--
	}
	r.mu.Unlock()
	if fail {
		http.Error(w, "denied", http.StatusForbidden)
		return
	}
	if u, p, ok := req.BasicAuth(); pass != "" && (!ok || u != "builder" || p != pass) {
		w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	r.h.ServeHTTP(w, req)
}

// password is what an account's pull Secret holds, at a version.
type password struct{ pass, version string }

type staticKeychain struct{ pass string }

func (k staticKeychain) Resolve(authn.Resource) (authn.Authenticator, error) {
	return authn.FromConfig(authn.AuthConfig{Username: "builder", Password: k.pass}), nil
}

// The Edge reuses an account's registry authentication across fetches
// (one ping per repository), reads its credentials again after
// AccountTTL and keeps the authentication only while they are unchanged,
// never lends one account's credentials to another, and starts anew after
// a failed call.
func TestEdgeReusesAnAccountsRegistryAuth(t *testing.T) {
	const builder, other = "builder", "other"
	type fetch struct {
		account string
		digest  int // 0 or 1: which image
		// before the fetch: the registry's password and the builder's
		// Secret (nil: unchanged), and requests to refuse.
		rotate  *password
		fail    int
		wantErr string
	}
	for _, tt := range []struct {
		name      string
		ttl       time.Duration
		fetches   []fetch
		wantPings int
		wantReads int
	}{
		{name: "one account, two images: one ping, one read", ttl: time.Hour,
			fetches: []fetch{{account: builder}, {account: builder, digest: 1}}, wantPings: 1, wantReads: 1},
		{name: "read again after the TTL; unchanged, the authentication is kept", ttl: time.Nanosecond,
			fetches: []fetch{{account: builder}, {account: builder, digest: 1}, {account: builder}}, wantPings: 1, wantReads: 3},
		{name: "a rotated Secret read after the TTL: its new password, authenticated anew", ttl: time.Nanosecond,
			fetches: []fetch{{account: builder}, {account: builder, digest: 1, rotate: &password{"new", "2"}}}, wantPings: 2, wantReads: 2},
		{name: "rotated within the TTL: the old password fails, is forgotten, the next fetch reads the new one", ttl: time.Hour,
			fetches: []fetch{{account: builder}, {account: builder, digest: 1, rotate: &password{"new", "2"}, wantErr: "401"},
				{account: builder, digest: 1}}, wantPings: 2, wantReads: 2},
		{name: "another account never uses the first one's credentials", ttl: time.Hour,
			fetches: []fetch{{account: builder}, {account: other, wantErr: "401"}}, wantPings: 2, wantReads: 2},
		{name: "a registry that failed: the next fetch authenticates anew", ttl: time.Hour,
			fetches: []fetch{{account: builder, fail: 1, wantErr: "403"}, {account: builder}}, wantPings: 2, wantReads: 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			reg := &testRegistry{h: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
			srv := httptest.NewServer(reg)
			t.Cleanup(srv.Close)
			repo := strings.TrimPrefix(srv.URL, "http://") + "/app"
			key := vt.NewKey("ecdsa")
			var digests []string
			for _, tag := range []string{"v1", "v2"} {
				d, err := vt.Push(repo, tag)
				require.NoError(t, err)
				require.NoError(t, vt.Attach(repo, d, "sig", key.Sign(repo, d)))
				digests = append(digests, d)
			}
			secret := password{"old", "1"}
			reg.mu.Lock()
			reg.pass = secret.pass
			reg.pings = 0
			reg.mu.Unlock()

			var mu sync.Mutex
			reads := 0
			e := &Edge{As: func(string, string) (dynamic.Interface, error) { return nil, nil }, AccountTTL: tt.ttl,
				credentials: func(_ context.Context, _ dynamic.Interface, acct api.ServiceAccountRef) (authn.Keychain, string, error) {
					mu.Lock()
					defer mu.Unlock()
					reads++
					if acct.Name != builder {
						return authn.NewMultiKeychain(), "-", nil // no pull Secret
					}
					return staticKeychain{secret.pass}, secret.version, nil
				}}
			for i, f := range tt.fetches {
				if f.rotate != nil {
					mu.Lock()
					secret = *f.rotate
					mu.Unlock()
					reg.mu.Lock()
					reg.pass = f.rotate.pass
					reg.mu.Unlock()
				}
				reg.mu.Lock()
				reg.fail = f.fail
				reg.mu.Unlock()
				req := Request{Owner: Owner{Kind: "Workload", Namespace: "team-a", Name: "app"},
					Account: api.ServiceAccountRef{Namespace: "team-a", Name: f.account}, Type: verify.TypeImage, Input: "image",
					Policy: api.InputVerify{Name: "image", Keys: []api.VerifyKey{{PublicKey: key.PublicPEM()}}}}
				target, err := verify.TargetOf(verify.TypeImage, "image", repo+"@"+digests[f.digest])
				require.NoError(t, err)
				ev, err := e.Evidence(context.Background(), req, target, true)
				if f.wantErr != "" {
					require.Error(t, err, "fetch %d", i)
					assert.Contains(t, err.Error(), f.wantErr, "fetch %d", i)
					continue
				}
				require.NoError(t, err, "fetch %d", i)
				assert.Len(t, ev.Signatures, 1, "fetch %d: the image's signature", i)
			}
			reg.mu.Lock()
			assert.Equal(t, tt.wantPings, reg.pings, "authentications")
			reg.mu.Unlock()
			assert.Equal(t, tt.wantReads, reads, "reads of the account's credentials")
		})
	}
}

// Past half the TTL a fetch does not wait for the account's credentials
// to be read again: it uses the Puller it has while they are read beside
// it; a change that read sees drops the Puller, and the next fetch reads
// and authenticates anew.
func TestEdgeReadsAnAccountAgainBesideItsFetches(t *testing.T) {
	reg := &testRegistry{h: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	srv := httptest.NewServer(reg)
	t.Cleanup(srv.Close)
	repo := strings.TrimPrefix(srv.URL, "http://") + "/app"
	key := vt.NewKey("ecdsa")
	d, err := vt.Push(repo, "v1")
	require.NoError(t, err)
	require.NoError(t, vt.Attach(repo, d, "sig", key.Sign(repo, d)))

	var mu sync.Mutex
	reads, version := 0, "1"
	release := make(chan struct{})
	acct := api.ServiceAccountRef{Namespace: "team-a", Name: "builder"}
	e := &Edge{As: func(string, string) (dynamic.Interface, error) { return nil, nil }, AccountTTL: 2 * time.Second,
		credentials: func(context.Context, dynamic.Interface, api.ServiceAccountRef) (authn.Keychain, string, error) {
			mu.Lock()
			reads++
			n := reads
			mu.Unlock()
			if n == 2 {
				<-release // the read beside the second fetch
			}
			mu.Lock()
			defer mu.Unlock()
			return authn.NewMultiKeychain(), version, nil
		}}
	req := Request{Owner: Owner{Kind: "Workload", Namespace: "team-a", Name: "app"}, Account: acct, Type: verify.TypeImage, Input: "image",
		Policy: api.InputVerify{Name: "image", Keys: []api.VerifyKey{{PublicKey: key.PublicPEM()}}}}
	target, err := verify.TargetOf(verify.TypeImage, "image", repo+"@"+d)
	require.NoError(t, err)
	fetch := func() {
		ev, err := e.Evidence(context.Background(), req, target, true)
		require.NoError(t, err)
		assert.Len(t, ev.Signatures, 1)
	}
	readsNow := func() int { mu.Lock(); defer mu.Unlock(); return reads }

	fetch()
	require.Equal(t, 1, readsNow())
	time.Sleep(1100 * time.Millisecond) // past half the TTL, within it
	fetched := make(chan struct{})
	go func() { fetch(); close(fetched) }()
	select {
	case <-fetched:
	case <-time.After(10 * time.Second):
		t.Fatal("the fetch waited for the account's credentials to be read again")
	}
	require.Eventually(t, func() bool { return readsNow() == 2 }, 10*time.Second, 10*time.Millisecond, "read again beside the fetch")
	mu.Lock()
	version = "2" // the pull Secret changed meanwhile
	mu.Unlock()
	close(release)
	require.Eventually(t, func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.accounts[acct] == nil
	}, 10*time.Second, 10*time.Millisecond, "the Puller of credentials that changed is dropped")
	fetch()
	assert.Equal(t, 3, readsNow(), "the next fetch reads the credentials itself")
}
