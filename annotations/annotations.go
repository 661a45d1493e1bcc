// Package annotations names the annotations people and tools put on
// Kontinue's objects to ask something of the controller. It is shared by the
// controller and the CLI, and imports nothing.
package annotations

// ReconcileRequest, set on a Workload or Deliverable (any value; `kontinue
// reconcile` writes the current time, RFC 3339 with nanoseconds), asks for a
// reconcile now: a change of its value is a change of the owner, so the
// controller takes it at once, as for any edit of the object.
const ReconcileRequest = "kontinue.dev/reconcile-requested-at"

// AdoptBy, set on an existing object by someone who may write it, lets the
// owner it names ("Workload/app" or "Deliverable/app", same namespace) take
// the object over when a template stamps an object of that name. Without it
// Kontinue never writes to an object it did not stamp for that owner.
const AdoptBy = "kontinue.dev/adopt-by"

// Retry, set on a Workload or Deliverable (its immutable steps) or on a
// Runnable, asks once per value (a token: `kontinue reconcile --retry`
// writes the current time) for one more run of the current inputs where
// the newest run failed (Cartographer #975). The new run carries the token
// and the name of the run it retries; the status records the token handled
// (a step's lastHandledRetry, a Runnable's) and an event says what was
// retried. The same token again does nothing.
const Retry = "kontinue.dev/retry"
