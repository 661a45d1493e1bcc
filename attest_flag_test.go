package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAttestationKeyRefused: a key the controller cannot sign with stops
// it at start, saying which flag and why, before the cluster is read (the
// kubeconfig here does not exist: its error would come after).
func TestAttestationKeyRefused(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o600))
		return p
	}
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	pub, err := x509.MarshalPKIXPublicKey(ec.Public())
	require.NoError(t, err)
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	rb, err := x509.MarshalPKCS8PrivateKey(rk)
	require.NoError(t, err)
	unreadable := write("unreadable.pem", []byte("x"))
	require.NoError(t, os.Chmod(unreadable, 0))
	for _, tt := range []struct {
		name, path, want string
		history          string
	}{
		{name: "missing", path: filepath.Join(dir, "nope.pem"), want: "no such file"},
		{name: "not PEM", path: write("junk.pem", []byte("junk")), want: "no PEM block"},
		{name: "a public key", path: write("pub.pem", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})), want: "a public key cannot sign"},
		{name: "RSA", path: write("rsa.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: rb})), want: "want ECDSA P-256 or ed25519"},
		{name: "no history to keep them in", path: write("ok.pem", []byte("unused")), history: "0", want: "--history-revisions must be positive"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"controller", "--attestation-key", tt.path, "--kubeconfig", "testdata/help/none"}
			if tt.history != "" {
				args = append(args, "--history-revisions", tt.history)
			}
			code, _, errOut := execute("kontinue", args...)
			assert.Equal(t, 1, code, errOut)
			assert.Contains(t, errOut, "--attestation-key")
			assert.Contains(t, errOut, tt.want)
			assert.NotContains(t, errOut, "testdata/help/none", "the key is checked first")
		})
	}
	if os.Getuid() != 0 { // root reads any file
		code, _, errOut := execute("kontinue", "controller", "--attestation-key", unreadable, "--kubeconfig", "testdata/help/none")
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut, "permission denied")
	}
}
