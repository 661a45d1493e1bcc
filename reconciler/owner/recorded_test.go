package owner

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/spans"
	st "kontinue.dev/kontinue/reconciler/status"
)

// After a status write the spans are told what the steps' statuses were
// and are, for this owner on its chain; an owner whose account does not
// exist (nothing was written as it) tells nobody.
func TestRecordedTellsSpans(t *testing.T) {
	prev := []st.Resource{{Name: "build", InputDigest: "sha256:a"}}
	next := []st.Resource{{Name: "build", InputDigest: "sha256:b"}}
	for _, tt := range []struct {
		name      string
		noAccount bool
		spansOn   bool
		want      int // calls
	}{
		{name: "spans on", spansOn: true, want: 1},
		{name: "spans off", want: 0},
		{name: "no account: nothing was written as it", noAccount: true, spansOn: true, want: 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []spans.Owner
			env := Env{Flavor: api.WorkloadFlavor}
			if tt.spansOn {
				env.Spans = func(o spans.Owner, p, n []st.Resource) {
					got = append(got, o)
					assert.Equal(t, prev, p)
					assert.Equal(t, next, n)
				}
			}
			own := &unstructured.Unstructured{}
			own.SetNamespace("dev")
			own.SetName("app")
			own.SetUID(types.UID("u1"))
			l := &loaded{chainName: "web", noAccount: tt.noAccount, prev: st.OwnerStatus{Resources: prev}}
			recorded(context.Background(), &env, own, l, &st.OwnerStatus{Resources: next})
			assert.Len(t, got, tt.want)
			if tt.want > 0 {
				assert.Equal(t, spans.Owner{Kind: "Workload", Namespace: "dev", Name: "app", UID: "u1", Chain: "web"}, got[0])
			}
		})
	}
}
