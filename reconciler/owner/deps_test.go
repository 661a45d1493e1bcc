package owner

import (
	"go/build"
	"strings"
	"testing"
)

// The owner reconciler is wired by the Manager (reconciler/), never the
// other way round: its imports, transitively, never reach the Manager's
// package. (Today the compiler would refuse the cycle; this keeps the
// rule if the Manager ever reaches the owner package another way.)
func TestOwnerDoesNotImportTheManager(t *testing.T) {
	const root = "kontinue.dev/kontinue/reconciler"
	seen := map[string]bool{}
	var walk func(path, dir string)
	walk = func(path, dir string) {
		if seen[path] {
			return
		}
		seen[path] = true
		if path == root {
			t.Errorf("reconciler/owner depends on %s", root)
			return
		}
		if !strings.HasPrefix(path, "kontinue.dev/kontinue/") {
			return // only Kontinue's own packages can import the Manager's
		}
		pkg, err := build.Default.Import(path, dir, 0)
		if err != nil {
			t.Fatalf("import %s: %v", path, err)
		}
		for _, imp := range pkg.Imports {
			walk(imp, pkg.Dir)
		}
	}
	walk("kontinue.dev/kontinue/reconciler/owner", ".")
}
