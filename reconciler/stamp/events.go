package stamp

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/record"
)

// Event reasons, all of them (docs/status.md lists them for users).
const (
	// EventStampedObjectApplied: an object was created or changed (on the
	// owner or Runnable that stamped it).
	EventStampedObjectApplied = "StampedObjectApplied"
	// EventRunRetried: a run was created for a retry token
	// (annotations.Retry): the message names the failed run, the new one
	// and the token.
	EventRunRetried = "RunRetried"
	// EventStampedObjectRemoved: an object no step stamps any more, or a
	// run retention does not keep, was deleted.
	EventStampedObjectRemoved = "StampedObjectRemoved"
	// EventStampedObjectNotRemoved (Warning): the service account may not
	// delete such an object; it is retried when RBAC changes.
	EventStampedObjectNotRemoved = "StampedObjectNotRemoved"
	// EventResourceOutputChanged: a step found a new output.
	EventResourceOutputChanged = "ResourceOutputChanged"
	// EventResourceHealthyStatusChange: a step's Healthy status changed
	// (Warning when it is now False).
	EventResourceHealthyStatusChange = "ResourceHealthyStatusChanged"
	// A step whose Ready turns False gets a Warning event whose reason is
	// the step's own (TemplateStampFailure, TemplateRejectedByAPIServer,
	// ServiceAccountError, FailedConditionMet, an unhealthy step's Healthy
	// reason …), once per change, naming the step.
	// EventTemplatesNotFound (Warning, on a chain): the message names each
	// missing template by kind and name (the condition, in Cartographer's
	// words, names only the steps).
	EventTemplatesNotFound = "TemplatesNotFound"
	// EventStampedObjectContested (Warning): another writer sets a field
	// back after each of Kontinue's writes; Kontinue stopped writing the
	// object for a while (fights.go). The message names the object, the
	// field and the other manager; once per fight found.
	EventStampedObjectContested = "StampedObjectContested"
	// EventStatusTooLarge (Warning, on an owner): its status had to be cut
	// to fit what the API server takes; the message says what was dropped
	// (as the StatusTruncated condition does).
	EventStatusTooLarge = "StatusTooLarge"
	// The owner matches several chains equally well: the reason is the
	// chain condition's (MultipleSupplyChainMatches, MultipleDeliveryMatches).
)

var eventsGVR = corev1.SchemeGroupVersion.WithResource("events")

// Events records Kubernetes events through the dynamic client, with
// client-go's aggregation and spam filtering.
type Events struct {
	b      record.EventBroadcaster
	rec    record.EventRecorder
	budget *eventBudget
	// Dropped is called for each Normal event past its namespace's budget.
	Dropped func(reason string)
}

// NewEvents starts a recorder; Shutdown flushes it.
func NewEvents(dyn dynamic.Interface) *Events {
	// client-go's spam filter allows 25 events per object, then one per 5
	// minutes: an owner whose steps change often would lose its events.
	b := record.NewBroadcaster(record.WithCorrelatorOptions(record.CorrelatorOptions{BurstSize: 100, QPS: 1.0 / 60}))
	b.StartRecordingToSink(&dynamicSink{dyn: dyn})
	return &Events{b: b, rec: b.NewRecorder(runtime.NewScheme(), corev1.EventSource{Component: "kontinue"}),
		budget: newEventBudget(NormalEventRate, NormalEventBurst)}
}

// Event records an event on obj. Normal events past the namespace's budget
// are dropped (see NormalEventBurst).
func (e *Events) Event(obj *unstructured.Unstructured, typ, reason, msgFmt string, args ...any) {
	if typ == corev1.EventTypeNormal && e.budget != nil && !e.budget.allow(obj.GetNamespace(), time.Now()) {
		if e.Dropped != nil {
			e.Dropped(reason)
		}
		return
	}
	e.rec.Eventf(obj, typ, reason, msgFmt, args...)
}

// Shutdown stops the recorder.
func (e *Events) Shutdown() { e.b.Shutdown() }

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

// applied records on f.Owner that live was written for f.Step.
func (e *Events) applied(f For, live *unstructured.Unstructured) {
	name := live.GetName()
	if ns := live.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	e.Event(f.Owner, corev1.EventTypeNormal, EventStampedObjectApplied, "Applied %s %s for step [%s]", live.GetKind(), name, f.Step)
}

// fought records on f.Owner a fight err found for f.Step (nothing for any
// other error, or a fight found before).
func (e *Events) fought(f For, err error) {
	if fight, ok := Declared(err); ok && f.Owner != nil {
		e.Event(f.Owner, corev1.EventTypeWarning, EventStampedObjectContested, "Step [%s]: %v", f.Step, fight)
	}
}
