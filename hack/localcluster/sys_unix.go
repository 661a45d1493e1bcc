//go:build unix && !linux

package localcluster

import (
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

func sysProcAttr(detach bool) *syscall.SysProcAttr {
	if detach {
		return &syscall.SysProcAttr{Setsid: true}
	}
	// No parent-death signal outside Linux: Stop must be called.
	return &syscall.SysProcAttr{Setpgid: true}
}

// cmdline is approximate outside Linux: ps joins the arguments with spaces.
func cmdline(pid int) ([]string, error) {
	out, err := exec.Command("ps", "-ww", "-o", "command=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(out)), nil
}

func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	out, err := exec.Command("ps", "-o", "stat=", "-p", strconv.Itoa(pid)).Output()
	return err == nil && !strings.HasPrefix(strings.TrimSpace(string(out)), "Z")
}

func signal(pid int, sig syscall.Signal) error { return syscall.Kill(pid, sig) }
