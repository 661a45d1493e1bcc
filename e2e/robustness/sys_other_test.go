//go:build !linux

package robustness

import "syscall"

func dieWithParent() *syscall.SysProcAttr { return nil }
