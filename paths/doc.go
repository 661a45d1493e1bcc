// Package paths compiles the JSONPath subset that Kubernetes and Cartographer
// users write (`.status.latestImage`, `{.metadata.labels['app.kubernetes.io/name']}`,
// `status.conditions[?(@.type=="Ready")].status`) once, caches the compiled
// form, and evaluates it on raw JSON with gjson, with "exactly one value"
// semantics.
//
// # Syntax
//
// An expression is a chain of steps. A leading '.' is optional, and so is a
// leading '$' (the root) and a surrounding '{' '}' as in kubectl's `{.a.b}`.
// Leading and trailing white space is ignored.
//
//	.key            object member. A dotted key is made of ASCII letters, digits,
//	                '_', '-', '/', ':', '+', '~', '%' and non-ASCII bytes; any other
//	                character can be included by escaping it with '\', as kubectl
//	                does: `metadata.labels.app\.kubernetes\.io/name`.
//	['key'] ["key"] object member, key taken literally (dots, slashes, '*', '?',
//	                '#', '@', '|', spaces...). Escapes: \\ \' \" \/ \b \f \n \r \t \uXXXX.
//	[n]             array element n (0-based); negative n counts from the end.
//	[*]             every element of an array.
//	[?(@.p OP lit)] every element of an array for which the relative path p
//	                (keys, bracket keys and indexes; `@` alone is the element)
//	                compares to the literal. OP is ==, !=, <, <=, >, >=; lit is a
//	                single or double quoted string, a number, true or false
//	                (true/false only with == and !=).
//	[?(@.p)]        every element of an array where p exists (a null counts).
//
// Valid JSONPath beyond this subset — recursive descent `..`, the `.*`
// wildcard, slices and unions (`[0:2]`, `[0,1]`, `['a','b']`), comparisons
// between two paths, wildcards and nested filters inside a filter — is
// evaluated by client-go's jsonpath, as Cartographer evaluates every path, with
// the same "exactly one value" rule: slower (the document is decoded), same
// results (a differential test holds both to it).
//
// Everything else is a *SyntaxError with the byte offset (into the original
// expression) of the problem: the empty expression, unbalanced brackets,
// braces or quotes, function calls, compound filters (`&&`, `||`), and
// trailing garbage.
//
// # Semantics
//
// Keys are literal: no wildcard or pattern matching ever happens in a key.
// A key step only matches on an object, an index, `[*]` or a filter only on an
// array; anything else is "not found" (so `a.0` is the member "0" of the
// object a, never the first element of an array, and `a[0]` never reads a
// member "0").
//
// [Path.Get] returns exactly one value: no value is a *NotFoundError, several
// values (after `[*]` or a filter) an *AmbiguousError carrying the count. A
// present JSON null is a value (gjson.Null). A filter is a list selection: it
// yields one value per matching element, whatever follows it is evaluated on
// each, and the results are counted.
//
// Filter comparisons hold only between values of the same JSON type: a string
// literal matches strings, a number literal numbers (compared exactly as
// integers when both sides are integers, as float64 otherwise, so 3 == 3.0),
// true/false booleans. An element where the compared path is missing, null,
// or of another type does not match, for == and != alike.
//
// # Translation to gjson
//
// Compilation turns the expression into a short list of steps evaluated on
// gjson.Result values, never re-parsing the expression:
//
//   - A run of consecutive keys that need no escaping in gjson (every byte is
//     an ASCII letter, a digit, '_', '-', ':' or a non-ASCII byte, and the key
//     is not made of digits only) becomes one gjson path `k1.k2.k3`, looked up
//     with a single gjson.Get. `.status.latestImage` is exactly
//     gjson.Get(doc, "status.latestImage"), with no allocation.
//   - A key that gjson would read specially ('.', '*', '?', '#', '@', '|', '!',
//     '=', '<', '>', '%', '\', '[', '{', spaces, ...; or digits only, which
//     gjson would take as an array index) is not escaped into a gjson path,
//     as gjson allocates while unescaping path components: it is looked up
//     by comparing the member names of the object literally (Result.ForEach),
//     which neither allocates nor enables gjson's modifiers, wildcards or
//     queries. This is equivalent to gjson.Get(obj, gjson.Escape(key)) on an
//     object.
//   - `[n]` checks that the value is an array and does gjson.Get(arr, "n");
//     a negative n counts the elements first.
//   - `[*]` and filters iterate the array elements. A filter corresponds to
//     gjson's `#(p==lit)#` query, but it is evaluated here with the
//     type-strict comparison described above (gjson's query compares loosely:
//     `#(n=="3")#` matches the number 3) and without building the
//     intermediate array of matches; the matches are then counted.
//
// # Differences from k8s.io/client-go/util/jsonpath
//
// The results agree with client-go (see differential_test.go) except that:
// bracket keys are literal here (client-go re-parses `['a.b']` as `.a.b` and
// rejects `["a"]`); a filter skips elements that lack the compared field
// (client-go with AllowMissingKeys(false) fails the whole expression, with
// AllowMissingKeys(true) it skips them too); comparing values of different
// types is a non-match instead of an error, and an integer compares equal to
// the same float; after `[*]` or a filter, an element too short for a
// following index is skipped like one lacking a following key (client-go
// fails the whole expression); with duplicate keys in an object the first
// one wins (gjson), not the last (encoding/json).
//
// # Performance
//
// Get scans the document bytes (with gjson) up to the value and does not
// allocate for paths without [*] or a filter, nor for filters on arrays of
// objects. Its cost grows with the bytes before the value; client-go's
// jsonpath instead needs the document decoded first, which costs far more
// than any lookup (see bench_test.go).
//
// Paths are safe for concurrent use. Get does not copy: the returned Result
// points into the document. Use [Path.Value] for detached Go values.
package paths
