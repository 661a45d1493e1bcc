//go:build !unix

package jsonlibs

import "time"

func cpuTime() time.Duration { return 0 }
