package dashboard

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

func TestSameOrigin(t *testing.T) {
	for _, tc := range []struct {
		host, origin string
		want         bool
	}{
		{"127.0.0.1:8082", "", true},
		{"127.0.0.1:8082", "http://127.0.0.1:8082", true},
		{"127.0.0.1:8082", "http://localhost:8082", false},
		{"127.0.0.1:8082", "http://127.0.0.1:9999", false},
		{"127.0.0.1:8082", "https://evil.example.com", false},
		{"127.0.0.1:8082", "null", false},
	} {
		r := httptest.NewRequest(http.MethodPost, "http://"+tc.host+"/api/reconcile", nil)
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		require.Equal(t, tc.want, sameOrigin(r), "%s from %q", tc.host, tc.origin)
	}
}

func TestServiceAccountConfig(t *testing.T) {
	base := &rest.Config{Host: "https://k8s", BearerToken: "controller"}
	for _, tc := range []struct {
		ref, user, err string
	}{
		{"team/viewer", "system:serviceaccount:team:viewer", ""},
		{"viewer", "", "namespace/name"},
		{"/viewer", "", "namespace/name"},
		{"team/", "", "namespace/name"},
		{"a/b/c", "", "namespace/name"},
	} {
		got, err := ServiceAccountConfig(base, tc.ref)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, tc.ref)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tc.user, got.Impersonate.UserName)
		require.Empty(t, base.Impersonate.UserName, "the controller's own config is not changed")
	}
}

func TestEvent(t *testing.T) {
	require.Equal(t, "event: owner\ndata: {\"a\":\"x\\ny\"}\n\n", string(event("owner", map[string]string{"a": "x\ny"})),
		"one data line: JSON escapes newlines")
}

// The read-only dashboard (the controller's) refuses the only write, and
// the page and its assets come from the binary.
func TestHandlerReadOnlyAndEmbedded(t *testing.T) {
	s := New(nil, Options{})
	h := s.Handler()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/api/reconcile", strings.NewReader(`{"kind":"Workload","namespace":"a","name":"b"}`))
	req.Header.Set(CSRFHeader, "1")
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusForbidden, rec.Code)
	require.Contains(t, rec.Body.String(), "read-only")

	for path, want := range map[string]string{"/": "<script src=\"app.js\">", "/app.js": "EventSource", "/style.css": "--fail"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		require.Equal(t, http.StatusOK, rec.Code, path)
		require.Contains(t, rec.Body.String(), want, path)
		require.NotContains(t, rec.Body.String(), "https://", "%s fetches nothing from the internet", path)
	}
}

// POST /api/rollout: refused on the read-only page (no RolloutFunc), from
// another site or without the header, for a bad verb or kind; else the
// function the CLI shares gets exactly the request, and its error keeps
// the API server's code.
func TestRolloutPost(t *testing.T) {
	post := func(s *Server, body string, header bool, origin string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8082/api/rollout", strings.NewReader(body))
		if header {
			req.Header.Set(CSRFHeader, "1")
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		s.Handler().ServeHTTP(rec, req)
		return rec
	}
	good := `{"verb":"pause","kind":"ClusterSupplyChain","name":"web"}`

	ro := New(nil, Options{Reconcile: func(context.Context, string, string, string) (string, error) { return "", nil }})
	require.False(t, ro.Snapshot().Identity.Rollout, "the page offers no roll-out buttons")
	rec := post(ro, good, true, "")
	require.Equal(t, http.StatusForbidden, rec.Code)
	require.Contains(t, rec.Body.String(), "read-only")

	var calls []string
	fail := error(nil)
	s := New(nil, Options{Rollout: func(_ context.Context, verb, kind, name string) (string, error) {
		calls = append(calls, verb+" "+kind+" "+name)
		return kind + " " + name + ": roll-out paused", fail
	}})
	require.True(t, s.Snapshot().Identity.Rollout)
	require.True(t, s.Snapshot().Identity.ReadOnly, "no reconcile button: its own switch")
	rec = post(s, good, false, "")
	require.Equal(t, http.StatusForbidden, rec.Code, "no header")
	require.Contains(t, rec.Body.String(), "cross-site")
	rec = post(s, good, true, "https://evil.example.com")
	require.Equal(t, http.StatusForbidden, rec.Code, "another origin")
	for _, bad := range []string{`{"verb":"delete","kind":"ClusterSupplyChain","name":"web"}`, `{"verb":"pause","kind":"Workload","name":"web"}`,
		`{"verb":"pause","kind":"ClusterDelivery"}`, `not json`} {
		require.Equal(t, http.StatusBadRequest, post(s, bad, true, "").Code, bad)
	}
	require.Empty(t, calls, "nothing refused reached the function")

	rec = post(s, good, true, "http://127.0.0.1:8082")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.JSONEq(t, `{"message":"ClusterSupplyChain web: roll-out paused"}`, rec.Body.String())
	require.Equal(t, []string{"pause ClusterSupplyChain web"}, calls)

	fail = apierrors.NewForbidden(schema.GroupResource{Group: "carto.run", Resource: "clustersupplychains"}, "web", errors.New("no RBAC"))
	rec = post(s, `{"verb":"undo","kind":"ClusterDelivery","name":"prod"}`, true, "")
	require.Equal(t, http.StatusForbidden, rec.Code, "the caller's rights: the API server's answer")
	require.Contains(t, rec.Body.String(), "no RBAC")
	require.Equal(t, "undo ClusterDelivery prod", calls[1])
}

func TestLocalHost(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1:8082": true, "localhost:8082": true, "localhost": true, "[::1]:8082": true, "10.0.0.7:80": true,
		"localhost.:8082": true, "evil.example.com:8082": false, "evil.example.com": false, "127.0.0.1.nip.io:8082": false, "": false,
	} {
		require.Equal(t, want, localHost(host), host)
	}
	s := New(nil, Options{LocalOnly: true})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/api/state", nil)
	req.Host = "rebound.example.com:8082"
	s.Handler().ServeHTTP(rec, req)
	require.Equal(t, http.StatusMisdirectedRequest, rec.Code)
	require.Contains(t, rec.Body.String(), "refused")
}

// A kind refused after its first list is flagged; a list or watch the API
// server accepts again clears the flag and tells the viewers, also when no
// object changed (no informer event would).
func TestKindRefusedThenReadable(t *testing.T) {
	s := New(nil, Options{})
	k := s.kinds[0]
	c := s.subscribe()
	require.Contains(t, string(<-c), "event: snapshot")
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "carto.run", Resource: "workloads"}, "", errors.New("no RBAC"))
	kind := func() KindState {
		for _, k := range s.Snapshot().Kinds {
			if k.Resource == "workloads" {
				return k
			}
		}
		t.Fatal("no workloads kind")
		return KindState{}
	}
	nextKinds := func() string {
		select {
		case m := <-c:
			require.Contains(t, string(m), "event: kinds")
			return string(m)
		default:
			t.Fatal("no kinds event sent")
			return ""
		}
	}
	noEvent := func(why string) {
		select {
		case m := <-c:
			t.Fatalf("%s, sent %s", why, m)
		default:
		}
	}

	s.failed(k, forbidden)
	require.True(t, kind().Forbidden)
	require.Contains(t, nextKinds(), `"forbidden":true`)
	s.failed(k, forbidden)
	noEvent("the same refusal again")

	s.readable(k)
	require.False(t, kind().Forbidden)
	require.Empty(t, kind().Error)
	require.NotContains(t, nextKinds(), `"forbidden":true`)
	s.readable(k)
	noEvent("readable again")

	// Synced, then revoked, then granted again.
	s.mu.Lock()
	k.Synced = true
	s.mu.Unlock()
	s.failed(k, errors.New("watch closed"))
	noEvent("an ended watch of a synced kind is resumed, not shown")
	require.Empty(t, kind().Error)
	s.failed(k, forbidden)
	require.True(t, kind().Forbidden)
	require.Contains(t, nextKinds(), `"forbidden":true`)
	s.readable(k)
	require.False(t, kind().Forbidden)
	require.Empty(t, kind().Error)
	require.True(t, kind().Synced)
	require.NotContains(t, nextKinds(), `"forbidden":true`)
}

// TestUnchangedOwnerSendsNothing: an update of an owner that changes
// nothing the page shows sends no event; a real change does. With many
// owners, pages draw only real changes.
func TestUnchangedOwnerSendsNothing(t *testing.T) {
	s := New(nil, Options{})
	c := s.subscribe()
	require.Contains(t, string(<-c), "event: snapshot\n")
	owners := func() []string {
		var got []string
		for {
			select {
			case msg := <-c:
				if strings.HasPrefix(string(msg), "event: owner") {
					got = append(got, strings.SplitN(string(msg), "\n", 2)[0])
				}
			default:
				return got
			}
		}
	}
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "carto.run/v1alpha1", "kind": "Workload",
		"metadata": map[string]any{"name": "app", "namespace": "dev", "resourceVersion": "1", "generation": int64(1)},
		"status": map[string]any{"observedGeneration": int64(1), "conditions": []any{
			map[string]any{"type": "Ready", "status": "False", "reason": "SupplyChainNotFound", "message": "no chain"}}},
	}}
	s.onOwner(w, false)
	require.Equal(t, []string{"event: owner"}, owners())

	w = w.DeepCopy()
	w.SetResourceVersion("2")
	w.SetAnnotations(map[string]string{"example.com/unrelated": "x"})
	w.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl"}})
	s.onOwner(w, false)
	require.Empty(t, owners(), "nothing the page shows changed")

	w = w.DeepCopy()
	require.NoError(t, unstructured.SetNestedSlice(w.Object, []any{
		map[string]any{"type": "Ready", "status": "True", "reason": "Ready"}}, "status", "conditions"))
	s.onOwner(w, false)
	require.Equal(t, []string{"event: owner"}, owners())

	s.onOwner(w, true)
	require.Equal(t, []string{"event: ownerDeleted"}, owners())
	s.onOwner(w, false)
	require.Equal(t, []string{"event: owner"}, owners(), "created again: sent again")
}

func TestParseObjectQuery(t *testing.T) {
	for _, tc := range []struct {
		query string
		gvr   schema.GroupVersionResource
		err   string
	}{
		{"apiVersion=v1&resource=configmaps&namespace=dev&name=app", schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, ""},
		{"apiVersion=kpack.io/v1alpha2&resource=images.kpack.io&namespace=dev&name=app", schema.GroupVersionResource{Group: "kpack.io", Version: "v1alpha2", Resource: "images"}, ""},
		{"apiVersion=carto.run/v1alpha1&resource=clustertemplates.carto.run&name=t", schema.GroupVersionResource{Group: "carto.run", Version: "v1alpha1", Resource: "clustertemplates"}, ""},
		{"apiVersion=v1&resource=configmaps&namespace=dev&name=../../secrets/x", schema.GroupVersionResource{}, "name"},
		{"apiVersion=v1&resource=configmaps/status&namespace=dev&name=a", schema.GroupVersionResource{}, "resource"},
		{"apiVersion=v1&resource=images.kpack.io&namespace=dev&name=a", schema.GroupVersionResource{}, "resource"},
		{"apiVersion=../v1&resource=configmaps&namespace=dev&name=a", schema.GroupVersionResource{}, "apiVersion"},
		{"apiVersion=v1&resource=configmaps&namespace=Dev/x&name=a", schema.GroupVersionResource{}, "namespace"},
		{"resource=configmaps&namespace=dev&name=a", schema.GroupVersionResource{}, "apiVersion"},
	} {
		q, err := url.ParseQuery(tc.query)
		require.NoError(t, err)
		got, err := parseObjectQuery(q)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, tc.query)
			continue
		}
		require.NoError(t, err, tc.query)
		require.Equal(t, tc.gvr, got.gvr, tc.query)
	}
}

// /api/history refuses what is not an owner before reading anything: its
// values become a URL path on the API server.
func TestHistoryQuery(t *testing.T) {
	h := New(nil, Options{}).Handler()
	for _, q := range []string{"kind=Runnable&namespace=a&name=b", "kind=Workload&namespace=a/b&name=c", "kind=Workload&namespace=&name=c",
		"kind=Workload&namespace=a&name=..%2Fsecrets", "kind=Deliverable&namespace=a&name="} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/history?"+q, nil))
		require.Equal(t, http.StatusBadRequest, rec.Code, q)
	}
}
