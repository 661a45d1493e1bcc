package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// profiler fetches pprof profiles from Kontinue, when it serves them
// (-pprof passes --pprof-bind-address), into the bench's work folder, for
// `go tool pprof`.
type profiler struct {
	base string // http://127.0.0.1:port/debug/pprof/; "" = off
	dir  string
}

// fetch saves one profile; query is e.g. "heap?gc=1" or "profile?seconds=30".
func (p *profiler) fetch(ctx context.Context, name, query string, timeout time.Duration) {
	if p == nil || p.base == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	path := filepath.Join(p.dir, name+".pprof")
	err := func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+query, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", req.URL, resp.Status)
		}
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, resp.Body); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}()
	if err != nil {
		logf("profile %s: %v", name, err)
		return
	}
	logf("profile %s saved: go tool pprof -top %s", name, path)
}

// cpu records a CPU profile of d in the background; wait blocks until saved.
func (p *profiler) cpu(ctx context.Context, name string, d time.Duration) (wait func()) {
	if p == nil || p.base == "" {
		return func() {}
	}
	secs := int(d.Seconds())
	if secs < 1 {
		secs = 1
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.fetch(ctx, name, fmt.Sprintf("profile?seconds=%d", secs), d+time.Minute)
	}()
	return func() { <-done }
}
