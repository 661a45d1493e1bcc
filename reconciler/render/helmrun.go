package render

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"
)

// Lookup answers Helm's `lookup` function: the object apiVersion/kind
// namespace/name, or the list of them when name is empty, as the owner's
// service account reads it. (nil, nil) means not found. Engines find it in
// the context.Context given to Render; without one, `lookup` finds nothing,
// as with `helm template`.
type Lookup interface {
	Lookup(ctx context.Context, apiVersion, kind, namespace, name string) (map[string]any, error)
}

type lookupKey struct{}

// WithLookup returns ctx carrying l for the helm engine.
func WithLookup(ctx context.Context, l Lookup) context.Context {
	return context.WithValue(ctx, lookupKey{}, l)
}

func lookupFrom(ctx context.Context) Lookup {
	l, _ := ctx.Value(lookupKey{}).(Lookup)
	return l
}

// runHelm renders one request in a child process (see helmchild.go) and
// answers its lookups. It returns the child's result, or an error when the
// child did not give one (deadline, output too large, out of memory).
func runHelm(ctx context.Context, req *helmRequest, lk Lookup, ns string) (*helmResultMsg, error) {
	exe, err := yttExecutable()
	if err != nil {
		return nil, &StampError{Engine: HelmName, Message: "cannot find Kontinue's executable to render the chart", Err: err}
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(runCtx, exe)
	cmd.Stderr = &cappedBuffer{b: &stderr, max: 8 << 10}
	cmd.Dir = "/"
	// Only the switch to the child: not the controller's environment
	// (credentials, tokens).
	cmd.Env = []string{helmChildEnv + "=1"}
	cmd.WaitDelay = time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, &StampError{Engine: HelmName, Message: "cannot run the chart renderer", Err: err}
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, &StampError{Engine: HelmName, Message: "cannot run the chart renderer", Err: err}
	}
	if err := cmd.Start(); err != nil {
		return nil, &StampError{Engine: HelmName, Message: "cannot run the chart renderer", Err: err}
	}
	enc := json.NewEncoder(stdin)
	// JSON escaping may double the rendered text; past that, the child is
	// stopped rather than read on.
	out := &boundedReader{r: stdout, left: 2*int64(req.MaxBytes) + 1<<20}
	dec := json.NewDecoder(out)
	res := &helmResultMsg{}
	var done bool
	if err := enc.Encode(req); err == nil {
		for {
			var m helmMessage
			if err := dec.Decode(&m); err != nil {
				break
			}
			if m.Lookup != nil {
				res.lookedUp = true
				if err := enc.Encode(answerLookup(ctx, lk, ns, *m.Lookup)); err != nil {
					break
				}
				continue
			}
			res.helmMessage, done = m, m.Done
			break
		}
	}
	_ = stdin.Close()
	if !done {
		stop()
	}
	werr := cmd.Wait()
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case out.exceeded:
		return nil, errTooLarge
	case done:
		for _, d := range res.Docs {
			res.size += len(d.Text)
		}
		return res, nil
	}
	msg := strings.TrimSpace(stderr.String())
	switch {
	case strings.Contains(msg, "stack overflow"):
		return nil, &StampError{Engine: HelmName, Message: fmt.Sprintf("the chart failed to render: its templates recursed too deeply (more than %d MiB of stack)", helmMaxStack>>20)}
	case outOfMemory(msg):
		return nil, &StampError{Engine: HelmName, Message: fmt.Sprintf("the chart failed to render: its templates need more than %d MiB of memory (a huge count given to until, seq, repeat or the like?)", helmMaxMemory>>20)}
	}
	first, _, _ := strings.Cut(msg, "\n")
	if first == "" && werr != nil {
		first = werr.Error()
	}
	return nil, &StampError{Engine: HelmName, Message: "the chart renderer failed: " + first}
}

// helmResultMsg is the child's result with what the parent saw of it.
type helmResultMsg struct {
	helmMessage
	lookedUp bool // the render called `lookup`
	size     int  // bytes of rendered text
}

// answerLookup answers one `lookup` of a chart: only in the owner's
// namespace (an empty namespace means it), only namespaced kinds (the Lookup
// refuses the others), as the owner's service account.
func answerLookup(ctx context.Context, lk Lookup, ns string, l helmLookup) helmAnswer {
	if lk == nil {
		return helmAnswer{NotFound: true}
	}
	if l.Namespace == "" {
		l.Namespace = ns
	}
	what := fmt.Sprintf("lookup of %s [%s] in namespace [%s]", l.Kind, l.Name, l.Namespace)
	if l.Name == "" {
		what = fmt.Sprintf("lookup of all %s in namespace [%s]", l.Kind, l.Namespace)
	}
	if l.Namespace != ns {
		return helmAnswer{Err: fmt.Sprintf("%s: lookup is answered only in the owner's namespace [%s]", what, ns)}
	}
	o, err := lk.Lookup(ctx, l.APIVersion, l.Kind, l.Namespace, l.Name)
	switch {
	case err != nil:
		return helmAnswer{Err: fmt.Sprintf("%s: %v", what, err)}
	case o == nil:
		return helmAnswer{NotFound: true}
	}
	return helmAnswer{Object: o}
}

// boundedReader reads at most left bytes, then fails.
type boundedReader struct {
	r        io.Reader
	left     int64
	exceeded bool
}

var errReadBound = errors.New("output bound reached")

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		b.exceeded = true
		return 0, errReadBound
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}
