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
	require.NoError(t, os.Mkdir(filepath.Join(out, "notification"), 0o755))
	cmd := exec.Command("go", "run", "-C", filepath.Join(root, "hack", "crdgen"), ".", "-root", root, "-o", out)
	cmd.Env = append(os.Environ(), "GOFLAGS=") // the tool module has its own go.sum
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "hack/crdgen: %s", b)

	for _, group := range []struct {
		dir  string
		have []string
	}{{"", fileNames()}, {"notification", ownFileNames()}} {
		fresh, err := filepath.Glob(filepath.Join(out, group.dir, "*.yaml"))
		require.NoError(t, err)
		require.Len(t, fresh, len(group.have), "one generated file per committed one")
		for _, f := range fresh {
			name := filepath.ToSlash(filepath.Join(group.dir, filepath.Base(f)))
			want, err := os.ReadFile(f)
			require.NoError(t, err)
			got, err := files.ReadFile(name)
			require.NoError(t, err, "%s is generated but not committed: run `make generate`", name)
			if !bytes.Equal(got, want) {
				t.Errorf("crds/%s is stale: run `make generate` and commit the result", name)
			}
		}
	}
}
