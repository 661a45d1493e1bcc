package owner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/specs"
)

// The account that stamps: the owner's, else the chain's (in the owner's
// namespace unless it names one), else "default" in the owner's namespace.
func TestServiceAccount(t *testing.T) {
	chain := func(ref *api.ServiceAccountRef) *specs.Chain {
		return &specs.Chain{Name: "web", Spec: api.ChainSpec{ServiceAccountRef: ref}}
	}
	for _, tt := range []struct {
		name  string
		owner string // spec.serviceAccountName
		chain *specs.Chain
		want  api.ServiceAccountRef
	}{
		{name: "no chain yet, none named: default", want: api.ServiceAccountRef{Namespace: "dev", Name: "default"}},
		{name: "the chain names none: default", chain: chain(nil), want: api.ServiceAccountRef{Namespace: "dev", Name: "default"}},
		{name: "the chain's, in the owner's namespace", chain: chain(&api.ServiceAccountRef{Name: "builder"}),
			want: api.ServiceAccountRef{Namespace: "dev", Name: "builder"}},
		{name: "the chain's, in the namespace it names", chain: chain(&api.ServiceAccountRef{Namespace: "ci", Name: "builder"}),
			want: api.ServiceAccountRef{Namespace: "ci", Name: "builder"}},
		{name: "a chain ref without a name is none", chain: chain(&api.ServiceAccountRef{Namespace: "ci"}),
			want: api.ServiceAccountRef{Namespace: "dev", Name: "default"}},
		{name: "the owner's wins over the chain's, always in its own namespace", owner: "deployer",
			chain: chain(&api.ServiceAccountRef{Namespace: "ci", Name: "builder"}), want: api.ServiceAccountRef{Namespace: "dev", Name: "deployer"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			own := &unstructured.Unstructured{}
			own.SetNamespace("dev")
			l := &loaded{owner: own, spec: api.OwnerSpec{ServiceAccountName: tt.owner}, chain: tt.chain}
			assert.Equal(t, tt.want, l.account())
		})
	}
}
