package notify

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	cdevents "github.com/cdevents/sdk-go/pkg/api"
	cdv05 "github.com/cdevents/sdk-go/pkg/api/v05"
	"github.com/cloudevents/sdk-go/v2/binding"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	"kontinue.dev/kontinue/notify/api"
)

// Source is the CDEvents source of what Kontinue sends.
const Source = "kontinue.dev/kontinue"

// CDEvent is e as a CDEvent (CDEvents v0.5, validated by the SDK): a step
// failing and recovering are an incident detected and resolved, a
// deployment a service deployed (rolled back when its shadow serves), a
// run started and finished a pipelineRun's, an image published an
// artifact's, a new source revision a change merged. nil: e has none.
func CDEvent(e *Event) (cdevents.CDEvent, error) {
	subject := e.Kind + "/" + e.Namespace + "/" + e.Name + "/" + e.Step
	env := &cdevents.Reference{Id: e.Namespace, Source: Source}
	artifact := "pkg:generic/" + url.PathEscape(e.Name)
	if e.Revision != "" {
		artifact += "@" + url.PathEscape(e.Revision)
	}
	var ev cdevents.CDEvent
	switch e.Type {
	case api.EventStepFailed:
		x, err := cdv05.NewIncidentDetectedEvent()
		if err != nil {
			return nil, err
		}
		x.SetSubjectDescription(Line(e, ""))
		x.SetSubjectEnvironment(env)
		x.SetSubjectService(&cdevents.Reference{Id: e.Kind + "/" + e.Name, Source: Source})
		x.SetSubjectArtifactId(artifact)
		ev = x
	case api.EventStepRecovered:
		x, err := cdv05.NewIncidentResolvedEvent()
		if err != nil {
			return nil, err
		}
		x.SetSubjectDescription(Line(e, ""))
		x.SetSubjectEnvironment(env)
		x.SetSubjectService(&cdevents.Reference{Id: e.Kind + "/" + e.Name, Source: Source})
		x.SetSubjectArtifactId(artifact)
		ev = x
	case api.EventDeployed:
		x, err := cdv05.NewServiceDeployedEvent()
		if err != nil {
			return nil, err
		}
		x.SetSubjectEnvironment(env)
		x.SetSubjectArtifactId(artifact)
		ev = x
	case api.EventRolledBack:
		x, err := cdv05.NewServiceRolledbackEvent()
		if err != nil {
			return nil, err
		}
		x.SetSubjectEnvironment(env)
		x.SetSubjectArtifactId(artifact)
		ev = x
	case api.EventStepStarted:
		x, err := cdv05.NewPipelineRunStartedEvent()
		if err != nil {
			return nil, err
		}
		x.SetSubjectPipelineName(e.Chain + "/" + e.Step)
		ev = x
	case api.EventStepSucceeded:
		x, err := cdv05.NewPipelineRunFinishedEvent()
		if err != nil {
			return nil, err
		}
		x.SetSubjectPipelineName(e.Chain + "/" + e.Step)
		x.SetSubjectOutcome("success")
		ev = x
	case api.EventArtifactPublished:
		x, err := cdv05.NewArtifactPublishedEvent()
		if err != nil {
			return nil, err
		}
		ev = x
	case api.EventSourceChanged:
		x, err := cdv05.NewChangeMergedEvent()
		if err != nil {
			return nil, err
		}
		if e.Repository != "" {
			x.SetSubjectRepository(&cdevents.Reference{Id: e.Repository, Source: Source})
		}
		ev = x
	default:
		return nil, nil
	}
	ev.SetSource(Source)
	ev.SetSubjectId(subject)
	if e.Type == api.EventArtifactPublished {
		ev.SetSubjectId(artifact)
	}
	ev.SetSubjectSource(Source)
	ev.SetTimestamp(e.At)
	if err := ev.SetCustomData("application/json", wire([]Event{*e}, "")[0]); err != nil {
		return nil, err
	}
	if err := cdevents.Validate(ev); err != nil {
		return nil, fmt.Errorf("CDEvent of %s: %w", e.Type, err)
	}
	return ev, nil
}

// cdEvents are a request per event that has a CDEvent, as a CloudEvent in
// HTTP binary mode.
func cdEvents(t Target, evs []Event) ([]*http.Request, error) {
	var out []*http.Request
	for i := range evs {
		ev, err := CDEvent(&evs[i])
		if err != nil {
			return nil, err
		}
		if ev == nil {
			continue
		}
		ce, err := cdevents.AsCloudEvent(ev)
		if err != nil {
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
		if err := cehttp.WriteRequest(context.Background(), binding.ToMessage(ce), req); err != nil {
			return nil, err
		}
		out = append(out, req)
	}
	return out, nil
}
