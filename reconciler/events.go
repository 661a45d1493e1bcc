package reconciler

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/record"
)

// Event reasons on owners (the contract's).
const (
	EventStampedObjectApplied        = "StampedObjectApplied"
	EventStampedObjectRemoved        = "StampedObjectRemoved"
	EventResourceOutputChanged       = "ResourceOutputChanged"
	EventResourceHealthyStatusChange = "ResourceHealthyStatusChanged"
	// On a chain whose steps name templates that do not exist: the message
	// names each one by kind and name (the condition, in Cartographer's
	// words, names only the steps).
	EventTemplatesNotFound = "TemplatesNotFound"
)

var eventsGVR = corev1.SchemeGroupVersion.WithResource("events")

// eventRecorder records Kubernetes events through the dynamic client, with
// client-go's aggregation and spam filtering.
type eventRecorder struct {
	b   record.EventBroadcaster
	rec record.EventRecorder
}

func newEventRecorder(dyn dynamic.Interface) *eventRecorder {
	// client-go's spam filter allows 25 events per object, then one per 5
	// minutes: an owner whose steps change often would lose its events.
	b := record.NewBroadcaster(record.WithCorrelatorOptions(record.CorrelatorOptions{BurstSize: 100, QPS: 1.0 / 60}))
	b.StartRecordingToSink(&dynamicSink{dyn: dyn})
	return &eventRecorder{b: b, rec: b.NewRecorder(runtime.NewScheme(), corev1.EventSource{Component: "kontinue"})}
}

func (e *eventRecorder) event(obj *unstructured.Unstructured, typ, reason, msgFmt string, args ...any) {
	e.rec.Eventf(obj, typ, reason, msgFmt, args...)
}

func (e *eventRecorder) shutdown() { e.b.Shutdown() }

type dynamicSink struct{ dyn dynamic.Interface }

func (s *dynamicSink) client(ns string) dynamic.ResourceInterface {
	return s.dyn.Resource(eventsGVR).Namespace(ns)
}

func (s *dynamicSink) Create(ev *corev1.Event) (*corev1.Event, error) {
	u, err := toUnstructured(ev)
	if err != nil {
		return nil, err
	}
	out, err := s.client(ev.Namespace).Create(context.Background(), u, metav1.CreateOptions{})
	return fromUnstructured(out, err)
}

func (s *dynamicSink) Update(ev *corev1.Event) (*corev1.Event, error) {
	u, err := toUnstructured(ev)
	if err != nil {
		return nil, err
	}
	out, err := s.client(ev.Namespace).Update(context.Background(), u, metav1.UpdateOptions{})
	return fromUnstructured(out, err)
}

func (s *dynamicSink) Patch(ev *corev1.Event, data []byte) (*corev1.Event, error) {
	out, err := s.client(ev.Namespace).Patch(context.Background(), ev.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
	return fromUnstructured(out, err)
}

func toUnstructured(ev *corev1.Event) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ev)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion("v1")
	u.SetKind("Event")
	return u, nil
}

func fromUnstructured(u *unstructured.Unstructured, err error) (*corev1.Event, error) {
	if err != nil {
		return nil, err
	}
	ev := &corev1.Event{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ev); err != nil {
		return nil, err
	}
	return ev, nil
}
