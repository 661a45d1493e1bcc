package apply

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func u(t *testing.T, js string) *unstructured.Unstructured {
	t.Helper()
	o := &unstructured.Unstructured{}
	if err := o.UnmarshalJSON([]byte(js)); err != nil {
		t.Fatal(err)
	}
	return o
}

func TestUpToDate(t *testing.T) {
	live := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","resourceVersion":"7","labels":{"x":"1","other":"y"}},
	  "data":{"k":"v"},"spec":{"replicas":3,"ports":[{"port":80,"name":"http"}],"empty":{}}}`
	cases := []struct {
		name    string
		desired string
		want    bool
	}{
		{"same fields", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","labels":{"x":"1"}},"data":{"k":"v"}}`, true},
		{"fields others added are ignored", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`, true},
		{"changed value", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"w"}}`, false},
		{"missing field", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"new":"v"}}`, false},
		{"missing label", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"z":"1"}}}`, false},
		{"float desired equals int live", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"spec":{"replicas":3.0}}`, true},
		{"list element differs", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"spec":{"ports":[{"port":81}]}}`, false},
		{"list subset of element fields", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"spec":{"ports":[{"port":80}]}}`, true},
		{"list length differs", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"spec":{"ports":[{"port":80},{"port":81}]}}`, false},
		{"empty map absent in live is fine", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"spec":{"gone":{}}}`, true},
		{"null absent in live is fine", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"spec":{"gone":null}}`, true},
		{"type changed", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"spec":{"replicas":"3"}}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, UpToDate(u(t, c.desired), u(t, live)))
		})
	}
	assert.False(t, UpToDate(u(t, `{"kind":"ConfigMap"}`), nil), "no live object")
}

func TestDigestIsStableAndContentSensitive(t *testing.T) {
	a := map[string]any{"b": 1, "a": map[string]any{"y": "1", "x": "2"}}
	b := map[string]any{"a": map[string]any{"x": "2", "y": "1"}, "b": 1}
	assert.Equal(t, Digest(a), Digest(b), "key order does not matter")
	assert.Len(t, Digest(a), 32)
	c := map[string]any{"a": map[string]any{"x": "2", "y": "2"}, "b": 1}
	assert.NotEqual(t, Digest(a), Digest(c))
	// Runs carry it as a label value: it must not depend on number types.
	assert.Equal(t, Digest(map[string]any{"x": int64(1)}), Digest(map[string]any{"x": float64(1)}))
}

func FuzzUpToDate(f *testing.F) {
	f.Add(`{"a":{"b":[1,2,{"c":"d"}]}}`, `{"a":{"b":[1,2,{"c":"d","e":1}]}}`)
	f.Add(`{"a":null}`, `{}`)
	f.Add(`[1]`, `{"a":1}`)
	f.Fuzz(func(t *testing.T, desired, live string) {
		var d, l map[string]any
		if json.Unmarshal([]byte(desired), &d) != nil || json.Unmarshal([]byte(live), &l) != nil {
			return
		}
		dd := &unstructured.Unstructured{Object: d}
		ll := &unstructured.Unstructured{Object: l}
		_ = UpToDate(dd, ll)
		if d != nil {
			assert.True(t, UpToDate(dd, &unstructured.Unstructured{Object: d}), "an object is up to date with itself")
		}
	})
}

// A float64 conversion would take 2^53+1 for 2^53 and skip a needed write.
func TestUpToDateLargeIntegers(t *testing.T) {
	live := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"n": int64(1<<53 + 1)}}}
	assert.False(t, UpToDate(&unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"n": float64(1 << 53)}}}, live))
	assert.True(t, UpToDate(&unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"n": int64(1<<53 + 1)}}}, live))
	assert.True(t, UpToDate(&unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"n": float64(3)}}}, &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"n": int64(3)}}}))
}

func TestLeaves(t *testing.T) {
	live := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","uid":"u","resourceVersion":"7",
	  "labels":{"x":"1"},"managedFields":[{"manager":"kontinue","operation":"Update"}]},
	  "data":{"k":"v","j":"w"},"spec":{"ports":[{"port":80,"name":"http"}]},"status":{"ready":true}}`
	cases := []struct {
		name    string
		desired string
		want    bool
	}{
		{"every field set, values changed", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"x":"2"}},
		  "data":{"k":"v2","j":"w2"},"spec":{"ports":[{"port":81,"name":"web"}]}}`, false},
		{"more fields", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"labels":{"x":"1","y":"2"}},"data":{"k":"v","j":"w","i":"u"},"spec":{"ports":[{"port":80,"name":"http","protocol":"TCP"}]}}`, false},
		{"a data key dropped", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"labels":{"x":"1"}},"data":{"k":"v"},"spec":{"ports":[{"port":80,"name":"http"}]}}`, true},
		{"a label dropped", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{},"data":{"k":"v","j":"w"},"spec":{"ports":[{"port":80,"name":"http"}]}}`, true},
		{"a list element's field dropped", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"labels":{"x":"1"}},"data":{"k":"v","j":"w"},"spec":{"ports":[{"port":80}]}}`, true},
		{"a list shorter", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"labels":{"x":"1"}},"data":{"k":"v","j":"w"},"spec":{"ports":[]}}`, true},
		{"a whole field dropped", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"labels":{"x":"1"}},"data":{"k":"v","j":"w"}}`, true},
		{"a value that became a scalar", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"labels":{"x":"1"}},"data":"text","spec":{"ports":[{"port":80,"name":"http"}]}}`, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, Leaves(u(t, c.desired), u(t, live)))
		})
	}
}

func TestStored(t *testing.T) {
	secret := func(extra map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s"}}}
		for k, v := range extra {
			u.Object[k] = v
		}
		return u
	}
	tests := []struct {
		name string
		in   *unstructured.Unstructured
		want map[string]any // the object's fields besides apiVersion, kind, metadata
	}{
		{"stringData becomes data", secret(map[string]any{"stringData": map[string]any{"token": "abc"}}),
			map[string]any{"data": map[string]any{"token": "YWJj"}}},
		{"merged over data, stringData winning", secret(map[string]any{"data": map[string]any{"a": "eA==", "token": "b2xk"}, "stringData": map[string]any{"token": "abc"}}),
			map[string]any{"data": map[string]any{"a": "eA==", "token": "YWJj"}}},
		{"empty data", secret(map[string]any{"data": nil, "stringData": map[string]any{"t": ""}}),
			map[string]any{"data": map[string]any{"t": ""}}},
		{"no stringData: unchanged", secret(map[string]any{"data": map[string]any{"a": "eA=="}}),
			map[string]any{"data": map[string]any{"a": "eA=="}}},
		{"a value that is not a string: left for the API server to refuse", secret(map[string]any{"stringData": map[string]any{"n": int64(3)}}),
			map[string]any{"stringData": map[string]any{"n": int64(3)}}},
		{"another kind with stringData: unchanged", &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Secret", "metadata": map[string]any{}, "stringData": map[string]any{"a": "b"}}},
			map[string]any{"stringData": map[string]any{"a": "b"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			Stored(tt.in)
			got := map[string]any{}
			for k, v := range tt.in.Object {
				if k != "apiVersion" && k != "kind" && k != "metadata" {
					got[k] = v
				}
			}
			assert.Equal(t, tt.want, got)
		})
	}
	// What the API server keeps of a Secret applied with stringData holds
	// the stored form: up to date, nothing left out.
	desired := secret(map[string]any{"stringData": map[string]any{"token": "abc"}})
	Stored(desired)
	live := secret(map[string]any{"data": map[string]any{"token": "YWJj"}, "type": "Opaque"})
	assert.True(t, UpToDate(desired, live))
	assert.False(t, Leaves(desired, live))
}
