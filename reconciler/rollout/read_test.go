package rollout

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestReadOwner: what a roll-out decides on of an owner, read from the
// owner as the cache decodes it (int64 numbers) or as encoding/json does
// (float64), and from bad input without a panic; the same from the owner
// trimmed (Trim: the other shards' owners are cached so).
func TestReadOwner(t *testing.T) {
	const ready = `{"metadata": {"namespace": "ns", "name": "app", "generation": 3, "labels": {"canary": "true"}},
		"status": {"observedGeneration": 3, "chainRevision": "B", "supplyChainRef": {"name": "web"},
		"conditions": [{"type": "Other", "status": "False"}, {"type": "Ready", "status": "True"}]}}`
	for _, tc := range []struct {
		name, doc, ref, chain string
		want                  Owner
	}{
		{name: "ready on B", doc: ready, ref: RefSupplyChain, chain: "web",
			want: Owner{Namespace: "ns", Name: "app", Labels: map[string]string{"canary": "true"}, Revision: "B", Ready: "True", Current: true}},
		{name: "the other kind's ref: no chain", doc: ready, ref: RefDelivery,
			want: Owner{Namespace: "ns", Name: "app", Labels: map[string]string{"canary": "true"}, Revision: "B", Ready: "True", Current: true}},
		{name: "an older generation's status", ref: RefDelivery, chain: "prod",
			doc:  `{"metadata": {"namespace": "ns", "name": "d", "generation": 4}, "status": {"observedGeneration": 3, "deliveryRef": {"name": "prod"}, "conditions": [{"type": "Ready", "status": "False"}]}}`,
			want: Owner{Namespace: "ns", Name: "d", Ready: "False"}},
		{name: "no status yet", ref: RefSupplyChain, doc: `{"metadata": {"namespace": "ns", "name": "new", "generation": 1}}`,
			want: Owner{Namespace: "ns", Name: "new"}},
		{name: "being deleted, no chain selects it", ref: RefSupplyChain, chain: "web",
			doc: `{"metadata": {"namespace": "ns", "name": "gone", "generation": 2, "deletionTimestamp": "2024-01-01T00:00:00Z", "finalizers": ["x"]},
				"status": {"observedGeneration": 2, "supplyChainRef": {"name": "web"}, "conditions": [{"type": "SupplyChainReady", "status": "False", "reason": "SupplyChainNotFound", "message": "m"}, {"type": "Ready", "status": "False", "reason": "SupplyChainNotFound"}]}}`,
			want: Owner{Namespace: "ns", Name: "gone", Ready: "False", Current: true, Deleting: true, ChainReason: "SupplyChainNotFound"}},
		{name: "a Deliverable's chain condition, True again", ref: RefDelivery, chain: "prod",
			doc: `{"metadata": {"namespace": "ns", "name": "d", "generation": 1},
				"status": {"observedGeneration": 1, "deliveryRef": {"name": "prod"}, "conditions": [{"type": "DeliveryReady", "status": "False", "reason": "DeliveryNotFound"}, {"type": "DeliveryReady", "status": "True", "reason": "Ready"}]}}`,
			want: Owner{Namespace: "ns", Name: "d", Current: true}},
		{name: "garbage where the status goes", ref: RefSupplyChain,
			doc:  `{"metadata": {"namespace": "ns", "name": "x", "labels": {"a": 1}}, "status": {"supplyChainRef": "web", "chainRevision": 7, "conditions": "Ready"}}`,
			want: Owner{Namespace: "ns", Name: "x", Labels: map[string]string{"a": ""}, Current: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var std map[string]any
			require.NoError(t, json.Unmarshal([]byte(tc.doc), &std))
			u := &unstructured.Unstructured{}
			require.NoError(t, u.UnmarshalJSON(append([]byte(`{"apiVersion": "carto.run/v1alpha1", "kind": "Workload", `), tc.doc[1:]...)))
			for _, obj := range []map[string]any{std, u.Object, Trim(std), Trim(u.Object)} {
				chain, o := ReadOwner(obj, tc.ref)
				require.Equal(t, tc.chain, chain)
				require.Equal(t, tc.want, o)
			}
		})
	}
}

// TestTrimKeepsLittle: a trimmed owner keeps what ReadOwner reads and what
// a cache tells versions by, nothing of its spec or the rest of its status.
func TestTrimKeepsLittle(t *testing.T) {
	var obj map[string]any
	require.NoError(t, json.Unmarshal([]byte(`{"apiVersion": "carto.run/v1alpha1", "kind": "Workload",
		"metadata": {"namespace": "ns", "name": "app", "uid": "u1", "resourceVersion": "42", "generation": 3,
			"labels": {"a": "b"}, "annotations": {"big": "x"}, "managedFields": [{}]},
		"spec": {"source": {"git": {"url": "u"}}},
		"status": {"observedGeneration": 3, "chainRevision": "B", "supplyChainRef": {"name": "web", "kind": "ClusterSupplyChain"},
			"resources": [{"name": "step"}], "conditions": [{"type": "SupplyChainReady", "status": "True"}, {"type": "Ready", "status": "True", "reason": "Ready", "message": "m"}]}}`), &obj))
	got, err := json.Marshal(Trim(obj))
	require.NoError(t, err)
	require.JSONEq(t, `{"metadata": {"namespace": "ns", "name": "app", "uid": "u1", "resourceVersion": "42", "generation": 3, "labels": {"a": "b"}},
		"status": {"observedGeneration": 3, "chainRevision": "B", "supplyChainRef": {"name": "web"}, "conditions": [{"type": "Ready", "status": "True"}]}}`, string(got))

	// Being deleted, and no chain selecting it: its deletionTimestamp and
	// its chain condition's reason, not the message.
	require.NoError(t, json.Unmarshal([]byte(`{"metadata": {"namespace": "ns", "name": "app", "generation": 3, "deletionTimestamp": "2024-01-01T00:00:00Z", "finalizers": ["x"]},
		"status": {"observedGeneration": 3, "conditions": [{"type": "SupplyChainReady", "status": "False", "reason": "SupplyChainNotFound", "message": "long"}, {"type": "Ready", "status": "False", "reason": "SupplyChainNotFound", "message": "long"}]}}`), &obj))
	got, err = json.Marshal(Trim(obj))
	require.NoError(t, err)
	require.JSONEq(t, `{"metadata": {"namespace": "ns", "name": "app", "generation": 3, "deletionTimestamp": "2024-01-01T00:00:00Z"},
		"status": {"observedGeneration": 3, "conditions": [{"type": "SupplyChainReady", "status": "False", "reason": "SupplyChainNotFound"}, {"type": "Ready", "status": "False"}]}}`, string(got))
}

// FuzzTrim: whatever an owner holds, its trimmed copy reads the same, for
// either kind, and nothing panics.
func FuzzTrim(f *testing.F) {
	f.Add(`{"metadata": {"namespace": "ns", "name": "a", "generation": 2, "labels": {"x": "y"}}, "status": {"observedGeneration": 2, "deliveryRef": {"name": "d"}, "chainRevision": "R", "conditions": [{"type": "Ready", "status": "False"}, {"type": "Ready", "status": "True"}]}}`)
	f.Add(`{"metadata": 1, "status": {"supplyChainRef": [], "conditions": [1, {"type": "Ready"}]}}`)
	f.Add(`{"status": null}`)
	f.Add(`{"metadata": {"deletionTimestamp": null}, "status": {"conditions": [{"type": "DeliveryReady", "status": "False", "reason": 3}, {"type": "SupplyChainReady", "status": "False", "reason": "X"}, {"type": "DeliveryReady", "status": "True"}]}}`)
	f.Fuzz(func(t *testing.T, doc string) {
		var obj map[string]any
		if json.Unmarshal([]byte(doc), &obj) != nil {
			return
		}
		for _, ref := range []string{RefSupplyChain, RefDelivery} {
			c1, o1 := ReadOwner(obj, ref)
			c2, o2 := ReadOwner(Trim(obj), ref)
			require.Equal(t, c1, c2)
			require.Equal(t, o1, o2)
		}
	})
}
