package render

import (
	"errors"
	"fmt"

	"github.com/tidwall/gjson"

	"kontinue.dev/kontinue/jsonvalue"
)

// maxContextDepth bounds the nesting of the context while encoding it (a
// cycle, or an owner, param or input nested deeper than anything Kontinue
// writes: jsonvalue.MaxDepth).
const maxContextDepth = jsonvalue.MaxDepth

// errContextTooDeep is contextJSON's error past maxContextDepth.
var errContextTooDeep = fmt.Errorf("nested deeper than %d levels (the owner, a param or an input)", maxContextDepth)

// contextError is the StampError of a context that does not encode.
func contextError(engine, what string, err error) *StampError {
	if errors.Is(err, errContextTooDeep) {
		return &StampError{Engine: engine, Message: what + " is " + errContextTooDeep.Error()}
	}
	return &StampError{Engine: engine, Message: what + " is not JSON", Err: err}
}

// contextJSON is v (the template context, or part of it) as the engines
// read it: compact JSON with sorted keys and no HTML escaping
// (jsonvalue.MarshalUnescaped), refused when nested deeper than
// maxContextDepth.
func contextJSON(v any) ([]byte, error) {
	if c, ok := v.(Context); ok {
		v = map[string]any(c)
	}
	if jsonvalue.DeeperThan(v, maxContextDepth) {
		return nil, errContextTooDeep
	}
	return jsonvalue.MarshalUnescaped(v)
}

// valueOf is a tag's whole value (res, in the context's JSON) as
// unstructured objects hold it (jsonvalue.FromResult).
func valueOf(res gjson.Result) (any, *walkError) {
	v, err := jsonvalue.FromResult(res)
	if err != nil {
		return nil, &walkError{msg: "template context value is not JSON", err: err}
	}
	return v, nil
}
