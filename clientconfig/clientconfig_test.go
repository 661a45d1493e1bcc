package clientconfig

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
)

// parse binds the flags to a flag set and parses args, as the CLI does.
func parse(t *testing.T, args ...string) *Flags {
	t.Helper()
	f := &Flags{}
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	f.Bind(fs)
	require.NoError(t, fs.Parse(args))
	return f
}

const fileA = `apiVersion: v1
kind: Config
clusters:
- name: a
  cluster: {server: https://a.example:6443}
users:
- name: a
  user: {token: tok-a}
contexts:
- name: a
  context: {cluster: a, user: a, namespace: team-a}
current-context: a
`

const fileB = `apiVersion: v1
kind: Config
clusters:
- name: b
  cluster: {server: https://b.example:6443}
users:
- name: b
  user: {token: tok-b}
contexts:
- name: b
  context: {cluster: b, user: b}
current-context: b
`

func write(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

func TestLoadLikeKubectl(t *testing.T) {
	dir := t.TempDir()
	a, b := write(t, dir, "a", fileA), write(t, dir, "b", fileB)
	t.Setenv("KUBECONFIG", a+string(os.PathListSeparator)+b)
	t.Setenv("HOME", dir)

	l, err := parse(t).Load()
	require.NoError(t, err)
	require.Equal(t, "https://a.example:6443", l.Config.Host, "the first file's current-context wins")
	require.Equal(t, "team-a", l.Namespace, "the context's namespace")
	require.False(t, l.InCluster)

	l, err = parse(t, "--context", "b").Load()
	require.NoError(t, err)
	require.Equal(t, "https://b.example:6443", l.Config.Host, "a context of the second file")
	require.Equal(t, "tok-b", l.Config.BearerToken)
	require.Equal(t, "default", l.Namespace)

	l, err = parse(t, "--context=a", "-n", "other").Load()
	require.NoError(t, err)
	require.Equal(t, "other", l.Namespace, "--namespace wins")

	l, err = parse(t, "--kubeconfig", b).Load()
	require.NoError(t, err)
	require.Equal(t, "https://b.example:6443", l.Config.Host, "--kubeconfig replaces $KUBECONFIG")

	_, err = parse(t, "--context", "nope").Load()
	require.Error(t, err)
}

func TestLoadNothing(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", dir)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	_, err := parse(t).Load()
	require.ErrorContains(t, err, "no usable cluster configuration")
}

// TestConnectionFlags: kubectl's flags override the kubeconfig.
func TestConnectionFlags(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("KUBECONFIG", write(t, dir, "a", fileA))
	t.Setenv("HOME", dir)
	f := parse(t, "--server", "https://other.example:6443", "--token", "tok-x", "--as", "alice", "--as-group", "devs",
		"--request-timeout", "7s", "-n", "ns1")
	require.Equal(t, "ns1", f.Namespace())
	l, err := f.Load()
	require.NoError(t, err)
	require.Equal(t, "https://other.example:6443", l.Config.Host)
	require.Equal(t, "tok-x", l.Config.BearerToken)
	require.Equal(t, "alice", l.Config.Impersonate.UserName)
	require.Equal(t, []string{"devs"}, l.Config.Impersonate.Groups)
	require.Equal(t, "7s", l.Config.Timeout.String())
	require.Equal(t, "ns1", l.Namespace)
	require.Equal(t, "", parse(t).Overrides.Context.Namespace, "flags left alone")

	wrapped := false
	f = parse(t)
	f.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { wrapped = true; return rt }
	l, err = f.Load()
	require.NoError(t, err)
	require.NotNil(t, l.Config.WrapTransport)
	l.Config.WrapTransport(http.DefaultTransport)
	require.True(t, wrapped)
}
