package render

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kontinue.dev/kontinue/reconciler/api"
)

// The credentials of a private chart repository or registry, read from a
// Secret as the owner's service account.

// credentials of a private chart repository or registry.
type credentials struct{ username, password string }

// key prefixes cache keys of what was fetched with cr ("" without).
func (cr *credentials) key() string {
	if cr == nil {
		return ""
	}
	return digest([]byte(cr.username + "\x00" + cr.password))[:16] + "@"
}

// basic is the Authorization header of cr (nil without).
func (cr *credentials) basic() http.Header {
	if cr == nil {
		return nil
	}
	req := &http.Request{Header: http.Header{}}
	req.SetBasicAuth(cr.username, cr.password)
	return req.Header
}

// basicFor is basic() for a request to host, and nothing for another host
// than the repository's.
func (cr *credentials) basicFor(host, repoHost string) http.Header {
	if host != repoHost {
		return nil
	}
	return cr.basic()
}

var secretGVR = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

type saGetterKey struct{}

// WithServiceAccountGetter returns ctx carrying g, which reads as the
// owner's service account: the helm engine reads helm.chart.secretRef with
// it.
func WithServiceAccountGetter(ctx context.Context, g ObjectGetter) context.Context {
	return context.WithValue(ctx, saGetterKey{}, g)
}

// credentialsOf reads the Secret of helm.chart.secretRef in the owner's
// namespace as the owner's service account.
func credentialsOf(ctx context.Context, ref *api.SecretRef, ns string) (*credentials, error) {
	if ref == nil {
		return nil, nil
	}
	fail := func(msg string, err error) (*credentials, error) {
		return nil, &StampError{Engine: HelmName, Message: msg, Err: err}
	}
	if ref.Name == "" {
		return fail("helm.chart.secretRef needs a name", nil)
	}
	g, _ := ctx.Value(saGetterKey{}).(ObjectGetter)
	if g == nil {
		return fail("cannot read Secret ["+ref.Name+"] of helm.chart.secretRef: the helm engine was given no service account to read it as", nil)
	}
	s, err := g.Get(ctx, secretGVR, ns, ref.Name)
	switch {
	case apierrors.IsNotFound(err):
		return fail(fmt.Sprintf("Secret [%s] of helm.chart.secretRef not found in namespace [%s]", ref.Name, ns), nil)
	case apierrors.IsForbidden(err):
		return fail(fmt.Sprintf("the service account may not read Secret [%s] of helm.chart.secretRef", ref.Name), err)
	case err != nil:
		return fail(fmt.Sprintf("cannot read Secret [%s] of helm.chart.secretRef", ref.Name), transientError{err})
	}
	data, _ := s.Object["data"].(map[string]any)
	val := func(k string) string {
		v, _ := data[k].(string)
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return ""
		}
		return string(b)
	}
	cr := &credentials{username: val("username"), password: val("password")}
	if cr.username == "" || cr.password == "" {
		return fail(fmt.Sprintf("Secret [%s] of helm.chart.secretRef needs the keys username and password", ref.Name), nil)
	}
	return cr, nil
}
