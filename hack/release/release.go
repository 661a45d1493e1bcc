package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"sigs.k8s.io/yaml"

	"kontinue.dev/kontinue/hack/installyaml/render"
)

// Platform is a GOOS/GOARCH pair.
type Platform struct{ OS, Arch string }

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// Platforms of a release: the CLI for each, the image for the linux ones.
var Platforms = []Platform{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}

// Options of one release.
type Options struct {
	Root     string // the repository
	Version  string // vMAJOR.MINOR.PATCH[-PRE]
	Registry string // where the image goes: Registry/kontinue
	// DownloadURL is the folder the archives are downloaded from (the
	// krew manifest names each archive in it).
	DownloadURL string
	Homepage    string // the krew manifest's homepage, if any
	Out         string
	// Epoch is every timestamp of the release (archives, image, SBOM):
	// the commit's time, so that a release is reproducible.
	Epoch     time.Time
	Platforms []Platform
	// Build writes the kontinue binary for p to path; nil: go build.
	Build func(p Platform, path string) error
}

// Result names what a release built.
type Result struct {
	Image  string // Registry/kontinue:Version@sha256:...
	Digest string // of the image index
	Chart  string // file name of the chart package
	Files  []string
}

var semver = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

// ImageName is the image's repository in a registry.
const ImageName = "kontinue"

// KrewManifest is the krew manifest's file, written when RELEASE_URL is set.
const KrewManifest = "kontinue.krew.yaml"

// Release builds every artefact of a release into o.Out (emptied first).
func Release(o Options) (*Result, error) {
	if !semver.MatchString(o.Version) {
		return nil, fmt.Errorf("VERSION %q is not a version like v0.1.0", o.Version)
	}
	if o.Registry == "" || strings.Contains(o.Registry, "@") || strings.HasSuffix(o.Registry, "/") {
		return nil, fmt.Errorf("REGISTRY %q: the registry and path the image goes to, e.g. ghcr.io/you", o.Registry)
	}
	if o.DownloadURL != "" && !strings.HasPrefix(o.DownloadURL, "https://") && !strings.HasPrefix(o.DownloadURL, "http://") {
		// krew fetches archives over HTTP(S) only: a file:// URL would give a
		// manifest no one can install from.
		return nil, fmt.Errorf("RELEASE_URL %q: the http:// or https:// URL of the folder users download the archives from (the krew manifest names it; krew fetches only over HTTP)", o.DownloadURL)
	}
	if len(o.Platforms) == 0 {
		o.Platforms = Platforms
	}
	if o.Build == nil {
		o.Build = func(p Platform, path string) error { return GoBuild(o.Root, o.Version, p, path) }
	}
	if err := os.RemoveAll(o.Out); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	r := &Result{}
	add := func(name string, b []byte) error {
		r.Files = append(r.Files, name)
		return os.WriteFile(filepath.Join(o.Out, name), b, 0o644)
	}

	// The binaries, an archive and an SBOM for each.
	bins := map[Platform]string{}
	archives := map[Platform][]byte{}
	for _, p := range o.Platforms {
		bin := filepath.Join(o.Out, "bin", p.OS+"_"+p.Arch, "kontinue")
		if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
			return nil, err
		}
		if err := o.Build(p, bin); err != nil {
			return nil, fmt.Errorf("build %s: %w", p, err)
		}
		bins[p] = bin
		b, err := os.ReadFile(bin)
		if err != nil {
			return nil, err
		}
		files := []tarFile{{name: "kontinue", mode: 0o755, data: b}}
		if readme, err := os.ReadFile(filepath.Join(o.Root, "README.md")); err == nil {
			files = append(files, tarFile{name: "README.md", mode: 0o644, data: readme})
		}
		archive, err := targz(files, o.Epoch)
		if err != nil {
			return nil, err
		}
		archives[p] = archive
		if err := add(ArchiveName(o.Version, p), archive); err != nil {
			return nil, err
		}
		sbom, err := SBOM(bin, o.Version, p, o.Epoch)
		if err != nil {
			return nil, err
		}
		if err := add(strings.TrimSuffix(ArchiveName(o.Version, p), ".tar.gz")+".spdx.json", sbom); err != nil {
			return nil, err
		}
	}

	// The image: the linux binaries on an empty base, as an OCI layout.
	var linux []Platform
	for _, p := range o.Platforms {
		if p.OS == "linux" {
			linux = append(linux, p)
		}
	}
	if len(linux) == 0 {
		return nil, errors.New("no linux platform: no image")
	}
	idx, err := Image(o, linux, bins)
	if err != nil {
		return nil, err
	}
	d, err := idx.Digest()
	if err != nil {
		return nil, err
	}
	r.Digest = d.String()
	r.Image = o.Registry + "/" + ImageName + ":" + o.Version + "@" + r.Digest
	lp, err := layout.Write(filepath.Join(o.Out, "image"), empty.Index)
	if err != nil {
		return nil, err
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": o.Version})); err != nil {
		return nil, err
	}

	// The chart, for this version and pinned to the image; linted, then
	// loaded back from its package to render install.yaml, so that what
	// is published is what was checked.
	chartFile, err := Chart(o, r.Image)
	if err != nil {
		return nil, err
	}
	r.Chart = filepath.Base(chartFile)
	r.Files = append(r.Files, r.Chart)
	ch, err := loader.Load(chartFile)
	if err != nil {
		return nil, err
	}
	install, err := render.GenerateFrom(o.Root, ch, r.Image)
	if err != nil {
		return nil, err
	}
	if err := add("install.yaml", install); err != nil {
		return nil, err
	}
	if err := add("crds.yaml", render.CRDs()); err != nil {
		return nil, err
	}

	// The krew manifest names each archive's URL: without RELEASE_URL
	// there is none to name.
	if o.DownloadURL != "" {
		krew, err := Krew(o, archives)
		if err != nil {
			return nil, err
		}
		if err := add(KrewManifest, krew); err != nil {
			return nil, err
		}
	}

	sort.Strings(r.Files)
	var sums bytes.Buffer
	for _, f := range r.Files {
		b, err := os.ReadFile(filepath.Join(o.Out, f))
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&sums, "%s  %s\n", sha256hex(b), f)
	}
	if err := add("SHA256SUMS", sums.Bytes()); err != nil {
		return nil, err
	}
	return r, nil
}

// ArchiveName is the CLI archive of a platform.
func ArchiveName(version string, p Platform) string {
	return fmt.Sprintf("kontinue_%s_%s_%s.tar.gz", version, p.OS, p.Arch)
}

// BuildFlags are the arguments of `go build` for a release binary of
// version, and BuildEnv its environment: static (no cgo), no paths of this
// machine, no build ID, no symbol table. The Dockerfile builds with the
// same (TestDockerfileBuildsTheReleaseImage).
func BuildFlags(version string) []string {
	return []string{"-trimpath", "-ldflags", "-s -w -buildid= -X kontinue.dev/kontinue/version.Version=" + version}
}

// BuildEnv is the environment BuildFlags need.
var BuildEnv = []string{"CGO_ENABLED=0"}

// GoBuild builds a static, reproducible binary (BuildFlags).
func GoBuild(root, version string, p Platform, path string) error {
	cmd := exec.Command("go", append(append([]string{"build"}, BuildFlags(version)...), "-o", path, ".")...)
	cmd.Dir = root
	cmd.Env = append(append(os.Environ(), BuildEnv...), "GOOS="+p.OS, "GOARCH="+p.Arch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

type tarFile struct {
	name string
	mode int64
	data []byte
}

// tarBytes writes files in order, owned by root, at epoch: the same input
// gives the same bytes.
func tarBytes(files []tarFile, epoch time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func targz(files []tarFile, epoch time.Time) ([]byte, error) {
	t, err := tarBytes(files, epoch)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	zw.ModTime = epoch
	if _, err := zw.Write(t); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ImageUser is the user the image runs as: numeric, so that the kubelet
// can check runAsNonRoot without /etc/passwd (the chart's runAsUser too).
const ImageUser = "65532:65532"

// RootsModule is the module that carries CA roots in the binary.
const RootsModule = "golang.org/x/crypto/x509roots/fallback"

// Image builds the multi-platform image: one layer holding /kontinue on
// no base image, as the Dockerfile's `FROM scratch`. The binary is static,
// runs as the numeric user ImageUser (no /etc/passwd needed), and carries
// its CA roots (RootsModule, which main.go imports), for what it reaches
// over https besides the API server (whose CA comes with the
// ServiceAccount token): Helm chart repositories, a traces endpoint. A
// binary without them is refused: the image has no CA bundle.
func Image(o Options, platforms []Platform, bins map[Platform]string) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range platforms {
		if err := hasRoots(bins[p]); err != nil {
			return nil, err
		}
		b, err := os.ReadFile(bins[p])
		if err != nil {
			return nil, err
		}
		t, err := tarBytes([]tarFile{{name: "kontinue", mode: 0o755, data: b}}, o.Epoch)
		if err != nil {
			return nil, err
		}
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(t)), nil },
			tarball.WithMediaType(types.OCILayer))
		if err != nil {
			return nil, err
		}
		img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
		img, err = mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: types.OCILayer,
			History: v1.History{Created: v1.Time{Time: o.Epoch}, CreatedBy: "hack/release: kontinue " + o.Version, Comment: "the static binary"}})
		if err != nil {
			return nil, err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture = p.OS, p.Arch
		cf.Created = v1.Time{Time: o.Epoch}
		cf.Config.Entrypoint = []string{"/kontinue"}
		cf.Config.User = ImageUser
		cf.Config.Labels = map[string]string{
			"org.opencontainers.image.title":   "kontinue",
			"org.opencontainers.image.version": o.Version,
			"org.opencontainers.image.created": o.Epoch.UTC().Format(time.RFC3339),
		}
		img, err = mutate.ConfigFile(img, cf)
		if err != nil {
			return nil, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			MediaType: types.OCIManifestSchema1, Platform: &v1.Platform{OS: p.OS, Architecture: p.Arch}}})
	}
	return idx, nil
}

// hasRoots is nil when the binary at bin links RootsModule.
func hasRoots(bin string) error {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return fmt.Errorf("%s: %w", bin, err)
	}
	for _, d := range info.Deps {
		if d.Path == RootsModule {
			return nil
		}
	}
	return fmt.Errorf("%s does not link %s: the image has no CA bundle, so it would trust no https server (main.go imports the module)", bin, RootsModule)
}

// Chart packages deploy/chart for the release: version and appVersion set,
// the image pinned by digest in values.yaml, linted. It returns the path
// of the package (kontinue-X.Y.Z.tgz, what `helm package` names it).
func Chart(o Options, image string) (string, error) {
	src := filepath.Join(o.Root, "deploy", "chart")
	stage := filepath.Join(o.Out, "chart", "kontinue")
	if err := os.RemoveAll(filepath.Dir(stage)); err != nil {
		return "", err
	}
	version := strings.TrimPrefix(o.Version, "v")
	repo, tag, digest := render.SplitImage(image)
	var files []tarFile
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		switch rel {
		case "Chart.yaml":
			b, err = setLines(b, map[string]string{"version: ": version, "appVersion: ": fmt.Sprintf("%q", o.Version)})
		case "values.yaml":
			b, err = setLines(b, map[string]string{"  repository: ": repo, "  tag: ": fmt.Sprintf("%q", tag), "  digest: ": fmt.Sprintf("%q", digest)})
		}
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		files = append(files, tarFile{name: "kontinue/" + filepath.ToSlash(rel), mode: 0o644, data: b})
		dst := filepath.Join(stage, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		return "", err
	}
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	linted := lint.All(stage, nil, render.Namespace, false)
	for _, m := range linted.Messages {
		if m.Severity >= support.WarningSev {
			return "", fmt.Errorf("helm lint: %s", m.Error())
		}
	}
	tgz, err := targz(files, o.Epoch)
	if err != nil {
		return "", err
	}
	out := filepath.Join(o.Out, "kontinue-"+version+".tgz")
	return out, os.WriteFile(out, tgz, 0o644)
}

// setLines replaces the value of the first line starting with each prefix
// (the file's comments stay); a prefix with no line is an error.
func setLines(b []byte, values map[string]string) ([]byte, error) {
	lines := strings.Split(string(b), "\n")
	for prefix, v := range values {
		found := false
		for i, l := range lines {
			if strings.HasPrefix(l, prefix) {
				lines[i] = prefix + v
				found = true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("no line %q", prefix)
		}
	}
	return []byte(strings.Join(lines, "\n")), nil
}

// Krew is the krew plugin manifest: `kubectl krew install --manifest=...`
// (and what a krew-index pull request submits).
func Krew(o Options, archives map[Platform][]byte) ([]byte, error) {
	type platform struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		URI    string              `json:"uri"`
		SHA256 string              `json:"sha256"`
		Files  []map[string]string `json:"files"`
		Bin    string              `json:"bin"`
	}
	var ps []platform
	for _, p := range o.Platforms {
		var x platform
		x.Selector.MatchLabels = map[string]string{"os": p.OS, "arch": p.Arch}
		x.URI = strings.TrimSuffix(o.DownloadURL, "/") + "/" + ArchiveName(o.Version, p)
		x.SHA256 = sha256hex(archives[p])
		x.Files = []map[string]string{{"from": "kontinue", "to": "."}}
		x.Bin = "kontinue"
		ps = append(ps, x)
	}
	spec := map[string]any{
		"version":          o.Version,
		"shortDescription": "Supply chains of Cartographer's API: get, events, reconcile, render",
		"description": "The CLI of Kontinue, a supply-chain choreographer that speaks Cartographer's\n" +
			"carto.run/v1alpha1 API: a workload's steps as a tree (get), its and its\n" +
			"stamped objects' events, reconcile --wait, offline render of a chain,\n" +
			"check of an installation, and a live dashboard.\n",
		"platforms": ps,
	}
	if o.Homepage != "" {
		spec["homepage"] = o.Homepage
	}
	return yaml.Marshal(map[string]any{
		"apiVersion": "krew.googlecontainertools.github.com/v1alpha2",
		"kind":       "Plugin",
		"metadata":   map[string]any{"name": "kontinue"},
		"spec":       spec,
	})
}

// SBOM is an SPDX 2.3 document of a binary: the Go modules linked into it,
// read from the build information Go embeds (so it lists what was built,
// not what go.mod allows).
func SBOM(bin, version string, p Platform, epoch time.Time) ([]byte, error) {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", bin, err)
	}
	type ref struct {
		Category string `json:"referenceCategory"`
		Type     string `json:"referenceType"`
		Locator  string `json:"referenceLocator"`
	}
	type pkg struct {
		ID               string `json:"SPDXID"`
		Name             string `json:"name"`
		Version          string `json:"versionInfo"`
		DownloadLocation string `json:"downloadLocation"`
		FilesAnalyzed    bool   `json:"filesAnalyzed"`
		ExternalRefs     []ref  `json:"externalRefs"`
		Comment          string `json:"comment,omitempty"`
	}
	type rel struct {
		Element string `json:"spdxElementId"`
		Type    string `json:"relationshipType"`
		Related string `json:"relatedSpdxElement"`
	}
	id := func(path string) string {
		return "SPDXRef-Package-" + regexp.MustCompile(`[^A-Za-z0-9.-]`).ReplaceAllString(path, "-")
	}
	purl := func(path, v string) ref {
		return ref{Category: "PACKAGE-MANAGER", Type: "purl", Locator: "pkg:golang/" + path + "@" + v}
	}
	mainID := id(info.Main.Path)
	pkgs := []pkg{{ID: mainID, Name: info.Main.Path, Version: version, DownloadLocation: "NOASSERTION",
		ExternalRefs: []ref{purl(info.Main.Path, version)}, Comment: "built with " + info.GoVersion + " for " + p.String()}}
	rels := []rel{{Element: "SPDXRef-DOCUMENT", Type: "DESCRIBES", Related: mainID}}
	deps := append([]*debug.Module(nil), info.Deps...)
	sort.Slice(deps, func(i, j int) bool { return deps[i].Path < deps[j].Path })
	for _, d := range deps {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		x := pkg{ID: id(d.Path), Name: d.Path, Version: m.Version, DownloadLocation: "NOASSERTION", ExternalRefs: []ref{purl(m.Path, m.Version)}}
		if m.Sum != "" {
			// Go's h1: hash (go.sum) is not a checksum of one file, which
			// is what SPDX's checksums are: a comment says it.
			x.Comment = "go.sum " + m.Sum
		}
		pkgs = append(pkgs, x)
		rels = append(rels, rel{Element: mainID, Type: "DEPENDS_ON", Related: x.ID})
	}
	doc := map[string]any{
		"spdxVersion":       "SPDX-2.3",
		"dataLicense":       "CC0-1.0",
		"SPDXID":            "SPDXRef-DOCUMENT",
		"name":              fmt.Sprintf("kontinue-%s-%s-%s", version, p.OS, p.Arch),
		"documentNamespace": fmt.Sprintf("https://kontinue.dev/spdx/kontinue-%s-%s-%s", version, p.OS, p.Arch),
		"creationInfo": map[string]any{
			"created":  epoch.UTC().Format(time.RFC3339),
			"creators": []string{"Tool: kontinue-hack-release"},
		},
		"packages":      pkgs,
		"relationships": rels,
	}
	return json.MarshalIndent(doc, "", "  ")
}

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
