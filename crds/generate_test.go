package crds

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The committed CRDs are what hack/crdgen makes of the Go types now: it
// runs into a temporary folder and every file must be equal. It needs only
// the module proxy (hack/crdgen's modules, cached after the first run).
func TestGeneratedFilesAreCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs hack/crdgen")
	}
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	out := t.TempDir()
	cmd := exec.Command("go", "run", "-C", filepath.Join(root, "hack", "crdgen"), ".", "-root", root, "-o", out)
	cmd.Env = append(os.Environ(), "GOFLAGS=") // the tool module has its own go.sum
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "hack/crdgen: %s", b)

	fresh, err := filepath.Glob(filepath.Join(out, "*.yaml"))
	require.NoError(t, err)
	require.Len(t, fresh, len(fileNames()), "one generated file per committed one")
	for _, f := range fresh {
		want, err := os.ReadFile(f)
		require.NoError(t, err)
		got, err := files.ReadFile(filepath.Base(f))
		require.NoError(t, err, "%s is generated but not committed: run `make generate`", filepath.Base(f))
		if !bytes.Equal(got, want) {
			t.Errorf("crds/%s is stale: run `make generate` and commit the result", filepath.Base(f))
		}
	}
}
