package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"
)

// logWith configures logging into a buffer, logs a few lines the way
// Kontinue and client-go do, and returns the output lines.
func logWith(t *testing.T, format, level string) []string {
	t.Helper()
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	v := fs.Lookup("v").Value
	require.NoError(t, v.Set("0"))
	var buf bytes.Buffer
	require.NoError(t, setupLogging(format, level, v, &buf))
	t.Cleanup(klog.ClearLogger)

	klog.InfoS("step applied", "owner", "Workload/ns/app", "step", "source", "template", "ClusterSourceTemplate/git", "took", 1500*time.Millisecond)
	klog.V(2).InfoS("status write raced", "owner", "Workload/ns/app")
	klog.FromContext(t.Context()).V(4).Info("lease renewed") // client-go's contextual path
	klog.ErrorS(errors.New("boom"), "apply failed", "owner", "Workload/ns/app")
	klog.Flush()
	return strings.Split(strings.TrimSpace(buf.String()), "\n")
}

func TestLoggingJSON(t *testing.T) {
	lines := logWith(t, "json", "")
	require.Len(t, lines, 2, "at the default level only info and error lines: %q", lines)
	var first, second map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &first), lines[0])
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &second), lines[1])
	require.Equal(t, "info", first["level"])
	require.Equal(t, "step applied", first["msg"])
	require.Equal(t, "Workload/ns/app", first["owner"])
	require.Equal(t, "source", first["step"])
	require.Equal(t, "ClusterSourceTemplate/git", first["template"])
	require.Contains(t, first, "time")
	require.Equal(t, "1.5s", first["took"])
	require.Equal(t, "error", second["level"])
	require.Equal(t, "boom", second["err"])
}

func TestLoggingLevels(t *testing.T) {
	debug := logWith(t, "text", "debug")
	require.Len(t, debug, 4, "debug (verbosity 4) shows V(2) and V(4) lines: %q", debug)
	require.Contains(t, debug[0], `msg="step applied"`)
	require.Contains(t, debug[0], "level=info")
	require.Contains(t, debug[1], "level=debug2")
	require.Contains(t, debug[2], `msg="lease renewed"`)

	two := logWith(t, "text", "2")
	require.Len(t, two, 3, "verbosity 2 hides V(4): %q", two)

	errOnly := logWith(t, "json", "error")
	require.Len(t, errOnly, 1, "error shows errors only: %q", errOnly)
	require.Contains(t, errOnly[0], `"msg":"apply failed"`)
}

func TestLoggingRejectsBadValues(t *testing.T) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	v := fs.Lookup("v").Value
	require.ErrorContains(t, setupLogging("yaml", "", v, &bytes.Buffer{}), "--log-format")
	require.ErrorContains(t, setupLogging("json", "loud", v, &bytes.Buffer{}), "--log-level")
	require.ErrorContains(t, setupLogging("json", "-1", v, &bytes.Buffer{}), "--log-level")
}
