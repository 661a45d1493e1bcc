package robustness

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kontinue.dev/kontinue/e2e/robustness/check"
)

// A kept snapshot reads back the same, objects too deep for encoding/json
// and integers past 2^53 included.
func TestSnapshotRoundTrip(t *testing.T) {
	deep := strings.Repeat(`{"d":`, 10001) + "1" + strings.Repeat("}", 10001)
	s := &check.Snapshot{At: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)}
	s.Put("", "configmaps", []byte(`{"kind":"ConfigMap","metadata":{"name":"a","namespace":"t1"},"data":{"n":"1"}}`))
	s.Put("robustness.kontinue.dev", "widgets", []byte(`{"kind":"Widget","metadata":{"name":"w","namespace":"t1"},"spec":{"value":9007199254740993,"deep":`+deep+`}}`))
	path := filepath.Join(t.TempDir(), "final.jsonl")
	require.NoError(t, saveSnapshot(path, s))
	back, err := loadSnapshot(path)
	require.NoError(t, err)
	assert.True(t, s.At.Equal(back.At))
	require.Len(t, back.Objects, 2)
	for k, v := range s.Objects {
		assert.Equal(t, string(v), string(back.Objects[k]), k.String())
	}
}
