// Package selector decides which ClusterSupplyChain or ClusterDelivery an
// owner (Workload or Deliverable) uses, and which template option a chain
// step uses (seed 001, COMPATIBILITY.md "Chains"). It is pure logic: callers
// pass the owner's labels and its JSON document and get names back.
//
// # Selectors
//
// A selector is the AND of three kinds of terms:
//
//   - labels (chain `selector`, option `matchLabels`): the owner's label
//     equals the value;
//   - label expressions (`selectorMatchExpressions`, `matchExpressions`):
//     Kubernetes set-based requirements with Kubernetes semantics (a NotIn or
//     DoesNotExist expression holds when the label is absent);
//   - field requirements (`selectorMatchFields`, `matchFields`): a path on the
//     owner's document, evaluated with package paths.
//
// Field keys are written relative to the owner (`spec.source.git.url`, as in
// Cartographer) or with the seed's `workload.` / `deliverable.` prefix; both
// spellings mean the same thing and either prefix is accepted on either kind
// of owner. A leading `.`, `$` or surrounding `{}` is accepted too.
//
// Field operators:
//
//   - Exists holds when the path yields at least one value; DoesNotExist when
//     it yields none. A present JSON null counts as a value. Several values
//     are not an error for these two operators.
//   - In holds when the path yields exactly one value equal to one of the
//     listed values; NotIn when it yields exactly one value equal to none of
//     them. A missing path is a non-match for both (NotIn included, as in
//     Cartographer: "not in" is a statement about a value, and there is none).
//     A path that yields several values is an evaluation error.
//
// # Value comparison (In, NotIn)
//
// Listed values are JSON values: strings and numbers both work. The field's
// value equals a listed value when
//
//   - they are JSON-equal: deep-equal after normalising numbers, so the
//     integer 3 equals 3.0; objects and lists compare member by member with
//     this same strict rule; or
//   - one side is a string and the other a number or a boolean whose
//     canonical JSON text is that string: `values: ["3"]` matches 3, and
//     `values: [true]` matches "true". Cartographer wrote these values as
//     strings, so existing chains keep working. "3.0" does not match 3 and
//     "True" does not match true: the text must be canonical.
//
// # Choosing
//
// Among the candidates whose whole selector matches, the most specific wins:
// specificity is the number of terms (labels + expressions + fields). Several
// winners with the same specificity are ambiguous. A chain with no selector
// at all matches nothing; a step option with no selector is a fallback that
// matches every owner with specificity 0.
//
// Evaluation of one selector is ordered so that a failing term only matters
// when the outcome depends on it: labels are checked first (they cannot
// fail), and a field term that does not match makes the selector a
// non-match even if another field term could not be evaluated.
package selector
