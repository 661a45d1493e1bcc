// Command release builds everything a release of Kontinue needs, without a
// container runtime, into one folder (make release):
//
//	kontinue_VERSION_OS_ARCH.tar.gz    the CLI for linux/darwin × amd64/arm64
//	kontinue_VERSION_OS_ARCH.spdx.json its SBOM (SPDX 2.3, from Go's build info)
//	image/                             the image, linux/amd64 and linux/arm64, as an OCI layout
//	install.yaml, crds.yaml            the manifests, the image pinned by digest
//	kontinue-X.Y.Z.tgz                 the Helm chart, pinned the same way
//	kontinue.krew.yaml                 the krew manifest of the archives (with -url)
//	SHA256SUMS                         checksums of all the files above
//
// The version is version/VERSION's (another is refused), with an entry in
// CHANGELOG.md. The image is named REGISTRY/kontinue (default: the chart's
// image.repository). Every timestamp is the commit's, binaries are built
// with -trimpath and no build ID, archives are written in a fixed order:
// the same commit gives the same bytes and the same image digest. Nothing
// is pushed unless -push: it then sends the image and the chart to the
// registry (docs/install.md: publishing a release).
//
//	go run ./hack/release [-version v0.1.0] [-registry ghcr.io/you] [-url https://.../v0.1.0] [-out DIR] [-push]
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"kontinue.dev/kontinue/hack/localcluster"
	"kontinue.dev/kontinue/version"
)

func main() {
	var o Options
	flag.StringVar(&o.Version, "version", "", "the version, like v0.1.0 (default and only choice: version/VERSION's)")
	flag.StringVar(&o.Registry, "registry", "", "where the image goes (REGISTRY/kontinue), e.g. ghcr.io/you (default: the chart's image.repository's registry)")
	flag.StringVar(&o.DownloadURL, "url", "", "the URL of the folder users download the archives from (the krew manifest names it; without it, no krew manifest)")
	flag.StringVar(&o.Homepage, "homepage", "", "the krew manifest's homepage")
	flag.StringVar(&o.Out, "out", "", "output folder (default: _output/release/VERSION)")
	platforms := flag.String("platforms", "", "OS/ARCH,... (default: linux and darwin, amd64 and arm64)")
	push := flag.Bool("push", false, "then push the image to REGISTRY/kontinue:VERSION and the chart to REGISTRY/charts/kontinue:X.Y.Z (the credentials of ~/.docker/config.json, and of `helm registry login` for the chart)")
	flag.Parse()
	if err := run(o, *platforms, *push); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(o Options, platforms string, push bool) error {
	root, err := localcluster.RepoRoot(".")
	if err != nil {
		return err
	}
	o.Root = root
	if o.Version == "" {
		o.Version = version.Next()
	}
	if err := CheckVersion(root, o.Version); err != nil {
		return err
	}
	registryGiven := o.Registry != ""
	if !registryGiven {
		if o.Registry, err = DefaultRegistry(root); err != nil {
			return err
		}
	}
	if o.Out == "" {
		o.Out = filepath.Join(root, "_output", "release", o.Version)
	}
	if platforms != "" {
		for _, s := range strings.Split(platforms, ",") {
			osName, arch, ok := strings.Cut(strings.TrimSpace(s), "/")
			if !ok {
				return fmt.Errorf("-platforms: %q is not OS/ARCH", s)
			}
			o.Platforms = append(o.Platforms, Platform{osName, arch})
		}
	}
	if o.Epoch, err = commitTime(root); err != nil {
		return err
	}
	r, err := Release(o)
	if err != nil {
		return err
	}
	fmt.Print(Summary(o, r, registryGiven, push))
	if !push {
		return nil
	}
	if err := Push(filepath.Join(o.Out, "image"), o.Registry+"/"+ImageName+":"+o.Version, r.Digest); err != nil {
		return err
	}
	_, err = PushChart(filepath.Join(o.Out, r.Chart), o.Registry, o.Epoch, false)
	return err
}

// Summary says what a release built, where its image and chart go, and
// how they get there (make publish) when they are not pushed now.
func Summary(o Options, r *Result, registryGiven, push bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", o.Out)
	for _, f := range r.Files {
		fmt.Fprintf(&b, "  %s\n", f)
	}
	fmt.Fprintf(&b, "  image/  (OCI layout: %s)\n", r.Image)
	tag := o.Registry + "/" + ImageName + ":" + o.Version
	chart := "oci://" + o.Registry + "/charts/" + ImageName + ":" + strings.TrimPrefix(o.Version, "v")
	if push {
		fmt.Fprintf(&b, "pushing the image to %s and the chart to %s\n", tag, chart)
		return b.String()
	}
	if !registryGiven {
		fmt.Fprintf(&b, "No REGISTRY given: install.yaml and the chart name %s/%s, the registry of deploy/chart/values.yaml's image.repository.\n", o.Registry, ImageName)
	}
	fmt.Fprintf(&b, "Nothing was pushed. Publishing would push the image (digest %s) to %s and the chart to %s:\n", r.Digest, tag, chart)
	url := o.DownloadURL
	if url == "" {
		url = "<the folder users download the files from>"
	}
	fmt.Fprintf(&b, "  make publish VERSION=%s REGISTRY=%s RELEASE_URL=%s\n", o.Version, o.Registry, url)
	b.WriteString("(the same build, then the push, with the credentials of ~/.docker/config.json and `helm registry login`; another REGISTRY renames the image in install.yaml and the chart, not its digest), then upload the files listed in SHA256SUMS to RELEASE_URL.\n")
	if o.DownloadURL == "" {
		fmt.Fprintf(&b, "No RELEASE_URL given: no %s (it names each archive's URL).\n", KrewManifest)
	}
	return b.String()
}

// commitTime is HEAD's commit time (SOURCE_DATE_EPOCH when set): every
// timestamp of the release.
func commitTime(root string) (time.Time, error) {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH: %w", err)
		}
		return time.Unix(n, 0).UTC(), nil
	}
	out, err := exec.Command("git", "-C", root, "log", "-1", "--format=%ct").Output()
	if err != nil {
		return time.Time{}, fmt.Errorf("git log: %w", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(n, 0).UTC(), nil
}
