package graph

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/schema"
)

// TestServersAreBounded: the servers a Handler keeps are bounded by their
// schemas' fields, the least recently used going first, whatever the
// number of databases served; requests that find no server build it once
// between them.
func TestServersAreBounded(t *testing.T) {
	s, err := schema.Parse("type P { a: Int b: Int c: Int }")
	if err != nil {
		t.Fatal(err)
	}
	h := NewHandler(nil, Options{})
	h.servers = newServerCache(maxServers, 7) // two servers of three fields
	for id := range int64(5) {
		if _, err := h.server(&sluice.Database{ID: id + 1, SchemaVersion: 1}, s, sluice.RoleAdmin); err != nil {
			t.Fatal(err)
		}
	}
	if n, f := h.servers.lru.Len(), h.servers.fields; n != 2 || f != 6 {
		t.Fatalf("after five databases: %d servers of %d fields, want 2 of 6", n, f)
	}
	if h.servers.get(serverKey{5, sluice.RoleAdmin}) == nil || h.servers.get(serverKey{1, sluice.RoleAdmin}) != nil {
		t.Fatal("the least recently used server is not the one that went")
	}

	var wg sync.WaitGroup
	got := make([]*server, 8)
	d := &sluice.Database{ID: 9, SchemaVersion: 1}
	for i := range got {
		wg.Go(func() {
			srv, err := h.server(d, s, sluice.RoleRead)
			if err != nil {
				t.Error(err)
			}
			got[i] = srv
		})
	}
	wg.Wait()
	for _, srv := range got {
		if srv != got[0] {
			t.Fatal("requests at once built a server each")
		}
	}
}

// TestQueryCachesAreShared: the query caches of all servers are one,
// bounded in weight: what one server adds past the bound evicts the least
// recently used entries, another server's included; a text larger than
// the whole cache is not kept.
func TestQueryCachesAreShared(t *testing.T) {
	c := newSharedCache[string](100, 100, func(text string) int { return len(text) })
	a := cacheView[string]{c, serverVersion{serverKey{1, sluice.RoleAdmin}, 1}}
	b := cacheView[string]{c, serverVersion{serverKey{2, sluice.RoleAdmin}, 1}}
	ctx := context.Background()
	for i := range 4 {
		a.Add(ctx, fmt.Sprintf("%030d", i), "a") // 120 bytes in all
	}
	if _, ok := a.Get(ctx, fmt.Sprintf("%030d", 0)); ok || c.weight != 90 {
		t.Fatalf("past the weight: the oldest kept %v, weight %d", ok, c.weight)
	}
	if _, ok := b.Get(ctx, fmt.Sprintf("%030d", 3)); ok {
		t.Fatal("a server sees another's entry")
	}
	b.Add(ctx, fmt.Sprintf("%030d", 9), "b")
	if _, ok := a.Get(ctx, fmt.Sprintf("%030d", 1)); ok || c.weight != 90 {
		t.Fatalf("another server's entry: the oldest kept %v, weight %d", ok, c.weight)
	}
	b.Add(ctx, fmt.Sprintf("%0200d", 1), "b")
	if _, ok := b.Get(ctx, fmt.Sprintf("%0200d", 1)); ok || c.weight != 90 {
		t.Fatalf("a text larger than the cache: kept %v, weight %d", ok, c.weight)
	}
}

// TestServersCountClassesAndEnums: a server is counted by its schema's
// classes without fields, enums and enum values as well as its fields,
// so servers of such schemas, each costing its GraphQL types, are bounded
// too (counted as one field each, 10,000 classes without fields held 312
// MB).
func TestServersCountClassesAndEnums(t *testing.T) {
	s, err := schema.Parse("type A\ntype B\ninterface C\ntype D { x: Int y: Int }\nenum E { V W X }")
	if err != nil {
		t.Fatal(err)
	}
	h := NewHandler(nil, Options{})
	h.servers = newServerCache(maxServers, 20) // two servers of nine
	for id := range int64(3) {
		if _, err := h.server(&sluice.Database{ID: id + 1, SchemaVersion: 1}, s, sluice.RoleAdmin); err != nil {
			t.Fatal(err)
		}
	}
	// Three classes without fields, two fields, an enum of three values.
	if n, f := h.servers.lru.Len(), h.servers.fields; n != 2 || f != 18 {
		t.Fatalf("after three databases: %d servers counted as %d, want 2 as 18", n, f)
	}
}

// TestServersCountDescriptions: a server holds its schema's descriptions,
// which a schema may carry 4 MiB of (an inherited field's counted with
// every class that inherits it, as the GraphQL schema repeats it): it is
// counted a field more for each 512 bytes of them, so the cache keeps
// fewer such servers (counted by their fields alone, 5 MB of descriptions
// made a server of a few fields, and the cache kept a thousand).
func TestServersCountDescriptions(t *testing.T) {
	long := strings.Repeat("d", 100<<10)
	s, err := schema.Parse(fmt.Sprintf("interface I { %q x: Int }\ntype A implements I { x: Int }\ntype B implements I { x: Int }", long))
	if err != nil {
		t.Fatal(err)
	}
	// Three classes of a field each, the description held by each.
	if got, want := schemaFields(s), 3+3*(100<<10)/descriptionBytesPerField; got != want {
		t.Fatalf("a server of three classes inheriting a 100 KiB description is counted %d fields, want %d", got, want)
	}
	h := NewHandler(nil, Options{})
	h.servers = newServerCache(maxServers, 1000) // one such server
	for id := range int64(3) {
		if _, err := h.server(&sluice.Database{ID: id + 1, SchemaVersion: 1}, s, sluice.RoleAdmin); err != nil {
			t.Fatal(err)
		}
	}
	if n := h.servers.lru.Len(); n != 1 {
		t.Fatalf("after three databases of that schema within 1,000 fields: %d servers kept, want 1", n)
	}
}
