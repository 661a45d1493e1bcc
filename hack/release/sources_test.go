package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"kontinue.dev/kontinue/hack/installyaml/render"
	"kontinue.dev/kontinue/hack/localcluster"
	"kontinue.dev/kontinue/version"
)

// TestOneVersion: version/VERSION is the one version; what repeats it
// agrees: CHANGELOG.md's newest entry, the chart's version and appVersion
// (which tags the image of the repository's install.yaml), `kontinue
// version` of a build that stamps none, and the Makefile reads the file.
func TestOneVersion(t *testing.T) {
	root, err := localcluster.RepoRoot(".")
	require.NoError(t, err)
	v := version.Next()
	require.Regexp(t, semver, v)

	b, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	require.NoError(t, err)
	require.NotEmpty(t, ChangelogVersions(b))
	require.Equal(t, v, ChangelogVersions(b)[0], "CHANGELOG.md's newest entry")
	require.NoError(t, CheckVersion(root, v))

	b, err = os.ReadFile(filepath.Join(root, "deploy", "chart", "Chart.yaml"))
	require.NoError(t, err)
	var chart struct{ Version, AppVersion string }
	require.NoError(t, yaml.Unmarshal(b, &chart))
	require.Equal(t, strings.TrimPrefix(v, "v"), chart.Version, "Chart.yaml's version")
	require.Equal(t, v, chart.AppVersion, "Chart.yaml's appVersion")

	reg, err := DefaultRegistry(root)
	require.NoError(t, err)
	def, err := render.DefaultImage(root)
	require.NoError(t, err)
	require.Equal(t, reg+"/"+ImageName+":"+v, def, "the image the repository's install.yaml names")
	install, err := os.ReadFile(filepath.Join(root, "deploy", "install.yaml"))
	require.NoError(t, err)
	require.Contains(t, string(install), "image: "+reg+"/"+ImageName+":"+v+"\n")

	require.Equal(t, v+"-dev", version.Version)

	b, err = os.ReadFile(filepath.Join(root, "Makefile"))
	require.NoError(t, err)
	require.Regexp(t, regexp.MustCompile(`(?m)^VERSION\s+\?=\s+\$\(shell cat version/VERSION\)$`), string(b))
}

func TestCheckVersionRefuses(t *testing.T) {
	root, err := localcluster.RepoRoot(".")
	require.NoError(t, err)
	require.ErrorContains(t, CheckVersion(root, "v99.0.0"), "is not version/VERSION's "+version.Next())

	// A version without a CHANGELOG entry: a copy of the repository's
	// changelog whose newest entry is another version.
	fake := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(fake, "CHANGELOG.md"), []byte("# Changelog\n\n## [Unreleased]\n\n## [v0.0.9] - 2026-01-01\n"), 0o644))
	require.ErrorContains(t, CheckVersion(fake, version.Next()), "CHANGELOG.md's newest entry is v0.0.9, not "+version.Next())
}

func TestChangelogVersions(t *testing.T) {
	b := []byte("# Changelog\n\n## [Unreleased]\n\n### Added\n- x\n\n## [v0.2.0] - Unreleased\n\n## [v0.1.0] - 2026-12-01\n\n[v0.1.0]: https://example/v0.1.0\n")
	require.Equal(t, []string{"v0.2.0", "v0.1.0"}, ChangelogVersions(b))
}

// TestDockerfileBuildsTheReleaseImage: the Dockerfile and `make release`
// give the same image, as far as can be told without Docker: the final
// stage is scratch holding only the binary as /kontinue, its entrypoint
// and user are the release image's (and the chart's runAsUser), and the
// binary is built with the release's flags and environment.
func TestDockerfileBuildsTheReleaseImage(t *testing.T) {
	root, err := localcluster.RepoRoot(".")
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	require.NoError(t, err)
	df := dockerfile(string(b))

	var froms []string
	for _, in := range df {
		if in.cmd == "FROM" {
			froms = append(froms, in.args)
		}
	}
	require.NotEmpty(t, froms)
	require.Equal(t, "scratch", froms[len(froms)-1], "the final stage's base")
	final := df[lastIndex(df, "FROM"):]
	require.Equal(t, []string{"--from=build /out/kontinue /kontinue"}, args(final, "COPY"), "the binary alone")
	require.Equal(t, []string{ImageUser}, args(final, "USER"))
	require.Equal(t, []string{`["/kontinue"]`}, args(final, "ENTRYPOINT"))

	// The go build command of the build stage.
	var build []string
	for _, in := range df {
		if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
			build = shellWords(in.args)
		}
	}
	require.NotEmpty(t, build, "a RUN with go build")
	i := indexOf(build, "go")
	require.Greater(t, i, 0)
	require.Equal(t, "build", build[i+1])
	env := build[:i]
	for _, e := range BuildEnv {
		require.Contains(t, env, e, "the build's environment")
	}
	var flags []string
	for _, a := range build[i+2:] {
		if a == "-o" {
			break
		}
		if k, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(k, "-") {
			flags = append(flags, k, v)
		} else {
			flags = append(flags, a)
		}
	}
	require.Equal(t, BuildFlags("${VERSION}"), flags, "the go build flags of the release (BuildFlags)")
	require.Equal(t, "/out/kontinue", build[indexOf(build, "-o")+1])

	// The chart runs the image as its user.
	docs, err := render.RenderChart(root, nil)
	require.NoError(t, err)
	for _, d := range docs {
		var u unstructured.Unstructured
		require.NoError(t, yaml.Unmarshal([]byte(d), &u.Object))
		if u.GetKind() == "Deployment" {
			uid, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "template", "spec", "securityContext", "runAsUser")
			gid, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "template", "spec", "securityContext", "runAsGroup")
			require.Equal(t, ImageUser, fmt.Sprint(uid)+":"+fmt.Sprint(gid), "the chart's runAsUser:runAsGroup")
		}
	}
}

type instruction struct{ cmd, args string }

// dockerfile splits a Dockerfile into instructions, continuation lines
// joined, comments dropped.
func dockerfile(s string) []instruction {
	var out []instruction
	var cur string
	for _, l := range strings.Split(s, "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "#") || (t == "" && cur == "") {
			continue
		}
		if strings.HasSuffix(t, "\\") {
			cur += strings.TrimSuffix(t, "\\") + " "
			continue
		}
		cur += t
		cmd, rest, _ := strings.Cut(cur, " ")
		out = append(out, instruction{strings.ToUpper(cmd), strings.TrimSpace(rest)})
		cur = ""
	}
	return out
}

func lastIndex(df []instruction, cmd string) int {
	i := -1
	for j, in := range df {
		if in.cmd == cmd {
			i = j
		}
	}
	return i
}

func args(df []instruction, cmd string) []string {
	var out []string
	for _, in := range df {
		if in.cmd == cmd {
			out = append(out, in.args)
		}
	}
	return out
}

// shellWords splits a RUN line as sh would for what the Dockerfile uses:
// words, double-quoted parts, the --mount options kept as words.
func shellWords(s string) []string {
	var out []string
	var w strings.Builder
	in, quoted := false, false
	for _, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
			in = true
		case (r == ' ' || r == '\t') && !quoted:
			if in {
				out = append(out, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if in {
		out = append(out, w.String())
	}
	return out
}

func indexOf(s []string, x string) int {
	for i, v := range s {
		if v == x {
			return i
		}
	}
	return -1
}
