package main

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Each tenant of -fairness has its own chain and templates, selecting only
// its own workloads.
func TestTenantChainYAML(t *testing.T) {
	objs, err := parseObjects(tenantChainYAML("noisy"))
	require.NoError(t, err)
	var names []string
	for _, o := range objs {
		names = append(names, o.GetKind()+"/"+o.GetName())
	}
	require.Equal(t, []string{"ClusterSourceTemplate/noisy-source", "ClusterImageTemplate/noisy-image", "ClusterTemplate/noisy-app", "ClusterSupplyChain/noisy"}, names)
	sel, _, _ := unstructured.NestedStringMap(objs[3].Object, "spec", "selector")
	require.Equal(t, map[string]string{chainLabel: "noisy"}, sel)
	require.Contains(t, fmt.Sprint(objs[3].Object["spec"]), "noisy-app")
	require.Equal(t, "noisy", tenantWorkload("noisy", 3).GetLabels()[chainLabel])
}

func TestParseWaves(t *testing.T) {
	got, err := parseWaves("template, restart,create")
	require.NoError(t, err)
	require.Equal(t, []string{waveTemplate, waveRestart, waveCreate}, got)
	_, err = parseWaves("template,tsunami")
	require.ErrorContains(t, err, `unknown wave "tsunami"`)
}
