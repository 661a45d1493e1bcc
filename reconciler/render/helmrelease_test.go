package render

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Charts that feed a huge count to until, repeat or seq, or recurse without
// end, fail with a message that says so; the controller's process does not
// pay for it (the render runs in a child process with a memory cap).
func TestHelmRunawayTemplates(t *testing.T) {
	cm := func(body string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: " + body + "}\n"
	}
	charts := map[string][]byte{
		"repeat.tgz":  chartArchive(t, "repeat", "1.0.0", map[string]string{"templates/x.yaml": cm(`{{ repeat (int .Values.n) "x" | len | quote }}`)}),
		"until.tgz":   chartArchive(t, "until", "1.0.0", map[string]string{"templates/x.yaml": cm(`{{ until (int .Values.n) | len | quote }}`)}),
		"recurse.tgz": chartArchive(t, "recurse", "1.0.0", map[string]string{"templates/_r.tpl": `{{ define "r" }}{{ tpl "{{ include \"r\" . }}" . }}{{ end }}`, "templates/x.yaml": cm(`{{ include "r" . | quote }}`)}),
	}
	ctx := helmCtx(charts)
	for _, c := range []struct{ chart, want string }{
		{"repeat.tgz", "need more than 256 MiB of memory"},
		{"until.tgz", "need more than 256 MiB of memory"},
		{"recurse.tgz", "the chart failed to render: its templates"},
	} {
		t.Run(c.chart, func(t *testing.T) {
			if raceEnabled {
				t.Skip("race builds run the child without its memory limit")
			}
			start := time.Now()
			_, err := newHelmEngine(nil).Render(ctx, cmSpec(c.chart, map[string]any{"n": int64(4_000_000_000)}), testContext())
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assert.Less(t, time.Since(start), limits.timeout)
			waitFlights(t)
			assert.Empty(t, renderSlots, "no slot held")
		})
	}
}

// Non-test hooks are refused with the files that hold them.
func TestHelmRefusesHooks(t *testing.T) {
	ctx := helmCtx(map[string][]byte{"hooks.tgz": chartArchive(t, "hooks", "1.0.0", map[string]string{
		"templates/cm.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
		"templates/job.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: migrate\n  annotations: {helm.sh/hook: \"pre-install,pre-upgrade\"}\n",
	})})
	_, err := newHelmEngine(nil).Render(ctx, cmSpec("hooks.tgz", nil), testContext())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "renders Helm hooks, which Kontinue does not run: hooks/templates/job.yaml (pre-install,pre-upgrade)")
}

type fakeLookup map[string]map[string]any

func (f fakeLookup) Lookup(_ context.Context, apiVersion, kind, ns, name string) (map[string]any, error) {
	if kind == "Namespace" {
		return nil, fmt.Errorf("kind Namespace is cluster-scoped")
	}
	return f[apiVersion+"/"+kind+"/"+ns+"/"+name], nil
}

// A release kept by the caller is the render while the inputs are the same:
// random values stay. New inputs render an upgrade, one revision up.
func TestHelmReleases(t *testing.T) {
	ctx := helmCtx(map[string][]byte{"rel.tgz": chartArchive(t, "rel", "1.0.0", map[string]string{
		"templates/s.yaml": `apiVersion: v1
kind: Secret
metadata: {name: s}
stringData:
  password: {{ randAlphaNum 16 }}
  revision: {{ .Release.Revision | quote }}
  upgrade: {{ .Release.IsUpgrade | quote }}
  color: {{ .Values.color }}
  kept: {{ (lookup "v1" "Secret" .Release.Namespace "kept").metadata.name | default "none" }}
`,
	})})
	h := newHelmEngine(nil)
	render := func(stored *HelmRelease, color string) (*ReleaseRecord, map[string]any) {
		t.Helper()
		rec := &ReleaseRecord{Stored: stored}
		objs, err := h.Render(WithLookup(WithRelease(ctx, rec), fakeLookup{"v1/Secret/dev/kept": {"metadata": map[string]any{"name": "kept"}}}),
			cmSpec("rel.tgz", map[string]any{"color": color}), testContext())
		require.NoError(t, err)
		data, _, _ := unstructured.NestedMap(objs[0].Object, "stringData")
		return rec, data
	}
	rec, first := render(nil, "red")
	require.NotNil(t, rec.Next)
	assert.Equal(t, 1, rec.Next.Revision)
	assert.Equal(t, map[string]any{"revision": "1", "upgrade": "false", "color": "red", "kept": "kept"}, without(first, "password"))

	// Kept in a Secret and read back: the same objects, nothing new to keep.
	s, err := ReleaseSecret("dev", ReleaseSecretName("Workload", "app", "deploy"), metav1.OwnerReference{Kind: "Workload", Name: "app"}, "deploy", rec.Next)
	require.NoError(t, err)
	stored, err := ParseReleaseSecret(s)
	require.NoError(t, err)
	again, same := render(stored, "red")
	assert.Nil(t, again.Next)
	assert.Equal(t, first, same)

	// New inputs: an upgrade, a new password.
	up, second := render(stored, "blue")
	require.NotNil(t, up.Next)
	assert.Equal(t, 2, up.Next.Revision)
	assert.Equal(t, map[string]any{"revision": "2", "upgrade": "true", "color": "blue", "kept": "kept"}, without(second, "password"))
	assert.NotEqual(t, first["password"], second["password"])
}

func without(m map[string]any, k string) map[string]any {
	out := map[string]any{}
	for kk, v := range m {
		if kk != k {
			out[kk] = v
		}
	}
	return out
}

// lookup is answered in the owner's namespace only; the Lookup's errors
// fail the render with what was looked up.
func TestHelmLookupBounds(t *testing.T) {
	ctx := helmCtx(map[string][]byte{
		"other.tgz":   chartArchive(t, "other", "1.0.0", map[string]string{"templates/x.yaml": `{{ lookup "v1" "Secret" "kube-system" "x" }}apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}`}),
		"cluster.tgz": chartArchive(t, "cluster", "1.0.0", map[string]string{"templates/x.yaml": `{{ lookup "v1" "Namespace" "" "" }}apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}`}),
	})
	ctx = WithLookup(ctx, fakeLookup{})
	_, err := newHelmEngine(nil).Render(ctx, cmSpec("other.tgz", nil), testContext())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lookup of Secret [x] in namespace [kube-system]: lookup is answered only in the owner's namespace [dev]")
	_, err = newHelmEngine(nil).Render(ctx, cmSpec("cluster.tgz", nil), testContext())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lookup of all Namespace in namespace [dev]: kind Namespace is cluster-scoped")
}

func TestReleaseSecretTooLarge(t *testing.T) {
	big := make([]byte, maxReleaseBytes)
	_, _ = rand.Read(big)
	r := &HelmRelease{Inputs: "x", Revision: 1, Objects: []map[string]any{{"data": fmt.Sprintf("%x", big)}}}
	_, err := ReleaseSecret("dev", "n", metav1.OwnerReference{}, "s", r)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "too large to keep as a release")
}
