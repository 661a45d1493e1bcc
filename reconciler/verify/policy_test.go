package verify_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"testing"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/verify"
	vt "kontinue.dev/kontinue/reconciler/verify/verifytest"
)

func stepWith(v string) (api.Step, error) {
	var s api.Step
	err := json.Unmarshal([]byte(`{"name":"deploy","templateRef":{"kind":"ClusterTemplate","name":"t"},
		"images":[{"name":"image","resource":"build"}],"sources":[{"name":"source","resource":"src"}],
		"configs":[{"name":"config","resource":"cfg"}],"verify":`+v+`}`), &s)
	return s, err
}

func TestValidate(t *testing.T) {
	pemKey := vt.NewKey("ecdsa").PublicPEM()
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	p384PEM, _ := cryptoutils.MarshalPublicKeyToPEM(p384.Public())
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	root := `"trustedRoot":{"configMapRef":{"namespace":"p","name":"r","key":"k"}}`
	cases := []struct {
		name, verify, err string
	}{
		{"a key", `{"images":[{"name":"image","keys":[{"publicKey":` + js(pemKey) + `}]}]}`, ""},
		{"a key in a Secret", `{"images":[{"name":"image","keys":[{"secretRef":{"namespace":"p","name":"k","key":"cosign.pub"}}]}]}`, ""},
		{"keyless", `{"images":[{"name":"image","keyless":[{"subject":"a@b","issuer":"https://i",` + root + `}]}]}`, ""},
		{"kontinue on a config", `{"configs":[{"name":"config","kontinue":{}}]}`, ""},
		{"an input the step does not have", `{"images":[{"name":"other","kontinue":{}}]}`, "the step has no such input"},
		{"no rule", `{"images":[{"name":"image"}]}`, "no rule"},
		{"a signature on a config", `{"configs":[{"name":"config","keys":[{"publicKey":` + js(pemKey) + `}]}]}`, "only kontinue"},
		{"unsigned attestations", `{"images":[{"name":"image","attestations":[{"predicateType":"x"}]}]}`, "attestations must be signed"},
		{"not a key", `{"images":[{"name":"image","keys":[{"publicKey":"nope"}]}]}`, "not a PEM public key"},
		{"a P-384 key", `{"images":[{"name":"image","keys":[{"publicKey":` + js(string(p384PEM)) + `}]}]}`, "want P-256"},
		{"two key sources", `{"images":[{"name":"image","keys":[{"publicKey":` + js(pemKey) + `,"configMapRef":{"namespace":"p","name":"k","key":"c"}}]}]}`, "exactly one"},
		{"a reference without a namespace", `{"images":[{"name":"image","keys":[{"secretRef":{"name":"k","key":"c"}}]}]}`, "namespace, name and key"},
		{"keyless without an issuer", `{"images":[{"name":"image","keyless":[{"subject":"a@b",` + root + `}]}]}`, "issuer"},
		{"keyless with a bad expression", `{"images":[{"name":"image","keyless":[{"subjectRegExp":"(","issuer":"i",` + root + `}]}]}`, "error parsing regexp"},
		{"keyless without a root", `{"images":[{"name":"image","keyless":[{"subject":"a","issuer":"i"}]}]}`, "trustedRoot"},
		{"a severity of none of these", `{"images":[{"name":"image","keys":[{"publicKey":` + js(pemKey) + `}],"attestations":[{"predicateType":"x","maxSeverity":"critical"}]}]}`, "maxSeverity"},
		{"an input named twice", `{"images":[{"name":"image","kontinue":{}},{"name":"image","kontinue":{}}]}`, "named twice"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := stepWith(c.verify)
			require.NoError(t, err)
			err = verify.Validate(s)
			if c.err == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.err)
			assert.Contains(t, err.Error(), "step [deploy] verify")
		})
	}
}

func TestCompileNeedsItsMaterial(t *testing.T) {
	s, err := stepWith(`{"images":[{"name":"image","keys":[{"secretRef":{"namespace":"p","name":"k","key":"cosign.pub"}}]}]}`)
	require.NoError(t, err)
	p := s.Verify.Images[0]
	_, err = verify.Compile(verify.TypeImage, p, verify.Material{})
	assert.ErrorContains(t, err, "Secret p/k[cosign.pub] not found")
	ref := verify.Ref{Secret: true, Namespace: "p", Name: "k", Key: "cosign.pub"}
	_, err = verify.Compile(verify.TypeImage, p, verify.Material{Data: map[verify.Ref][]byte{ref: []byte("not a key")}})
	assert.ErrorContains(t, err, "not a PEM public key")
	key := vt.NewKey("ed25519")
	m := verify.Material{Data: map[verify.Ref][]byte{ref: []byte(key.PublicPEM())}}
	_, err = verify.Compile(verify.TypeImage, p, m)
	assert.NoError(t, err)
	other := verify.Material{Data: map[verify.Ref][]byte{ref: []byte(vt.NewKey("ed25519").PublicPEM())}}
	assert.NotEqual(t, verify.Hash(p, m), verify.Hash(p, other), "a key rotated in its Secret is another policy")
	assert.Equal(t, verify.Hash(p, m), verify.Hash(p, m))
}

// FuzzPolicy: whatever a chain's verify holds, validating and compiling it
// neither panics nor takes what validation refused.
func FuzzPolicy(f *testing.F) {
	pemKey := vt.NewKey("ecdsa").PublicPEM()
	b, _ := json.Marshal(pemKey)
	for _, s := range []string{
		`{"images":[{"name":"image","keys":[{"publicKey":` + string(b) + `}]}]}`,
		`{"images":[{"name":"image","keyless":[{"subject":"a@b","issuer":"i","trustedRoot":{"secretRef":{"namespace":"p","name":"r","key":"k"}}}],"attestations":[{"predicateType":"x","builderID":"b","maxSeverity":"low"}]}]}`,
		`{"configs":[{"name":"config","kontinue":{}}],"deployment":{"name":"deployment","kontinue":{}}}`,
		`{"sources":[{"name":"source","keys":[{"publicKey":"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"}]}]}`,
		`{"images":[{"name":"image","keyless":[{"subjectRegExp":"^(a|b)+$","issuerRegExp":".*","trustedRoot":{"configMapRef":{"namespace":"p","name":"r","key":"k"}}}]}]}`,
	} {
		f.Add(s, []byte(`{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1"}`))
	}
	f.Fuzz(func(t *testing.T, v string, material []byte) {
		s, err := stepWith(v)
		if err != nil {
			return
		}
		valid := verify.Validate(s) == nil
		m := verify.Material{Data: map[verify.Ref][]byte{}}
		for _, n := range verify.Policies(s.Verify) {
			for _, r := range verify.Refs(n.Policy) {
				m.Data[r] = material
			}
			_ = verify.Hash(n.Policy, m)
			cp, err := verify.Compile(n.Type, n.Policy, m)
			if err == nil && !valid {
				// Compile checks each input as Validate does: an input
				// Compile takes may only fail Validate for the step's own
				// reasons (names), never for its rules.
				require.NotNil(t, cp)
			}
		}
	})
}
