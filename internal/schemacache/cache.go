// Package schemacache keeps parsed schemas, bounded in entries and in bytes
// of schema text. A parsed schema keeps its text and its parts take a few
// times more, and each can be as large as max_schema_bytes; a process
// serving many databases, or reading many versions of one, must hold a
// bounded number of them whatever the data asks for.
package schemacache

import (
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/sluice-dev/sluice"
)

// Key names one schema version of one database.
type Key struct {
	DB      int64
	Version int
}

// Cache is a least-recently-used cache of parsed schemas. It is safe for
// concurrent use.
type Cache struct {
	mu       sync.Mutex // guards bytes, and the evictions that keep it bounded
	lru      *lru.Cache[Key, *sluice.Schema]
	bytes    int
	maxBytes int
}

// New returns a cache of at most entries schemas and, past the newest one,
// maxBytes of their text.
func New(entries, maxBytes int) *Cache {
	c := &Cache{maxBytes: maxBytes}
	l, err := lru.NewWithEvict(entries, func(_ Key, s *sluice.Schema) { c.bytes -= len(s.SDL) })
	if err != nil {
		panic(err) // only for entries <= 0
	}
	c.lru = l
	return c
}

// Get returns the schema of k, if cached.
func (c *Cache) Get(k Key) (*sluice.Schema, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Get(k)
}

// Add caches s as k's schema, evicting the least recently used ones past
// the bounds.
func (c *Cache) Add(k Key, s *sluice.Schema) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lru.Contains(k) {
		return
	}
	c.lru.Add(k, s) // may evict the oldest, through the callback
	c.bytes += len(s.SDL)
	for c.bytes > c.maxBytes && c.lru.Len() > 1 {
		c.lru.RemoveOldest()
	}
}

// Forget drops every schema of database db.
func (c *Cache) Forget(db int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range c.lru.Keys() {
		if k.DB == db {
			c.lru.Remove(k)
		}
	}
}

// Bytes returns the bytes of schema text cached.
func (c *Cache) Bytes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}
