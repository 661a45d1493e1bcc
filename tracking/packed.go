package tracking

import (
	"fmt"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"kontinue.dev/kontinue/jsonvalue"
)

// packed is how the cache holds an object of a packed watch (the many
// objects: owners and what they stamped): its JSON, compressed (codec.go),
// with the few metadata fields the indexers, the informer and event
// routing read kept typed. A Workload with its status costs ~0.9 KiB so,
// against 4.7 KiB as JSON and 13 KiB as decoded maps. Reads decode a fresh
// copy.
type packed struct {
	meta keptMeta
	raw  []byte // the whole object, compacted, as compressed JSON
}

func (p *packed) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

func (p *packed) DeepCopyObject() runtime.Object {
	// raw is never written after packing: it can be shared.
	return &packed{meta: p.meta.deepCopy(), raw: p.raw}
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
	buf := getScratch()
	doc, err := p.json(*buf)
	if err != nil {
		putScratch(buf, *buf)
		return nil, err
	}
	// The decoders copy what they keep: the buffer can be reused.
	u := &unstructured.Unstructured{}
	m, ok := jsonvalue.DecodeObject(doc)
	if kind, _ := m["kind"].(string); ok && kind != "" {
		u.Object = m
	} else {
		err = u.UnmarshalJSON(doc) // its error
	}
	putScratch(buf, doc)
	if err != nil {
		return nil, fmt.Errorf("cached %s/%s: %w", p.meta.namespace, p.meta.name, err)
	}
	return u, nil
}

// json returns the object's JSON, decompressed into buf's storage when it
// fits.
func (p *packed) json(buf []byte) ([]byte, error) {
	doc, err := decompress(buf, p.raw)
	if err != nil {
		return nil, fmt.Errorf("cached %s/%s: %w", p.meta.namespace, p.meta.name, err)
	}
	return doc, nil
}

// pack is the transform of packed watches: compact, then keep as JSON.
func pack(obj any) (any, error) {
	u, err := toTransform(obj)
	if u == nil {
		return obj, err
	}
	Compact(u)
	doc, err := jsonvalue.Marshal(u.Object)
	if err != nil {
		return nil, err
	}
	p := &packed{raw: compress(doc)}
	// Names are not interned: each is one object's (or one owner's and
	// its few children's), a table entry would cost more than it saves.
	p.meta.name = u.GetName()
	p.meta.namespace = intern(u.GetNamespace())
	p.meta.uid = string(u.GetUID())
	p.meta.resourceVersion = u.GetResourceVersion()
	p.meta.owners = u.GetOwnerReferences()
	for i := range p.meta.owners {
		r := &p.meta.owners[i]
		r.APIVersion, r.Kind = intern(r.APIVersion), intern(r.Kind)
	}
	return p, nil
}

// trimmed is the transform of trimmed watches (TrimWith): what trim keeps
// of the object, packed.
func trimmed(trim func(map[string]any) map[string]any) cache.TransformFunc {
	return func(obj any) (any, error) {
		u, err := toTransform(obj)
		if u == nil {
			return obj, err
		}
		kept := trim(u.Object)
		kept["apiVersion"], kept["kind"] = u.Object["apiVersion"], u.Object["kind"] // an object decodes with them only
		return pack(&unstructured.Unstructured{Object: kept})
	}
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

// jsonOf returns a cached item as JSON: a packed item's decompressed into
// buf's storage when it fits, others marshalled.
func jsonOf(item any, buf []byte) ([]byte, bool) {
	if p, ok := item.(*packed); ok {
		doc, err := p.json(buf)
		return doc, err == nil
	}
	u, ok := unpack(item)
	if !ok {
		return nil, false
	}
	doc, err := jsonvalue.Marshal(u.Object)
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
	meta             keptMeta
	apiVersion, kind string
}

func (s *slimmed) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

func (s *slimmed) DeepCopyObject() runtime.Object {
	return &slimmed{meta: s.meta.deepCopy(), apiVersion: s.apiVersion, kind: s.kind}
}

// GetObjectMeta makes slimmed a meta.Accessor (keys, indexers, informer).
func (s *slimmed) GetObjectMeta() metav1.Object { return &s.meta }

func (s *slimmed) object() *unstructured.Unstructured {
	md := map[string]any{"name": s.meta.name, "uid": s.meta.uid, "resourceVersion": s.meta.resourceVersion}
	if s.meta.namespace != "" {
		md["namespace"] = s.meta.namespace
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
	s.meta.name, s.meta.namespace = u.GetName(), intern(u.GetNamespace())
	s.meta.uid, s.meta.resourceVersion = string(u.GetUID()), u.GetResourceVersion()
	return s, nil
}
