package render

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// What an engine rendered, bounded and decoded: the text up to
// limits.bytes (limitWriter), its YAML or JSON documents to objects
// (objectDecoder).

// limitWriter collects rendered text up to limits.bytes and fails the
// write past it, or once ctx has ended: a template that writes stops there.
type limitWriter struct {
	ctx context.Context
	buf bytes.Buffer
	max int
}

var errTooLarge = errors.New("rendered output is too large")

func (w *limitWriter) Write(p []byte) (int, error) {
	if err := w.ctx.Err(); err != nil {
		return 0, err
	}
	if w.buf.Len()+len(p) > w.max {
		return 0, errTooLarge
	}
	return w.buf.Write(p)
}

func tooLarge(engine string) *StampError {
	return &StampError{Engine: engine, Message: fmt.Sprintf("%s rendered more than %d bytes", engine, limits.bytes)}
}

// objectDecoder turns rendered YAML documents into objects, counting them
// against limits.objects.
type objectDecoder struct {
	engine string
	objs   []*unstructured.Unstructured
	// keep: docs collects each document as JSON, for a child renderer to
	// hand the parent (which decodes them with decodeJSON).
	keep bool
	docs []jsonDoc
}

// jsonDoc is one rendered document as JSON, and where it comes from.
type jsonDoc struct {
	Where string          `json:"where"`
	JSON  json.RawMessage `json:"json"`
}

// decode adds the objects of a YAML stream; source names it in messages
// (a template file of a chart, "goTemplate", ...). Empty documents are
// skipped; a `kind: List` adds its items.
func (d *objectDecoder) decode(source string, text []byte) error {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(text)))
	for n := 1; ; n++ {
		doc, err := r.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &StampError{Engine: d.engine, Message: fmt.Sprintf("%s: cannot split the rendered YAML", source), Err: err}
		}
		where := source
		if n > 1 {
			where = fmt.Sprintf("%s (document %d)", source, n)
		}
		if err := d.decodeDoc(where, doc); err != nil {
			return err
		}
	}
}

func (d *objectDecoder) decodeDoc(where string, doc []byte) error {
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return &StampError{Engine: d.engine, Message: fmt.Sprintf("%s is not valid YAML", where), Err: err}
	}
	if d.keep {
		d.docs = append(d.docs, jsonDoc{Where: where, JSON: j})
	}
	return d.decodeJSON(where, j)
}

// decodeJSON adds the objects of one document given as JSON.
func (d *objectDecoder) decodeJSON(where string, j []byte) error {
	if s := string(bytes.TrimSpace(j)); s == "null" || s == "" {
		return nil
	}
	var obj map[string]any
	// utiljson keeps integers as int64, as unstructured objects hold them.
	if err := utiljson.Unmarshal(j, &obj); err != nil {
		return &StampError{Engine: d.engine, Message: fmt.Sprintf("%s does not render an object (a YAML mapping)", where), Err: err}
	}
	if obj["kind"] == "List" && obj["apiVersion"] == "v1" {
		items, _ := obj["items"].([]any)
		for i, it := range items {
			m, ok := it.(map[string]any)
			if !ok {
				return &StampError{Engine: d.engine, Message: fmt.Sprintf("%s: List item %d is not an object", where, i)}
			}
			if err := d.add(fmt.Sprintf("%s (List item %d)", where, i), m); err != nil {
				return err
			}
		}
		return nil
	}
	return d.add(where, obj)
}

func (d *objectDecoder) add(where string, obj map[string]any) error {
	for _, f := range []string{"apiVersion", "kind"} {
		if s, ok := obj[f].(string); !ok || s == "" {
			return &StampError{Engine: d.engine, Message: fmt.Sprintf("%s renders an object without apiVersion/kind: %s must be a non-empty string", where, f)}
		}
	}
	if len(d.objs) >= limits.objects {
		return &StampError{Engine: d.engine, Message: fmt.Sprintf("%s rendered more than %d objects", d.engine, limits.objects)}
	}
	d.objs = append(d.objs, &unstructured.Unstructured{Object: obj})
	return nil
}

// copyObjects deep-copies shared render results: the caller modifies what
// it gets (namespace, labels).
func copyObjects(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		out[i] = o.DeepCopy()
	}
	return out
}
