package render

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
)

// YttName is the name of the ytt engine.
const YttName = "ytt"

func init() { Register(FieldYtt, Ytt()) }

// Ytt returns the engine that renders spec.ytt with the ytt library built
// into Kontinue (carvel.dev/ytt). Each key of the template context is a data
// value, replaced whole as Cartographer's --data-value-yaml flags do, so
// templates read data.values.workload, data.values.params, ... as in
// Cartographer.
//
// The library runs in a child process of Kontinue's own executable (see
// yttchild.go), not in the controller: a Starlark loop cannot be
// interrupted, and unbounded recursion or a huge list ends the whole
// process with a fatal error that recover cannot catch. The child is killed
// at the deadline and limited in memory; the controller only pays a process
// start, and results are cached by template and context.
func Ytt() Engine { return yttEngine{} }

type yttEngine struct{}

func (yttEngine) Name() string { return YttName }

// yttRequest is what the controller sends the child on stdin.
type yttRequest struct {
	Template string          `json:"template"`
	Values   json.RawMessage `json:"values"` // the template context, a JSON object
}

// Exit codes of the child: yttExitFailed means ytt reported an error (its
// message is on stderr); anything else is the child itself failing.
const (
	yttExitFailed = 3
	yttExitUsage  = 4
)

// Rendered output (or the deterministic failure) by template and context:
// a template's text and context rarely change between reconciles, and a
// render costs a process start.
var yttResults = newLRU(512, 16<<20)

type yttResult struct {
	out []byte
	err error // a *StampError, or a slowError for a while after a time-out
}

func (yttEngine) Render(ctx context.Context, spec *api.TemplateSpec, tc Context) ([]*unstructured.Unstructured, error) {
	if spec == nil || strings.TrimSpace(spec.Ytt) == "" {
		return nil, &StampError{Engine: YttName, Message: "ytt is empty"}
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()

	values, err := contextJSON(map[string]any(tc))
	if err != nil {
		return nil, contextError(YttName, "template context", err)
	}
	key := YttName + "/" + digest([]byte(spec.Ytt)) + "/" + digest(values)
	var res yttResult
	if v, ok := yttResults.get(key); ok {
		res = v.(yttResult)
	} else {
		req, err := json.Marshal(yttRequest{Template: spec.Ytt, Values: values})
		if err != nil {
			return nil, &StampError{Engine: YttName, Message: "template context is not JSON", Err: err}
		}
		ns, _ := ownerOf(tc)
		v, err := bounded(ctx, ns, key, func(runCtx context.Context) (any, error) {
			v, err := runYtt(runCtx, req)
			if errors.Is(err, context.DeadlineExceeded) {
				// Not run again for a while: each run would hold a slot
				// until the deadline.
				yttResults.add(key, yttResult{err: slowError{StampError: timeoutError(YttName, runCtx)}}, 1024, timeoutMemo)
			}
			return v, err
		})
		if err != nil {
			return nil, boundedError(YttName, ctx, err, "ytt failed")
		}
		res = v.(yttResult)
		yttResults.add(key, res, int64(len(res.out)+len(key)+256), 0)
	}
	if res.err != nil {
		return nil, res.err
	}
	d := &objectDecoder{engine: YttName}
	if err := d.decode("ytt output", res.out); err != nil {
		return nil, err
	}
	if len(d.objs) == 0 {
		return nil, &StampError{Engine: YttName, Message: "ytt rendered no object"}
	}
	return d.objs, nil
}

// yttExecutable is the program that runs the child: this very executable.
// /proc/self/exe still works after the file on disk was replaced.
func yttExecutable() (string, error) {
	if runtime.GOOS == "linux" {
		return "/proc/self/exe", nil
	}
	return os.Executable()
}

// runYtt runs one render in a child process. It returns a yttResult for
// every outcome worth caching (output, an error of the template) and an
// error otherwise (deadline, output too large, the child not starting).
func runYtt(ctx context.Context, req []byte) (any, error) {
	exe, err := yttExecutable()
	if err != nil {
		return nil, &StampError{Engine: YttName, Message: "cannot find Kontinue's executable to run ytt", Err: err}
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	out := &limitWriter{ctx: runCtx, max: limits.bytes}
	stdout := &cancelOnError{w: out, cancel: stop}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(runCtx, exe)
	cmd.Stdin = bytes.NewReader(req)
	cmd.Stdout = stdout
	cmd.Stderr = &cappedBuffer{b: &stderr, max: 8 << 10}
	cmd.Dir = "/"
	// Only the switch to the child: not the controller's environment
	// (credentials, tokens), which ytt could otherwise read.
	cmd.Env = []string{yttChildEnv + "=1"}
	cmd.WaitDelay = time.Second
	err = cmd.Run()
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(stdout.err, errTooLarge):
		return nil, errTooLarge
	case err == nil:
		return yttResult{out: out.buf.Bytes()}, nil
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return nil, &StampError{Engine: YttName, Message: "cannot run ytt", Err: err}
	}
	msg := strings.TrimSpace(stderr.String())
	switch {
	case exit.ExitCode() == yttExitFailed:
		// Cartographer's words around the ytt command's own message.
		return yttResult{err: &StampError{Engine: YttName, Message: "unable to apply ytt template: ytt: Error: " + stderr.String()}}, nil
	case strings.Contains(msg, "stack overflow"):
		return yttResult{err: &StampError{Engine: YttName, Message: fmt.Sprintf("ytt failed: the template recursed too deeply (more than %d MiB of stack)", yttMaxStack>>20)}}, nil
	case outOfMemory(msg):
		return yttResult{err: &StampError{Engine: YttName, Message: fmt.Sprintf("ytt failed: the template needs more than %d MiB of memory", yttMaxMemory>>20)}}, nil
	}
	first, _, _ := strings.Cut(msg, "\n")
	if first == "" {
		first = err.Error()
	}
	return nil, &StampError{Engine: YttName, Message: "ytt failed: " + first}
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
