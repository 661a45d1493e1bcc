// Package failure says what a failed API call means: its class (what can
// make it succeed: a retry, RBAC or discovery news, a changed template) and
// the condition it ends in on the object that asked for the write, a step
// of an owner or a Runnable. One mapping for every writer, pure: it takes
// the error and plain words, and talks to no API server.
package failure

import (
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Class says what can make a failed API call succeed.
type Class int

// Classes, from an error's point of view.
const (
	// Transient: retrying may help (a timeout, a 5xx, a conflict).
	Transient Class = iota
	// NotServed: the kind is not served; news from discovery may help.
	NotServed
	// Forbidden: the service account may not; news from RBAC may help.
	Forbidden
	// Rejected: the API server refuses the object as it is; only a change
	// to the template or the owner helps.
	Rejected
	// AlreadyExists: a create found the name taken.
	AlreadyExists
	// Unauthorized: the impersonated account was not accepted; retried.
	Unauthorized
	// NotOwned: an object of the name exists that the writer did not stamp
	// (stamp.Claim); it is left alone, and only its removal helps.
	NotOwned
	// Contested: another writer sets back a field Kontinue applies after
	// each of its writes (stamp.Fight); Kontinue stops writing that
	// content for a while. A change of what Kontinue renders, or the other
	// writer leaving the field alone, helps.
	Contested
)

// Error is a failed call with its Class.
type Error struct {
	Class Class
	Err   error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Classify says what can make a failed API call succeed (nil: Transient).
func Classify(err error) Class {
	var fe *Error
	switch {
	case err == nil:
		return Transient
	case errors.As(err, &fe):
		return fe.Class
	case apierrors.IsForbidden(err):
		return Forbidden
	case apierrors.IsAlreadyExists(err):
		return AlreadyExists
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsMethodNotSupported(err), isSchemaMismatch(err),
		apierrors.IsNotFound(err), apierrors.IsRequestEntityTooLargeError(err), apierrors.IsUnsupportedMediaType(err), apierrors.IsNotAcceptable(err):
		return Rejected
	case apierrors.IsUnauthorized(err):
		return Unauthorized
	case meta.IsNoMatchError(err):
		return NotServed
	}
	return Transient
}

// isSchemaMismatch recognises a server-side apply of a value whose type the
// kind's schema does not allow (a map where a string goes): the API server
// reports it without a 4xx code, but retrying cannot fix it.
func isSchemaMismatch(err error) bool {
	return err != nil && strings.Contains(err.Error(), "failed to create typed patch object")
}

// Cause is what a failure comes to on the object's condition; each kind of
// condition names the causes with its own reasons (Reasons).
type Cause int

// Causes.
const (
	// Unknown: retrying may help; the error goes back to the queue.
	Unknown Cause = iota
	// Refused: the API server refuses the object, forbids the write or
	// does not serve the kind; a change to the template, RBAC or the CRDs
	// helps.
	Refused
	// Account: the service account cannot be used.
	Account
	// NameTaken: a create found the name taken (a run without
	// generateName).
	NameTaken
	// Scope: the kind is cluster-scoped where only namespaced kinds go.
	Scope
	// Taken: the object exists and is someone else's (NotOwned).
	Taken
	// Fought: another writer keeps setting a field back (Contested).
	Fought
)

// Reasons name the causes for one kind of condition (Fought: Refused's
// when unset).
type Reasons struct {
	Unknown, Refused, Account, NameTaken, Scope, Taken, Fought string
}

// Subject is what was being done when the call failed, for the message.
type Subject struct {
	Verb    string // "apply", "create", "select"
	What    string // the object: "Deployment [app] for step [deploy] from template [ClusterTemplate/app]"
	Account string // the service account the call was made as ("ns/name"; "": Kontinue's own)
	// Home says where objects must live, after a cluster-scoped kind:
	// "stamped objects must live in the Workload's namespace".
	Home string
}

// Condition is a failure as it ends on the object.
type Condition struct {
	Cause   Cause
	Status  metav1.ConditionStatus
	Message string
	// Retry is the error to return for a retry with backoff (nil: retrying
	// cannot help; the object waits for news).
	Retry error
}

// Cond is c as a condition of type typ, its reason named by r.
func (c Condition) Cond(typ string, r Reasons) metav1.Condition {
	reason := r.Unknown
	switch c.Cause {
	case Refused:
		reason = r.Refused
	case Account:
		reason = r.Account
	case NameTaken:
		reason = r.NameTaken
	case Scope:
		reason = r.Scope
	case Taken:
		reason = r.Taken
	case Fought:
		reason = r.Fought
		if reason == "" {
			reason = r.Refused
		}
	}
	return metav1.Condition{Type: typ, Status: c.Status, Reason: reason, Message: c.Message}
}

func (s Subject) unable() string { return "unable to " + s.Verb + " " + s.What }

// Kind is what resolving the object's kind came to (err from the lookup,
// namespaced its scope): nil when the object may be written.
func Kind(s Subject, kind string, namespaced bool, err error) *Condition {
	var c Condition
	switch {
	case err != nil && Classify(err) == NotServed:
		c = Condition{Cause: Refused, Status: metav1.ConditionFalse, Message: fmt.Sprintf("%s: %v", s.unable(), err)}
	case err != nil:
		c = Condition{Cause: Unknown, Status: metav1.ConditionUnknown, Message: fmt.Sprintf("%s: %v", s.unable(), err), Retry: err}
	case !namespaced:
		c = Condition{Cause: Scope, Status: metav1.ConditionFalse, Message: fmt.Sprintf("%s: kind [%s], which is cluster-scoped: %s", s.unable(), kind, s.Home)}
	default:
		return nil
	}
	return &c
}

// Write is what a failed write (create, apply, patch) of the object named
// name came to. Errors that retrying cannot fix end False and are not
// retried: they come back when RBAC, discovery, the template or the owner
// change.
func Write(s Subject, name string, err error) Condition {
	switch Classify(err) {
	case Forbidden:
		return Condition{Cause: Refused, Status: metav1.ConditionFalse, Message: fmt.Sprintf("%s: service account [%s] is not allowed: %v", s.unable(), s.Account, err)}
	case Rejected:
		return Condition{Cause: Refused, Status: metav1.ConditionFalse, Message: fmt.Sprintf("%s: %v", s.unable(), err)}
	case AlreadyExists:
		return Condition{Cause: NameTaken, Status: metav1.ConditionFalse, Message: fmt.Sprintf("%s: an object named [%s] already exists; give the template metadata.generateName so that each new set of inputs creates a new object", s.unable(), name)}
	case NotOwned:
		return Condition{Cause: Taken, Status: metav1.ConditionFalse, Message: fmt.Sprintf("%s: %v", s.unable(), err)}
	case Contested:
		return Condition{Cause: Fought, Status: metav1.ConditionFalse, Message: fmt.Sprintf("%s: %v", s.unable(), err)}
	case Unauthorized:
		return Condition{Cause: Account, Status: metav1.ConditionFalse, Message: fmt.Sprintf("%s as service account [%s]: %v", s.unable(), s.Account, err), Retry: err}
	}
	return Condition{Cause: Unknown, Status: metav1.ConditionUnknown, Message: fmt.Sprintf("%s: %v", s.unable(), err), Retry: err}
}

// Client is what failing to get a client for the service account came to
// (it does not exist, or its client cannot be built): nothing is written
// as it, and its creation brings the object back. The message is the
// error's own: Cartographer's words for a missing account.
func Client(err error) Condition {
	return Condition{Cause: Account, Status: metav1.ConditionFalse, Message: err.Error()}
}
