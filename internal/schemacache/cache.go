// Package schemacache keeps parsed schemas, bounded in entries and in
// bytes: each schema counts its text and fieldBytes for each field of each
// of its classes (each class counting at least one), each enum and each
// enum value (schema.Weight). A parsed schema keeps its text and its parts take a few
// times more, and each can be as large as max_schema_bytes; a class holds
// the fields it inherits as its own, so a short text can expand to many
// (up to 20,000 fields: schema.MaxExpandedFields). A process serving many
// databases, or reading many versions of one, must hold a bounded number
// of them whatever the data asks for.
package schemacache

import (
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/schema"
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
	l, err := lru.NewWithEvict(entries, func(_ Key, s *sluice.Schema) { c.bytes -= weight(s) })
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
	c.bytes += weight(s)
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

// fieldBytes is what a field of a parsed class is counted as: its
// struct, its name and type, its place in the class's slices and maps.
const fieldBytes = 256

// weight returns the bytes s is counted as: its text, and fieldBytes for
// each field of each class, each class without fields, each enum and each
// enum value (schema.Weight): a class or an enum value costs a parsed
// schema about as much as a field, and counted by fields alone 10,000
// classes without fields weighed nothing past their text.
func weight(s *sluice.Schema) int {
	return len(s.SDL) + fieldBytes*schema.Weight(s)
}

// Bytes returns the bytes the cached schemas are counted as.
func (c *Cache) Bytes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}
