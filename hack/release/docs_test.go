package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"kontinue.dev/kontinue/hack/localcluster"
)

// releaseFile is the name of a file a release holds, as docs write it
// (a path before it is kept apart, to tell deploy/crds.yaml from crds.yaml).
var releaseFile = regexp.MustCompile(`([\w.$/{}-]*/)?(kontinue_v[\w.{},-]+\.(?:tar\.gz|spdx\.json)|kontinue-[\d.X]+\.tgz|kontinue\.krew\.yaml|SHA256SUMS|install\.yaml|crds\.yaml)`)

// normal writes a file name without its version: docs name v0.1.0 while
// the test builds another.
func normal(name string) string {
	name = regexp.MustCompile(`v\d+\.\d+\.\d+`).ReplaceAllString(name, "vX")
	return regexp.MustCompile(`kontinue-(\d+\.\d+\.\d+|X\.Y\.Z)\.tgz`).ReplaceAllString(name, "kontinue-X.tgz")
}

// expand spells out {a,b} and OS_ARCH for every platform of a release.
func expand(name string) []string {
	if i := strings.Index(name, "{"); i >= 0 {
		j := strings.Index(name[i:], "}") + i
		var out []string
		for _, alt := range strings.Split(name[i+1:j], ",") {
			out = append(out, expand(name[:i]+alt+name[j+1:])...)
		}
		return out
	}
	if strings.Contains(name, "OS_ARCH") {
		var out []string
		for _, p := range Platforms {
			out = append(out, strings.Replace(name, "OS_ARCH", p.OS+"_"+p.Arch, 1))
		}
		return out
	}
	return []string{name}
}

// TestInstallDocsNameReleaseFiles: docs/install.md starts from what a
// release holds. Its table lists every file a release has (SHA256SUMS),
// and every release file that its commands and README.md's name is one a
// release has.
func TestInstallDocsNameReleaseFiles(t *testing.T) {
	root, err := localcluster.RepoRoot(".")
	require.NoError(t, err)
	out := filepath.Join(t.TempDir(), "r")
	r, err := Release(options(t, root, out, tinyBuild(t, root, "tiny")))
	require.NoError(t, err)
	built := map[string]bool{}
	for _, f := range r.Files {
		built[normal(f)] = true
	}

	doc, err := os.ReadFile(filepath.Join(root, "docs", "install.md"))
	require.NoError(t, err)
	section := string(doc)
	start := strings.Index(section, "## What a release holds")
	require.GreaterOrEqual(t, start, 0, "install.md starts from what a release holds")
	require.Less(t, start, strings.Index(section, "## In a cluster"), "before installing in a cluster")
	section = section[start:]
	section = section[:strings.Index(section[3:], "\n## ")+3]
	listed := map[string]bool{}
	for _, row := range strings.Split(section, "\n") {
		if !strings.HasPrefix(row, "| `") {
			continue
		}
		for _, cell := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(strings.Split(row, "|")[1], -1) {
			for _, name := range expand(cell[1]) {
				listed[normal(name)] = true
			}
		}
	}
	for f := range built {
		require.True(t, listed[f], "install.md's table of what a release holds lacks %s", f)
	}

	for _, file := range []string{"docs/install.md", "README.md"} {
		b, err := os.ReadFile(filepath.Join(root, file))
		require.NoError(t, err)
		named := 0
		for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
			for _, m := range releaseFile.FindAllStringSubmatch(block[1], -1) {
				if strings.Contains(m[1], "deploy/") {
					continue // the repository's file, not the release's
				}
				for _, name := range expand(m[2]) {
					require.True(t, built[normal(name)], "%s names %s%s, which a release does not hold", file, m[1], name)
					named++
				}
			}
		}
		require.Positive(t, named, "%s's commands install from a release's files", file)
	}
}
