package owner

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"kontinue.dev/kontinue/reconciler/api"
	st "kontinue.dev/kontinue/reconciler/status"
)

// The sweep's books: a deleted owner's records are queued by name (one key
// each), an owner waiting for a name is woken once, an unproven object is
// logged once.
func TestSweepBooks(t *testing.T) {
	var queued []string
	g := NewSweep(nil, nil, nil, func(name string) { queued = append(queued, name) })
	app := OwnerRef{Kind: api.KindWorkload, Namespace: "dev", Name: "app"}
	g.OwnerDeleted(app, "", nil)
	assert.Empty(t, queued, "nothing recorded: nothing to sweep")
	g.OwnerDeleted(app, "", []st.GeneratedRunTemplate{{Step: "a", Name: "crt-a"}, {Step: "b", Name: "crt-b"}})
	assert.Equal(t, []string{"crt-a", "crt-b"}, queued)
	assert.Equal(t, []doomedRunTemplate{{owner: app, rec: st.GeneratedRunTemplate{Step: "a", Name: "crt-a"}}}, g.doomed["crt-a"])

	other := OwnerRef{Kind: api.KindDeliverable, Namespace: "dev", Name: "app"}
	g.WaitForName("crt-x", app)
	g.WaitForName("crt-x", app)
	g.WaitForName("crt-x", other)
	assert.ElementsMatch(t, []OwnerRef{app, other}, g.NameFreed("crt-x"))
	assert.Empty(t, g.NameFreed("crt-x"), "woken once")

	assert.True(t, g.noteUnproven("u1"))
	assert.False(t, g.noteUnproven("u1"))
	assert.Equal(t, "Workload/dev/app", app.String())
}

// The owner a ClusterRunTemplate's labels name (for a log line only:
// labels prove nothing).
func TestGeneratedOwner(t *testing.T) {
	crt := obj(api.KindClusterRunTemplate, "crt", "carto.run/v1alpha1")
	_, ok := generatedOwner(crt)
	assert.False(t, ok, "not stamped")
	d := api.DeliverableFlavor
	crt.SetLabels(map[string]string{api.StampedLabel: "true", d.LabelOwnerName: "app", d.LabelOwnerNS: "prod"})
	o, ok := generatedOwner(crt)
	assert.True(t, ok)
	assert.Equal(t, OwnerRef{Kind: api.KindDeliverable, Namespace: "prod", Name: "app"}, o)
}
