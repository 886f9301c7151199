package graph_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/daemontest"
)

// TestGetQueryIsReadWhole: a GraphQL GET whose URL query cannot be read
// whole (a bad %-escape, a ';' separator) or gives a parameter twice is
// a 400 naming what is wrong, never run without the pair it mangles or
// with one of two values picked. url.URL.Query left the mangled
// variables out, so an optional filter variable was null and the query
// answered every document; of variables given twice it ran the first.
func TestGetQueryIsReadWhole(t *testing.T) {
	t.Parallel()
	d := daemontest.Start(t)
	d.CreateDatabase(t, "people", testSDL)
	path := "/api/graphql/admin/people"
	d.MustDo(t, http.StatusOK, daemontest.Admin(), http.MethodPost, "/api/document/admin/people",
		`[{"@type":"Person","@id":"a","name":"A"},{"@type":"Person","@id":"b","name":"B"}]`)
	query := "query=" + url.QueryEscape(`query($f: Person_Filter) { Person(filter: $f) { name } }`)
	vars := "variables=" + url.QueryEscape(`{"f":{"name":{"eq":"A"}}}`)
	// Read whole, the filter holds.
	r := d.Do(t, daemontest.Admin(), http.MethodGet, path+"?"+query+"&"+vars, nil)
	if want := `{"data":{"Person":[{"name":"A"}]},`; r.Status != http.StatusOK || !strings.HasPrefix(string(r.Body), want) {
		t.Fatalf("GET: %d %s, want %s", r.Status, r.Body, want)
	}
	for _, c := range []struct{ name, rawQuery, want string }{
		{"bad escape", query + "&" + vars + "%zz", `the URL's query cannot be read: invalid URL escape \"%zz\"`},
		{"semicolon", query + "&" + vars + ";x=1", `the URL's query cannot be read: invalid semicolon separator in query`},
		{"variables twice", query + "&" + vars + "&variables=%7B%7D", `query parameter \"variables\" is given 2 times`},
		{"query twice", query + "&" + vars + "&query=%7B__typename%7D", `query parameter \"query\" is given 2 times`},
	} {
		r := d.Do(t, daemontest.Admin(), http.MethodGet, path+"?"+c.rawQuery, nil)
		if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), c.want) {
			t.Errorf("%s: %d %s, want 400 containing %s", c.name, r.Status, r.Body, c.want)
		}
	}
}
