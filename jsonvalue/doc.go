// Package jsonvalue is Kontinue's one home for JSON, a leaf every layer
// may import: values as the API server and apimachinery's unstructured
// objects hold them.
//
//   - The one number rule (values.go): an integer literal that fits is an
//     int64, any other number a float64; a Go number is what apimachinery
//     makes of encoding/json's text of it (Scalar); a gjson result as an
//     unstructured value (FromResult: paths and the simple engine).
//   - Objects and watch events decoded in one read (DecodeObject,
//     SplitEvent, NewFrameReader: tracking.NewDynamic and the cache), as
//     deep as the API server sends them (readDepth), fuzzed against
//     apimachinery (decode_test.go).
//   - Encoding (Marshal, MarshalUnescaped): encoding/json's bytes, from
//     github.com/go-json-experiment/json (encoding/json/v2's module).
//   - apimachinery's own decoder of values (Unmarshal, Remarshal): every
//     other JSON decode of a value that may reach a stamped object or a
//     status goes through it, never encoding/json's decoder into an any
//     (which makes every number a float64 and alters integers past 2^53).
//   - Exact comparison (Equal: int64 2^53+1 differs from float64 2^53) and
//     the depth Kontinue writes (MaxDepth, DeeperThan).
//
// Why the decoder is hand-written and the encoder is not: measured with
// bench/jsonlibs (its own module, so the libraries not chosen stay out of
// go.mod) on tracking/testdata's Workload (10 KiB) and stamped Deployment
// (6 KiB, three managedFields entries), compact, to the same values; CPU
// µs per op, median of 5-8 runs, go1.26.8, 2 shared cores (load 15-20: the
// ratios are what counts):
//
//	decode to unstructured values       workload  deployment
//	jsonvalue.DecodeObject (kept)          73-93      91-122
//	tree on encoding/json/v2's jsontext   101-150    120-157   (1.3-1.7x)
//	apimachinery (sigs.k8s.io/json)       128-152    174-217   (1.5-2.2x)
//	apimachinery's serializer (client-go) 247-268    262-327   (2.7-3.3x)
//	goccy/go-json, UseNumber + rule       167-225    193-204   (1.8-2.4x)
//	encoding/json/v2 Unmarshal + number fn 245-310   260-340   (2.6-3.4x)
//
//	encode (encoding/json's bytes)      workload  deployment
//	go-json-experiment, v1 options (kept)  55-78      72-94
//	the hand-written encoder it replaced   80-83      77-80
//	encoding/json                          116        145
//	goccy/go-json                          93-118     117-139
//
//	a watch stream of 100 Workload events: NewFrameReader + SplitEvent +
//	DecodeObject 14.7 ms, apimachinery's framer and decoders 34.9 ms (2.4x)
//
// With GOEXPERIMENT=jsonv2 (the standard library's encoding/json/v2,
// which the module then aliases) the ratios are the same. The decoder is
// 1.3-1.7x the best library and decoding was a fifth of Kontinue's CPU
// while converging, so it stays; the encoder from the library is on par
// with the hand-written one it replaced, so that one is gone.
package jsonvalue
