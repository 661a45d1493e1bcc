package jsonvalue

import (
	"encoding/json"
	"fmt"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// Encoding is encoding/json's, from github.com/go-json-experiment/json:
// the module that mirrors encoding/json/v2 (and becomes an alias of the
// standard library's once the toolchain has it without GOEXPERIMENT), and
// its v1 package, encoding/json's behaviour on that implementation. It
// gives encoding/json's bytes (fuzzed against it, encode_test.go) at
// 1.5-2x its speed, on par with the hand-written encoder it replaced
// (doc.go).

// Marshal returns json.Marshal(v), byte for byte: compact, map keys
// sorted, HTML characters, U+2028 and U+2029 escaped. The one difference:
// a byte of invalid UTF-8 is written as U+FFFD itself, where
// encoding/json writes the escape \ufffd: the same string once read, and
// no object read from the API server holds one (its decoder replaces
// them). It is what Kontinue sends (request bodies, as apimachinery's
// serializer writes them), caches and digests.
func Marshal(v any) ([]byte, error) { return jsonv2.Marshal(v, escaped) }

var (
	// v1 is encoding/json's behaviour; it knows the json.Number of its
	// own package only, so the standard library's is taught.
	v1      = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(), jsonv2.WithMarshalers(jsonv2.MarshalToFunc(stdNumber)))
	escaped = v1
	// unescaped is encoding/json with SetEscapeHTML(false), without the
	// newline its Encoder writes.
	unescaped = jsonv2.JoinOptions(v1, jsontext.EscapeForHTML(false))
)

// stdNumber writes a json.Number as encoding/json does: its text, "0" when
// empty, an error when it is not a JSON number.
func stdNumber(enc *jsontext.Encoder, n json.Number) error {
	if n == "" {
		n = "0"
	}
	if !numberSyntax.MatchString(string(n)) {
		return fmt.Errorf("json: invalid number literal %q", string(n))
	}
	return enc.WriteValue(jsontext.Value(n))
}

// MarshalUnescaped is Marshal without escaping HTML characters: a
// template's context reads `<` as `<`, not `\u003c`.
func MarshalUnescaped(v any) ([]byte, error) { return jsonv2.Marshal(v, unescaped) }
