package tracking

import (
	"encoding/json"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func decoded(t *testing.T, uid string) *unstructured.Unstructured {
	t.Helper()
	raw := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a-` + uid + `","namespace":"dev","uid":"` + uid + `",
	"labels":{"carto.run/workload-name":"app"},
	"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"big\":true}","note":"kept"},
	"managedFields":[{"manager":"x"}]},"data":{"k":"v"}}`
	u := &unstructured.Unstructured{}
	require.NoError(t, json.Unmarshal([]byte(raw), &u.Object))
	return u
}

func TestCompactDropsWhatIsNeverReadAndSharesStrings(t *testing.T) {
	a, b := decoded(t, "u-1"), decoded(t, "u-2")
	_, err := compact(a)
	require.NoError(t, err)
	_, err = compact(b)
	require.NoError(t, err)

	md := a.Object["metadata"].(map[string]any)
	assert.NotContains(t, md, "managedFields")
	assert.Equal(t, map[string]any{"note": "kept"}, md["annotations"], "only kubectl's copy goes")
	assert.Equal(t, "a-u-1", a.GetName())
	assert.Equal(t, map[string]any{"k": "v"}, a.Object["data"])

	same := func(x, y string) bool { return unsafe.StringData(x) == unsafe.StringData(y) }
	keyOf := func(m map[string]any, want string) string {
		for k := range m {
			if k == want {
				return k
			}
		}
		t.Fatalf("no key %q", want)
		return ""
	}
	mb := b.Object["metadata"].(map[string]any)
	assert.True(t, same(keyOf(md, "namespace"), keyOf(mb, "namespace")), "keys are shared")
	assert.True(t, same(a.GetNamespace(), b.GetNamespace()), "repeated values are shared")
	assert.True(t, same(a.GetLabels()["carto.run/workload-name"], b.GetLabels()["carto.run/workload-name"]))
	assert.False(t, same(a.GetName(), b.GetName()))
}

func BenchmarkCompact(b *testing.B) {
	raw := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"app-source","namespace":"dev","uid":"2f0d8c4e-5b8a-4d3e-9f43-0c1f6b1f8f11","resourceVersion":"12345",
	"labels":{"carto.run/workload-name":"app","carto.run/workload-namespace":"dev","carto.run/supply-chain-name":"chain","carto.run/resource-name":"source","kontinue.dev/stamped":"true"},
	"ownerReferences":[{"apiVersion":"carto.run/v1alpha1","kind":"Workload","name":"app","uid":"8a1","controller":true,"blockOwnerDeletion":true}]},"data":{"url":"https://example.com/app.tar.gz","revision":"abc"}}`)
	b.ReportAllocs()
	for b.Loop() {
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal(raw, &u.Object); err != nil {
			b.Fatal(err)
		}
		if _, err := compact(u); err != nil {
			b.Fatal(err)
		}
	}
}

func TestCompactKeepsOnlyWhetherKontinueCreated(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries string
		marked  bool
	}{
		{"created by kontinue", `[{"manager":"kontinue","operation":"Update","fieldsV1":{"f:data":{}}}]`, true},
		{"applied by kontinue", `[{"manager":"kontinue","operation":"Apply","fieldsV1":{"f:data":{}}}]`, false},
		{"after the upgrade", `[{"manager":"kontinue","operation":"Apply"},{"manager":"kubectl","operation":"Update"}]`, false},
		{"status subresource", `[{"manager":"kontinue","operation":"Update","subresource":"status"}]`, false},
		{"someone else's update", `[{"manager":"kubectl-edit","operation":"Update"}]`, false},
		{"none", `[]`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &unstructured.Unstructured{}
			require.NoError(t, json.Unmarshal([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","managedFields":`+tc.entries+`}}`), &u.Object))
			assert.Equal(t, tc.marked, HasUpdateEntry(u), "before")
			_, err := compact(u)
			require.NoError(t, err)
			assert.Equal(t, tc.marked, HasUpdateEntry(u), "the cache keeps the answer")
			mf, kept := u.Object["metadata"].(map[string]any)["managedFields"]
			assert.Equal(t, tc.marked, kept)
			if kept {
				assert.Equal(t, []any{map[string]any{"manager": "kontinue", "operation": "Update"}}, mf, "without the fields")
			}
		})
	}
}
