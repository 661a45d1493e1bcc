package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestChartAttestation: no signing key by default; with
// attestation.keySecret the Secret's one key is mounted read-only, readable
// by the controller's group only, and given to --attestation-key.
func TestChartAttestation(t *testing.T) {
	render := func(values map[string]any) *unstructured.Unstructured {
		docs, err := RenderChart(repo(t), values)
		require.NoError(t, err)
		return byKind(parse(t, []byte(strings.Join(docs, "\n---\n"))), "Deployment")[0]
	}
	pod := func(d *unstructured.Unstructured) map[string]any {
		return nested(d.Object, "spec", "template", "spec").(map[string]any)
	}
	d := render(nil)
	require.NotContains(t, fmt.Sprint(pod(d)), "attestation")
	require.NotContains(t, fmt.Sprint(pod(d)["securityContext"]), "fsGroup")

	d = render(map[string]any{"attestation": map[string]any{"keySecret": "kontinue-attestation"}})
	c := pod(d)["containers"].([]any)[0].(map[string]any)
	require.Contains(t, c["args"], "--attestation-key=/etc/kontinue/attestation/key.pem")
	require.Contains(t, c["volumeMounts"], map[string]any{"name": "attestation-key", "mountPath": "/etc/kontinue/attestation", "readOnly": true})
	require.Contains(t, pod(d)["volumes"], map[string]any{"name": "attestation-key", "secret": map[string]any{
		"secretName": "kontinue-attestation", "defaultMode": int64(0o440),
		"items": []any{map[string]any{"key": "key.pem", "path": "key.pem"}}}})
	require.EqualValues(t, 65532, nested(pod(d)["securityContext"].(map[string]any), "fsGroup"))

	_, err := RenderChart(repo(t), map[string]any{"attestation": map[string]any{"keySecret": "s", "secretKey": "../x"}})
	require.Error(t, err, "a key name that is no Secret key is refused by the schema")
}
