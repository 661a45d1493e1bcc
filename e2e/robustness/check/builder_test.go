package check

import (
	"encoding/json"
	"fmt"
	"time"
)

// Small hand-made histories for the checks' tests.

const kontinue = "system:serviceaccount:kontinue-system:kontinue"

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

type builder struct {
	h   *History
	seq int
	rv  int64
}

func newBuilder() *builder {
	return &builder{h: &History{Kontinue: kontinue, Begin: t0, End: at(1000)}}
}

// obj is an object's JSON: kind, namespace, name, uid, then options.
type obj map[string]any

func object(kind, ns, name, uid string, opts ...func(obj)) obj {
	o := obj{"kind": kind, "metadata": map[string]any{"name": name, "namespace": ns, "uid": uid}}
	for _, f := range opts {
		f(o)
	}
	return o
}

func (o obj) md() map[string]any { return o["metadata"].(map[string]any) }

func labels(kv ...string) func(obj) {
	return func(o obj) {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		o.md()["labels"] = m
	}
}

func annotations(kv ...string) func(obj) {
	return func(o obj) {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		o.md()["annotations"] = m
	}
}

func controlledBy(kind, name, uid string) func(obj) {
	return func(o obj) {
		o.md()["ownerReferences"] = []any{map[string]any{"kind": kind, "name": name, "uid": uid, "controller": true}}
	}
}

func generation(g int64) func(obj) { return func(o obj) { o.md()["generation"] = g } }

func with(path string, v any) func(obj) {
	return func(o obj) {
		o[path] = v
	}
}

// stamped: the labels and controller of an object Kontinue stamps for
// Workload app (uid w1), step.
func stamped(step string, extra ...string) func(obj) {
	return func(o obj) {
		kv := append([]string{LabelStamped, "true", LabelWorkload, "app", LabelStep, step, LabelTemplate, "tmpl-" + step}, extra...)
		labels(kv...)(o)
		controlledBy("Workload", "app", "w1")(o)
	}
}

// write records a write at sec seconds: verb, user (and impersonated
// user), resource ("configmaps", "deployments.apps", "workloads.carto.run",
// with "/status" for the subresource), code and the response object.
func (b *builder) write(sec float64, verb, user, as, resource string, code int, o obj) *Event {
	b.seq++
	b.rv++
	res, sub := resource, ""
	if i := indexByte(res, '/'); i >= 0 {
		res, sub = res[:i], res[i+1:]
	}
	group := ""
	if i := indexByte(res, '.'); i >= 0 {
		res, group = res[:i], res[i+1:]
	}
	e := &Event{Seq: b.seq, Time: at(sec), Verb: verb, User: user, As: as, Group: group, Resource: res, Subresource: sub, Code: code}
	if o != nil {
		md := o.md()
		if _, ok := md["resourceVersion"]; !ok {
			md["resourceVersion"] = fmt.Sprint(b.rv)
		}
		e.Namespace, _ = md["namespace"].(string)
		e.Name, _ = md["name"].(string)
		raw, err := json.Marshal(o)
		if err != nil {
			panic(err)
		}
		e.Response = raw
		e.Obj = MetaOf(raw)
		delete(md, "resourceVersion")
	}
	b.h.Events = append(b.h.Events, e)
	b.h.incs = nil
	return e
}

// attempt records a write at sec seconds that the API server refused
// (code), of the request object o.
func (b *builder) attempt(sec float64, verb, user, as, resource string, code int, o obj) *Event {
	e := b.write(sec, verb, user, as, resource, code, nil)
	e.Namespace, _ = o.md()["namespace"].(string)
	e.Name, _ = o.md()["name"].(string)
	raw, err := json.Marshal(o)
	if err != nil {
		panic(err)
	}
	e.Req = MetaOf(raw)
	return e
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

func (b *builder) mark(sec float64, scope string) {
	b.h.Marks = append(b.h.Marks, Mark{At: at(sec), Scope: scope, What: "op"})
}
