package daemon_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestPagingAsOfSeesEachDocumentOnce: pages read at different positions
// (limit/offset, skip/count) repeat or skip a document when a write lands
// between them, as docs/graphql.md and docs/rest.md warn; pages read as of
// the first page's position hold every document of that state exactly
// once, in GraphQL (asOf) and REST (as_of) alike, whatever is written
// between them.
func TestPagingAsOfSeesEachDocumentOnce(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	a.CreateDatabase(t, "pages", "type Person { name: String @index }")
	var docs []string
	for i := range 9 {
		docs = append(docs, fmt.Sprintf(`{"@type":"Person","@id":"p%d","name":"n%d"}`, i, i))
	}
	a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/pages", "["+strings.Join(docs, ",")+"]")

	// The writes between two pages: a document inserted (its name and
	// id sort first) and, unless insertOnly, one deleted.
	step := 0
	writeBetween := func(insertOnly bool) {
		step++
		a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/pages", fmt.Sprintf(`{"@type":"Person","@id":"a%d","name":"a%d"}`, step, step))
		if !insertOnly && step < 9 {
			a.MustDo(t, 200, dt.Admin(), "DELETE", fmt.Sprintf("/api/document/admin/pages?id=Person/p%d", step), nil)
		}
	}
	ids := func(data string) []string {
		var r struct {
			Person []struct {
				ID string `json:"_id"`
			}
		}
		if err := json.Unmarshal([]byte(data), &r); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		var out []string
		for _, p := range r.Person {
			out = append(out, p.ID)
		}
		return out
	}

	// Without a position, the second page repeats what the first ended
	// with: the document inserted before it moved the rest down one.
	first := ids(gqlData(t, a, dt.Admin(), "pages", `{ Person(orderBy: {name: ASC}, limit: 3) { _id } }`))
	writeBetween(true)
	second := ids(gqlData(t, a, dt.Admin(), "pages", `{ Person(orderBy: {name: ASC}, limit: 3, offset: 3) { _id } }`))
	if !slices.Contains(second, first[len(first)-1]) {
		t.Fatalf("pages %v then %v: want the second to repeat %s (the hazard the docs warn of)", first, second, first[len(first)-1])
	}

	// As of the first page's position: each document once.
	r := gqlQuery(t, a, dt.Admin(), "pages", `{ Person(orderBy: {name: ASC}, limit: 2) { _id } }`)
	if len(r.Errors) > 0 {
		t.Fatalf("first page: %+v", r.Errors)
	}
	at := r.Extensions.Position
	got := ids(string(r.Data))
	wantAt := ids(gqlData(t, a, dt.Admin(), "pages", fmt.Sprintf(`{ Person(orderBy: {name: ASC}, asOf: %q) { _id } }`, at)))
	for off := 2; off < 20; off += 2 {
		writeBetween(false)
		p := gqlQuery(t, a, dt.Admin(), "pages", fmt.Sprintf(`{ Person(orderBy: {name: ASC}, limit: 2, offset: %d, asOf: %q) { _id } }`, off, at))
		if len(p.Errors) > 0 || p.Extensions.Position != at {
			t.Fatalf("page at offset %d: %+v, position %s, want %s", off, p.Errors, p.Extensions.Position, at)
		}
		page := ids(string(p.Data))
		if len(page) == 0 {
			break
		}
		got = append(got, page...)
	}
	if !slices.Equal(got, wantAt) {
		t.Errorf("GraphQL pages as of %s: %v, want %v", at, got, wantAt)
	}

	// REST: skip/count as of the same position, ordered by id.
	var rest []string
	for skip := 0; skip < 20; skip += 2 {
		writeBetween(false)
		res := a.MustDo(t, 200, dt.Admin(), "GET", fmt.Sprintf("/api/document/admin/pages?type=Person&skip=%d&count=2&as_of=%s", skip, at), nil)
		if p := res.Header.Get("Sluice-Position"); p != at {
			t.Fatalf("REST page at skip %d answers position %s, want %s", skip, p, at)
		}
		lines := strings.Fields(string(res.Body))
		if len(lines) == 0 {
			break
		}
		for _, l := range lines {
			var d struct {
				ID string `json:"@id"`
			}
			if err := json.Unmarshal([]byte(l), &d); err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			rest = append(rest, d.ID)
		}
	}
	sorted := slices.Clone(wantAt)
	slices.Sort(sorted)
	if !slices.Equal(rest, sorted) {
		t.Errorf("REST pages as of %s: %v, want %v", at, rest, sorted)
	}
}
