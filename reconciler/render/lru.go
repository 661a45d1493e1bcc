package render

import (
	"container/list"
	"sync"
	"time"
)

// lru is a small cache bounded by entries and bytes, with optional expiry.
type lru struct {
	mu         sync.Mutex
	maxEntries int
	maxBytes   int64
	bytes      int64
	ll         *list.List
	m          map[string]*list.Element
}

type lruEntry struct {
	key     string
	val     any
	size    int64
	expires time.Time // zero: never
}

func newLRU(maxEntries int, maxBytes int64) *lru {
	return &lru{maxEntries: maxEntries, maxBytes: maxBytes, ll: list.New(), m: map[string]*list.Element{}}
}

func (c *lru) get(key string) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.m[key]
	if !ok {
		return nil, false
	}
	e := el.Value.(*lruEntry)
	if !e.expires.IsZero() && time.Now().After(e.expires) {
		c.remove(el)
		return nil, false
	}
	c.ll.MoveToFront(el)
	return e.val, true
}

// add stores val; a value larger than the whole cache is not kept.
func (c *lru) add(key string, val any, size int64, ttl time.Duration) {
	if size > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[key]; ok {
		c.remove(el)
	}
	e := &lruEntry{key: key, val: val, size: size}
	if ttl > 0 {
		e.expires = time.Now().Add(ttl)
	}
	c.m[key] = c.ll.PushFront(e)
	c.bytes += size
	for c.ll.Len() > c.maxEntries || c.bytes > c.maxBytes {
		c.remove(c.ll.Back())
	}
}

func (c *lru) remove(el *list.Element) {
	e := el.Value.(*lruEntry)
	c.ll.Remove(el)
	delete(c.m, e.key)
	c.bytes -= e.size
}
