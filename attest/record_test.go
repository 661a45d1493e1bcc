package attest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"kontinue.dev/kontinue/reconciler/history"
	st "kontinue.dev/kontinue/reconciler/status"
)

func TestDue(t *testing.T) {
	moved := func(f func(rs []st.Resource)) []st.Resource {
		rs := workload().Resources
		f(rs)
		return rs
	}
	for _, tt := range []struct {
		name       string
		prev, next []st.Resource
		want       []string
	}{
		{name: "the same status: a restart, a resync", prev: workload().Resources, next: workload().Resources},
		{name: "an owner's first status", next: workload().Resources, want: []string{"source", "build", "deploy"}},
		{name: "a new set succeeded", prev: workload().Resources, next: moved(func(rs []st.Resource) {
			rs[1].Provenance.Current.Digest = "b2"
			rs[1].Outputs = []st.Output{output("image", "registry.example.com/app@sha256:"+strings.Repeat("1", 64))}
		}), want: []string{"build"}},
		{name: "the same set rendered from another template (a chain edit)", prev: workload().Resources, next: moved(func(rs []st.Resource) {
			rs[2].TemplateRef = &st.TemplateRef{Kind: "ClusterTemplate", Name: "deploy-v2"}
		}), want: []string{"deploy"}},
		{name: "a source's new commit from the same set", prev: workload().Resources, next: moved(func(rs []st.Resource) {
			rs[0].Outputs[1] = output("revision", "main@sha1:"+strings.Repeat("1", 40))
		}), want: []string{"source"}},
		{name: "a newer set processing or failed: the outputs are still the current's", prev: workload().Resources, next: moved(func(rs []st.Resource) {
			rs[1].Provenance.Latest = &st.InputSet{Digest: "b2", Outcome: st.OutcomeFailed, EndedAt: &ended}
			rs[1].Provenance.Held = &st.InputSet{Digest: "b3", Outcome: st.OutcomeHeld}
		})},
		{name: "nothing succeeded", prev: nil, next: moved(func(rs []st.Resource) {
			for i := range rs {
				rs[i].Provenance.Current.Outcome = st.OutcomeProcessing
			}
		})},
		{name: "a step without provenance (cut from a status too large)", prev: workload().Resources, next: moved(func(rs []st.Resource) {
			rs[2].Provenance = nil
		})},
		{name: "a step that moved to another object", prev: workload().Resources, next: moved(func(rs []st.Resource) {
			rs[2].StampedRef.Name = "app-deploy-2"
		}), want: []string{"deploy"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Due(tt.prev, tt.next))
		})
	}
}

func deliverable(labels, ann map[string]string, ref *metav1.OwnerReference) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetKind("Deliverable")
	u.SetNamespace("dev")
	u.SetName("app")
	u.SetLabels(labels)
	u.SetAnnotations(ann)
	if ref != nil {
		u.SetOwnerReferences([]metav1.OwnerReference{*ref})
	}
	return u
}

func TestUpstreamOf(t *testing.T) {
	yes := true
	ctrl := &metav1.OwnerReference{APIVersion: "carto.run/v1alpha1", Kind: "Workload", Name: "app", UID: types.UID("w1"), Controller: &yes}
	labels := map[string]string{"carto.run/workload-name": "app", "carto.run/resource-name": "deliverable"}
	ann := map[string]string{"kontinue.dev/applied-digest": "dd1"}
	for _, tt := range []struct {
		name string
		obj  *unstructured.Unstructured
		want *Upstream
	}{
		{name: "stamped by a workload step", obj: deliverable(labels, ann, ctrl),
			want: &Upstream{Kind: "Workload", Namespace: "dev", Name: "app", UID: "w1", Step: "deliverable", Digest: "dd1"}},
		{name: "its set named: re-rendered since the set was taken", obj: deliverable(labels, map[string]string{"kontinue.dev/applied-digest": "dd2", "kontinue.dev/input-set": "dd1"}, ctrl),
			want: &Upstream{Kind: "Workload", Namespace: "dev", Name: "app", UID: "w1", Step: "deliverable", Digest: "dd1"}},
		{name: "labels of another workload: the step is not known", obj: deliverable(map[string]string{"carto.run/workload-name": "other", "carto.run/resource-name": "x"}, ann, ctrl),
			want: &Upstream{Kind: "Workload", Namespace: "dev", Name: "app", UID: "w1"}},
		{name: "no controller", obj: deliverable(labels, ann, nil)},
		{name: "a controller that is no workload", obj: deliverable(labels, ann, &metav1.OwnerReference{Kind: "Flux", Name: "x", Controller: &yes})},
		{name: "an owner reference that is not the controller", obj: deliverable(labels, ann, &metav1.OwnerReference{Kind: "Workload", Name: "app"})},
		{name: "a workload", obj: func() *unstructured.Unstructured {
			u := deliverable(labels, ann, ctrl)
			u.SetKind("Workload")
			return u
		}()},
		{name: "nil"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, UpstreamOf(tt.obj))
		})
	}
}

// The controller's half: the steps Due signed, each under its key, and
// verifiable with the public key; nothing when nothing changed.
func TestSignerExtra(t *testing.T) {
	priv, pub := keyPair(t, "p256")
	sk, err := ParseKey(priv)
	require.NoError(t, err)
	vk, err := ParseKey(pub)
	require.NoError(t, err)
	var lines []string
	s := NewSigner(sk, "v9")
	s.logf = func(msg string, _ ...any) { lines = append(lines, msg) }
	status := workload()
	o := history.Owner{APIVersion: "carto.run/v1alpha1", Kind: "Workload", Namespace: "dev", Name: "app", UID: "u1", Status: &status}

	assert.Empty(t, s.Extra(o, status.Resources, status.Resources), "nothing changed")
	got := s.Extra(o, nil, status.Resources)
	require.Len(t, got, 3)
	for _, step := range []string{"source", "build", "deploy"} {
		env := got[DataKey(step)]
		require.NotEmpty(t, env, step)
		assert.NotContains(t, env, "\n", "one line: .intoto.jsonl")
		stmt, err := Verify(context.Background(), vk, []byte(env))
		require.NoError(t, err, step)
		b, err := Marshal(stmt)
		require.NoError(t, err)
		j := gjson.ParseBytes(b)
		assert.Equal(t, step, j.Get("predicate.buildDefinition.externalParameters.step").String())
		assert.Equal(t, "web", j.Get("predicate.buildDefinition.externalParameters.chain.name").String(), "the chain from the status written")
		assert.Equal(t, "v9", j.Get("predicate.runDetails.builder.version.kontinue").String())
	}
	assert.Empty(t, lines)

	// A step whose name makes no ConfigMap key is logged and skipped; a
	// passThrough step (nothing to name) is skipped quietly.
	odd := workload()
	odd.Resources[1].Name = "build step"
	odd.Resources[2].Outputs, odd.Resources[2].StampedRef = nil, nil
	got = s.Extra(history.Owner{Kind: "Workload", Namespace: "dev", Name: "app", Status: &odd}, nil, odd.Resources)
	assert.Len(t, got, 1)
	assert.Contains(t, got, DataKey("source"))
	assert.Equal(t, []string{"attestation not written: the step's name makes no ConfigMap key"}, lines)
}

func TestCompare(t *testing.T) {
	stmt := func(f func(s *st.OwnerStatus, o *Owner), step string) *intoto.Statement {
		s, o := workload(), wl
		if f != nil {
			f(&s, &o)
		}
		x, err := Build(Input{Owner: o, Status: s, Step: step, Version: "v1"})
		require.NoError(t, err)
		return x
	}
	now := stmt(nil, "build")
	for _, tt := range []struct {
		name   string
		signed *intoto.Statement
		want   string // in the error; "" none
	}{
		{name: "the same", signed: stmt(nil, "build")},
		{name: "another builder version, same statement", signed: func() *intoto.Statement {
			s := workload()
			x, err := Build(Input{Owner: wl, Status: s, Step: "build", Version: "v0"})
			require.NoError(t, err)
			return x
		}()},
		{name: "another step's", signed: stmt(nil, "deploy"), want: "is about Workload dev/app step [deploy], not Workload dev/app step [build]"},
		{name: "another owner's", signed: stmt(func(_ *st.OwnerStatus, o *Owner) { o.Name = "other" }, "build"), want: "Workload dev/other"},
		{name: "an owner of that name deleted since", signed: stmt(func(_ *st.OwnerStatus, o *Owner) { o.UID = "u0" }, "build"), want: "uid u0"},
		{name: "an older input set", signed: stmt(func(s *st.OwnerStatus, _ *Owner) { s.Resources[1].Provenance.Current.Digest = "b0" }, "build"),
			want: "input set b0; the step's current set is b1"},
		{name: "the same set, other outputs", signed: stmt(func(s *st.OwnerStatus, _ *Owner) {
			s.Resources[1].Outputs = []st.Output{output("image", "registry.example.com/app:other")}
		}, "build"), want: "subject differs"},
		{name: "the same set, other inputs recorded", signed: stmt(func(s *st.OwnerStatus, _ *Owner) {
			s.Resources[1].Provenance.Current.Sources[0].Revision = "main@sha1:" + strings.Repeat("0", 40)
		}, "build"), want: "resolvedDependencies differs"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := Compare(tt.signed, now)
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

// TestRetain: a step's key keeps its newest envelopes, oldest first,
// within a count and a size; the fresh one always.
func TestRetain(t *testing.T) {
	for _, tt := range []struct {
		name      string
		kept      []string
		fresh     string
		keep, max int
		want      []string
	}{
		{name: "nothing kept", fresh: "f", keep: 5, max: 100, want: []string{"f"}},
		{name: "appended, oldest first", kept: []string{"a", "b"}, fresh: "f", keep: 5, max: 100, want: []string{"a", "b", "f"}},
		{name: "the count: the oldest go", kept: []string{"a", "b", "c", "d", "e"}, fresh: "f", keep: 3, max: 100, want: []string{"d", "e", "f"}},
		{name: "a count of one: the fresh alone", kept: []string{"a"}, fresh: "f", keep: 1, max: 100, want: []string{"f"}},
		{name: "the size, with line ends: the oldest go", kept: []string{"aaaa", "bbbb", "cccc"}, fresh: "ffff", keep: 5, max: 15, want: []string{"bbbb", "cccc", "ffff"}},
		{name: "the size: an older one too large stops there", kept: []string{"a", "bbbbbbbbbb", "c"}, fresh: "f", keep: 5, max: 8, want: []string{"c", "f"}},
		{name: "a fresh one larger than the size is kept alone", kept: []string{"a"}, fresh: "ffffff", keep: 5, max: 4, want: []string{"ffffff"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Retain(tt.kept, tt.fresh, tt.keep, tt.max))
		})
	}
}

func TestEnvelopes(t *testing.T) {
	assert.Empty(t, Envelopes(""))
	assert.Equal(t, []string{"a"}, Envelopes("a"), "one envelope, as written before a step kept several")
	assert.Equal(t, []string{"a", "b"}, Envelopes("a\n\n  b \n"))
}

// TestSignerMerge: what a step's key keeps when a new statement is
// signed: the owner's statements of its last input sets, each set once,
// newest last; nothing the key cannot vouch for.
func TestSignerMerge(t *testing.T) {
	priv, _ := keyPair(t, "p256")
	sk, err := ParseKey(priv)
	require.NoError(t, err)
	otherPriv, _ := keyPair(t, "p256")
	other, err := ParseKey(otherPriv)
	require.NoError(t, err)
	s := NewSigner(sk, "v9")
	o := history.Owner{APIVersion: "carto.run/v1alpha1", Kind: "Workload", Namespace: "dev", Name: "app", UID: "u1"}
	// sign is the statement of build's output image n (a set of its own),
	// of owner uid, signed with k.
	sign := func(n int, uid string, k *Key) string {
		status := workload()
		status.Resources[1].Provenance.Current.Digest = fmt.Sprintf("set%d", n)
		status.Resources[1].Outputs = []st.Output{output("image", "registry.example.com/app@sha256:"+strings.Repeat(fmt.Sprintf("%x", n%16), 64))}
		stmt, err := Build(Input{Owner: Owner{APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, UID: uid}, Status: status, Step: "build"})
		require.NoError(t, err)
		env, err := Sign(context.Background(), k, stmt)
		require.NoError(t, err)
		return string(env)
	}
	e := make([]string, 8)
	for i := range e {
		e[i] = sign(i, "u1", sk)
	}
	again := sign(1, "u1", sk) // set 1 taken again: another signature of the same subjects
	var tampered map[string]any
	require.NoError(t, json.Unmarshal([]byte(e[2]), &tampered))
	tampered["payload"] = strings.Replace(tampered["payload"].(string), "A", "B", 1)
	altered, _ := json.Marshal(tampered)
	lines := func(l ...string) string { return strings.Join(l, "\n") }
	key := DataKey("build")
	for _, tt := range []struct {
		name        string
		key, stored string
		fresh       string
		want        string
	}{
		{name: "nothing stored: the fresh one", key: key, fresh: e[1], want: e[1]},
		{name: "an earlier set's kept before it", key: key, stored: e[0], fresh: e[1], want: lines(e[0], e[1])},
		{name: "the same set again: named once, by its newest", key: key, stored: lines(e[0], e[1]), fresh: again, want: lines(e[0], again)},
		{name: "the last KeepStatements sets", key: key, stored: lines(e[0], e[1], e[2], e[3], e[4], e[5]), fresh: e[6],
			want: lines(e[2], e[3], e[4], e[5], e[6])},
		{name: "another owner's (a uid of a deleted owner of that name) dropped", key: key, stored: lines(sign(3, "u0", sk), e[0]), fresh: e[1], want: lines(e[0], e[1])},
		{name: "one signed with another key dropped", key: key, stored: lines(sign(3, "u1", other), e[0]), fresh: e[1], want: lines(e[0], e[1])},
		{name: "an altered one dropped", key: key, stored: lines(string(altered), e[0]), fresh: e[1], want: lines(e[0], e[1])},
		{name: "lines that are no envelope dropped", key: key, stored: lines("", "{not json", e[0], ""), fresh: e[1], want: lines(e[0], e[1])},
		{name: "not an attestation's key: replaced", key: "other", stored: e[0], fresh: e[1], want: e[1]},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, s.Merge(o, tt.key, tt.stored, tt.fresh))
		})
	}
}
