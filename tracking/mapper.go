package tracking

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
)

// Mapper maps kinds to resources and learns CRDs created after start: on a
// miss it refreshes discovery, at most once per minInterval so that a
// template naming an unknown kind cannot hammer the API server.
type Mapper struct {
	cached      discovery.CachedDiscoveryInterface
	mapper      *restmapper.DeferredDiscoveryRESTMapper
	minInterval time.Duration

	mu        sync.Mutex
	lastReset time.Time
}

// NewMapper returns a mapper backed by dc.
func NewMapper(dc discovery.DiscoveryInterface) *Mapper {
	cached := memory.NewMemCacheClient(dc)
	return &Mapper{cached: cached, mapper: restmapper.NewDeferredDiscoveryRESTMapper(cached), minInterval: 2 * time.Second}
}

// Mapping returns the resource and scope of a kind.
func (m *Mapper) Mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	mapping, err := m.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err == nil || !meta.IsNoMatchError(err) {
		return mapping, err
	}
	if !m.Reset(false) {
		return nil, err
	}
	return m.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
}

// Reset forgets discovery so that the next lookup reads it again. Unless
// force is set it does nothing (and returns false) when it ran recently.
func (m *Mapper) Reset(force bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !force && time.Since(m.lastReset) < m.minInterval {
		return false
	}
	m.lastReset = time.Now()
	m.mapper.Reset()
	return true
}
