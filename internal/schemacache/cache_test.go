package schemacache

import (
	"fmt"
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

// TestCacheCountsFields: a schema counts its classes' fields as well as
// its text: a short text can expand to many fields (classes holding the
// fields they inherit), which the text alone would not show.
func TestCacheCountsFields(t *testing.T) {
	c := New(100, 100000)
	wide := func() *sluice.Schema {
		fields := make([]*sluice.Field, 100)
		classes := map[string]*sluice.Class{}
		for i := range 3 {
			classes[fmt.Sprint("C", i)] = &sluice.Class{Fields: fields}
		}
		return &sluice.Schema{SDL: "short", Classes: classes}
	}
	c.Add(Key{1, 1}, wide())
	if c.Bytes() != 5+3*100*fieldBytes {
		t.Fatalf("300 fields in 5 bytes of text counted as %d bytes", c.Bytes())
	}
	c.Add(Key{2, 1}, wide())
	if _, ok := c.Get(Key{1, 1}); ok || c.Bytes() != 5+3*100*fieldBytes {
		t.Fatalf("two schemas of 76,805 bytes each under 100,000: the first kept %v, %d bytes", ok, c.Bytes())
	}
}

// TestCacheCountsClassesAndEnums: a class without fields, an enum and an
// enum value count as a field each, so a schema of many of them, whose
// parts cost memory however short its text, is weighed by them (it was
// weighed by its text alone).
func TestCacheCountsClassesAndEnums(t *testing.T) {
	classes := map[string]*sluice.Class{}
	for i := range 1000 {
		classes[fmt.Sprint("C", i)] = &sluice.Class{}
	}
	enums := map[string]*sluice.Enum{"E": {Values: make([]string, 499)}}
	c := New(100, 1<<30)
	c.Add(Key{1, 1}, &sluice.Schema{SDL: "short", Classes: classes, Enums: enums})
	if want := 5 + 1500*fieldBytes; c.Bytes() != want {
		t.Fatalf("1,000 classes without fields and an enum of 499 values counted as %d bytes, want %d", c.Bytes(), want)
	}
}
