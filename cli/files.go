package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"kontinue.dev/kontinue/reconciler/jsonvalue"
)

// LoadObjects reads YAML or JSON documents from files and folders (recursively,
// *.yaml, *.yml, *.json); "-" is stdin.
func LoadObjects(paths []string, stdin io.Reader) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	read := func(name string, r io.Reader) error {
		d := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
		for {
			// Each document as JSON text first, then decoded as the API
			// server decodes it (integers exact): the decoder's own
			// numbers are float64.
			var raw json.RawMessage
			if err := d.Decode(&raw); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return fmt.Errorf("%s: %w", name, err)
			}
			var m map[string]any
			if err := jsonvalue.Unmarshal(raw, &m); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if len(m) == 0 {
				continue
			}
			u := &unstructured.Unstructured{Object: m}
			if u.IsList() {
				l, err := u.ToList()
				if err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				for i := range l.Items {
					out = append(out, &l.Items[i])
				}
				continue
			}
			if u.GetKind() == "" {
				return fmt.Errorf("%s: a document without kind", name)
			}
			out = append(out, u)
		}
	}
	for _, p := range paths {
		if p == "-" {
			if err := read("stdin", stdin); err != nil {
				return nil, err
			}
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		var files []string
		if fi.IsDir() {
			err = filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
				if err != nil {
					return err
				}
				switch strings.ToLower(filepath.Ext(path)) {
				case ".yaml", ".yml", ".json":
					if !d.IsDir() {
						files = append(files, path)
					}
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
			sort.Strings(files)
		} else {
			files = []string{p}
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			if err := read(f, bytes.NewReader(b)); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
