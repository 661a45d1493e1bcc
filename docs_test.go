package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// docs reads the Markdown files users read: README.md and docs/*.md.
func docs(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("docs", "*.md"))
	require.NoError(t, err)
	out := map[string]string{}
	for _, f := range append(files, "README.md") {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		out[f] = string(b)
	}
	require.Greater(t, len(out), 10)
	return out
}

// section is the text of a Markdown section, from its heading to the next
// of the same level.
func section(t *testing.T, doc, heading string) string {
	t.Helper()
	i := strings.Index(doc, "\n"+heading+"\n")
	require.GreaterOrEqual(t, i, 0, heading)
	s := doc[i+1+len(heading):]
	level := heading[:strings.Index(heading, " ")+1]
	if j := strings.Index(s, "\n"+level); j >= 0 {
		s = s[:j]
	}
	return s
}

// TestDocsDashboardWrites: docs/cli.md's `kontinue dashboard` says what it
// writes: every POST the dashboard's server answers is named there, so a
// new write cannot come without its line.
func TestDocsDashboardWrites(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("dashboard", "http.go"))
	require.NoError(t, err)
	posts := regexp.MustCompile(`HandleFunc\("POST (/[^"]+)"`).FindAllStringSubmatch(string(src), -1)
	require.NotEmpty(t, posts)
	cli := strings.Join(strings.Fields(section(t, docs(t)["docs/cli.md"], "## `kontinue dashboard`")), " ")
	for _, p := range posts {
		require.Contains(t, cli, "`POST "+p[1]+"`", "docs/cli.md's dashboard section names the write %s", p[1])
	}
}

// TestDocsReadTheLeadersLog: no doc sends a reader to `kubectl logs
// deployment/kontinue` for an owner's lines: that reads any replica, often
// a standby. They read the Lease holder's Pod (e2e/release checks that the
// holder is the Pod's name).
func TestDocsReadTheLeadersLog(t *testing.T) {
	grepped := regexp.MustCompile(`logs (deploy|deployment)/kontinue[^\n]*\|\s*grep`)
	for f, d := range docs(t) {
		require.False(t, grepped.MatchString(d), "%s greps the log of any replica: %s", f, grepped.FindString(d))
	}
	for _, f := range []string{"docs/operations.md", "docs/cli.md", "docs/install.md"} {
		require.Contains(t, docs(t)[f], "{.spec.holderIdentity}", "%s says how to find the leader's Pod", f)
	}
}

// TestDocsVersionsAgree: what the docs say of pinned versions and results
// is what the repository has: a module named with a version is go.mod's
// version, and migration.md's conformance result is conformance.md's.
func TestDocsVersionsAgree(t *testing.T) {
	gomod, err := os.ReadFile("go.mod")
	require.NoError(t, err)
	required := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s+([a-z0-9.-]+\.[a-z]+/\S+) (v\S+)`).FindAllStringSubmatch(string(gomod), -1) {
		required[m[1]] = m[2]
	}
	named := regexp.MustCompile("`([a-z0-9.-]+\\.[a-z]+/[A-Za-z0-9./_-]+)` (v\\d+\\.\\d+\\.\\d+)")
	checked := 0
	for f, d := range docs(t) {
		for _, m := range named.FindAllStringSubmatch(d, -1) {
			if want, ok := required[m[1]]; ok {
				require.Equal(t, want, m[2], "%s names %s %s; go.mod requires %s", f, m[1], m[2], want)
				checked++
			}
		}
	}
	require.Positive(t, checked)

	all := docs(t)
	total := 0
	for _, m := range regexp.MustCompile(`(?m)^\| (?:runnable|supplychain|delivery) \| (\d+) \| (\d+) \|$`).FindAllStringSubmatch(all["docs/conformance.md"], -1) {
		require.Equal(t, m[1], m[2], "conformance.md: a suite with failing folders")
		n, _ := strconv.Atoi(m[1])
		total += n
	}
	require.Positive(t, total)
	require.Contains(t, all["docs/migration.md"], "all "+strconv.Itoa(total)+" folders pass", "migration.md states conformance.md's result")
}
