package cli

import (
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/crds"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/render"
)

// ownerSchema is an owner kind's schema from the CRDs Kontinue installs
// (the controller reads the served ones): a preview renders fields an
// owner leaves unset as the controller does (render.Schema). nil when
// they cannot be read: tags then read only what the owner holds.
func ownerSchema(kind string) *render.Schema {
	schemaOnce.Do(func() {
		all, err := crds.All()
		if err != nil {
			return
		}
		for _, c := range all {
			k, _, _ := unstructured.NestedString(c.Object, "spec", "names", "kind")
			if s, err := render.SchemaOf(c, api.Version); err == nil {
				schemaByKind[k] = s
			}
		}
	})
	return schemaByKind[kind]
}

var (
	schemaOnce   sync.Once
	schemaByKind = map[string]*render.Schema{}
)
