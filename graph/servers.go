package graph

import (
	"context"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/schema"
)

// What a Handler keeps for the databases it serves is bounded whatever
// their number and their schemas, which users choose: the servers (one
// per database, role and schema version in use, each holding its
// schema's generated GraphQL types) and their query caches.
//
// Servers are counted by their schemas' fields (a role's GraphQL schema
// holds a filter, ordering and aggregate part for each field, a few KB in
// all), each class counting at least one and each enum and enum value one
// (10,000 classes without fields, counted as one, held 312 MB): a replica serving many databases kept a server for each for good,
// and a schema of 2,000 classes implementing one wide interface held 5.4
// GB. The least recently used server goes past maxServers or
// maxServerFields; a request that finds none builds it again (about a
// millisecond for a schema of tens of fields).
//
// The parsed queries, the shapes of queries that validated, and the
// persisted queries (APQ) of all servers share one cache each, bounded in
// entries and in weight (a parsed query costs about 100 bytes a token,
// and a 64 KiB text holds up to 15,000 tokens): a thousand entries per
// server, for each server, took a gigabyte and more for one database.
const (
	maxServers      = 1024
	maxServerFields = 100000

	maxCachedQueries   = 10000
	queryCacheWeight   = 64 << 20 // parsed queries, about 32 bytes a byte of text
	maxCachedTexts     = 10000
	textCacheWeight    = 16 << 20 // persisted queries' texts
	maxCachedShapes    = 100000
	shapeCacheWeight   = 8 << 20
	parsedBytesPerByte = 32
	entryOverhead      = 128
)

// serverCache holds the servers of a Handler: the least recently used go
// first, past maxServers or past maxServerFields of their schemas.
type serverCache struct {
	mu        sync.Mutex
	lru       *simplelru.LRU[serverKey, *server]
	fields    int // of the cached servers' schemas
	maxFields int
}

func newServerCache(entries, maxFields int) *serverCache {
	c := &serverCache{maxFields: maxFields}
	l, err := simplelru.NewLRU(entries, func(_ serverKey, s *server) { c.fields -= s.fields })
	if err != nil {
		panic(err) // only for entries <= 0
	}
	c.lru = l
	return c
}

// get returns the server of key, if cached.
func (c *serverCache) get(key serverKey) *server {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, _ := c.lru.Get(key)
	return s
}

// add caches s as key's server unless a newer schema version's is cached,
// and returns the one cached.
func (c *serverCache) add(key serverKey, s *server) *server {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.lru.Get(key); ok && cur.version > s.version {
		return cur // a concurrent request built a newer version meanwhile
	}
	if cur, ok := c.lru.Peek(key); ok {
		c.fields -= cur.fields // replaced: the callback is not called
	}
	c.lru.Add(key, s)
	c.fields += s.fields
	for c.fields > c.maxFields && c.lru.Len() > 1 {
		c.lru.RemoveOldest()
	}
	return s
}

// forget drops the servers of database id.
func (c *serverCache) forget(id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range c.lru.Keys() {
		if k.db == id {
			c.lru.Remove(k)
		}
	}
}

// schemaFields returns what a server for s is counted as: the fields of
// s's classes, inherited ones included, each class counting at least one,
// and each enum and each of its values (schema.Weight), and one more for
// each descriptionBytesPerField bytes of their descriptions; at least
// one.
func schemaFields(s *sluice.Schema) int {
	return max(schema.Weight(s)+descriptionBytes(s)/descriptionBytesPerField, 1)
}

// descriptionBytesPerField is how many bytes of descriptions a server is
// counted a field for. A schema may carry 4 MiB of descriptions
// (schema.MaxDescriptionBytes), which its server holds (in its schema and
// its generated GraphQL types, an inherited field's description on every
// class that inherits it): counted by its fields alone, such a server
// counted a few fields, and the cache could keep a thousand of them.
const descriptionBytesPerField = 512

// descriptionBytes returns the bytes of the descriptions of s's classes
// (their fields', inherited ones with each class that inherits them) and
// enums (their values').
func descriptionBytes(s *sluice.Schema) int {
	n := 0
	for _, c := range s.Classes {
		n += len(c.Description)
		for _, f := range c.Fields {
			n += len(f.Description)
		}
	}
	for _, e := range s.Enums {
		n += len(e.Description)
		for _, d := range e.ValueDescriptions {
			n += len(d)
		}
	}
	return n
}

// sharedCache is a least-recently-used cache of values by query text for
// all the servers of a Handler, bounded in entries and in weight. Each
// server sees it through a view whose keys are its own.
type sharedCache[T any] struct {
	mu     sync.Mutex
	lru    *simplelru.LRU[viewKey, T]
	weight int
	max    int
	weigh  func(text string) int
}

// viewKey is a cache key: the server's schema version and role, and the
// text.
type viewKey struct {
	server serverVersion
	text   string
}

// serverVersion names a server: a schema version of a database, as a role
// reads it. A server built again for it finds its entries.
type serverVersion struct {
	key     serverKey
	version int
}

func newSharedCache[T any](entries, weight int, weigh func(string) int) *sharedCache[T] {
	c := &sharedCache[T]{max: weight, weigh: weigh}
	l, err := simplelru.NewLRU(entries, func(k viewKey, _ T) { c.weight -= weigh(k.text) })
	if err != nil {
		panic(err)
	}
	c.lru = l
	return c
}

func (c *sharedCache[T]) get(k viewKey) (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Get(k)
}

func (c *sharedCache[T]) add(k viewKey, v T) {
	w := c.weigh(k.text)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lru.Contains(k) {
		c.lru.Add(k, v) // the same text: the same weight
		return
	}
	if w > c.max {
		return // larger than the whole cache: not kept
	}
	c.lru.Add(k, v)
	c.weight += w
	for c.weight > c.max && c.lru.Len() > 1 {
		c.lru.RemoveOldest()
	}
}

// cacheView is one server's view of a sharedCache (a graphql.Cache).
type cacheView[T any] struct {
	c      *sharedCache[T]
	server serverVersion
}

func (v cacheView[T]) Get(_ context.Context, text string) (T, bool) {
	return v.c.get(viewKey{v.server, text})
}

func (v cacheView[T]) Add(_ context.Context, text string, value T) {
	v.c.add(viewKey{v.server, text}, value)
}
