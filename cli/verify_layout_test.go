package cli

import (
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	vt "kontinue.dev/kontinue/reconciler/verify/verifytest"
)

// `kontinue verify --oci-layout`: a copy of an image and its cosign tags,
// taken as `crane pull --format=oci --annotate-ref` takes it, is checked
// after the registry is gone: the signed image passes, the copy without
// its signature is refused, a signature of another key is refused.
func TestVerifyFromAnOCILayout(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	repo := strings.TrimPrefix(srv.URL, "http://") + "/app"
	key, other := vt.NewKey("ecdsa"), vt.NewKey("ecdsa")
	push := func(tag string, by *vt.Key) string {
		d, err := vt.Push(repo, tag)
		require.NoError(t, err)
		require.NoError(t, vt.Attach(repo, d, "sig", by.Sign(repo, d)))
		require.NoError(t, vt.Attach(repo, d, "att", by.Attest(d, "https://slsa.dev/provenance/v1", vt.SLSA("https://builder.example"))))
		return d
	}
	signed, wrong := push("signed", key), push("wrong", other)
	// Signed and attested in Sigstore bundles only, as OCI 1.1 referrers.
	bundled, err := vt.Push(repo, "bundled")
	require.NoError(t, err)
	require.NoError(t, vt.AttachBundle(repo, bundled, key.SignBundle(bundled)))
	require.NoError(t, vt.AttachBundle(repo, bundled, key.AttestBundle(bundled, "https://slsa.dev/provenance/v1", vt.SLSA("https://builder.example"))))
	// copyOf writes an OCI layout of refs, each named by its whole
	// reference (crane's --annotate-ref), or by its tag (oras), and their
	// referrers, unnamed.
	copyOf := func(byTag bool, refs ...string) string {
		dir := t.TempDir()
		p, err := layout.Write(dir, empty.Index)
		require.NoError(t, err)
		for _, r := range refs {
			ref, err := name.ParseReference(r, name.Insecure)
			require.NoError(t, err)
			img, err := remote.Image(ref)
			require.NoError(t, err)
			n := ref.Name()
			if byTag {
				n = ref.Identifier()
			}
			require.NoError(t, p.AppendImage(img, layout.WithAnnotations(map[string]string{refName: n})))
			d, err := img.Digest()
			require.NoError(t, err)
			idx, err := remote.Referrers(ref.Context().Digest(d.String()))
			require.NoError(t, err)
			im, err := idx.IndexManifest()
			require.NoError(t, err)
			for _, desc := range im.Manifests {
				r, err := remote.Image(ref.Context().Digest(desc.Digest.String()))
				require.NoError(t, err)
				require.NoError(t, p.AppendImage(r))
			}
		}
		return dir
	}
	tags := func(d string) (string, string) {
		h := strings.Replace(d, ":", "-", 1)
		return repo + ":" + h + ".sig", repo + ":" + h + ".att"
	}
	sig, att := tags(signed)
	whole := copyOf(false, repo+":signed", sig, att)
	byTag := copyOf(true, repo+":signed", sig, att)
	unsigned := copyOf(false, repo+":signed", att)
	wsig, watt := tags(wrong)
	other0 := copyOf(false, repo+":wrong", wsig, watt)
	bundles := copyOf(false, repo+":bundled")
	srv.Close() // offline from here

	pem, err := json.Marshal(key.PublicPEM())
	require.NoError(t, err)
	chainFile := filepath.Join(t.TempDir(), "chain.yaml")
	require.NoError(t, os.WriteFile(chainFile, []byte(toProduction(pem, "")), 0o644))

	for _, dir := range []string{whole, byTag} {
		code, out, errOut := run("verify", repo+":signed", "-f", chainFile, "--oci-layout", dir)
		require.Equal(t, 0, code, errOut+out)
		assert.Contains(t, out, "step [deploy] image [image]: Verified "+signed)
		assert.Contains(t, out, "✔ signature: signature 0 (cosign's sha256-"+strings.TrimPrefix(signed, "sha256:")+".sig tag) by keys[0]")
		assert.Contains(t, out, "✔ attestation https://slsa.dev/provenance/v1: attestation 0 by keys[0]")
	}
	code, out, errOut := run("verify", repo+"@"+bundled, "-f", chainFile, "--oci-layout", bundles)
	require.Equal(t, 0, code, errOut+out)
	assert.Contains(t, out, "step [deploy] image [image]: Verified "+bundled)
	assert.Regexp(t, `✔ signature: bundle \d \(an OCI referrer\) by keys\[0\]`, out, "the signature found in a bundle of the copy")

	code, out, _ = run("verify", repo+"@"+signed, "-f", chainFile, "--oci-layout", unsigned)
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "✗ signature:", "no signature in the copy")

	code, out, _ = run("verify", repo+":wrong", "-f", chainFile, "--oci-layout", other0)
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "✗ signature: none of the 1 signatures of "+wrong+" is by a trusted signer")

	code, _, errOut = run("verify", repo+":signed", "-f", chainFile, "--oci-layout", filepath.Join(t.TempDir(), "none"))
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "--oci-layout", "a layout that cannot be read is said, not taken for no evidence")
}
