package owner

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kontinue.dev/kontinue/reconciler/api"
	st "kontinue.dev/kontinue/reconciler/status"
)

// bound cuts a status the API server would refuse, says so in
// StatusTruncated, and tells it once per change of what was cut.
func TestBound(t *testing.T) {
	big := map[string]any{"blob": strings.Repeat("x", st.FieldLimit+1)}
	for _, tt := range []struct {
		name      string
		resources []st.Resource
		prev      st.OwnerStatus
		truncated bool // StatusTruncated is set
		events    int
	}{
		{name: "small: nothing cut, nothing said", resources: []st.Resource{{Name: "a", LastGoodObject: map[string]any{"k": "v"}}}},
		{name: "a last good object over the field limit is dropped, and told",
			resources: []st.Resource{{Name: "a", LastGoodObject: big}}, truncated: true, events: 1},
		{name: "told once: the same cut as before says nothing new",
			resources: []st.Resource{{Name: "a", LastGoodObject: big}}, truncated: true,
			prev: func() st.OwnerStatus {
				s := st.OwnerStatus{Resources: []st.Resource{{Name: "a", LastGoodObject: big}}}
				notes := st.Bound(&s, 1<<30)
				return st.OwnerStatus{Conditions: []metav1.Condition{st.Cond(CondStatusTruncated, st.True, ReasonStatusTooLarge, strings.Join(notes, "; "))}}
			}()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o, ev := loadedOwner(t, &world{}, Env{}, tt.prev)
			status := st.OwnerStatus{Resources: tt.resources}
			r := &Reconciler{env: *o.env}
			r.bound(o.l.owner, o.l, &status)
			c := st.Find(status.Conditions, CondStatusTruncated)
			if !tt.truncated {
				assert.Nil(t, c)
				assert.NotNil(t, status.Resources[0].LastGoodObject)
				return
			}
			require.NotNil(t, c)
			assert.Equal(t, ReasonStatusTooLarge, c.Reason)
			assert.Contains(t, c.Message, "step [a]: lastGoodObject")
			assert.Nil(t, status.Resources[0].LastGoodObject)
			assert.Len(t, *ev, tt.events)
		})
	}
}

// A status just written is waited for (briefly) until the cache shows
// it; a cache that shows it, or a wait past ownWriteWait, ends the wait.
func TestAwaitOwnWrite(t *testing.T) {
	r := New(Env{Flavor: api.WorkloadFlavor})
	cached := walkOwner()
	assert.False(t, r.awaitOwnWrite("u", cached), "nothing written: nothing to wait for")

	written := map[string]any{"observedGeneration": int64(3)}
	r.recordWrite("u", written)
	assert.True(t, r.awaitOwnWrite("u", cached), "the cache does not show the write yet")

	cached.Object["status"] = written
	assert.False(t, r.awaitOwnWrite("u", cached), "the cache shows it")
	assert.False(t, r.awaitOwnWrite("u", walkOwner()), "forgotten once seen")

	r.recordWrite("u", written)
	r.writes["u"] = ownWrite{digest: r.writes["u"].digest, at: time.Now().Add(-2 * ownWriteWait)}
	assert.False(t, r.awaitOwnWrite("u", walkOwner()), "waited long enough: the cache is used as it is")
}
