package schemacache

import (
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
)

// TestCacheBounds: the cache keeps at most its entries and, past the
// newest schema, its bytes of schema text, evicting the least recently
// used first; Forget drops a database's schemas.
func TestCacheBounds(t *testing.T) {
	t.Parallel()
	schema := func(n int) *sluice.Schema { return &sluice.Schema{SDL: strings.Repeat("x", n)} }
	c := New(3, 100)
	for v := 1; v <= 4; v++ {
		c.Add(Key{1, v}, schema(10))
	}
	if _, ok := c.Get(Key{1, 1}); ok || c.Bytes() != 30 {
		t.Fatalf("past 3 entries: version 1 kept %v, %d bytes", ok, c.Bytes())
	}
	c.Get(Key{1, 2}) // now the most recently used
	c.Add(Key{2, 1}, schema(75))
	if _, ok := c.Get(Key{1, 3}); ok || c.Bytes() != 95 {
		t.Fatalf("past 3 entries, the least recently used stays (%d bytes)", c.Bytes())
	}
	// A fourth entry: 1/4, the oldest, goes; then 105 bytes: 1/2 goes.
	c.Add(Key{2, 2}, schema(20))
	_, kept := c.Get(Key{1, 2})
	if _, ok := c.Get(Key{2, 1}); kept || !ok || c.Bytes() != 95 {
		t.Fatalf("past 100 bytes: 1/2 kept %v, 2/1 kept %v, %d bytes", kept, ok, c.Bytes())
	}
	c.Add(Key{3, 1}, schema(500)) // larger than the bound alone: kept
	if _, ok := c.Get(Key{3, 1}); !ok || c.Bytes() != 500 {
		t.Fatalf("a schema over the bound: %d bytes", c.Bytes())
	}
	c.Forget(3)
	if _, ok := c.Get(Key{3, 1}); ok || c.Bytes() != 0 {
		t.Fatalf("after Forget: %d bytes", c.Bytes())
	}
}
