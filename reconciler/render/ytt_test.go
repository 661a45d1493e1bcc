package render

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kontinue.dev/kontinue/reconciler/api"
)

// fakeYtt puts a `ytt` shell script on PATH (and nothing else).
func fakeYtt(t *testing.T, script string) {
	t.Helper()
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ytt"), []byte("#!/bin/sh\n"+script), 0o755))
	t.Setenv("PATH", dir+":/usr/bin:/bin")
}

func yttRender(t *testing.T, text string) error {
	t.Helper()
	_, err := Ytt().Render(context.Background(), &api.TemplateSpec{Ytt: text}, testContext())
	return err
}

func TestYttWithoutBinary(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	err := yttRender(t, "#@ load(\"@ytt:data\", \"data\")\n")
	require.Error(t, err)
	var se *StampError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, YttName, se.Engine)
	assert.Equal(t, "ytt is not supported: no ytt binary on PATH", err.Error())
}

func TestYttRunsTheBinary(t *testing.T) {
	// The fake echoes the template (stdin, "-f -") and adds what the data
	// values file (the second -f) says about the owner, checking the
	// arguments on the way.
	fakeYtt(t, `
[ "$1 $2 $3" = "-f - -f" ] || { echo "bad args: $*" >&2; exit 2; }
head -n 1 "$4" | grep -q '^#@data/values' || { echo "no data values annotation" >&2; exit 2; }
cat
echo "  owner: $(grep -c -e '^workload:' -e '^params:' -e '^sources:' "$4")"
echo "  leak: \"${KONTINUE_SECRET}\""
`)
	t.Setenv("KONTINUE_SECRET", "hunter2")
	objs, err := Ytt().Render(context.Background(), &api.TemplateSpec{Ytt: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n"}, testContext())
	require.NoError(t, err)
	require.Len(t, objs, 1)
	assert.Equal(t, map[string]any{"owner": int64(3), "leak": ""}, objs[0].Object["data"], "the context reached ytt; the environment did not")
}

func TestYttErrors(t *testing.T) {
	tests := []struct {
		name, script, part string
		timeout            time.Duration
		bytes              int
	}{
		{"ytt fails", "echo 'ytt: Error: undefined: foo' >&2; exit 1", "ytt failed: ytt: Error: undefined: foo", 0, 0},
		{"ytt fails silently", "exit 3", "ytt failed: exit status 3", 0, 0},
		{"not YAML", "echo 'a: [b'", "ytt output is not valid YAML", 0, 0},
		{"no object", "echo '# nothing'", "ytt rendered no object", 0, 0},
		{"too slow", "exec sleep 30", "ytt rendering did not finish within 200ms", 200 * time.Millisecond, 0},
		{"too much", "exec yes 'a: b'", "ytt rendered more than 4096 bytes", 0, 4096},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fakeYtt(t, tt.script)
			setLimits(t, tt.timeout, tt.bytes, 0)
			start := time.Now()
			err := yttRender(t, "x: y\n")
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.part)
			assert.Less(t, time.Since(start), 5*time.Second, "the process is killed, not waited for")
		})
	}
}
