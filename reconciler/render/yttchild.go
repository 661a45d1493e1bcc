package render

import (
	"encoding/json"
	"fmt"
	uierrs "github.com/cppforlife/go-cli-ui/errors"
	"io"
	"os"
	"sort"
	"strings"

	yttcmd "carvel.dev/ytt/pkg/cmd/template"
	yttui "carvel.dev/ytt/pkg/cmd/ui"
	yttfiles "carvel.dev/ytt/pkg/files"
	// @ytt:toml, as in the ytt command Cartographer runs.
	_ "carvel.dev/ytt/pkg/yttlibraryext"
)

// yttChildEnv, set to 1, makes any executable that links this package a
// ytt renderer (runYtt starts it so): package initialization is the only
// point early enough that works for the controller and test binaries alike.
const yttChildEnv = "KONTINUE_YTT_CHILD"

// Bounds of the child beyond the time and output ones the parent enforces.
const (
	yttMaxMemory = 256 << 20 // data segment, the Go heap included
	yttMaxStack  = 64 << 20  // Go stack of one goroutine: Starlark recursion
)

// yttFile names the template in ytt's messages ("stdin.yml:7 | ..."): the
// name Cartographer's ytt invocation gave it.
const yttFile = "stdin.yml"

func init() {
	asChild(yttChildEnv, yttMaxMemory, yttMaxStack, func() int { return yttChild(os.Stdin, os.Stdout, os.Stderr) })
}

// yttChild reads a yttRequest from in, writes the rendered YAML to out and
// returns the exit code. A failure of the template is yttExitFailed with
// ytt's message on errOut.
func yttChild(in io.Reader, out, errOut io.Writer) int {
	var req yttRequest
	if err := json.NewDecoder(in).Decode(&req); err != nil {
		fmt.Fprintln(errOut, "bad request:", err)
		return yttExitUsage
	}
	text, err := renderYtt(req.Template, req.Values)
	if err != nil {
		// Formatted as the ytt command formats it: Cartographer passed that
		// text on, and its users' tooling (and its suite) read it.
		fmt.Fprintln(errOut, uierrs.NewMultiLineError(err))
		return yttExitFailed
	}
	if _, err := out.Write(text); err != nil {
		return yttExitUsage
	}
	return 0
}

// renderYtt renders one template with the ytt library. Its only file is the
// template itself, so load() finds nothing but the @ytt: modules, and the
// data values come from the request alone: no flag reads a file or the
// environment.
func renderYtt(template string, values json.RawMessage) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(values, &top); err != nil {
		return nil, fmt.Errorf("template context is not a JSON object: %w", err)
	}
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	opts := yttcmd.NewOptions()
	// As Cartographer does: one --data-value-yaml per context key, which
	// adds the key or replaces it whole if the template declares it. JSON
	// is YAML, and a key holds no "." (it would address a nested value).
	for _, k := range keys {
		if strings.ContainsAny(k, ".:") {
			continue
		}
		opts.DataValuesFlags.KVsFromYAML = append(opts.DataValuesFlags.KVsFromYAML, k+"="+string(top[k]))
	}
	file, err := yttfiles.NewFileFromSource(yttfiles.NewBytesSource(yttFile, []byte(template)))
	if err != nil {
		return nil, err
	}
	res := opts.RunWithFiles(yttcmd.Input{Files: []*yttfiles.File{file}}, yttui.NewCustomWriterTTY(false, io.Discard, io.Discard))
	if res.Err != nil {
		return nil, res.Err
	}
	if res.DocSet == nil {
		return nil, nil
	}
	return res.DocSet.AsBytes()
}
