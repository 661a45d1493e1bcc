package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kontinue.dev/kontinue/reconciler/verify"
	vt "kontinue.dev/kontinue/reconciler/verify/verifytest"
)

// TestVerifyCommand: `kontinue verify -f` checks images in a registry (in
// process) against a chain's policies with the controller's decision: a
// signed image passes (exit 0, the signer named); one signed by another
// key is refused (exit 1, the rule and the digest named), and each rule is
// reported even past the first refusal; a key read from a Secret in the
// files or from --material; rule kontinue said not checked.
func TestVerifyCommand(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // anonymous: no credentials of the machine's
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	repo := strings.TrimPrefix(srv.URL, "http://") + "/app"
	key, other := vt.NewKey("ecdsa"), vt.NewKey("ecdsa")
	push := func(tag string, by *vt.Key, provenance bool) string {
		d, err := vt.Push(repo, tag)
		require.NoError(t, err)
		require.NoError(t, vt.Attach(repo, d, "sig", by.Sign(repo, d)))
		if provenance {
			require.NoError(t, vt.Attach(repo, d, "att", by.Attest(d, "https://slsa.dev/provenance/v1", vt.SLSA("https://builder.example"))))
		}
		return d
	}
	signed := push("signed", key, true)
	wrong := push("wrong", other, true)

	dir := t.TempDir()
	pem, err := json.Marshal(key.PublicPEM())
	require.NoError(t, err)
	chain := toProduction(pem, `  - name: deliver
    templateRef: {kind: ClusterTemplate, name: deliver}
    images: [{name: image, resource: image}]
    verify:
      images:
      - name: image
        keys: [{secretRef: {namespace: platform, name: build-key, key: cosign.pub}}]
        kontinue: {}
`)
	chainFile := filepath.Join(dir, "chain.yaml")
	require.NoError(t, os.WriteFile(chainFile, []byte(chain), 0o644))
	secret := fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: build-key, namespace: platform}\nstringData: {cosign.pub: %s}\n", pem)
	secretFile := filepath.Join(dir, "secret.yaml")
	require.NoError(t, os.WriteFile(secretFile, []byte(secret), 0o644))
	pubFile := filepath.Join(dir, "build.pub")
	require.NoError(t, os.WriteFile(pubFile, []byte(key.PublicPEM()), 0o644))

	// Signed, by tag: every policy passes; the tag is resolved to the
	// digest; who signed is said; kontinue is said not checked.
	code, out, errOut := run("verify", repo+":signed", "-f", chainFile, "-f", secretFile)
	require.Equal(t, 0, code, errOut+out)
	for _, want := range []string{
		"step [deploy] image [image]: Verified " + signed,
		"✔ signature: signature 0 (cosign's sha256-" + strings.TrimPrefix(signed, "sha256:") + ".sig tag) by keys[0]",
		"✔ attestation https://slsa.dev/provenance/v1: attestation 0 by keys[0]",
		"step [deliver] image [image]: Verified " + signed,
		"- kontinue: not checked here",
	} {
		assert.Contains(t, out, want)
	}

	// Signed by another key, by digest: refused (exit 1); both rules
	// are reported, each saying why.
	code, out, errOut = run("verify", repo+"@"+wrong, "-f", chainFile, "--material", "secret/platform/build-key/cosign.pub="+pubFile,
		"--step", "deploy", "--input", "image/image")
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "step [deploy] image [image]: Refused "+wrong)
	assert.Contains(t, out, "✗ signature: none of the 1 signatures of "+wrong+" is by a trusted signer")
	assert.Contains(t, out, "✗ attestation https://slsa.dev/provenance/v1: none of the 1")
	assert.NotContains(t, out, "deliver", "--step narrows")
	assert.Contains(t, errOut, "refused by 1 of 1 policies")

	// As JSON: the rule Decide names, and each rule.
	code, out, _ = run("verify", repo+":wrong", "-f", chainFile, "--step", "deploy", "-o", "json")
	assert.Equal(t, 1, code)
	var rep VerifyReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Len(t, rep.Checks, 1)
	assert.Equal(t, "Refused", rep.Checks[0].Result)
	assert.Equal(t, verify.RuleSignature, rep.Checks[0].Rule)
	assert.Equal(t, wrong, rep.Checks[0].Digest)
	assert.Len(t, rep.Checks[0].Rules, 2)

	// Without the Secret (offline: the cluster is not read), the policy
	// naming it cannot be used: refused under rule policy, saying which.
	code, out, _ = run("verify", repo+":signed", "-f", chainFile, "--step", "deliver")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "✗ policy: keys[0]: Secret platform/build-key[cosign.pub] not found")
}

func TestVerifyUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"verify", "img"}, "give the chain with --chain"},
		{[]string{"verify", "img", "--chain", "c", "--material", "secret/ns/name=x"}, "want KIND/NAMESPACE/NAME/KEY=FILE"},
		{[]string{"verify", "img", "--chain", "c", "--material", "pod/ns/name/key=x"}, "KIND is secret or configmap"},
		{[]string{"verify", "img", "--chain", "c", "-o", "yaml"}, "-o must be text or json"},
		{[]string{"verify"}, "want an image reference"},
	} {
		code, _, errOut := run(tt.args...)
		assert.Equal(t, 2, code, tt.args)
		assert.Contains(t, errOut, tt.want, tt.args)
	}
}

// toProduction is the tests' chain: step deploy takes step image's image
// when it is signed by the key pem (JSON-quoted) and has SLSA provenance
// by https://builder.example; more steps follow.
func toProduction(pem []byte, more string) string {
	return fmt.Sprintf(`apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: to-production}
spec:
  selector: {env: production}
  resources:
  - name: image
    templateRef: {kind: ClusterImageTemplate, name: build}
  - name: deploy
    templateRef: {kind: ClusterTemplate, name: deploy}
    images: [{name: image, resource: image}]
    verify:
      images:
      - name: image
        keys: [{publicKey: %s}]
        attestations: [{predicateType: "https://slsa.dev/provenance/v1", builderID: "https://builder.example"}]
`, pem) + more
}
