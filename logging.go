package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"

	"k8s.io/klog/v2"
)

// logLevels maps --log-level names to klog verbosities (Kubernetes
// conventions: 2 steady-state detail, 4 debugging, 6 and up tracing).
var logLevels = map[string]int{"error": 0, "info": 0, "debug": 4, "trace": 6}

// setupLogging routes klog (Kontinue's and client-go's logs) to a slog
// handler writing JSON or logfmt-style text to w. level, when set, also sets
// klog's -v (verbosity), so the flags cannot disagree.
//
// The handler filters by level itself because klog hands the logger to
// client-go's contextual logging, which bypasses klog's -v check: V(n) lines
// arrive as slog level -n.
func setupLogging(format, level string, v flag.Value, w io.Writer) error {
	minLevel := slog.Level(0)
	if level != "" {
		n, ok := logLevels[strings.ToLower(level)]
		if !ok {
			var err error
			if n, err = strconv.Atoi(level); err != nil || n < 0 {
				return fmt.Errorf("--log-level %q: want error, info, debug, trace or a verbosity number >= 0", level)
			}
		}
		if err := v.Set(strconv.Itoa(n)); err != nil {
			return err
		}
		if strings.EqualFold(level, "error") {
			minLevel = slog.LevelError
		}
	}
	verbosity, err := strconv.Atoi(v.String())
	if err != nil {
		return fmt.Errorf("-v %q: %w", v.String(), err)
	}
	if minLevel != slog.LevelError {
		minLevel = slog.Level(-verbosity)
	}
	opts := &slog.HandlerOptions{Level: minLevel, ReplaceAttr: replaceAttr}
	var h slog.Handler
	switch format {
	case "json":
		h = slog.NewJSONHandler(w, opts)
	case "text":
		h = slog.NewTextHandler(w, opts)
	default:
		return fmt.Errorf("--log-format %q: want json or text", format)
	}
	klog.SetSlogLogger(slog.New(h))
	return nil
}

// replaceAttr writes levels as "info" or "error", and V(n) lines as
// "debugN" (slog would write "DEBUG" for V(4) and "INFO-2" for V(2)), and
// durations as "1.5s" rather than JSON nanoseconds.
func replaceAttr(groups []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	if len(groups) > 0 || a.Key != slog.LevelKey {
		return a
	}
	l, ok := a.Value.Any().(slog.Level)
	if !ok {
		return a
	}
	switch {
	case l >= slog.LevelError:
		return slog.String(slog.LevelKey, "error")
	case l >= slog.LevelWarn:
		return slog.String(slog.LevelKey, "warn")
	case l >= slog.LevelInfo:
		return slog.String(slog.LevelKey, "info")
	default:
		return slog.String(slog.LevelKey, "debug"+strconv.Itoa(int(-l)))
	}
}
