package step

import (
	"go/build"
	"testing"
)

// The step package decides; it must never be able to talk to the API
// server. Its imports, transitively, hold no client that could.
func TestStepImportsNoAPIClient(t *testing.T) {
	forbidden := map[string]bool{"k8s.io/client-go/dynamic": true, "k8s.io/client-go/rest": true, "k8s.io/client-go/kubernetes": true}
	seen := map[string]bool{}
	var walk func(path, dir string)
	walk = func(path, dir string) {
		if seen[path] {
			return
		}
		seen[path] = true
		if forbidden[path] {
			t.Errorf("reconciler/step depends on %s", path)
			return
		}
		pkg, err := build.Default.Import(path, dir, 0)
		if err != nil {
			return // standard library or not found: no client there
		}
		for _, imp := range pkg.Imports {
			walk(imp, pkg.Dir)
		}
	}
	walk("kontinue.dev/kontinue/reconciler/step", ".")
}
