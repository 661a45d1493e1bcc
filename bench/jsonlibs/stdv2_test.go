//go:build goexperiment.jsonv2

package jsonlibs

import (
	stdv2 "encoding/json/v2"

	"encoding/json/jsontext"
)

// With GOEXPERIMENT=jsonv2 the standard library's encoding/json/v2 is
// measured too (the same implementation as github.com/go-json-experiment/json).
func init() {
	skipFunc = stdv2.SkipFunc
	opts := stdv2.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true),
		stdv2.WithUnmarshalers(stdv2.UnmarshalFromFunc(func(d *jsontext.Decoder, v *any) error {
			if d.PeekKind() != '0' {
				return stdv2.SkipFunc
			}
			raw, err := d.ReadValue()
			if err != nil {
				return err
			}
			*v, err = number(raw)
			return err
		})))
	decoders["std-v2-Unmarshal-fn"] = func(doc []byte) (any, error) {
		var m map[string]any
		err := stdv2.Unmarshal(doc, &m, opts)
		return m, err
	}
	encoders["std-v2-options"] = func(v any) ([]byte, error) {
		return stdv2.Marshal(v, stdv2.Deterministic(true), jsontext.EscapeForHTML(true), jsontext.EscapeForJS(true), jsontext.AllowInvalidUTF8(true))
	}
}
