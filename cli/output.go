package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"

	"k8s.io/client-go/util/jsonpath"
	"sigs.k8s.io/yaml"
)

// Output formats of `get`.
const (
	outDefault       = "" // a tree for one owner or chain, else a table
	outWide          = "wide"
	outName          = "name"
	outJSON          = "json"
	outYAML          = "yaml"
	outJSONPath      = "jsonpath"
	outCustomColumns = "custom-columns"
)

// output is a parsed -o.
type output struct {
	format  string
	jp      *jsonpath.JSONPath
	columns []column
}

type column struct {
	header string
	jp     *jsonpath.JSONPath
}

// parseOutput reads -o: tree (the default), wide, name, json, yaml,
// jsonpath=TEMPLATE, custom-columns=HEADER:PATH,...
func parseOutput(s string) (output, error) {
	kind, arg, hasArg := strings.Cut(s, "=")
	switch kind {
	case "", "tree", "table":
		if !hasArg {
			return output{format: outDefault}, nil
		}
	case outWide, outName, outJSON, outYAML:
		if !hasArg {
			return output{format: kind}, nil
		}
	case outJSONPath:
		if arg == "" {
			return output{}, usagef("-o jsonpath= needs a template, e.g. -o jsonpath='{.items[*].name}'")
		}
		jp := jsonpath.New("output").AllowMissingKeys(true)
		if err := jp.Parse(arg); err != nil {
			return output{}, usagef("-o jsonpath: %v", err)
		}
		return output{format: outJSONPath, jp: jp}, nil
	case outCustomColumns:
		cols, err := parseColumns(arg)
		if err != nil {
			return output{}, err
		}
		return output{format: outCustomColumns, columns: cols}, nil
	}
	return output{}, usagef("-o %q: want tree, wide, name, json, yaml, jsonpath=TEMPLATE or custom-columns=HEADER:PATH,...", s)
}

// parseColumns reads custom-columns: HEADER:PATH pairs separated by commas;
// a path without braces is taken as {PATH}, as kubectl does.
func parseColumns(spec string) ([]column, error) {
	if spec == "" {
		return nil, usagef("-o custom-columns= needs columns, e.g. -o custom-columns=NAME:.name,READY:.ready.status")
	}
	var cols []column
	for _, part := range strings.Split(spec, ",") {
		header, path, ok := strings.Cut(part, ":")
		if !ok || header == "" || path == "" {
			return nil, usagef("-o custom-columns: %q is not HEADER:PATH", part)
		}
		if !strings.HasPrefix(path, "{") {
			if !strings.HasPrefix(path, ".") {
				path = "." + path
			}
			path = "{" + path + "}"
		}
		jp := jsonpath.New(header).AllowMissingKeys(true)
		if err := jp.Parse(path); err != nil {
			return nil, usagef("-o custom-columns: column %s: %v", header, err)
		}
		cols = append(cols, column{header: header, jp: jp})
	}
	return cols, nil
}

// structured reports whether the format prints the documents (so that
// every field must be read, e.g. a step's Runnable).
func (o output) structured() bool {
	switch o.format {
	case outJSON, outYAML, outJSONPath, outCustomColumns:
		return true
	}
	return false
}

// toDoc turns a Go value into the generic JSON form jsonpath walks.
func toDoc(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var doc any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return doc, d.Decode(&doc)
}

// printDoc prints one document (an object or a list) in a structured
// format. items are the list's items for custom-columns (nil: doc is one
// object).
func (o output) printDoc(w io.Writer, doc any, items []any) error {
	switch o.format {
	case outJSON:
		return writeJSON(w, doc)
	case outYAML:
		return writeYAML(w, doc)
	case outJSONPath:
		d, err := toDoc(doc)
		if err != nil {
			return err
		}
		return o.jp.Execute(w, d)
	case outCustomColumns:
		if items == nil {
			items = []any{doc}
		}
		return o.printColumns(w, items, true)
	}
	return fmt.Errorf("format %q is not structured", o.format)
}

// printColumns prints items as custom columns.
func (o output) printColumns(w io.Writer, items []any, header bool) error {
	var h []string
	for _, c := range o.columns {
		h = append(h, c.header)
	}
	t := newTable(h...)
	for _, it := range items {
		d, err := toDoc(it)
		if err != nil {
			return err
		}
		var row []cell
		for _, c := range o.columns {
			v, err := columnValue(c.jp, d)
			if err != nil {
				return err
			}
			row = append(row, plain(v))
		}
		t.add(row...)
	}
	if !header {
		var b bytes.Buffer
		if err := t.write(&b, false); err != nil {
			return err
		}
		_, rest, _ := strings.Cut(b.String(), "\n")
		_, err := io.WriteString(w, rest)
		return err
	}
	return t.write(w, false)
}

// columnValue evaluates a column's path: several values are joined by
// commas, none is <none>, as kubectl prints them.
func columnValue(jp *jsonpath.JSONPath, doc any) (string, error) {
	res, err := jp.FindResults(doc)
	if err != nil {
		return "", err
	}
	var vals []string
	for _, r := range res {
		for _, v := range r {
			if !v.IsValid() || (v.CanInterface() && v.Interface() == nil) {
				continue
			}
			var b bytes.Buffer
			if err := jp.PrintResults(&b, []reflect.Value{v}); err != nil {
				return "", err
			}
			vals = append(vals, b.String())
		}
	}
	if len(vals) == 0 {
		return "<none>", nil
	}
	return strings.Join(vals, ","), nil
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func writeYAML(w io.Writer, v any) error {
	b, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}
