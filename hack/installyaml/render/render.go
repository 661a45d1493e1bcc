// Package render renders Kontinue's install files from one source: the
// CRDs of crds/ and the chart deploy/chart (hack/installyaml writes them
// into deploy/, hack/release into a release).
package render

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"

	"kontinue.dev/kontinue/crds"
)

// DefaultImage is the image the chart names with its default values, and
// so the repository's deploy/install.yaml: values.yaml's image.repository
// (the registry a release is published to) tagged with Chart.yaml's
// appVersion (version/VERSION, the version the next release carries).
func DefaultImage(root string) (string, error) {
	ch, err := loader.LoadDir(filepath.Join(root, "deploy", "chart"))
	if err != nil {
		return "", err
	}
	img, _ := ch.Values["image"].(map[string]any)
	repo, _ := img["repository"].(string)
	if repo == "" || ch.Metadata.AppVersion == "" {
		return "", fmt.Errorf("deploy/chart: no image.repository or appVersion")
	}
	return repo + ":" + ch.Metadata.AppVersion, nil
}

// Namespace and release name install.yaml is rendered for.
const (
	Namespace = "kontinue-system"
	Release   = "kontinue"
)

// templateOrder puts the chart's templates in install order: what others
// need first.
var templateOrder = []string{"serviceaccount.yaml", "rbac.yaml", "aggregate.yaml", "deployment.yaml", "pdb.yaml", "service.yaml", "servicemonitor.yaml", "dashboard.yaml", "shardpolicy.yaml"}

// RenderChart renders deploy/chart with values (nil: the defaults) and
// returns its documents in install order, empty ones dropped.
func RenderChart(root string, values map[string]any) ([]string, error) {
	ch, err := loader.LoadDir(filepath.Join(root, "deploy", "chart"))
	if err != nil {
		return nil, err
	}
	return Render(ch, values, "Helm")
}

// Render renders a loaded chart (the folder, or a release's package) as
// Helm would install it in Namespace as Release, with values checked
// against its values.schema.json. service is the managed-by label's value:
// "Helm", or "kubectl" for install.yaml, which kubectl applies.
func Render(ch *chart.Chart, values map[string]any, service string) ([]string, error) {
	vals, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{Name: Release, Namespace: Namespace, IsInstall: true, Revision: 1}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	if rel, ok := vals["Release"].(map[string]any); ok {
		rel["Service"] = service
	}
	out, err := engine.Render(ch, vals)
	if err != nil {
		return nil, err
	}
	rank := func(name string) int {
		for i, t := range templateOrder {
			if strings.HasSuffix(name, "/templates/"+t) {
				return i
			}
		}
		return len(templateOrder)
	}
	var names []string
	for name := range out {
		if strings.Contains(name, "/templates/") && !strings.HasSuffix(name, "NOTES.txt") && !strings.Contains(name, "/_") {
			names = append(names, name)
		}
	}
	sort.Slice(names, func(i, j int) bool {
		if rank(names[i]) != rank(names[j]) {
			return rank(names[i]) < rank(names[j])
		}
		return names[i] < names[j]
	})
	var docs []string
	for _, name := range names {
		for _, doc := range strings.Split(out[name], "\n---\n") {
			doc = strings.Trim(doc, "\n")
			doc = strings.TrimPrefix(doc, "---\n")
			if hasContent(doc) {
				docs = append(docs, doc)
			}
		}
	}
	return docs, nil
}

// hasContent is false for a document of comments and blank lines only.
func hasContent(doc string) bool {
	for _, l := range strings.Split(doc, "\n") {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") {
			return true
		}
	}
	return false
}

// SplitImage splits an image reference into repository, tag and digest:
// "localhost:5000/kontinue:v1@sha256:..." is "localhost:5000/kontinue",
// "v1", "sha256:...". A reference with neither tag nor digest gets the tag
// "latest", as a container runtime would pull it.
func SplitImage(image string) (repo, tag, digest string) {
	repo, digest, _ = strings.Cut(image, "@")
	// A tag follows the last colon after the last slash; a colon before it
	// separates a registry's host from its port.
	if i := strings.LastIndexByte(repo, ':'); i > strings.LastIndexByte(repo, '/') {
		repo, tag = repo[:i], repo[i+1:]
	}
	if tag == "" && digest == "" {
		tag = "latest"
	}
	return repo, tag, digest
}

// ImageValues are the chart's image values for a reference.
func ImageValues(image string) map[string]any {
	repo, tag, digest := SplitImage(image)
	return map[string]any{"repository": repo, "tag": tag, "digest": digest}
}

// Generate builds install.yaml from the repository at root.
func Generate(root, image string) ([]byte, error) {
	ch, err := loader.LoadDir(filepath.Join(root, "deploy", "chart"))
	if err != nil {
		return nil, err
	}
	return GenerateFrom(root, ch, image)
}

// GenerateFrom builds install.yaml from a loaded chart and the namespace of
// the repository at root.
func GenerateFrom(root string, ch *chart.Chart, image string) ([]byte, error) {
	docs, err := Render(ch, map[string]any{"image": ImageValues(image)}, "kubectl")
	if err != nil {
		return nil, err
	}
	ns, err := os.ReadFile(filepath.Join(root, "deploy", "namespace.yaml"))
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.WriteString("# Kontinue: namespace, RBAC and Deployment, without the CRDs (deploy/crds.yaml;\n")
	buf.WriteString("# apply them first). Generated by `make install-yaml` (hack/installyaml) from\n")
	buf.WriteString("# deploy/namespace.yaml and the chart deploy/chart with its default values;\n")
	buf.WriteString("# edit those, not this file.\n")
	buf.Write(bytes.TrimRight(ns, "\n"))
	buf.WriteString("\n")
	for _, d := range docs {
		buf.WriteString("---\n")
		buf.WriteString(d)
		buf.WriteString("\n")
	}
	return buf.Bytes(), nil
}

// CRDs is deploy/crds.yaml (and the chart's crds/crds.yaml).
func CRDs() []byte {
	var buf bytes.Buffer
	buf.WriteString("# Kontinue's CustomResourceDefinitions (`kontinue crds`), apart from install.yaml\n")
	buf.WriteString("# so that deleting Kontinue never deletes them, and every Workload with them.\n")
	buf.WriteString("# Generated by `make install-yaml` from crds/; edit those, not this file.\n")
	buf.Write(crds.YAML())
	return buf.Bytes()
}
