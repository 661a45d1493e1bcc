package reconciler

import (
	"strings"
	"sync"

	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/render"
	"kontinue.dev/kontinue/tracking"
)

// schemas are the owner kinds' schemas as the API server serves them (the
// CRDs, from the permanent watch of CRDs), compiled once per version of
// each CRD: what a template tag naming a field an owner leaves unset
// renders (render.Schema).
type schemas struct {
	tracker *tracking.Tracker
	mu      sync.Mutex
	byKind  map[string]compiledSchema
}

type compiledSchema struct {
	rv     string
	schema *render.Schema
}

func newSchemas(t *tracking.Tracker) *schemas {
	return &schemas{tracker: t, byKind: map[string]compiledSchema{}}
}

// For returns the served schema of kind (Workload, Deliverable, Runnable);
// nil while its CRD is not in the cache, or cannot be read: tags then read
// only what the owner holds.
func (s *schemas) For(kind string) *render.Schema {
	name := strings.ToLower(kind) + "s." + api.Group
	crd, _ := s.tracker.Get(tracking.Key{GVR: CRDGVR}, "", name)
	if crd == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.byKind[kind]; ok && c.rv == crd.GetResourceVersion() {
		return c.schema
	}
	schema, err := render.SchemaOf(crd, api.Version)
	if err != nil {
		klog.ErrorS(err, "the owner kind's schema cannot be read: tags naming its unset fields fail", "crd", name)
	}
	s.byKind[kind] = compiledSchema{rv: crd.GetResourceVersion(), schema: schema}
	return schema
}
