package render

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
)

// An owner's fields a template names but the owner leaves unset. In
// Cartographer a tag reads the owner as its Go type: a field the owner
// leaves unset still exists and holds its type's zero value ("" for a
// string, 0, false, null for a pointer, a list or a map, {} for a struct
// such as a Workload's spec.build), and only what the type does not have
// (a param, a label, a map key, an unknown field, anything below a null
// pointer) is missing. Kontinue reads the owner as stored, so it asks the
// owner kind's schema, as its CRD serves it, what a field is: its type,
// and whether it is nullable (Cartographer's pointers; a struct without
// nullable is one of Cartographer's value structs). metadata is
// metav1.ObjectMeta's, which the CRD does not spell out.

// Schema is an owner kind's schema: what its unset fields hold.
type Schema struct {
	root *field
	keys []string // the template context keys that name the owner
}

// field is one node of a schema.
type field struct {
	typ      string // object, array, string, integer, number, boolean; "": any
	nullable bool
	props    map[string]*field // an object's (a struct's) fields; nil: a map or any value
	required []string
}

// SchemaOf compiles the schema version v of a CRD (an owner kind's:
// Workload, Deliverable or Runnable).
func SchemaOf(crd *unstructured.Unstructured, version string) (*Schema, error) {
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if m["name"] != version {
			continue
		}
		raw, ok, _ := unstructured.NestedMap(m, "schema", "openAPIV3Schema")
		if !ok {
			return nil, fmt.Errorf("CRD %s: version %s has no schema", crd.GetName(), version)
		}
		root := compileField(raw)
		if root.props == nil {
			root.props = map[string]*field{}
		}
		root.props["metadata"] = goField(reflect.TypeOf(metav1.ObjectMeta{}))
		keys := []string{"workload", "deliverable"}
		if kind == api.KindRunnable {
			keys = []string{"runnable"}
		}
		return &Schema{root: root, keys: keys}, nil
	}
	return nil, fmt.Errorf("CRD %s serves no version %s", crd.GetName(), version)
}

func compileField(m map[string]any) *field {
	f := &field{}
	f.typ, _ = m["type"].(string)
	f.nullable, _ = m["nullable"].(bool)
	if props, ok := m["properties"].(map[string]any); ok {
		f.props = make(map[string]*field, len(props))
		for k, v := range props {
			if pm, ok := v.(map[string]any); ok {
				f.props[k] = compileField(pm)
			}
		}
	}
	if req, ok := m["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				f.required = append(f.required, s)
			}
		}
	}
	return f
}

var marshaler = reflect.TypeOf((*json.Marshaler)(nil)).Elem()

// goField is the schema of a Go type as encoding/json writes it: what
// Cartographer's typed owner holds.
func goField(t reflect.Type) *field {
	if t.Implements(marshaler) || reflect.PointerTo(t).Implements(marshaler) {
		return &field{nullable: true} // e.g. metav1.Time: null when zero
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
		return &field{nullable: true}
	case reflect.String:
		return &field{typ: "string"}
	case reflect.Bool:
		return &field{typ: "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return &field{typ: "integer"}
	case reflect.Float32, reflect.Float64:
		return &field{typ: "number"}
	case reflect.Struct:
		f := &field{typ: "object", props: map[string]*field{}}
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			name, opts, _ := strings.Cut(sf.Tag.Get("json"), ",")
			if !sf.IsExported() || name == "-" || name == "" {
				continue
			}
			f.props[name] = goField(sf.Type)
			if !strings.Contains(opts, "omitempty") {
				f.required = append(f.required, name)
			}
		}
		return f
	}
	return &field{}
}

// zero is what an unset field holds, and whether a tag may read below it
// (a struct); ok is false for a field without a known zero value.
func (f *field) zero() (v any, below, ok bool) {
	if f.nullable {
		return nil, false, true
	}
	switch f.typ {
	case "string":
		return "", false, true
	case "integer", "number":
		return int64(0), false, true
	case "boolean":
		return false, false, true
	case "array":
		return nil, false, true
	case "object":
		if f.props == nil {
			return nil, false, true // a map
		}
		s := map[string]any{}
		for _, r := range f.required {
			if p := f.props[r]; p != nil {
				if z, _, ok := p.zero(); ok {
					s[r] = z
				}
			}
		}
		return s, true, true
	}
	return nil, false, false
}

// Unset returns what the owner field named by keys (a tag's member names,
// the first the context key that names the owner, e.g. "workload") holds
// when the owner leaves it, or a field above it, unset: ok is false when
// the owner's type has no such field, or it lies below a map key or a null
// pointer, which a tag cannot read either. Only the owner's spec and
// metadata, what people write: its status is Kontinue's own (not
// Cartographer's type), and a Runnable's is not in its context at all.
func (s *Schema) Unset(owner map[string]any, keys []string) (any, bool) {
	if s == nil || len(keys) < 2 || !s.names(keys[0]) || keys[1] != "spec" && keys[1] != "metadata" {
		return nil, false
	}
	f := s.root
	var cur any = owner
	for i, k := range keys[1:] {
		if f.props == nil {
			return nil, false // a map: its keys are data, not fields
		}
		child := f.props[k]
		if child == nil {
			return nil, false
		}
		last := i == len(keys)-2
		if m, ok := cur.(map[string]any); ok {
			if v, present := m[k]; present {
				if last || v == nil {
					// Present: the tag found it, or nothing lies below null.
					return v, last
				}
				cur, f = v, child
				continue
			}
		} else if cur != nil {
			return nil, false
		}
		z, below, ok := child.zero()
		if !ok || last {
			return z, ok
		}
		if !below {
			return nil, false
		}
		cur, f = z, child
	}
	return nil, false
}

func (s *Schema) names(key string) bool {
	for _, k := range s.keys {
		if k == key {
			return true
		}
	}
	return false
}

type schemaKey struct{}

// WithSchema returns ctx carrying the owner kind's schema for the engines
// (the $(…)$ engine reads unset owner fields with it).
func WithSchema(ctx context.Context, s *Schema) context.Context {
	if s == nil {
		return ctx
	}
	return context.WithValue(ctx, schemaKey{}, s)
}

// SchemaFrom returns the schema in ctx, or nil.
func SchemaFrom(ctx context.Context) *Schema {
	s, _ := ctx.Value(schemaKey{}).(*Schema)
	return s
}
