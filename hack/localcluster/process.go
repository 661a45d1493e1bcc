package localcluster

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one component: either started by this process (cmd != nil) or
// found in the pids file of a cluster started by another process.
type process struct {
	name    string
	path    string // absolute path of the binary
	pid     int
	dir     string // the cluster state folder; appears in the command line
	logPath string
	args    []string // command line (processes started by us only)
	env     []string // added to the environment (processes started by us only)
	detach  bool

	cmd     *exec.Cmd
	done    chan struct{} // closed once cmd.Wait returned
	waitErr error
}

// launch starts a component with its output appended to logPath and env
// added to this process's environment.
func launch(name, path string, args, env []string, dir, logPath string, detach bool) (*process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fmt.Fprintf(f, "# %s\n", strings.Join(append(append(env[:len(env):len(env)], path), args...), " "))
	cmd := exec.Command(path, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Dir = dir
	cmd.Stdin = nil // /dev/null
	cmd.Stdout = f  // an *os.File: no copying goroutine, survives our exit
	cmd.Stderr = f
	cmd.SysProcAttr = sysProcAttr(detach)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{
		name: name, path: path, pid: cmd.Process.Pid, dir: dir, logPath: logPath,
		args: args, env: env, detach: detach, cmd: cmd, done: make(chan struct{}),
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether a process started by us has exited.
func (p *process) exited() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// running reports whether the process is alive and still the one recorded
// (for a process found in the pids file: same binary, same state folder).
func (p *process) running() bool {
	if p.cmd != nil {
		return !p.exited()
	}
	return isOurs(p.pid, p.path, p.dir)
}

// isOurs reports whether pid is alive and runs binary path with dir in its
// command line, so that a pid reused by an unrelated process is never killed.
func isOurs(pid int, path, dir string) bool {
	if pid <= 0 || !alive(pid) {
		return false
	}
	args, err := cmdline(pid)
	if err != nil || len(args) == 0 || args[0] != path {
		return false
	}
	return strings.Contains(strings.Join(args, " "), dir)
}

// stop sends SIGTERM, then SIGKILL after grace, and waits for the exit.
func (p *process) stop(grace time.Duration) error {
	if p.cmd != nil {
		if p.exited() {
			return nil
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
			return nil
		case <-time.After(grace):
		}
		_ = p.cmd.Process.Kill()
		select {
		case <-p.done:
			return nil
		case <-time.After(10 * time.Second):
			return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.name, p.pid)
		}
	}
	if !isOurs(p.pid, p.path, p.dir) {
		return nil // already gone, or the pid now belongs to someone else
	}
	if err := signal(p.pid, syscall.SIGTERM); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		return fmt.Errorf("%s (pid %d): %w", p.name, p.pid, err)
	}
	if waitGone(p.pid, grace) {
		return nil
	}
	if !isOurs(p.pid, p.path, p.dir) {
		return nil
	}
	_ = signal(p.pid, syscall.SIGKILL)
	if waitGone(p.pid, 10*time.Second) {
		return nil
	}
	return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.name, p.pid)
}

func waitGone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if !alive(pid) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The pids file has one line per process: name, pid and binary path,
// separated by tabs.
const pidsFile = "pids"

func writePids(dir string, procs []*process) error {
	var b bytes.Buffer
	for _, p := range procs {
		fmt.Fprintf(&b, "%s\t%d\t%s\n", p.name, p.pid, p.path)
	}
	tmp := filepath.Join(dir, pidsFile+".tmp")
	if err := os.WriteFile(tmp, b.Bytes(), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, pidsFile))
}

func readPids(dir string) ([]*process, error) {
	data, err := os.ReadFile(filepath.Join(dir, pidsFile))
	if err != nil {
		return nil, err
	}
	var procs []*process
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		f := strings.SplitN(line, "\t", 3)
		if len(f) != 3 {
			return nil, fmt.Errorf("%s line %d: malformed %q", pidsFile, i+1, line)
		}
		pid, err := strconv.Atoi(f[1])
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", pidsFile, i+1, err)
		}
		procs = append(procs, &process{
			name: f[0], pid: pid, path: f[2], dir: dir,
			logPath: filepath.Join(dir, "logs", f[0]+".log"),
		})
	}
	return procs, nil
}

// tail returns the last n lines of a file (reading at most its last 64 KiB).
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer f.Close()
	const max = 64 << 10
	if st, err := f.Stat(); err == nil && st.Size() > max {
		_, _ = f.Seek(st.Size()-max, io.SeekStart)
	}
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), max+1)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// bindFailed reports whether a component's log says a port was taken.
func bindFailed(logPath string) bool {
	data, err := os.ReadFile(logPath)
	if err != nil {
		return false
	}
	return bytes.Contains(data, []byte("address already in use"))
}
