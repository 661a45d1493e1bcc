package render

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// childPool keeps long-lived renderer processes of Kontinue's own
// executable (started with env=1), each bounded as the one-shot ytt and
// Helm children are: capped memory and stack, no environment, killed at
// the deadline of the request it is working on. A child answers one
// request at a time; the render slots bound how many work at once, and at
// most maxIdle wait for work, each for at most idleTimeout.
//
// Reusing a child takes a process start off every render (about 20 ms
// against well under 1 ms for the exchange). A render cannot leave
// anything behind in a child for the next one: templates share no state,
// and a child that grew its memory exits after its answer (Retire).
type childPool struct {
	env         string
	maxIdle     int
	idleTimeout time.Duration

	mu    sync.Mutex
	idle  []*child // most recently used last
	timer *time.Timer

	started   atomic.Int64 // processes started
	exchanges atomic.Int64 // requests answered
}

func newChildPool(env string) *childPool {
	return &childPool{env: env, maxIdle: limits.running, idleTimeout: 30 * time.Second}
}

// child is one renderer process.
type child struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	w      *bufio.Writer
	out    *bufio.Reader
	stderr bytes.Buffer // the first 8 KiB; read after wait
	used   time.Time

	waitOnce sync.Once
	waitErr  error
}

// errChildGone: the child ended without answering.
var errChildGone = errors.New("the renderer ended without answering")

// exchange sends the frames of req to a child and reads its answer with
// read, which says whether the child exits after it (retiring). ctx ends
// the exchange: the child is killed then, and the error is ctx's. When the
// child ends otherwise, the error is a childFailure with what it wrote on
// stderr.
func (p *childPool) exchange(ctx context.Context, req [][]byte, read func(*bufio.Reader) (retiring bool, err error)) error {
	for attempt := 0; ; attempt++ {
		c, reused, err := p.get()
		if err != nil {
			return err
		}
		retiring, err := c.roundTrip(ctx, req, read)
		if err == nil {
			p.exchanges.Add(1)
			if retiring {
				c.close()
			} else {
				p.put(c)
			}
			return nil
		}
		c.kill()
		werr := c.wait()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		stderr := strings.TrimSpace(c.stderr.String())
		if reused && attempt == 0 && stderr == "" && !errors.Is(err, errFrameTooLarge) {
			// An idle child that was ended meanwhile (the kernel's OOM
			// killer picks renderers first): once more on a new one.
			continue
		}
		return &childFailure{err: err, exit: werr, stderr: stderr}
	}
}

// childFailure is a child that ended without a complete answer.
type childFailure struct {
	err    error // of the exchange
	exit   error // of the process
	stderr string
}

func (f *childFailure) Error() string {
	if first, _, _ := strings.Cut(f.stderr, "\n"); first != "" {
		return first
	}
	if f.exit != nil {
		return f.exit.Error()
	}
	return f.err.Error()
}

func (f *childFailure) Unwrap() error { return f.err }

// roundTrip writes one request and reads one answer; ctx's end kills the
// child, which ends both.
func (c *child) roundTrip(ctx context.Context, req [][]byte, read func(*bufio.Reader) (bool, error)) (bool, error) {
	stop := context.AfterFunc(ctx, c.kill)
	var err error
	for _, f := range req {
		if err = writeFrame(c.w, f); err != nil {
			break
		}
	}
	if err == nil {
		err = c.w.Flush()
	}
	var retiring bool
	if err == nil {
		retiring, err = read(c.out)
	}
	if !stop() && err == nil {
		err = ctx.Err() // killed as it answered: the answer is late
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = errChildGone
	}
	return retiring, err
}

// get returns an idle child (reused) or starts one.
func (p *childPool) get() (*child, bool, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return c, true, nil
	}
	p.mu.Unlock()
	c, err := p.start()
	return c, false, err
}

func (p *childPool) start() (*child, error) {
	exe, err := yttExecutable()
	if err != nil {
		return nil, err
	}
	c := &child{cmd: exec.Command(exe)}
	c.cmd.Dir = "/"
	// Only the switch to the child: not the controller's environment
	// (credentials, tokens).
	c.cmd.Env = []string{p.env + "=1"}
	c.cmd.Stderr = &cappedBuffer{b: &c.stderr, max: 8 << 10}
	c.cmd.WaitDelay = time.Second
	if c.in, err = c.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	p.started.Add(1)
	c.w, c.out = bufio.NewWriter(c.in), bufio.NewReader(out)
	return c, nil
}

// put keeps a child that answered for the next request, or lets it go.
func (p *childPool) put(c *child) {
	c.used = time.Now()
	p.mu.Lock()
	if len(p.idle) >= p.maxIdle {
		p.mu.Unlock()
		c.close()
		return
	}
	p.idle = append(p.idle, c)
	if p.timer == nil {
		p.timer = time.AfterFunc(p.idleTimeout, p.reap)
	}
	p.mu.Unlock()
}

// reap lets go of the children idle for idleTimeout.
func (p *childPool) reap() {
	p.mu.Lock()
	p.timer = nil
	var keep, old []*child
	for _, c := range p.idle {
		if time.Since(c.used) >= p.idleTimeout {
			old = append(old, c)
		} else {
			keep = append(keep, c)
		}
	}
	p.idle = keep
	if len(keep) > 0 {
		p.timer = time.AfterFunc(p.idleTimeout-time.Since(keep[0].used), p.reap)
	}
	p.mu.Unlock()
	for _, c := range old {
		c.close()
	}
}

// idleCount is the number of children waiting for work.
func (p *childPool) idleCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// close ends an idle child: it exits when its stdin ends.
func (c *child) close() {
	_ = c.in.Close()
	go c.wait()
}

func (c *child) kill() { _ = c.cmd.Process.Kill() }

// wait reaps the process once and returns how it ended.
func (c *child) wait() error {
	c.waitOnce.Do(func() { c.waitErr = c.cmd.Wait() })
	return c.waitErr
}
