// Command installyaml writes the generated install files from one source,
// so that they never drift:
//
//	deploy/crds.yaml            Kontinue's CRDs (what `kontinue crds` prints)
//	deploy/chart/crds/crds.yaml the same, in the chart's crds/ folder
//	deploy/install.yaml         deploy/namespace.yaml + the chart (deploy/chart)
//	                            rendered with its default values by Helm's engine
//	                            in the namespace kontinue-system, release "kontinue"
//
// CRDs are in their own file so that `kubectl delete -f deploy/install.yaml`
// removes Kontinue but not the CRDs, and with them every Workload. `make
// install-yaml` runs it; a unit test fails when a committed file is stale.
//
//	go run ./hack/installyaml [-image REGISTRY/kontinue:TAG] [-o deploy/install.yaml]
//
// The image defaults to the chart's (DefaultImage): the release of
// version/VERSION in the registry of values.yaml's image.repository.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"kontinue.dev/kontinue/hack/installyaml/render"
	"kontinue.dev/kontinue/hack/localcluster"
)

// The library's names, for this command and its tests.
const (
	Namespace = render.Namespace
	Release   = render.Release
)

var (
	RenderChart  = render.RenderChart
	Generate     = render.Generate
	CRDs         = render.CRDs
	DefaultImage = render.DefaultImage
)

func main() {
	image := flag.String("image", "", "container image of the Deployment (default: the chart's, image.repository:appVersion)")
	out := flag.String("o", "", "install.yaml output file (default: deploy/install.yaml in the repository, and the CRD files next to it; - for stdout)")
	flag.Parse()
	root, err := localcluster.RepoRoot(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "installyaml:", err)
		os.Exit(1)
	}
	if *image == "" {
		if *image, err = DefaultImage(root); err != nil {
			fmt.Fprintln(os.Stderr, "installyaml:", err)
			os.Exit(1)
		}
	}
	b, err := Generate(root, *image)
	if err != nil {
		fmt.Fprintln(os.Stderr, "installyaml:", err)
		os.Exit(1)
	}
	switch *out {
	case "-":
		_, err = os.Stdout.Write(b)
	case "":
		err = os.WriteFile(filepath.Join(root, "deploy", "install.yaml"), b, 0o644)
		if err == nil {
			err = os.WriteFile(filepath.Join(root, "deploy", "crds.yaml"), CRDs(), 0o644)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(root, "deploy", "chart", "crds", "crds.yaml"), CRDs(), 0o644)
		}
	default:
		err = os.WriteFile(*out, b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "installyaml:", err)
		os.Exit(1)
	}
}
