package notify

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/google/uuid"

	"kontinue.dev/kontinue/notify/api"
)

// Source is the CDEvents source of what Kontinue sends.
const Source = "kontinue.dev/kontinue"

// CDEvents are built here, in the shape of CDEvents v0.5, not with the
// CDEvents Go SDK: the SDK compiles every schema of the spec when its
// package initialises, in every process that links it (measured with
// GODEBUG=inittrace=1: 223 ms and 33 MB allocated, 9 MiB of it kept; the
// controller, each CLI command and each renderer child paid it, and the
// controller's baseline heap went from 5 to 14 MiB in `make bench`). The
// SDK stays the oracle: the tests validate every event built here with
// its schemas (TestCDEvents, and e2e TestNotifications' receiver).
const cdSpecVersion = "0.5.0"

// CDEvent is a CDEvent in the spec's JSON form.
type CDEvent struct {
	Context               CDContext `json:"context"`
	Subject               CDSubject `json:"subject"`
	CustomData            any       `json:"customData,omitempty"`
	CustomDataContentType string    `json:"customDataContentType,omitempty"`
}

// CDContext is a CDEvent's context.
type CDContext struct {
	ID          string `json:"id"`
	Source      string `json:"source"`
	Type        string `json:"type"`
	Timestamp   string `json:"timestamp"`
	SpecVersion string `json:"specversion"`
}

// CDSubject is a CDEvent's subject; Content is the subject type's own.
type CDSubject struct {
	ID      string         `json:"id"`
	Source  string         `json:"source"`
	Content map[string]any `json:"content"`
}

// cdReference is a CDEvents reference to another subject.
func cdReference(id string) map[string]any { return map[string]any{"id": id, "source": Source} }

// CDEventOf is e as a CDEvent (CDEvents v0.5): a step failing and
// recovering are an incident detected and resolved, a deployment a service
// deployed (rolled back when its shadow serves), a run started and
// finished a pipelineRun's, an image published an artifact's, a new source
// revision a change merged. nil: e has none.
func CDEventOf(e *Event) *CDEvent {
	subject := e.Kind + "/" + e.Namespace + "/" + e.Name + "/" + e.Step
	env := cdReference(e.Namespace)
	artifact := "pkg:generic/" + url.PathEscape(e.Name)
	if e.Revision != "" {
		artifact += "@" + url.PathEscape(e.Revision)
	}
	var typ string
	content := map[string]any{}
	switch e.Type {
	case api.EventStepFailed, api.EventStepRecovered:
		typ = "incident.detected"
		if e.Type == api.EventStepRecovered {
			typ = "incident.resolved"
		}
		content["description"] = Line(e, "")
		content["environment"] = env
		content["service"] = cdReference(e.Kind + "/" + e.Name)
		content["artifactId"] = artifact
	case api.EventDeployed, api.EventRolledBack:
		typ = "service.deployed"
		if e.Type == api.EventRolledBack {
			typ = "service.rolledback"
		}
		content["environment"] = env
		content["artifactId"] = artifact
	case api.EventStepStarted:
		typ = "pipelinerun.started"
		content["pipelineName"] = e.Chain + "/" + e.Step
	case api.EventStepSucceeded:
		typ = "pipelinerun.finished"
		content["pipelineName"] = e.Chain + "/" + e.Step
		content["outcome"] = "success"
	case api.EventArtifactPublished:
		typ = "artifact.published"
		subject = artifact
	case api.EventSourceChanged:
		typ = "change.merged"
		if e.Repository != "" {
			content["repository"] = cdReference(e.Repository)
		}
	default:
		return nil
	}
	return &CDEvent{
		Context: CDContext{ID: uuid.NewString(), Source: Source, Type: "dev.cdevents." + typ + ".0.3.0",
			Timestamp: e.At.UTC().Format(time.RFC3339Nano), SpecVersion: cdSpecVersion},
		Subject:               CDSubject{ID: subject, Source: Source, Content: content},
		CustomData:            wire([]Event{*e}, "")[0],
		CustomDataContentType: "application/json",
	}
}

// cdEvents are a request per event that has a CDEvent, as a CloudEvent in
// HTTP binary mode.
func cdEvents(t Target, evs []Event) ([]*http.Request, error) {
	var out []*http.Request
	for i := range evs {
		cd := CDEventOf(&evs[i])
		if cd == nil {
			continue
		}
		ce := cloudevents.NewEvent()
		ce.SetID(cd.Context.ID)
		ce.SetSource(cd.Context.Source)
		ce.SetType(cd.Context.Type)
		ce.SetTime(evs[i].At)
		body, err := json.Marshal(cd)
		if err != nil {
			return nil, err
		}
		if err := ce.SetData(cloudevents.ApplicationJSON, body); err != nil {
			return nil, err
		}
		if tp := evs[i].TraceParent; tp != "" {
			// CloudEvents' distributed tracing extension: a receiver joins
			// the event with the owner's trace (kontinue trace).
			ce.SetExtension("traceparent", tp)
		}
		req, err := http.NewRequest(http.MethodPost, t.Address, nil)
		if err != nil {
			return nil, err
		}
		if err := cehttp.WriteRequest(context.Background(), binding.ToMessage(&ce), req); err != nil {
			return nil, err
		}
		out = append(out, req)
	}
	return out, nil
}
