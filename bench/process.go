package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// kontinue is Kontinue running as a separate process, as in production:
// its memory and API calls are its own.
type kontinue struct {
	*process
	metricsURL string
	readyURL   string
	logPath    string
	started    time.Time
}

// startKontinue runs bin with args plus free metrics and probe ports, with
// env added to the bench's environment.
func startKontinue(bin, logPath string, args, env []string) (*kontinue, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	metrics := "127.0.0.1:" + strconv.Itoa(ports[0])
	probes := "127.0.0.1:" + strconv.Itoa(ports[1])
	args = append(args, "--metrics-bind-address="+metrics, "--health-probe-bind-address="+probes)
	p, err := startProcess(bin, logPath, args, env)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	return &kontinue{process: p, metricsURL: "http://" + metrics + "/metrics",
		readyURL: "http://" + probes + "/readyz", logPath: logPath, started: time.Now()}, nil
}

func (k *kontinue) exited() bool {
	select {
	case <-k.done:
		return true
	default:
		return false
	}
}

// waitReady polls /readyz (caches synced) until it answers 200.
func (k *kontinue) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		if k.exited() {
			return fmt.Errorf("kontinue exited before it was ready (%v); see %s", k.waitErr, k.logPath)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, k.readyURL, nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kontinue not ready after %s; see %s", timeout, k.logPath)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// scrape reads Kontinue's /metrics.
func (k *kontinue) scrape(ctx context.Context) (metrics, error) {
	return scrapeURL(ctx, http.DefaultClient, k.metricsURL)
}

func scrapeURL(ctx context.Context, client *http.Client, url string) (metrics, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return parseMetrics(resp.Body)
}

// stop sends SIGTERM (Kontinue drains its queues) and waits, then kills.
func (k *kontinue) stop(grace time.Duration) error {
	if k.exited() {
		return nil
	}
	_ = k.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-k.done:
	case <-time.After(grace):
		_ = k.cmd.Process.Kill()
		<-k.done
		return fmt.Errorf("kontinue did not stop within %s of SIGTERM; killed", grace)
	}
	var ee *exec.ExitError
	if k.waitErr != nil && !errors.As(k.waitErr, &ee) {
		return k.waitErr
	}
	return nil
}

func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close() // held until all are picked, so they differ
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// rssAnon reads a process's anonymous resident memory (RssAnon), bytes: its
// RSS without the pages of files it maps (its own executable), which the
// kernel maps from the page cache and can drop at any time.
func rssAnon(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "RssAnon:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no RssAnon", pid)
}

// memory reads a process's resident set (VmRSS) and its peak (VmHWM), bytes.
func memory(pid int) (rss, hwm int64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb * 1024
		case "VmHWM:":
			hwm = kb * 1024
		}
	}
	if rss == 0 && hwm == 0 {
		return 0, 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
	}
	return rss, hwm, nil
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports.
const clockTicks = 100

// cpuSeconds reads a process's user+system CPU time; with children, its
// children's too (Kontinue's renderers): those it has reaped, and those
// still running. The bench's own children are the control plane, counted
// under their own names.
func cpuSeconds(pid int, withChildren bool) (float64, error) {
	own, reaped, _, err := procStat(pid)
	if err != nil || !withChildren {
		return own, err
	}
	total := own + reaped
	for _, c := range children(pid) {
		if o, r, _, err := procStat(c); err == nil {
			total += o + r
		}
	}
	return total, nil
}

// procStat reads a process's CPU seconds (user+system), its reaped
// children's, and its parent's pid from /proc/<pid>/stat.
func procStat(pid int) (own, reaped float64, ppid int, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return 0, 0, 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	// After the command: state(0) ppid(1) … utime(11) stime(12)
	// cutime(13) cstime(14).
	ppid, _ = strconv.Atoi(f[1])
	var t [4]float64
	for i, k := range f[11:15] {
		if t[i], err = strconv.ParseFloat(k, 64); err != nil {
			return 0, 0, 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
		}
	}
	return (t[0] + t[1]) / clockTicks, (t[2] + t[3]) / clockTicks, ppid, nil
}

// children lists the running child processes of pid.
func children(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, _, ppid, err := procStat(c); err == nil && ppid == pid {
			out = append(out, c)
		}
	}
	return out
}

// cpuMeter measures the CPU time of named processes over a phase.
type cpuMeter struct {
	pids  map[string]int
	start map[string]float64
}

func newCPUMeter(pids map[string]int) *cpuMeter {
	m := &cpuMeter{pids: pids, start: map[string]float64{}}
	for name, pid := range pids {
		if s, err := cpuSeconds(pid, name != "bench"); err == nil {
			m.start[name] = s
		}
	}
	return m
}

// read returns the CPU seconds each process used since newCPUMeter.
func (m *cpuMeter) read() map[string]float64 {
	out := map[string]float64{}
	for name, pid := range m.pids {
		if s, err := cpuSeconds(pid, name != "bench"); err == nil {
			out[name] = round(s-m.start[name], 1)
		}
	}
	return out
}

// sampler follows the Kontinue process's RSS and Go heap over time: the
// kernel keeps the RSS peak (VmHWM) but the heap and anonymous RSS peaks
// must be sampled.
type sampler struct {
	mu       sync.Mutex
	peakHeap float64
	peakAnon float64
	// peakChildren: the anonymous RSS of Kontinue's child processes (its
	// renderers), summed.
	peakChildren float64
	stop         chan struct{}
	done         chan struct{}

	// prof, when set, saves a heap profile named name each time the heap
	// passes its last profiled peak by a tenth: the profile of the peak
	// (as of the GC before it), which a profile at a fixed time misses.
	prof     *profiler
	name     string
	profiled float64
}

func startSampler(ctx context.Context, k *kontinue, every time.Duration) *sampler {
	return startProfilingSampler(ctx, k, every, nil, "")
}

func startProfilingSampler(ctx context.Context, k *kontinue, every time.Duration, prof *profiler, name string) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{}), prof: prof, name: name}
	start := time.Now()
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if m, err := k.scrape(ctx); err == nil {
				h := m.sum("go_memstats_heap_alloc_bytes", nil)
				s.mu.Lock()
				if h > s.peakHeap {
					s.peakHeap = h
				}
				again := s.prof != nil && h > s.profiled*1.1
				if again {
					s.profiled = h
				}
				s.mu.Unlock()
				if again {
					logf("%s: heap %.0f MiB at %.0fs", s.name, h/(1<<20), time.Since(start).Seconds())
					s.prof.fetch(ctx, s.name, "heap", 30*time.Second)
				}
			}
			if a, err := rssAnon(k.pid); err == nil {
				s.mu.Lock()
				s.peakAnon = max(s.peakAnon, float64(a))
				s.mu.Unlock()
			}
			var kids int64
			for _, c := range children(k.pid) {
				if a, err := rssAnon(c); err == nil {
					kids += a
				}
			}
			s.mu.Lock()
			s.peakChildren = max(s.peakChildren, float64(kids))
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// finish stops sampling and returns the largest heap, anonymous RSS and
// children's anonymous RSS seen, bytes.
func (s *sampler) finish() (heap, anon, kids float64) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peakHeap, s.peakAnon, s.peakChildren
}
