package failure

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var gr = schema.GroupResource{Group: "x", Resource: "ys"}

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Class
	}{
		{"forbidden waits for RBAC", apierrors.NewForbidden(gr, "a", errors.New("no")), Forbidden},
		{"invalid is rejected", apierrors.NewInvalid(schema.GroupKind{Kind: "Y"}, "a", nil), Rejected},
		{"bad request is rejected", apierrors.NewBadRequest("no"), Rejected},
		{"a type the schema does not allow is rejected", errors.New("failed to create typed patch object (/a): .spec: expected string"), Rejected},
		{"already exists", apierrors.NewAlreadyExists(gr, "a"), AlreadyExists},
		{"unauthorized", apierrors.NewUnauthorized("who"), Unauthorized},
		{"not served", &meta.NoKindMatchError{GroupKind: schema.GroupKind{Kind: "Y"}}, NotServed},
		{"a timeout is retried", apierrors.NewTimeoutError("slow", 1), Transient},
		{"a conflict is retried", apierrors.NewConflict(gr, "a", errors.New("rv")), Transient},
		{"wrapped", &Error{Class: NotServed, Err: errors.New("x")}, NotServed},
		{"not owned", &Error{Class: NotOwned, Err: errors.New("x")}, NotOwned},
		{"nil", nil, Transient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, Classify(tt.err)) })
	}
}

var (
	apply = Subject{Verb: "apply", What: "Deployment [app] for step [deploy]", Account: "ns/sa", Home: "stamped objects must live in the Workload's namespace"}
	step  = Reasons{Unknown: "UnknownError", Refused: "TemplateRejectedByAPIServer", Account: "ServiceAccountError", NameTaken: "TemplateRejectedByAPIServer", Scope: "TemplateStampFailure", Taken: "StampedObjectNotOwned"}
	run   = Reasons{Unknown: "UnknownError", Refused: "StampedObjectRejectedByAPIServer", Account: "ServiceAccountError", NameTaken: "StampedObjectRejectedByAPIServer", Scope: "TemplateStampFailure", Taken: "StampedObjectRejectedByAPIServer"}
)

func TestWrite(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		status     metav1.ConditionStatus
		stepReason string
		runReason  string
		message    string
		retry      bool
	}{
		{"forbidden names the account, waits for RBAC", apierrors.NewForbidden(gr, "a", errors.New("no")), metav1.ConditionFalse,
			"TemplateRejectedByAPIServer", "StampedObjectRejectedByAPIServer", "unable to apply Deployment [app] for step [deploy]: service account [ns/sa] is not allowed: ", false},
		{"rejected waits for a new template", apierrors.NewBadRequest("bad"), metav1.ConditionFalse,
			"TemplateRejectedByAPIServer", "StampedObjectRejectedByAPIServer", "unable to apply Deployment [app] for step [deploy]: bad", false},
		{"a taken name asks for generateName", apierrors.NewAlreadyExists(gr, "a"), metav1.ConditionFalse,
			"TemplateRejectedByAPIServer", "StampedObjectRejectedByAPIServer", "an object named [app-x] already exists; give the template metadata.generateName", false},
		{"unauthorized is retried", apierrors.NewUnauthorized("who"), metav1.ConditionFalse,
			"ServiceAccountError", "ServiceAccountError", "unable to apply Deployment [app] for step [deploy] as service account [ns/sa]: who", true},
		{"someone else's object is left alone", &Error{Class: NotOwned, Err: errors.New("Deployment [ns/app] already exists and was not stamped by this Workload")}, metav1.ConditionFalse,
			"StampedObjectNotOwned", "StampedObjectRejectedByAPIServer", "unable to apply Deployment [app] for step [deploy]: Deployment [ns/app] already exists and was not stamped", false},
		{"a timeout is retried", apierrors.NewTimeoutError("slow", 1), metav1.ConditionUnknown,
			"UnknownError", "UnknownError", "unable to apply Deployment [app] for step [deploy]: ", true},
		{"not served at write time is retried", &meta.NoKindMatchError{GroupKind: schema.GroupKind{Kind: "Y"}}, metav1.ConditionUnknown,
			"UnknownError", "UnknownError", "unable to apply", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Write(apply, "app-x", tt.err)
			assert.Equal(t, tt.status, c.Status)
			assert.Contains(t, c.Message, tt.message)
			assert.Equal(t, tt.retry, c.Retry != nil, "retry")
			if tt.retry {
				assert.Equal(t, tt.err, c.Retry)
			}
			sc := c.Cond("ResourceSubmitted", step)
			assert.Equal(t, metav1.Condition{Type: "ResourceSubmitted", Status: tt.status, Reason: tt.stepReason, Message: c.Message}, sc)
			assert.Equal(t, tt.runReason, c.Cond("RunTemplateReady", run).Reason)
		})
	}
}

func TestKind(t *testing.T) {
	notServed := &Error{Class: NotServed, Err: errors.New("the API server does not serve kind [Y] in [x/v1]")}
	lookup := &Error{Class: Transient, Err: errors.New("unable to look up kind [Y]: timeout")}
	tests := []struct {
		name       string
		namespaced bool
		err        error
		want       *Condition
	}{
		{"namespaced and served: write", true, nil, nil},
		{"not served waits for discovery", true, notServed, &Condition{Cause: Refused, Status: metav1.ConditionFalse,
			Message: "unable to apply Deployment [app] for step [deploy]: the API server does not serve kind [Y] in [x/v1]"}},
		{"a failed lookup is retried", false, lookup, &Condition{Cause: Unknown, Status: metav1.ConditionUnknown,
			Message: "unable to apply Deployment [app] for step [deploy]: unable to look up kind [Y]: timeout", Retry: lookup}},
		{"cluster-scoped is refused", false, nil, &Condition{Cause: Scope, Status: metav1.ConditionFalse,
			Message: "unable to apply Deployment [app] for step [deploy]: kind [Namespace], which is cluster-scoped: stamped objects must live in the Workload's namespace"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kind := "Y"
			if tt.err == nil {
				kind = "Namespace"
			}
			assert.Equal(t, tt.want, Kind(apply, kind, tt.namespaced, tt.err))
		})
	}
}

func TestClient(t *testing.T) {
	c := Client(errors.New("service account [ns/x] not found"))
	assert.Equal(t, metav1.Condition{Type: "RunTemplateReady", Status: metav1.ConditionFalse, Reason: "ServiceAccountError",
		Message: "service account [ns/x] not found"}, c.Cond("RunTemplateReady", run))
	assert.Nil(t, c.Retry, "a missing account is news to wait for, not an error to retry")
}
