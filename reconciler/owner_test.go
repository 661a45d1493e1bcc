package reconciler

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The status a reconcile computes went through a JSON round trip (float64
// numbers); the cached one holds int64. They must compare equal, or every
// reconcile would write a status that did not change.
func TestStatusDigestIgnoresNumberTypesAndKeyOrder(t *testing.T) {
	cached := map[string]any{"observedGeneration": int64(3), "conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}
	var computed map[string]any
	b, _ := json.Marshal(map[string]any{"conditions": []any{map[string]any{"status": "True", "type": "Ready"}}, "observedGeneration": 3})
	_ = json.Unmarshal(b, &computed)
	assert.IsType(t, float64(0), computed["observedGeneration"])
	assert.Equal(t, statusDigest(cached), statusDigest(computed))

	computed["observedGeneration"] = float64(4)
	assert.NotEqual(t, statusDigest(cached), statusDigest(computed))
	assert.Equal(t, statusDigest(nil), statusDigest(map[string]any(nil)))
}
