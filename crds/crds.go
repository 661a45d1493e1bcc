// Package crds holds the CustomResourceDefinitions of Kontinue's
// carto.run/v1alpha1 kinds. Their source is Go: the kinds in kinds.go, with
// the spec and status types the controller uses (reconciler/api,
// reconciler/status). hack/crdgen generates the YAML files next to this one
// from them (`make generate`; a test fails when they are stale), one per
// kind, and they are embedded so that the binary can install them.
//
// +groupName=carto.run
// +versionName=v1alpha1
package crds

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

//go:embed *.yaml
var files embed.FS

// fileNames lists the embedded CRD files in name order. Files are named
// carto.run_<plural>.yaml and CRDs <plural>.carto.run, so this is also the
// order of the CRD names.
func fileNames() []string {
	names, err := fs.Glob(files, "*.yaml")
	if err != nil {
		// Only a malformed pattern fails, and the pattern is a constant.
		return nil
	}
	sort.Strings(names)
	return names
}

// All returns every CRD as an unstructured object, sorted by name.
func All() ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, name := range fileNames() {
		obj, err := parse(name)
		if err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out, nil
}

func parse(name string) (*unstructured.Unstructured, error) {
	b, err := files.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("crds: read %s: %w", name, err)
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return nil, fmt.Errorf("crds: %s is not valid YAML: %w", name, err)
	}
	obj := &unstructured.Unstructured{}
	// UnmarshalJSON keeps integers as int64, as objects read from the API server do.
	if err := obj.UnmarshalJSON(j); err != nil {
		return nil, fmt.Errorf("crds: %s is not a Kubernetes object: %w", name, err)
	}
	return obj, nil
}

// YAML returns all CRDs as one multi-document YAML stream (for `kontinue crds`),
// in the same order as All.
func YAML() []byte {
	var buf bytes.Buffer
	for _, name := range fileNames() {
		b, err := files.ReadFile(name)
		if err != nil {
			// Embedded files are always readable; skip rather than panic.
			continue
		}
		buf.WriteString("---\n")
		buf.Write(bytes.TrimRight(document(b), "\n"))
		buf.WriteString("\n")
	}
	return buf.Bytes()
}

// document is a generated file without its header: the comment lines and
// the "---" that open it.
func document(b []byte) []byte {
	for len(b) > 0 && b[0] == '#' {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return nil
		}
		b = b[i+1:]
	}
	return bytes.TrimPrefix(b, []byte("---\n"))
}
