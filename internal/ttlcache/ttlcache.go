// Package ttlcache is a small map whose entries expire after a fixed time.
// Sluice uses it to skip a Postgres round trip per request for facts that may
// be a little stale on other replicas (credentials, database metadata); the
// process that changes such a fact clears its own cache at once.
package ttlcache

import (
	"sync"
	"time"
)

// Cache maps K to V for ttl after each Put. It is safe for concurrent use.
type Cache[K comparable, V any] struct {
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	entries map[K]entry[V]
}

type entry[V any] struct {
	v       V
	expires time.Time
}

// maxEntries bounds the memory a cache can take; past it, Put starts over.
const maxEntries = 10000

// New returns an empty cache whose entries live for ttl, measured with now.
func New[K comparable, V any](ttl time.Duration, now func() time.Time) *Cache[K, V] {
	return &Cache[K, V]{ttl: ttl, now: now, entries: map[K]entry[V]{}}
}

// Get returns the value for k if it was Put less than ttl ago.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok || !c.now().Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.v, true
}

// Put stores v for k.
func (c *Cache[K, V]) Put(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= maxEntries {
		clear(c.entries)
	}
	c.entries[k] = entry[V]{v: v, expires: c.now().Add(c.ttl)}
}

// Delete forgets k.
func (c *Cache[K, V]) Delete(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, k)
}

// Clear forgets everything.
func (c *Cache[K, V]) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.entries)
}
