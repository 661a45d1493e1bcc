//go:build !linux

package main

import "os/exec"

// dieWithParent is Linux only; elsewhere an interrupted run may leave
// Kontinue running. (Memory and CPU figures need /proc, Linux only, too.)
func dieWithParent(*exec.Cmd) {}
