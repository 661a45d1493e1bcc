package attest

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// keyPair makes a private and a public key as PEM, of kind "p256",
// "p256-sec1", "ed25519", "p384" or "rsa".
func keyPair(t *testing.T, kind string) (priv, pub []byte) {
	t.Helper()
	var k any
	var err error
	switch kind {
	case "p256", "p256-sec1":
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "p384":
		k, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "ed25519":
		_, k, err = ed25519.GenerateKey(rand.Reader)
	case "rsa":
		k, err = rsa.GenerateKey(rand.Reader, 2048)
	}
	require.NoError(t, err)
	var block *pem.Block
	if kind == "p256-sec1" {
		b, err := x509.MarshalECPrivateKey(k.(*ecdsa.PrivateKey))
		require.NoError(t, err)
		block = &pem.Block{Type: "EC PRIVATE KEY", Bytes: b}
	} else {
		b, err := x509.MarshalPKCS8PrivateKey(k)
		require.NoError(t, err)
		block = &pem.Block{Type: "PRIVATE KEY", Bytes: b}
	}
	pb, err := x509.MarshalPKIXPublicKey(k.(crypto.Signer).Public())
	require.NoError(t, err)
	return pem.EncodeToMemory(block), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pb})
}

func TestSignVerify(t *testing.T) {
	ctx := context.Background()
	stmt, err := Build(Input{Owner: wl, Status: workload(), Step: "build", Version: "v1"})
	require.NoError(t, err)
	want, err := Marshal(stmt)
	require.NoError(t, err)
	for _, kind := range []string{"p256", "p256-sec1", "ed25519"} {
		t.Run(kind, func(t *testing.T) {
			priv, pub := keyPair(t, kind)
			sk, err := ParseKey(priv)
			require.NoError(t, err)
			vk, err := ParseKey(pub)
			require.NoError(t, err)
			assert.Equal(t, sk.ID, vk.ID, "a key pair has one id")

			env, err := Sign(ctx, sk, stmt)
			require.NoError(t, err)
			got, err := Verify(ctx, vk, env)
			require.NoError(t, err)
			b, err := Marshal(got)
			require.NoError(t, err)
			assert.Equal(t, string(want), string(b), "the statement comes back as signed")
			var e struct {
				PayloadType string
				Signatures  []struct{ KeyID string }
			}
			require.NoError(t, json.Unmarshal(env, &e))
			assert.Equal(t, PayloadType, e.PayloadType)
			require.Len(t, e.Signatures, 1)
			assert.Equal(t, sk.ID, e.Signatures[0].KeyID)

			_, err = Verify(ctx, sk, env)
			assert.NoError(t, err, "a private key verifies with its public half")
			_, otherPub := keyPair(t, kind)
			other, err := ParseKey(otherPub)
			require.NoError(t, err)
			_, err = Verify(ctx, other, env)
			assert.Error(t, err, "another key's")

			for name, tamper := range map[string]func(m map[string]any){
				"payload": func(m map[string]any) {
					p, _ := base64.StdEncoding.DecodeString(m["payload"].(string))
					p = []byte(strings.Replace(string(p), imgHash, strings.Repeat("0", 64), 1))
					m["payload"] = base64.StdEncoding.EncodeToString(p)
				},
				"payload type": func(m map[string]any) { m["payloadType"] = "application/json" },
				"signature": func(m map[string]any) {
					s := m["signatures"].([]any)[0].(map[string]any)
					sig, _ := base64.StdEncoding.DecodeString(s["sig"].(string))
					sig[len(sig)/2] ^= 1
					s["sig"] = base64.StdEncoding.EncodeToString(sig)
				},
				"no signature": func(m map[string]any) { m["signatures"] = []any{} },
				"keyid":        func(m map[string]any) { m["signatures"].([]any)[0].(map[string]any)["keyid"] = "another" },
			} {
				var m map[string]any
				require.NoError(t, json.Unmarshal(env, &m))
				tamper(m)
				b, err := json.Marshal(m)
				require.NoError(t, err)
				_, err = Verify(ctx, vk, b)
				assert.Error(t, err, "tampered %s", name)
			}
			_, err = Verify(ctx, vk, []byte("not json"))
			assert.Error(t, err)
			_, err = Sign(ctx, vk, stmt)
			assert.ErrorIs(t, err, ErrKey, "a public key cannot sign")
		})
	}
}

// A signed envelope whose payload is not a statement is refused even with
// a good signature.
func TestVerifyNotAStatement(t *testing.T) {
	priv, pub := keyPair(t, "ed25519")
	sk, err := ParseKey(priv)
	require.NoError(t, err)
	vk, err := ParseKey(pub)
	require.NoError(t, err)
	for _, payload := range []string{`{"_type":"https://in-toto.io/Statement/v1"}`, `[1]`} {
		sig, err := sk.sv.Sign(context.Background(), paeOf(PayloadType, payload))
		require.NoError(t, err)
		env, _ := json.Marshal(map[string]any{"payloadType": PayloadType, "payload": base64.StdEncoding.EncodeToString([]byte(payload)),
			"signatures": []any{map[string]any{"keyid": sk.ID, "sig": base64.StdEncoding.EncodeToString(sig)}}})
		_, err = Verify(context.Background(), vk, env)
		assert.ErrorContains(t, err, "payload", payload)
	}
}

func paeOf(typ, payload string) []byte {
	return []byte("DSSEv1 " + itoa(len(typ)) + " " + typ + " " + itoa(len(payload)) + " " + payload)
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// Keys that cannot be used are clear errors, never a panic.
func TestLoadKeyFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o600))
		return p
	}
	p256, p256pub := keyPair(t, "p256")
	p384, _ := keyPair(t, "p384")
	rsaKey, rsaPub := keyPair(t, "rsa")
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("x")})
	for _, tt := range []struct {
		name    string
		path    string
		private bool
		want    string // in the error; "" none
	}{
		{name: "a P-256 private key", path: write("ok.pem", p256), private: true},
		{name: "a public key to verify", path: write("pub.pem", p256pub)},
		{name: "a public key to sign", path: write("pub2.pem", p256pub), private: true, want: "a public key cannot sign"},
		{name: "missing", path: filepath.Join(dir, "nope.pem"), private: true, want: "no such file"},
		{name: "a directory", path: dir, private: true, want: "is a directory"},
		{name: "empty", path: write("empty.pem", nil), private: true, want: "no PEM block"},
		{name: "not PEM", path: write("junk.pem", []byte("hello")), private: true, want: "no PEM block"},
		{name: "a certificate", path: write("cert.pem", cert), private: true, want: `PEM block "CERTIFICATE"`},
		{name: "RSA", path: write("rsa.pem", rsaKey), private: true, want: "want ECDSA P-256 or ed25519"},
		{name: "RSA public", path: write("rsapub.pem", rsaPub), want: "want ECDSA P-256 or ed25519"},
		{name: "P-384", path: write("p384.pem", p384), private: true, want: "ECDSA on P-384: want P-256"},
		{name: "a broken key", path: write("broken.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("xx")})), private: true, want: "unusable key"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k, err := LoadKeyFile(tt.path, tt.private)
			if tt.want == "" {
				require.NoError(t, err)
				assert.NotEmpty(t, k.ID)
				return
			}
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrKey), "%v", err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
