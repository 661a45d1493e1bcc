package clientconfig

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

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

	l, err := Flags{}.Load()
	require.NoError(t, err)
	require.Equal(t, "https://a.example:6443", l.Config.Host, "the first file's current-context wins")
	require.Equal(t, "team-a", l.Namespace, "the context's namespace")
	require.False(t, l.InCluster)

	l, err = Flags{Context: "b"}.Load()
	require.NoError(t, err)
	require.Equal(t, "https://b.example:6443", l.Config.Host, "a context of the second file")
	require.Equal(t, "tok-b", l.Config.BearerToken)
	require.Equal(t, "default", l.Namespace)

	l, err = Flags{Context: "a", Namespace: "other"}.Load()
	require.NoError(t, err)
	require.Equal(t, "other", l.Namespace, "--namespace wins")

	l, err = Flags{Kubeconfig: b}.Load()
	require.NoError(t, err)
	require.Equal(t, "https://b.example:6443", l.Config.Host, "--kubeconfig replaces $KUBECONFIG")

	_, err = Flags{Context: "nope"}.Load()
	require.Error(t, err)
}

func TestLoadNothing(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", dir)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	_, err := Flags{}.Load()
	require.ErrorContains(t, err, "no usable cluster configuration")
}
