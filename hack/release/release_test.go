package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart/loader"
	helmregistry "helm.sh/helm/v3/pkg/registry"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"kontinue.dev/kontinue/hack/installyaml/render"
	"kontinue.dev/kontinue/hack/localcluster"
)

// tinyBuild builds testdata/NAME (tiny: a stand-in for kontinue) once and
// copies it for every platform: the release's logic is what is tested, not
// Go's cross-compiler (make release builds the real binaries).
func tinyBuild(t *testing.T, root, name string) func(Platform, string) error {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./hack/release/testdata/"+name)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	b, err := os.ReadFile(bin)
	require.NoError(t, err)
	return func(_ Platform, path string) error { return os.WriteFile(path, b, 0o755) }
}

func options(t *testing.T, root, out string, build func(Platform, string) error) Options {
	return Options{Root: root, Version: "v0.3.1", Registry: "registry.example:5000/team", DownloadURL: "https://downloads.example/kontinue/v0.3.1/",
		Out: out, Epoch: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC), Build: build}
}

// TestRelease is `make release` as a dry run: every artefact, checked, and
// the image pushed to an in-process registry and read back by the digest
// the manifests pin.
func TestRelease(t *testing.T) {
	root, err := localcluster.RepoRoot(".")
	require.NoError(t, err)
	build := tinyBuild(t, root, "tiny")
	out := filepath.Join(t.TempDir(), "a")
	r, err := Release(options(t, root, out, build))
	require.NoError(t, err)
	require.Regexp(t, `^sha256:[0-9a-f]{64}$`, r.Digest)
	require.Equal(t, "registry.example:5000/team/kontinue:v0.3.1@"+r.Digest, r.Image)

	// install.yaml: the committed one, but pinned to the built image.
	install, err := os.ReadFile(filepath.Join(out, "install.yaml"))
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(install), "image: "), "one container")
	require.Contains(t, string(install), "image: "+r.Image+"\n")
	require.Contains(t, string(install), `app.kubernetes.io/version: "v0.3.1"`)
	crds, err := os.ReadFile(filepath.Join(out, "crds.yaml"))
	require.NoError(t, err)
	require.Equal(t, render.CRDs(), crds)

	// The chart package: this version, pinned, with its schema and notes,
	// and it templates to the same image.
	require.Equal(t, "kontinue-0.3.1.tgz", r.Chart)
	ch, err := loader.Load(filepath.Join(out, r.Chart))
	require.NoError(t, err)
	require.Equal(t, "0.3.1", ch.Metadata.Version)
	require.Equal(t, "v0.3.1", ch.Metadata.AppVersion)
	require.NotEmpty(t, ch.Schema, "values.schema.json")
	notes := false
	for _, f := range ch.Templates {
		notes = notes || f.Name == "templates/NOTES.txt"
	}
	require.True(t, notes, "NOTES.txt")
	require.Len(t, ch.CRDObjects(), 1)
	docs, err := render.Render(ch, nil, "Helm")
	require.NoError(t, err)
	images := 0
	for _, d := range docs {
		if strings.Contains(d, "kind: Deployment") {
			var dep unstructured.Unstructured
			require.NoError(t, yaml.Unmarshal([]byte(d), &dep.Object))
			cs, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
			require.Equal(t, r.Image, cs[0].(map[string]any)["image"])
			images++
		}
	}
	require.Equal(t, 1, images)

	// Archives, SBOMs, the krew manifest and the checksums agree.
	sums, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	require.NoError(t, err)
	listed := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		sum, file, ok := strings.Cut(l, "  ")
		require.True(t, ok, l)
		b, err := os.ReadFile(filepath.Join(out, file))
		require.NoError(t, err)
		require.Equal(t, sha256hex(b), sum, file)
		listed[file] = sum
	}
	for _, p := range Platforms {
		a := ArchiveName("v0.3.1", p)
		require.Contains(t, listed, a)
		require.Contains(t, listed, strings.TrimSuffix(a, ".tar.gz")+".spdx.json")
		require.Contains(t, untar(t, filepath.Join(out, a)), "kontinue")
	}
	for _, f := range []string{"install.yaml", "crds.yaml", "kontinue-0.3.1.tgz", "kontinue.krew.yaml"} {
		require.Contains(t, listed, f)
	}

	var krew struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct{ Name string }
		Spec       struct {
			Version   string `json:"version"`
			Platforms []struct {
				Selector struct {
					MatchLabels map[string]string `json:"matchLabels"`
				} `json:"selector"`
				URI    string `json:"uri"`
				SHA256 string `json:"sha256"`
				Bin    string `json:"bin"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	b, err := os.ReadFile(filepath.Join(out, "kontinue.krew.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &krew))
	require.Equal(t, "krew.googlecontainertools.github.com/v1alpha2", krew.APIVersion)
	require.Equal(t, "Plugin", krew.Kind)
	require.Equal(t, "v0.3.1", krew.Spec.Version)
	require.Len(t, krew.Spec.Platforms, 4)
	for _, p := range krew.Spec.Platforms {
		file := ArchiveName("v0.3.1", Platform{p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]})
		require.Equal(t, "https://downloads.example/kontinue/v0.3.1/"+file, p.URI)
		require.Equal(t, listed[file], p.SHA256, file)
		require.Equal(t, "kontinue", p.Bin)
	}

	var sbom struct {
		SPDXVersion string `json:"spdxVersion"`
		Packages    []struct {
			Name         string `json:"name"`
			Version      string `json:"versionInfo"`
			ExternalRefs []struct {
				Locator string `json:"referenceLocator"`
			} `json:"externalRefs"`
		} `json:"packages"`
		Relationships []struct {
			Type string `json:"relationshipType"`
		} `json:"relationships"`
	}
	b, err = os.ReadFile(filepath.Join(out, "kontinue_v0.3.1_darwin_arm64.spdx.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &sbom))
	require.Equal(t, "SPDX-2.3", sbom.SPDXVersion)
	require.Equal(t, "kontinue.dev/kontinue", sbom.Packages[0].Name)
	require.Equal(t, "v0.3.1", sbom.Packages[0].Version)
	gjson := ""
	for _, p := range sbom.Packages {
		if p.Name == "github.com/tidwall/gjson" {
			gjson = p.ExternalRefs[0].Locator
		}
	}
	require.Equal(t, "pkg:golang/github.com/tidwall/gjson@"+goModVersion(t, root, "github.com/tidwall/gjson"), gjson)
	require.Len(t, sbom.Relationships, len(sbom.Packages), "the document describes the binary, which depends on the rest")

	// Reproducible: the same inputs give the same bytes and digest.
	out2 := filepath.Join(t.TempDir(), "b")
	again, err := Release(options(t, root, out2, build))
	require.NoError(t, err)
	require.Equal(t, r.Digest, again.Digest)
	sums2, err := os.ReadFile(filepath.Join(out2, "SHA256SUMS"))
	require.NoError(t, err)
	require.Equal(t, string(sums), string(sums2))

	// Pushed to a registry, the image is served under the pinned digest,
	// for both platforms, running the binary as non-root.
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	require.NoError(t, Push(filepath.Join(out, "image"), host+"/team/kontinue:v0.3.1", r.Digest, remote.WithTransport(srv.Client().Transport)))
	ref, err := name.ParseReference(host+"/team/kontinue@"+r.Digest, name.Insecure)
	require.NoError(t, err)
	idx, err := remote.Index(ref)
	require.NoError(t, err)
	got, err := idx.Digest()
	require.NoError(t, err)
	require.Equal(t, r.Digest, got.String())
	m, err := idx.IndexManifest()
	require.NoError(t, err)
	require.Len(t, m.Manifests, 2)
	want, err := os.ReadFile(filepath.Join(out, "bin", "linux_arm64", "kontinue"))
	require.NoError(t, err)
	for _, d := range m.Manifests {
		img, err := idx.Image(d.Digest)
		require.NoError(t, err)
		cf, err := img.ConfigFile()
		require.NoError(t, err)
		require.Equal(t, d.Platform.OS, cf.OS)
		require.Equal(t, d.Platform.Architecture, cf.Architecture)
		require.Equal(t, []string{"/kontinue"}, cf.Config.Entrypoint)
		require.Equal(t, "65532:65532", cf.Config.User)
		layers, err := img.Layers()
		require.NoError(t, err)
		require.Len(t, layers, 1)
		rc, err := layers[0].Uncompressed()
		require.NoError(t, err)
		files := readTar(t, rc)
		require.Equal(t, want, files["kontinue"])
	}
	tagged, err := name.ParseReference(host+"/team/kontinue:v0.3.1", name.Insecure)
	require.NoError(t, err)
	desc, err := remote.Head(tagged)
	require.NoError(t, err)
	require.Equal(t, r.Digest, desc.Digest.String(), "the tag names the same index")

	// The chart is OCI-pushable: Helm's registry client pushes it and pulls
	// the same bytes back, and the same package gives the same manifest.
	chartDigest, err := PushChart(filepath.Join(out, r.Chart), host+"/team", options(t, root, out, build).Epoch, true)
	require.NoError(t, err)
	again2, err := PushChart(filepath.Join(out2, r.Chart), host+"/team", options(t, root, out2, build).Epoch, true)
	require.NoError(t, err)
	require.Equal(t, chartDigest, again2)
	hc, err := helmregistry.NewClient(helmregistry.ClientOptPlainHTTP())
	require.NoError(t, err)
	pulled, err := hc.Pull(host + "/team/charts/kontinue:0.3.1")
	require.NoError(t, err)
	packaged, err := os.ReadFile(filepath.Join(out, r.Chart))
	require.NoError(t, err)
	require.Equal(t, packaged, pulled.Chart.Data)
	require.Equal(t, "v0.3.1", pulled.Chart.Meta.AppVersion)
}

func TestReleaseRefusesBadInput(t *testing.T) {
	root, err := localcluster.RepoRoot(".")
	require.NoError(t, err)
	never := func(Platform, string) error { t.Fatal("built despite bad input"); return nil }
	for _, tc := range []struct {
		change func(*Options)
		want   string
	}{
		{func(o *Options) { o.Version = "0.1.0" }, "VERSION"},
		{func(o *Options) { o.Version = "latest" }, "VERSION"},
		{func(o *Options) { o.Registry = "" }, "REGISTRY"},
		{func(o *Options) { o.Registry = "ghcr.io/you/" }, "REGISTRY"},
		{func(o *Options) { o.DownloadURL = "file:///tmp/release/v0.3.1" }, "http:// or https:// URL"},
	} {
		o := options(t, root, filepath.Join(t.TempDir(), "x"), never)
		tc.change(&o)
		_, err := Release(o)
		require.ErrorContains(t, err, tc.want)
	}
}

func untar(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	return readTar(t, zr)
}

func readTar(t *testing.T, r io.Reader) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		var b bytes.Buffer
		_, err = io.Copy(&b, tr)
		require.NoError(t, err)
		require.Zero(t, h.Uid)
		out[h.Name] = b.Bytes()
	}
}

// goModVersion is the version go.mod requires of a module.
func goModVersion(t *testing.T, root, module string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] == module {
			return f[1]
		}
	}
	t.Fatalf("%s not in go.mod", module)
	return ""
}

// TestReleaseSaysWhatItWouldPush: without RELEASE_URL there is no krew
// manifest (it would name no URL), and the release says what publishing
// would push, where, and with which command; nothing is pushed.
func TestReleaseSaysWhatItWouldPush(t *testing.T) {
	root, err := localcluster.RepoRoot(".")
	require.NoError(t, err)
	o := options(t, root, filepath.Join(t.TempDir(), "a"), tinyBuild(t, root, "tiny"))
	o.DownloadURL = ""
	o.Platforms = []Platform{{"linux", "amd64"}}
	r, err := Release(o)
	require.NoError(t, err)
	require.NoFileExists(t, filepath.Join(o.Out, KrewManifest))
	require.NotContains(t, r.Files, KrewManifest)

	s := Summary(o, r, false, false)
	for _, want := range []string{
		"No REGISTRY given: install.yaml and the chart name registry.example:5000/team/kontinue",
		"Nothing was pushed. Publishing would push the image (digest " + r.Digest + ") to registry.example:5000/team/kontinue:v0.3.1 and the chart to oci://registry.example:5000/team/charts/kontinue:0.3.1",
		"make publish VERSION=v0.3.1 REGISTRY=registry.example:5000/team RELEASE_URL=",
		"No RELEASE_URL given: no kontinue.krew.yaml",
		"  install.yaml\n", "  kontinue-0.3.1.tgz\n", "  SHA256SUMS\n", "  kontinue_v0.3.1_linux_amd64.tar.gz\n",
	} {
		require.Contains(t, s, want)
	}
	o.DownloadURL = "https://downloads.example/v0.3.1"
	s = Summary(o, r, true, false)
	require.NotContains(t, s, "No REGISTRY")
	require.NotContains(t, s, "No RELEASE_URL")
	require.Contains(t, s, "make publish VERSION=v0.3.1 REGISTRY=registry.example:5000/team RELEASE_URL=https://downloads.example/v0.3.1\n")
}

// TestImageNeedsRoots: the image has no CA bundle, so a binary that does
// not carry its roots is refused before any image is made.
func TestImageNeedsRoots(t *testing.T) {
	root, err := localcluster.RepoRoot(".")
	require.NoError(t, err)
	o := options(t, root, filepath.Join(t.TempDir(), "a"), tinyBuild(t, root, "bare"))
	_, err = Release(o)
	require.ErrorContains(t, err, "does not link golang.org/x/crypto/x509roots/fallback: the image has no CA bundle")
}
