// Package jsonlibs measures the JSON libraries jsonvalue was chosen
// against, on Kontinue's real objects (tracking/testdata): decoding to the
// values an unstructured object holds (integers as int64) and encoding
// them as encoding/json does, and a watch stream framed and decoded. A
// module of its own, so that the libraries measured and not chosen stay
// out of Kontinue's go.mod. The figures are in jsonvalue/doc.go; take them
// with
//
//	cd bench/jsonlibs && go test -run '^$' -bench . -count 5
//
// (and again with GOEXPERIMENT=jsonv2 for the standard library's
// encoding/json/v2, stdv2_test.go). TestSameValues checks that every
// candidate gives the same values and bytes.
package jsonlibs
