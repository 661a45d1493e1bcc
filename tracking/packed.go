package tracking

import (
	"encoding/json"
	"fmt"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// packed is how the cache holds an object of a packed watch (the many
// objects: owners and what they stamped): its JSON, about a third of the
// memory of the decoded maps (a Workload with its status: 4 KiB against
// 13 KiB), with the few metadata fields the indexers, the informer and
// event routing read kept typed. Reads decode a fresh copy.
type packed struct {
	meta metav1.ObjectMeta // name, namespace, uid, resourceVersion, owner references
	raw  []byte            // the whole object, compacted
}

func (p *packed) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

func (p *packed) DeepCopyObject() runtime.Object {
	// raw is never written after packing: it can be shared.
	return &packed{meta: *p.meta.DeepCopy(), raw: p.raw}
}

// GetObjectMeta makes packed a meta.Accessor (keys, namespace index,
// controller index, the informer's resourceVersion checks).
func (p *packed) GetObjectMeta() metav1.Object { return &p.meta }

// decodes counts the packed objects decoded in this process (Decoded).
var decodes atomic.Int64

// Decoded is how many cached objects of packed watches (owners, stamped
// objects) were decoded since the process started: what reading them
// costs, for benchmarks.
func Decoded() int64 { return decodes.Load() }

// object decodes the object.
func (p *packed) object() (*unstructured.Unstructured, error) {
	decodes.Add(1)
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(p.raw); err != nil {
		return nil, fmt.Errorf("cached %s/%s: %w", p.meta.Namespace, p.meta.Name, err)
	}
	return u, nil
}

// pack is the transform of packed watches: compact, then keep as JSON.
func pack(obj any) (any, error) {
	u, err := toTransform(obj)
	if u == nil {
		return obj, err
	}
	Compact(u)
	raw, err := json.Marshal(u.Object)
	if err != nil {
		return nil, err
	}
	p := &packed{raw: raw}
	p.meta.Name = intern(u.GetName())
	p.meta.Namespace = intern(u.GetNamespace())
	p.meta.UID = u.GetUID()
	p.meta.ResourceVersion = u.GetResourceVersion()
	p.meta.OwnerReferences = u.GetOwnerReferences()
	for i := range p.meta.OwnerReferences {
		r := &p.meta.OwnerReferences[i]
		r.APIVersion, r.Kind, r.Name = intern(r.APIVersion), intern(r.Kind), intern(r.Name)
	}
	return p, nil
}

// unpack returns a cached item as an object: decoded when packed.
func unpack(item any) (*unstructured.Unstructured, bool) {
	switch o := item.(type) {
	case *unstructured.Unstructured:
		return o, true
	case *packed:
		u, err := o.object()
		return u, err == nil
	case *slimmed:
		return o.object(), true
	}
	return nil, false
}

// jsonOf returns a cached item as JSON: a packed item's own bytes
// (shared: read-only), others marshalled.
func jsonOf(item any) ([]byte, bool) {
	if p, ok := item.(*packed); ok {
		return p.raw, true
	}
	u, ok := unpack(item)
	if !ok {
		return nil, false
	}
	doc, err := json.Marshal(u.Object)
	return doc, err == nil
}

// metaOf returns a cached item's metadata without decoding it.
func metaOf(item any) (metav1.Object, bool) {
	m, err := meta.Accessor(item)
	return m, err == nil
}

// slimmed is how the cache holds an object of a slim watch: only what
// says it exists (name, namespace, UID; resourceVersion for the
// informer). A ServiceAccount's secrets, labels, annotations and
// managedFields are never read.
type slimmed struct {
	meta             metav1.ObjectMeta
	apiVersion, kind string
}

func (s *slimmed) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

func (s *slimmed) DeepCopyObject() runtime.Object {
	return &slimmed{meta: *s.meta.DeepCopy(), apiVersion: s.apiVersion, kind: s.kind}
}

// GetObjectMeta makes slimmed a meta.Accessor (keys, indexers, informer).
func (s *slimmed) GetObjectMeta() metav1.Object { return &s.meta }

func (s *slimmed) object() *unstructured.Unstructured {
	md := map[string]any{"name": s.meta.Name, "uid": string(s.meta.UID), "resourceVersion": s.meta.ResourceVersion}
	if s.meta.Namespace != "" {
		md["namespace"] = s.meta.Namespace
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": s.apiVersion, "kind": s.kind, "metadata": md}}
}

// slim is the transform of slim watches.
func slim(obj any) (any, error) {
	u, err := toTransform(obj)
	if u == nil {
		return obj, err
	}
	s := &slimmed{apiVersion: intern(u.GetAPIVersion()), kind: intern(u.GetKind())}
	s.meta.Name, s.meta.Namespace = u.GetName(), intern(u.GetNamespace())
	s.meta.UID, s.meta.ResourceVersion = u.GetUID(), u.GetResourceVersion()
	return s, nil
}
