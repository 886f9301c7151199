package daemon_test

import (
	"cmp"
	"fmt"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestDocumentValueBound: a document holds at most 1,000,000 values in
// its fields (schema.MaxValues), counted at any depth, whoever writes it:
// the API refuses one more, naming the bound (a body far past it before
// decoding it), and so does a SQL write,
// counting as the API does (a comma inside a string is not a value, an
// array of an empty string is not empty, null columns do not count). A
// row holding more all the same (written before the bound, as Sluice's own
// role with the triggers skipped) reads without that field, which is not
// decoded.
func TestDocumentValueBound(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "many", `type W { xs: [Int!] data: JSON s: String n: Int }`)
	zeros := func(n int, sep string) string { return strings.TrimSuffix(strings.Repeat("0"+sep, n), sep) }

	// The API: the list and its elements are the document's values.
	body := `{"@type":"W","@id":"api","xs":[` + zeros(1_000_000, ",") + `]}`
	if r := d.MustDo(t, 400, dt.Admin(), "POST", "/api/document/admin/many", body); !strings.Contains(string(r.Body), "holds 1000001 values in its fields") ||
		!strings.Contains(string(r.Body), "more than 1000000, the most a document may") {
		t.Fatalf("POST of 1,000,001 values: %s", r.Body)
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/many", `{"@type":"W","@id":"api","xs":[`+zeros(999_999, ",")+`]}`)
	// Past it by more than a document's own members ("@type", "@id",
	// "@version"): refused before the body is decoded, which builds a value
	// for each (a body of max_body_bytes, 30 million, held gigabytes). A
	// merge patch is counted as it is read.
	for _, c := range []struct{ method, path, body, contentType, want string }{
		{"POST", "/api/document/admin/many", `[{"@type":"W","@id":"big","xs":[` + zeros(1_000_004, ",") + `]}]`, "application/json",
			"document 0 (big): the document holds more than 1000000 values in its fields"},
		{"PATCH", "/api/document/admin/many?id=W/api", `{"xs":[` + zeros(1_000_001, ",") + `]}`, "application/merge-patch+json",
			"the patch holds more than 1000000 values"},
	} {
		if r := d.MustDo(t, 400, dt.Admin(), c.method, c.path, c.body, "Content-Type", c.contentType); !strings.Contains(string(r.Body), c.want) {
			t.Fatalf("%s %s: %.300s", c.method, c.path, r.Body)
		}
	}

	// SQL: the same bound, the same count.
	w := newSQLWriter(t, d, "many")
	tbl := w.table("W")
	before := logLength(t, d, "many")
	objects := func(n int) string { return strings.Repeat(`{"a": ",,,,"}, `, n) } // commas in strings
	for _, c := range []struct {
		xs, data, s, n string // the columns' values
		ok             bool
	}{
		{xs: `'[` + zeros(999_999, ", ") + `]'`, ok: true},
		{xs: `'[` + zeros(1_000_000, ", ") + `]'`},
		// n, data, its 499,999 lists and their strings, and 0: an empty
		// string is a value, its list not empty.
		{data: `'[` + strings.Repeat(`[""], `, 499_999) + `0]'`, n: "1"},
		{data: `'[` + strings.Repeat(`[""], `, 499_999) + `0]'`, ok: true},
		// Commas and brackets in strings are not values.
		{data: `'[` + objects(499_998) + `0]'`, s: `'` + strings.Repeat(",[{", 400_000) + `'`, ok: true},
		{data: `'[` + objects(499_999) + `0, 0]'`, s: `'x'`},
	} {
		vals := make([]string, 0, 4)
		for _, v := range []string{c.xs, c.data, c.s, c.n} {
			vals = append(vals, cmp.Or(v, "NULL"))
		}
		row := strings.Join(vals, ", ")
		for i, stmt := range []string{
			"INSERT INTO " + tbl + " (_id, xs, data, s, n) VALUES ('W/sql', " + row + ")",
			"UPDATE " + tbl + " SET (xs, data, s, n) = ROW(" + row + ") WHERE _id = 'W/api'",
		} {
			err := sqlTx(w.url, stmt)
			if c.ok != (err == nil) || err != nil && !strings.Contains(err.Error(), "more than 1000000, the most a document may") {
				msg := fmt.Sprint(err)
				t.Errorf("row %.80s… statement %d: %.80s…%s", row, i, msg, msg[max(0, len(msg)-300):])
			}
		}
		if c.ok {
			sqlExec(t, w.url, "DELETE FROM "+tbl+" WHERE _id = 'W/sql'")
		}
	}
	if n := logLength(t, d, "many"); n != before+9 {
		t.Fatalf("%d commits for 9 accepted statements", n-before)
	}
	checkLogMatchesTables(t, d, "many", "W")

	// A row past the bound, written before it: read without the field.
	sqlExec(t, d.DatabaseURL, "SET LOCAL sluice.writer = 'on'",
		"INSERT INTO "+tbl+` (_id, _commit_uid, xs, n) VALUES ('W/old', 1, '[`+zeros(1_100_000, ", ")+`]', 7)`)
	if r := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/many?id=W/old", nil); strings.TrimSpace(string(r.Body)) != `{"@id":"W/old","@type":"W","@version":"1","n":7}` {
		t.Fatalf("GET W/old: %.200s", r.Body)
	}
	for _, q := range []string{`{ W(ids: ["W/old"]) { _id xs n } }`, `{ W(ids: ["W/old"]) { _id xs n _CommitMetadata { _id } } }`} {
		if got := gqlData(t, d, dt.Admin(), "many", q); !strings.Contains(got, `"xs":null,"n":7`) {
			t.Errorf("%s: %.200s", q, got)
		}
	}
}

// TestReplaceOfStoredPastValueBound: a replace by a writer whose role
// cannot read some fields keeps their stored values; when the stored
// document holds more values than a document may (written before the
// bound: two fields of 600,000 values, each readable on its own), the
// replace is refused with a Conflict naming why, before the stored
// document is decoded (a value each), and nothing is written. Before, the
// stored document was decoded whole, and the replace refused as invalid
// only after.
func TestReplaceOfStoredPastValueBound(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "keepmany", `type W { xs: [Int!] @private ys: [Int!] @private n: Int }`)
	tbl := newSQLWriter(t, d, "keepmany").table("W")
	zeros := "'[" + strings.TrimSuffix(strings.Repeat("0, ", 600_000), ", ") + "]'"
	sqlExec(t, d.DatabaseURL, "SET LOCAL sluice.writer = 'on'",
		"INSERT INTO "+tbl+" (_id, _commit_uid, xs, ys, n) VALUES ('W/old', 1, "+zeros+", "+zeros+", 7)")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"wren","organization":"admin","password":"wren-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/keepmany", `{"user":"wren","role":"write"}`)
	r := d.MustDo(t, 409, dt.Basic("wren", "wren-password"), "PUT", "/api/document/admin/keepmany", `{"@type":"W","@id":"old","n":8}`)
	if !strings.Contains(string(r.Body), "hold more than 1000000 values, the most a document may") {
		t.Errorf("the replace: %s", r.Body)
	}
	if r := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/keepmany?id=W/old", nil); !strings.Contains(string(r.Body), `"n":7`) {
		t.Errorf("after the refused replace: %.200s", r.Body)
	}
}
