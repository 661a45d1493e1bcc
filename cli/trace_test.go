package cli

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"kontinue.dev/kontinue/cli/view"
	"kontinue.dev/kontinue/reconciler/spans"
	st "kontinue.dev/kontinue/reconciler/status"
)

// traceWorkload: source (commit c1) -> build (image) -> deliverable, which
// stamped Deliverable dev/app from the image (input set d1).
func traceWorkload(t *testing.T) view.TraceOwner {
	out := func(name, v string) string {
		p, d := st.Preview(v)
		return fmt.Sprintf("{name: %s, preview: %q, digest: %q, lastTransitionTime: '2026-11-24T23:55:01Z'}", name, p, d)
	}
	o, err := view.DecodeTraceOwner(yamlObj(t, `
apiVersion: carto.run/v1alpha1
kind: Workload
metadata: {name: app, namespace: dev, uid: w-uid}
status:
  resources:
  - name: source
    stampedRef: {apiVersion: v1, kind: ConfigMap, namespace: dev, name: app-src}
    outputs: [`+out("url", "https://git.example/app.git")+`, `+out("revision", "c1")+`]
    provenance: {current: {digest: s1, ownerGeneration: 1, outcome: Succeeded, takenAt: '2026-11-24T23:55:01Z', endedAt: '2026-11-24T23:55:01Z'}}
  - name: build
    inputs: [{name: source}]
    stampedRef: {apiVersion: test.run/v1alpha1, kind: Test, namespace: dev, name: app-build}
    outputs: [`+out("image", "img-c1")+`]
    provenance: {current: {digest: b1, outcome: Succeeded, takenAt: '2026-11-24T23:55:01Z', endedAt: '2026-11-24T23:55:03Z',
      sources: [{name: source, resource: source, url: "https://git.example/app.git", revision: c1}]}}
  - name: deliverable
    inputs: [{name: build}]
    stampedRef: {apiVersion: carto.run/v1alpha1, kind: Deliverable, namespace: dev, name: app}
    provenance: {current: {digest: d1, outcome: Succeeded, takenAt: '2026-11-24T23:55:03Z', endedAt: '2026-11-24T23:55:04Z',
      images: [{name: image, resource: build, image: img-c1}]}}
`))
	require.NoError(t, err)
	return o
}

// traceDeliverable: its source step published revision (set g1).
func traceDeliverable(t *testing.T, revision string) view.TraceOwner {
	p, d := st.Preview(revision)
	o, err := view.DecodeTraceOwner(yamlObj(t, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: Deliverable
metadata: {name: app, namespace: dev}
status:
  resources:
  - name: gitops
    stampedRef: {apiVersion: test.run/v1alpha1, kind: Test, namespace: dev, name: app-gitops}
    outputs: [{name: revision, preview: %q, digest: %q}]
    provenance: {current: {digest: g1, ownerGeneration: 1, outcome: Succeeded, takenAt: '2026-11-24T23:55:05Z', endedAt: '2026-11-24T23:55:07Z'}}
`, p, d)))
	require.NoError(t, err)
	return o
}

// TestPrintTraceCrossing: the hop from the Workload revision to a
// Deliverable's first step, proven (with the evidence, and without a
// traceparent to weigh) and not (with the condition that failed), as text
// and JSON.
func TestPrintTraceCrossing(t *testing.T) {
	for _, tt := range []struct{ name, revision, traceParent string }{
		{"proven", "img-c1", ""},
		{"proven-traceparent", "img-c1", "good"},
		{"branch", "main@sha1:9f", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := traceWorkload(t)
			f := &spans.Feed{Namespace: "dev", Name: "app", UID: "w-uid", Steps: w.Status.Resources, Deliverable: "app", Applied: "d1"}
			if tt.traceParent != "" {
				f.TraceParent, _ = spans.ForSet("w-uid", w.Status.Resources[:2], "deliverable", w.Status.Resources[2].Provenance.Current)
			}
			tr, err := view.TraceStep(traceDeliverable(t, tt.revision), []string{"gitops"}, &view.Upstream{Ref: "Workload/dev/app", Workload: w, Feed: f})
			require.NoError(t, err)
			var b bytes.Buffer
			printTrace(&b, tr)
			golden(t, "trace/"+tt.name+".txt", b.String())
			b.Reset()
			require.NoError(t, writeJSON(&b, tr))
			golden(t, "trace/"+tt.name+".json", b.String())
		})
	}
}

// TestPrintTraceVerification: each hop says how its inputs were checked
// against the chain's verify policy, as `kontinue get` does (result,
// input, digest, rule, held, why), as text and JSON.
func TestPrintTraceVerification(t *testing.T) {
	o, err := view.DecodeTraceOwner(yamlObj(t, `
apiVersion: carto.run/v1alpha1
kind: Workload
metadata: {name: app, namespace: dev}
status:
  resources:
  - name: build
    outputs: [{name: image, preview: "reg.example/app@sha256:9a1e", digest: x}]
    provenance: {current: {digest: b1, outcome: Succeeded}}
  - name: deploy
    inputs: [{name: build}]
    stampedRef: {apiVersion: v1, kind: ConfigMap, namespace: dev, name: app-deploy}
    provenance: {current: {digest: d1, outcome: Succeeded, images: [{name: image, resource: build, image: "reg.example/app@sha256:4f2c"}]}}
    verification:
    - {type: image, name: image, result: Refused, rule: signature, digest: "sha256:9a1e9a1e9a1e9a1e9a1e", held: true, message: "no signature of sha256:9a1e… found"}
    - {type: source, name: src, result: Verified, rule: "signature, kontinue", digest: "sha256:4f2c4f2c4f2c4f2c4f2c"}
`))
	require.NoError(t, err)
	tr, err := view.TraceStep(o, []string{"deploy"}, nil)
	require.NoError(t, err)
	var b bytes.Buffer
	printTrace(&b, tr)
	require.Contains(t, b.String(), "      verify Refused image image 9a1e9a1e9a1e (signature); the step keeps its previous image: no signature of sha256:9a1e… found\n")
	require.Contains(t, b.String(), "      verify Verified source src 4f2c4f2c4f2c (signature, kontinue)\n")
	b.Reset()
	require.NoError(t, writeJSON(&b, tr))
	require.Contains(t, b.String(), `"verification": [`)
	require.Contains(t, b.String(), `"held": true`)
}
