package owner

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kontinue.dev/kontinue/reconciler/api"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/tracking"
)

// An owner whose status.shard is not the replica's moved: the objects it
// left in other shards are looked for, once, in every kind its steps stamp
// now, its status named or the replica watches stamped objects of (not the
// cluster-scoped ClusterRunTemplates, which their records find), and status.shard becomes the replica's only
// when every kind was looked at.
func TestAdoptMoved(t *testing.T) {
	cm := st.StampedRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "dev", Name: "app-src", Resource: "configmaps"}
	widget := st.StampedRef{APIVersion: "example.com/v1", Kind: "Widget", Namespace: "dev", Name: "app-w", Resource: "widgets.example.com"}
	old := st.StampedRef{APIVersion: "example.com/v1", Kind: "Gadget", Namespace: "dev", Name: "app-g", Resource: "gadgets.example.com"}
	job := st.StampedRef{APIVersion: "batch/v1", Kind: "Job", Namespace: "dev", Name: "app-run", Resource: "jobs.batch"}
	prev := st.OwnerStatus{Shard: "a", Resources: []st.Resource{{Name: "src", StampedRef: &cm}, {Name: "w", StampedRef: &widget}},
		Orphans: []st.StampedRef{old}}
	for _, tt := range []struct {
		name      string
		prevShard string
		shard     string
		err       error
		looks     []string
		wantShard string
		wantErr   bool
	}{
		{name: "same shard: nothing looked at", prevShard: "a", shard: "a", wantShard: "a"},
		{name: "moved: every kind", prevShard: "a", shard: "b", looks: []string{"configmaps", "widgets", "gadgets", "jobs", "gizmos"}, wantShard: "b"},
		{name: "moved to the default shard", prevShard: "a", shard: "", looks: []string{"configmaps", "widgets", "gadgets", "jobs", "gizmos"}, wantShard: ""},
		{name: "a status of the default shard", prevShard: "", shard: "b", looks: []string{"configmaps", "widgets", "gadgets", "jobs", "gizmos"}, wantShard: "b"},
		{name: "refused: looked at again at the next reconcile (RBAC news), no backoff", prevShard: "a", shard: "b",
			err: apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "app-src", errors.New("no")), wantShard: "a"},
		{name: "failed: retried", prevShard: "a", shard: "b", err: errors.New("boom"), wantShard: "a", wantErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &fakeStamper{adoptErr: tt.err}
			x := writerIO(s, nil)
			x.keep.want(job)
			x.keep.want(st.StampedRef{APIVersion: "carto.run/v1alpha1", Kind: "ClusterRunTemplate", Name: "gen", Resource: api.RunTemplateGVR.Resource + "." + api.RunTemplateGVR.Group})
			p := prev
			p.Shard = tt.prevShard
			op := &cleanup{x: x, prev: p, stampedKinds: func() []schema.GroupVersionResource {
				return stampedKinds(map[tracking.Key]int{
					{GVR: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gizmos"}, Selector: api.StampedSelector}:  1,
					{GVR: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}, Selector: api.StampedSelector}: 2,
					{GVR: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, Namespace: "dev"}:                                    1,
					{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Selector: api.StampedSelector, Name: "held"}:      1,
				})
			}}
			op.out.shard = p.Shard
			err := op.adoptMoved(tt.shard)
			assert.Equal(t, tt.wantErr, err != nil, "%v", err)
			assert.Equal(t, tt.wantShard, op.out.shard)
			if tt.err != nil {
				assert.Len(t, s.adopted, 1, "stops at the first failure")
				return
			}
			assert.ElementsMatch(t, tt.looks, s.adopted)
		})
	}
}
