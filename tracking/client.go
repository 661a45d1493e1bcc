package tracking

import (
	"bytes"
	"io"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// NewDynamic returns a dynamic client for cfg, as dynamic.NewForConfig
// does, except that JSON answers and watch events are decoded in one
// read (decodeObject, splitEvent), and a watch's events are framed
// without a depth limit (eventFramer): an object as deep as the API server
// sends it is read. What they cannot read (a Status, an error, a kind
// apimachinery types itself) goes to apimachinery's decoder as before.
func NewDynamic(cfg *rest.Config) (*dynamic.DynamicClient, error) {
	c := dynamic.ConfigFor(cfg)
	c.NegotiatedSerializer = newFastSerializer(c.NegotiatedSerializer)
	// As dynamic.NewForConfigAndClient: the paths are the client's own.
	c.GroupVersion = nil
	c.APIPath = "/if-you-see-this-search-for-the-break"
	hc, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, err
	}
	rc, err := rest.UnversionedRESTClientForConfigAndClient(c, hc)
	if err != nil {
		return nil, err
	}
	return dynamic.New(rc), nil
}

// metaScheme knows what the dynamic client's own scheme types (Status,
// WatchEvent, the options): those are left to apimachinery.
var metaScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return s
}()

// byName are the kinds metaScheme makes in any group and version (Status,
// APIVersions, …): apimachinery types those whatever the apiVersion says.
var byName = func() map[string]bool {
	names := map[string]bool{}
	for gvk := range metaScheme.AllKnownTypes() {
		if _, err := metaScheme.New(schema.GroupVersionKind{Group: "probe.invalid", Version: "v0", Kind: gvk.Kind}); err == nil {
			names[gvk.Kind] = true
		}
	}
	return names
}()

// typed reports whether apimachinery would decode gvk into a type of its
// own rather than an Unstructured.
func typed(gvk schema.GroupVersionKind) bool {
	return byName[gvk.Kind] || metaScheme.Recognizes(gvk)
}

// plainKind reports whether apimachinery reads m's kind and apiVersion as
// decodeObject did: it reads them first with encoding/json, which matches
// keys case-insensitively ("Kind", "KIND") and refuses a value that is not
// a string.
func plainKind(m map[string]any) bool {
	for k, v := range m {
		switch {
		case k == "kind" || k == "apiVersion":
			if _, ok := v.(string); !ok && v != nil {
				return false
			}
		case len(k) <= 3*len("apiVersion") && (strings.EqualFold(k, "kind") || strings.EqualFold(k, "apiVersion")):
			return false // a key that folds to it (K is also the Kelvin sign)
		}
	}
	return true
}

var watchEventGVK = schema.GroupVersionKind{Version: "v1", Kind: "WatchEvent"}

type fastSerializer struct {
	runtime.NegotiatedSerializer
	infos []runtime.SerializerInfo
}

func newFastSerializer(base runtime.NegotiatedSerializer) fastSerializer {
	infos := append([]runtime.SerializerInfo(nil), base.SupportedMediaTypes()...)
	for i := range infos {
		if infos[i].MediaType != runtime.ContentTypeJSON {
			continue
		}
		infos[i].Serializer = objectCodec{infos[i].Serializer}
		if ss := infos[i].StreamSerializer; ss != nil {
			events := *ss
			events.Serializer = eventDecoder{ss.Serializer}
			events.Framer = eventFramer{ss.Framer}
			infos[i].StreamSerializer = &events
		}
	}
	return fastSerializer{NegotiatedSerializer: base, infos: infos}
}

func (s fastSerializer) SupportedMediaTypes() []runtime.SerializerInfo { return s.infos }

// objectCodec decodes an object into an Unstructured, and encodes an
// Unstructured request body, with MarshalJSON: the same bytes as
// apimachinery's (compact JSON and a newline), without reflection.
type objectCodec struct{ runtime.Serializer }

func (d objectCodec) Encode(obj runtime.Object, w io.Writer) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return d.Serializer.Encode(obj, w)
	}
	doc, err := MarshalJSON(u.Object)
	if err != nil {
		return d.Serializer.Encode(obj, w) // its error
	}
	_, err = w.Write(append(doc, '\n'))
	return err
}

func (d objectCodec) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	u, isU := into.(*unstructured.Unstructured)
	if (into != nil && !isU) || defaults != nil {
		return d.Serializer.Decode(data, defaults, into)
	}
	m, ok := decodeObject(data)
	if !ok {
		return d.Serializer.Decode(data, defaults, into)
	}
	obj := &unstructured.Unstructured{Object: m}
	gvk := obj.GroupVersionKind()
	if gvk.Kind == "" || !plainKind(m) || (!isU && (gvk.Version == "" || typed(gvk))) {
		return d.Serializer.Decode(data, defaults, into)
	}
	if isU {
		u.Object = m
		return u, &gvk, nil
	}
	return obj, &gvk, nil
}

// eventDecoder decodes a watch event's frame, leaving its object to
// objectCodec.
type eventDecoder struct{ runtime.Serializer }

func (d eventDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	ev, isEvent := into.(*metav1.WatchEvent)
	if !isEvent || defaults != nil {
		return d.Serializer.Decode(data, defaults, into)
	}
	typ, object, ok := splitEvent(data)
	if !ok {
		return d.Serializer.Decode(data, defaults, into)
	}
	ev.Type = typ
	// The frame's buffer is reused for the next one.
	ev.Object = runtime.RawExtension{Raw: bytes.Clone(object)}
	gvk := watchEventGVK
	return ev, &gvk, nil
}
