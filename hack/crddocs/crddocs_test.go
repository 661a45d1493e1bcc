package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"kontinue.dev/kontinue/hack/localcluster"
)

func TestCRDDocsUpToDate(t *testing.T) {
	want, err := Generate()
	require.NoError(t, err)
	root, err := localcluster.RepoRoot(".")
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(root, "docs", "crds.md"))
	require.NoError(t, err)
	if !bytes.Equal(got, want) {
		t.Fatal("docs/crds.md is stale: run `go generate .` (or go run ./hack/crddocs) and commit the result")
	}
}

func TestCRDDocsCoverFields(t *testing.T) {
	b, err := Generate()
	require.NoError(t, err)
	doc := string(b)
	for _, row := range []string{
		"| `spec.serviceAccountName` |",
		"| `status.resources[].stampedRef.resource` |",
		"| `spec.resources[].templateRef.options[].passThrough` |",
		"| `spec.healthRule.multiMatch.healthy.matchFields[].key` |",
		"| `spec.observedCompletion.succeeded` |",
	} {
		require.Contains(t, doc, row)
	}
	require.Equal(t, 13, strings.Count(doc, "\n## "), "one section per kind: carto.run's eleven, Provider and Alert")
}
