package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"kontinue.dev/kontinue/cli"
)

var update = flag.Bool("update", false, "rewrite testdata/help with what the commands print")

func execute(program string, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := newRoot(cli.Env{Stdout: &out, Stderr: &errb, Program: program}).Execute(context.Background(), args)
	return code, out.String(), errb.String()
}

// TestHelpGolden keeps the help of every command in testdata/help (go test
// . -run TestHelpGolden -update rewrites it): a change of the command line
// shows in review.
func TestHelpGolden(t *testing.T) {
	root := newRoot(cli.Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}})
	root.Command.InitDefaultHelpCmd()
	root.Command.InitDefaultCompletionCmd()
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		paths = append(paths, path)
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() || sub.Name() == "help" {
				walk(sub, append(append([]string{}, path...), sub.Name()))
			}
		}
	}
	walk(root.Command, nil)
	require.Greater(t, len(paths), 15)
	for _, p := range paths {
		code, out, errOut := execute("kontinue", append(p, "--help")...)
		require.Equal(t, 0, code, "%v: %s", p, errOut)
		name := strings.Join(append([]string{"kontinue"}, p...), "_")
		golden(t, name+".txt", out)
		if len(p) == 1 {
			code, out2, _ := execute("kontinue", "help", p[0])
			require.Equal(t, 0, code)
			require.Equal(t, out, out2, "help %s", p[0])
		}
	}
	code, out, _ := execute("/usr/bin/kubectl-kontinue", "--help")
	require.Equal(t, 0, code)
	golden(t, "kubectl-kontinue.txt", out)
	code, out, _ = execute("/usr/bin/kubectl-kontinue", "reconcile", "--help")
	require.Equal(t, 0, code)
	golden(t, "kubectl-kontinue_reconcile.txt", out)
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "help", name)
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden file: go test . -run TestHelpGolden -update")
	require.Equal(t, string(want), got, "help differs from %s (go test . -run TestHelpGolden -update rewrites it)", path)
}

// TestControllerOnlyWhenAsked: the bare binary prints help and exits; the
// controller's flags belong to `kontinue controller`.
func TestControllerOnlyWhenAsked(t *testing.T) {
	code, out, _ := execute("kontinue")
	require.Equal(t, 0, code)
	require.Contains(t, out, "controller   run the controller")

	for _, args := range [][]string{{"--leader-elect"}, {"controller", "extra"}, {"controller", "--nope"}, {"controller", "--log-level", "loud", "--kubeconfig", "testdata/help/none"}} {
		code, _, errOut := execute("kontinue", args...)
		if args[len(args)-1] == "testdata/help/none" {
			require.Equal(t, 1, code, "%v: %s", args, errOut) // no kubeconfig: an error, not usage
			continue
		}
		require.Equal(t, 2, code, "%v: %s", args, errOut)
	}
}

// TestControllerFlags: every flag docs/operations.md and deploy/ use keeps
// its name and default.
func TestControllerFlags(t *testing.T) {
	root := newRoot(cli.Env{})
	c, _, err := root.Command.Find([]string{"controller"})
	require.NoError(t, err)
	require.Equal(t, "controller", c.Name())
	lookup := func(name string) *pflag.Flag {
		if f := c.Flags().Lookup(name); f != nil {
			return f
		}
		return root.Command.PersistentFlags().Lookup(name)
	}
	for name, def := range map[string]string{
		"kubeconfig": "", "context": "",
		"metrics-bind-address": ":8080", "health-probe-bind-address": ":8081", "dashboard-bind-address": "0",
		"dashboard-service-account": "", "pprof-bind-address": "0", "workers": "16", "fair-queue": "true", "kube-api-qps": "-1",
		"kube-api-burst": "100", "resync-period": "10h0m0s", "install-crds": "false", "kstatus-conditions": "false",
		"helm-allow-private-networks": "false", "helm-allow-http": "false", "shutdown-grace-period": "30s",
		"leader-elect": "false", "leader-election-namespace": "", "leader-election-id": "kontinue-leader",
		"leader-elect-lease-duration": "15s", "leader-elect-renew-deadline": "10s", "leader-elect-retry-period": "2s",
		"log-format": "", "log-level": "", "v": "0", "attestation-key": "",
		"notifications": "true", "notification-platform-namespaces": "[]", "notification-allow-private-networks": "false", "dashboard-url": "",
	} {
		f := lookup(name)
		require.NotNil(t, f, name)
		require.Equal(t, def, f.DefValue, name)
	}
	require.Equal(t, "v", c.Flags().Lookup("v").Shorthand)
	flagRe := regexp.MustCompile("--([a-z][a-z-]+)")
	for _, file := range []string{"deploy/chart/templates/deployment.yaml", "deploy/install.yaml"} {
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		for _, m := range regexp.MustCompile(`(?m)^\s*- (--[a-z-]+)`).FindAllStringSubmatch(string(b), -1) {
			require.NotNil(t, lookup(flagRe.FindStringSubmatch(m[1])[1]), "%s passes %s", file, m[1])
		}
	}
	b, err := os.ReadFile("docs/operations.md")
	require.NoError(t, err)
	_, table, _ := strings.Cut(string(b), "## Flags")
	table, _, _ = strings.Cut(table, "\n## ")
	n := 0
	for _, m := range regexp.MustCompile("(?m)^\\| `(-{1,2}[a-z-]+)`").FindAllStringSubmatch(table, -1) {
		n++
		require.NotNil(t, lookup(strings.TrimLeft(m[1], "-")), "docs/operations.md names %s", m[1])
	}
	require.Greater(t, n, 15)
}
