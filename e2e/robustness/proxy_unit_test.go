package robustness

import (
	"crypto/tls"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The fault proxy passes requests through (bodies and tokens untouched),
// answers 429 with Retry-After, and slows answers, as it is told.
func TestProxy(t *testing.T) {
	upstream := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_, _ = w.Write([]byte(r.Header.Get("Authorization") + " " + string(body)))
	}))
	defer upstream.Close()
	ca := filepath.Join(t.TempDir(), "ca.crt")
	require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: upstream.Certificate().Raw}), 0o600))
	p, err := newProxy(upstream.URL, ca, 1)
	require.NoError(t, err)
	defer p.close()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the test's own proxy
	call := func() (*http.Response, string, time.Duration) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, p.URL()+"/api/v1/namespaces", strings.NewReader(`{"big":9007199254740993}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer tok")
		t0 := time.Now()
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body), time.Since(t0)
	}

	resp, body, _ := call()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, `Bearer tok {"big":9007199254740993}`, body)

	p.set(0, 1)
	resp, body, _ = call()
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	assert.Contains(t, body, `"reason":"TooManyRequests"`)

	p.set(200*time.Millisecond, 0)
	resp, _, took := call()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.GreaterOrEqual(t, took, 100*time.Millisecond)
	assert.Equal(t, "slowed 1, refused 1", p.stats())
}
