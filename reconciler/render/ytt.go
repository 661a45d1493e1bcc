package render

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"kontinue.dev/kontinue/reconciler/api"
)

// YttName is the name of the ytt engine.
const YttName = "ytt"

func init() { Register(FieldYtt, Ytt()) }

// Ytt returns the engine that renders spec.ytt with a `ytt` binary found on
// PATH at render time; ytt has no Go module that can be built here, so
// without the binary every ytt template fails with a clear StampError. The
// template goes on stdin and the context is a data values file, so
// templates read data.values.workload, data.values.params, ... as in
// Cartographer.
func Ytt() Engine { return yttEngine{} }

type yttEngine struct{}

func (yttEngine) Name() string { return YttName }

func (yttEngine) Render(ctx context.Context, spec *api.TemplateSpec, tc Context) ([]*unstructured.Unstructured, error) {
	if spec == nil || strings.TrimSpace(spec.Ytt) == "" {
		return nil, &StampError{Engine: YttName, Message: "ytt is empty"}
	}
	bin, err := exec.LookPath("ytt")
	if err != nil {
		return nil, &StampError{Engine: YttName, Message: unavailable[FieldYtt]}
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()

	doc, err := appendJSON(nil, map[string]any(tc), 0)
	if err != nil {
		return nil, &StampError{Engine: YttName, Message: "template context is not JSON", Err: err}
	}
	values, err := yaml.JSONToYAML(doc)
	if err != nil {
		return nil, &StampError{Engine: YttName, Message: "template context is not JSON", Err: err}
	}
	dir, err := os.MkdirTemp("", "kontinue-ytt-")
	if err != nil {
		return nil, &StampError{Engine: YttName, Message: "cannot write the data values for ytt", Err: err}
	}
	defer func() { _ = os.RemoveAll(dir) }()
	// The first data values document may add keys; match-child-defaults
	// lets it add them also when the template declares data values too.
	file := filepath.Join(dir, "values.yml")
	content := append([]byte("#@data/values\n#@overlay/match-child-defaults missing_ok=True\n---\n"), values...)
	if err := os.WriteFile(file, content, 0o600); err != nil {
		return nil, &StampError{Engine: YttName, Message: "cannot write the data values for ytt", Err: err}
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	out := &limitWriter{ctx: runCtx, max: limits.bytes}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(runCtx, bin, "-f", "-", "-f", file)
	cmd.Stdin = strings.NewReader(spec.Ytt)
	stdout := &cancelOnError{w: out, cancel: stop}
	cmd.Stdout = stdout
	cmd.Stderr = &cappedBuffer{b: &stderr, max: 8 << 10}
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + dir} // not the controller's environment
	cmd.WaitDelay = time.Second
	err = cmd.Run()
	switch {
	case ctx.Err() != nil:
		return nil, timeoutError(YttName, ctx)
	case errors.Is(stdout.err, errTooLarge):
		return nil, tooLarge(YttName)
	case err != nil:
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return nil, &StampError{Engine: YttName, Message: "ytt failed: " + msg}
	}
	d := &objectDecoder{engine: YttName}
	if err := d.decode("ytt output", out.buf.Bytes()); err != nil {
		return nil, err
	}
	if len(d.objs) == 0 {
		return nil, &StampError{Engine: YttName, Message: "ytt rendered no object"}
	}
	return d.objs, nil
}

// cancelOnError kills the process as soon as its output is refused, rather
// than at the deadline.
type cancelOnError struct {
	w      *limitWriter
	cancel context.CancelFunc
	err    error
}

func (c *cancelOnError) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if err != nil && c.err == nil {
		c.err = err
		c.cancel()
	}
	return n, err
}

// cappedBuffer keeps the first max bytes written and drops the rest.
type cappedBuffer struct {
	b   *bytes.Buffer
	max int
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if room := c.max - c.b.Len(); room > 0 {
		c.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
