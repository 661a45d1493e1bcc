package main

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill cmd when the bench dies, so that an
// interrupted run leaves no Kontinue behind.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
