package render

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/jsonvalue"
)

// Engine renders a template with a context into one or more objects.
// Render must not modify spec or tc: both are shared and cached by callers.
// Every failure is a *StampError.
type Engine interface {
	Name() string
	Render(ctx context.Context, spec *api.TemplateSpec, tc Context) ([]*unstructured.Unstructured, error)
}

// The TemplateSpec fields that select an engine, in the order they are
// reported in messages.
const (
	FieldTemplate   = "template"
	FieldGoTemplate = "goTemplate"
	FieldHelm       = "helm"
	FieldYtt        = "ytt"
)

var engineFields = []string{FieldTemplate, FieldGoTemplate, FieldHelm, FieldYtt}

// unavailable explains, per field, why a spec using an engine that is not
// registered cannot be rendered.
var unavailable = map[string]string{
	FieldGoTemplate: "goTemplate engine is not available in this build",
	FieldHelm:       "helm engine is not available in this build",
	FieldYtt:        "ytt engine (the built-in carvel.dev/ytt library) is not available in this build",
}

var (
	enginesMu sync.RWMutex
	engines   = map[string]Engine{}
)

// Register makes e the engine for the TemplateSpec field `field` (one of the
// Field* constants). Engines call it from init(); registering a field again
// replaces the engine. Like sql.Register, a bad registration is a programming
// error and panics at start-up rather than failing templates later.
func Register(field string, e Engine) {
	if e == nil {
		panic("render: Register of a nil engine for field " + field)
	}
	known := false
	for _, f := range engineFields {
		known = known || f == field
	}
	if !known {
		panic(fmt.Sprintf("render: Register for unknown field %q (want one of %s)", field, strings.Join(engineFields, ", ")))
	}
	enginesMu.Lock()
	defer enginesMu.Unlock()
	engines[field] = e
}

// EngineFor picks the engine from the one engine field set in spec.
func EngineFor(spec *api.TemplateSpec) (Engine, error) { return EngineForWith(spec, nil) }

// EngineForWith is EngineFor where own names engines of the caller's that
// replace the registered ones (a manager's helm engine, made with its own
// options, so that two managers in one process never share them).
func EngineForWith(spec *api.TemplateSpec, own map[string]Engine) (Engine, error) {
	if spec == nil {
		return nil, &StampError{Message: "template has no spec"}
	}
	set := setEngineFields(spec)
	switch len(set) {
	case 0:
		return nil, &StampError{Message: "template sets no render engine: exactly one of " + strings.Join(engineFields, ", ") + " is required"}
	case 1:
	default:
		return nil, &StampError{Message: "template sets several render engines (" + strings.Join(set, ", ") + "): exactly one of " + strings.Join(engineFields, ", ") + " is allowed"}
	}
	field := set[0]
	if e := own[field]; e != nil {
		return depthBounded{e}, nil
	}
	enginesMu.RLock()
	e := engines[field]
	enginesMu.RUnlock()
	if e == nil {
		msg := unavailable[field]
		if msg == "" {
			msg = field + " engine is not available in this build"
		}
		return nil, &StampError{Engine: field, Message: msg}
	}
	return depthBounded{e}, nil
}

// depthBounded refuses, whatever the engine, an object nested deeper than
// jsonvalue.MaxDepth: a template (fromYaml of a param, a ytt loop, a
// chart) can build one from a shallow context, and the API server,
// which stores it, then fails every LIST of its kind, or cannot read it
// back at all.
type depthBounded struct{ Engine }

func (b depthBounded) Render(ctx context.Context, spec *api.TemplateSpec, tc Context) ([]*unstructured.Unstructured, error) {
	objs, err := b.Engine.Render(ctx, spec, tc)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if jsonvalue.DeeperThan(o.Object, jsonvalue.MaxDepth) {
			return nil, &StampError{Engine: b.Name(), Message: fmt.Sprintf("%s rendered %s [%s] nested deeper than %d levels, more than Kontinue writes",
				b.Name(), o.GetKind(), o.GetName(), jsonvalue.MaxDepth)}
		}
	}
	return objs, nil
}

// setEngineFields lists the engine fields set in spec, in engineFields order.
// An empty `template: {}` counts as set: it is a template, only an invalid one.
func setEngineFields(spec *api.TemplateSpec) []string {
	var set []string
	if spec.Template != nil {
		set = append(set, FieldTemplate)
	}
	if spec.GoTemplate != "" {
		set = append(set, FieldGoTemplate)
	}
	if spec.Helm != nil {
		set = append(set, FieldHelm)
	}
	if spec.Ytt != "" {
		set = append(set, FieldYtt)
	}
	return set
}

// StampError is every rendering failure; the reconciler reports it with the
// TemplateStampFailure reason. Message names the tag, path or field at fault;
// Err is the underlying cause, if any.
type StampError struct {
	Engine  string
	Message string
	Err     error
}

func (e *StampError) Error() string {
	if e.Err == nil {
		return e.Message
	}
	return e.Message + ": " + e.Err.Error()
}

func (e *StampError) Unwrap() error { return e.Err }
