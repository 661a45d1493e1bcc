package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func run(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := MainContext(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestHelpAndVersion(t *testing.T) {
	code, out, _ := run("version")
	require.Equal(t, 0, code)
	require.Equal(t, "kontinue dev\n", out, "a plain build is dev")

	code, out, _ = run("help")
	require.Equal(t, 0, code)
	for _, c := range []string{"get", "render", "reconcile", "dashboard", "version", "crds"} {
		require.Contains(t, out, "kontinue "+c)
	}
	for _, c := range commands() {
		code, out, _ := run(c.name, "--help")
		require.Equal(t, 0, code, c.name)
		require.Contains(t, out, "Examples:\n  ", "%s --help has examples", c.name)
		require.Contains(t, out, "kontinue "+c.name, c.name)
		code, out2, _ := run("help", c.name)
		require.Equal(t, 0, code)
		require.Equal(t, out, out2)
	}
	require.True(t, IsCommand("get"))
	require.False(t, IsCommand("--help"), "the controller's")
	require.False(t, IsCommand("--kubeconfig"))
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"nope"}, {"get"}, {"get", "gadgets"}, {"get", "workload", "-x"}, {"get", "workload", "a", "-A"},
		{"get", "workload", "-o", "table"}, {"reconcile", "workload"}, {"version", "extra"}, {"dashboard", "extra"}, {"render", "-f", "x", "--output", "bad"},
	} {
		code, _, errOut := run(args...)
		require.Equal(t, 2, code, "%v: %s", args, errOut)
		require.NotEmpty(t, errOut, args)
	}
}
