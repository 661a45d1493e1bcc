//go:build !unix

package localcluster

import (
	"errors"
	"syscall"
)

var errUnsupported = errors.New("localcluster: unsupported operating system")

func sysProcAttr(bool) *syscall.SysProcAttr { return nil }

func cmdline(int) ([]string, error) { return nil, errUnsupported }

func alive(int) bool { return false }

func signal(int, syscall.Signal) error { return errUnsupported }
