package main

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"

	"kontinue.dev/kontinue/version"
)

// changelogHeading is a version's entry in CHANGELOG.md (Keep a Changelog:
// "## [v0.1.0] - 2026-12-01", or "- Unreleased" until it is out).
var changelogHeading = regexp.MustCompile(`(?m)^## \[(v[^\]]+)\]`)

// ChangelogVersions are the versions CHANGELOG.md has entries for, newest
// first ([Unreleased] is not one).
func ChangelogVersions(b []byte) []string {
	var out []string
	for _, m := range changelogHeading.FindAllSubmatch(b, -1) {
		out = append(out, string(m[1]))
	}
	return out
}

// CheckVersion refuses to release a version other than the one the
// sources name: version/VERSION (what `kontinue version` of any build
// says), and the newest entry of CHANGELOG.md, which tells users what it
// holds.
func CheckVersion(root, v string) error {
	if v != version.Next() {
		return fmt.Errorf("VERSION %s is not version/VERSION's %s: a release carries the version its source names; bump version/VERSION, CHANGELOG.md and deploy/chart/Chart.yaml together (TestOneVersion checks them)", v, version.Next())
	}
	b, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		return err
	}
	if vs := ChangelogVersions(b); len(vs) == 0 || vs[0] != v {
		return fmt.Errorf("CHANGELOG.md's newest entry is %v, not %s: say what the release holds", first(vs), v)
	}
	return nil
}

func first(vs []string) string {
	if len(vs) == 0 {
		return "none"
	}
	return vs[0]
}

// DefaultRegistry is where the chart's default image lives (values.yaml's
// image.repository, REGISTRY/kontinue): what the repository's
// deploy/install.yaml names, and what a release names when REGISTRY is
// not given.
func DefaultRegistry(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "deploy", "chart", "values.yaml"))
	if err != nil {
		return "", err
	}
	var v struct {
		Image struct {
			Repository string `json:"repository"`
		} `json:"image"`
	}
	if err := yaml.Unmarshal(b, &v); err != nil {
		return "", fmt.Errorf("deploy/chart/values.yaml: %w", err)
	}
	dir, base := path.Split(v.Image.Repository)
	if base != ImageName || dir == "" {
		return "", fmt.Errorf("deploy/chart/values.yaml: image.repository %q is not REGISTRY/%s", v.Image.Repository, ImageName)
	}
	return strings.TrimSuffix(dir, "/"), nil
}
