package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"kontinue.dev/kontinue/cli/view"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/rollout"
)

const haltedDelivery = `
apiVersion: carto.run/v1alpha1
kind: ClusterDelivery
metadata: {name: prod}
spec:
  selector: {app.example.com/delivery: prod}
  rollout:
    waves:
    - selector: {matchLabels: {canary: "true"}}
    - percent: 50
  resources:
  - name: cfg
    templateRef: {kind: ClusterTemplate, name: cfg}
status:
  conditions:
  - {type: RolledOut, status: "False", reason: Halted, message: "wave 1 of 3 halted: owner(s) failed on revision bbb: dev/c1 (kontinue rollout resume, or undo)"}
  rollout: {stable: aaa, target: bbb, wave: 0, waves: 3, phase: Halted, admitted: 2, updated: 1, owners: 5, failing: [dev/c1],
    revisions: [{name: aaa, chain: {}}, {name: bbb, chain: {}}]}
`

func yamlObj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	m := map[string]any{}
	require.NoError(t, yaml.Unmarshal([]byte(y), &m))
	return &unstructured.Unstructured{Object: m}
}

// deliverable is a Deliverable of chain prod on revision rev with Ready.
func deliverable(t *testing.T, name string, canary bool, rev, ready string) *unstructured.Unstructured {
	return yamlObj(t, fmt.Sprintf(`{apiVersion: carto.run/v1alpha1, kind: Deliverable, metadata: {name: %s, namespace: dev, generation: 1, labels: {canary: "%t"}},
status: {observedGeneration: 1, chainRevision: %s, deliveryRef: {kind: ClusterDelivery, name: prod}, conditions: [{type: Ready, status: "%s"}]}}`, name, canary, rev, ready))
}

// TestRolloutStatusWaves: `kontinue rollout status` lists each wave with
// its place, tally and owners (failed first), placed by the dashboard's
// view code; JSON has the same as "plan"; without a roll-out under way
// the waves are only named; owners that cannot be listed are said so.
func TestRolloutStatusWaves(t *testing.T) {
	chain := yamlObj(t, haltedDelivery)
	_, st, err := rollout.Read(chain.Object)
	require.NoError(t, err)
	var low, high string
	for i := 0; low == "" || high == ""; i++ {
		n := fmt.Sprintf("app-%d", i)
		if b := rollout.Bucket("dev", n); b < 50 && low == "" {
			low = n
		} else if b >= 50 && high == "" {
			high = n
		}
	}
	owners := []*unstructured.Unstructured{
		deliverable(t, "c2", true, "bbb", "True"),
		deliverable(t, "c1", true, "bbb", "False"),
		deliverable(t, low, false, "aaa", "True"),
		deliverable(t, high, false, "aaa", "True"),
		yamlObj(t, `{apiVersion: carto.run/v1alpha1, kind: Deliverable, metadata: {name: other, namespace: dev}, status: {deliveryRef: {name: staging}}}`),
		yamlObj(t, `{apiVersion: carto.run/v1alpha1, kind: Deliverable, metadata: {name: new, namespace: dev}}`),
	}
	out := rolloutReport(api.DeliverableFlavor, chain, st, owners, nil)
	var text bytes.Buffer
	printRolloutStatus(&text, out)
	golden(t, "rollout/halted.txt", text.String())
	b, err := json.MarshalIndent(out, "", "  ")
	require.NoError(t, err)
	golden(t, "rollout/halted.json", string(b)+"\n")
	require.Len(t, out.Plan, 3)
	require.Equal(t, []int{2, 1, 1}, []int{out.Plan[0].Owners, out.Plan[1].Owners, out.Plan[2].Owners})
	require.Nil(t, out.Rollout.Revisions, "the kept definitions are not printed")

	text.Reset()
	printRolloutStatus(&text, rolloutReport(api.DeliverableFlavor, chain, st, nil, errors.New("cannot list Deliverables: forbidden")))
	require.Contains(t, text.String(), "  (no owners shown: cannot list Deliverables: forbidden)\n")

	// A wave names at most view.MaxWaveMembers owners, and counts the rest.
	many := append([]*unstructured.Unstructured(nil), owners...)
	for i := 0; i < 150; i++ {
		many = append(many, deliverable(t, fmt.Sprintf("many-%d", i), false, "aaa", "True"))
	}
	out = rolloutReport(api.DeliverableFlavor, chain, st, many, nil)
	require.Len(t, out.Plan[1].Members, view.MaxWaveMembers)
	text.Reset()
	printRolloutStatus(&text, out)
	require.Contains(t, text.String(), fmt.Sprintf("         ... and %d more\n", out.Plan[1].Owners-view.MaxWaveMembers))

	// Owners nothing moves: passed over, said why, not "moving".
	paused := yamlObj(t, `
apiVersion: carto.run/v1alpha1
kind: ClusterDelivery
metadata: {name: prod, annotations: {kontinue.dev/rollout-paused: "true"}}
spec:
  rollout:
    waves:
    - selector: {matchLabels: {canary: "true"}}
    pauseOnFailure: false
  resources: []
status:
  conditions:
  - {type: RolledOut, status: Unknown, reason: Paused, message: "wave 1 of 2 paused: 1 of 5 admitted owner(s) Ready on revision bbb; 3 owner(s) passed over, which nothing can move now: dev/gone (Deleting), dev/left (DeliveryNotFound), dev/tenant (Unserved)"}
  rollout: {stable: aaa, target: bbb, wave: 0, waves: 2, phase: Paused, admitted: 5, updated: 1, owners: 6,
    passedOver: [{owner: dev/gone, reason: Deleting}, {owner: dev/left, reason: DeliveryNotFound}, {owner: dev/tenant, reason: Unserved}], passedOverCount: 3}
`)
	_, st, err = rollout.Read(paused.Object)
	require.NoError(t, err)
	tenant := func(name, shard string) *unstructured.Unstructured {
		return yamlObj(t, fmt.Sprintf(`{apiVersion: carto.run/v1alpha1, kind: Deliverable, metadata: {name: %s, namespace: dev, generation: 1, labels: {canary: "true", kontinue.dev/shard: %s}},
status: {observedGeneration: 1, chainRevision: aaa, deliveryRef: {kind: ClusterDelivery, name: prod}, conditions: [{type: Ready, status: "True"}]}}`, name, shard))
	}
	gone := deliverable(t, "gone", true, "aaa", "True")
	gone.SetDeletionTimestamp(&metav1.Time{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)})
	left := yamlObj(t, `{apiVersion: carto.run/v1alpha1, kind: Deliverable, metadata: {name: left, namespace: dev, generation: 1, labels: {canary: "true"}},
status: {observedGeneration: 1, chainRevision: aaa, deliveryRef: {kind: ClusterDelivery, name: prod}, conditions: [
  {type: DeliveryReady, status: "False", reason: DeliveryNotFound}, {type: Ready, status: "False", reason: DeliveryNotFound}]}}`)
	out = rolloutReport(api.DeliverableFlavor, paused, st, []*unstructured.Unstructured{
		deliverable(t, "c2", true, "bbb", "True"), deliverable(t, "c3", true, "aaa", "True"),
		tenant("tenant", "nowhere"), tenant("tenant-2", "nowhere"), gone, left}, nil)
	text.Reset()
	printRolloutStatus(&text, out)
	golden(t, "rollout/passedover.txt", text.String())
	require.Equal(t, 4, out.Plan[0].PassedOver, "the tenant's second owner too: its shard is the one the status names")

	done := yamlObj(t, `{apiVersion: carto.run/v1alpha1, kind: ClusterDelivery, metadata: {name: prod},
spec: {rollout: {waves: [{percent: 10}]}, resources: []}, status: {rollout: {stable: aaa, phase: Complete, owners: 4}}}`)
	_, st, err = rollout.Read(done.Object)
	require.NoError(t, err)
	text.Reset()
	printRolloutStatus(&text, rolloutReport(api.DeliverableFlavor, done, st, owners, nil))
	golden(t, "rollout/complete.txt", text.String())
}
