//go:build linux

package localcluster

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
)

func sysProcAttr(detach bool) *syscall.SysProcAttr {
	if detach {
		// A new session: no controlling terminal, so neither a Ctrl-C nor the
		// end of the launching shell reaches the components.
		return &syscall.SysProcAttr{Setsid: true}
	}
	// Own process group (a Ctrl-C goes to the launcher only, which stops the
	// components in order) and killed by the kernel if the launcher dies.
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func cmdline(pid int) ([]string, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return nil, err
	}
	data = bytes.TrimSuffix(data, []byte{0})
	return strings.Split(string(data), "\x00"), nil
}

// alive reports whether pid exists and is not a zombie (an exited child of
// a process that has not reaped it yet counts as gone).
func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state ...; comm may contain spaces and parentheses.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) {
		return false
	}
	state := data[i+2]
	return state != 'Z' && state != 'X'
}

func signal(pid int, sig syscall.Signal) error { return syscall.Kill(pid, sig) }
