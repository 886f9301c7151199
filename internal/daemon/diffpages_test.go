package daemon_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/jsonpatch"
)

// diffPage is one page of /api/diff.
type diffPage struct {
	From, To, Position, Next string
	More                     bool
	HiddenFields             []string `json:"hidden_fields"`
	Changes                  []struct {
		ID     string          `json:"@id"`
		Type   string          `json:"@type"`
		Op     string          `json:"op"`
		Before json.RawMessage `json:"before"`
		After  json.RawMessage `json:"after"`
		Patch  json.RawMessage `json:"patch"`
	}
	header dt.Response
}

// getDiff reads the diff at path (a URL of /api/diff) on d, which must
// answer 200, and checks each patch turns its before into its after.
func getDiff(t *testing.T, d *dt.Daemon, path string) diffPage {
	t.Helper()
	r := d.MustDo(t, 200, dt.Admin(), "GET", path, nil)
	var p diffPage
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatalf("%s: %v %s", path, err, r.Body)
	}
	p.header = r
	for _, e := range p.Changes {
		if got, err := jsonpatch.Apply(e.Before, e.Patch); err != nil || !sameJSON(t, got, e.After) {
			t.Errorf("%s: %s's patch %s turns %s into %s (%v), not %s", path, e.ID, e.Patch, e.Before, got, err, e.After)
		}
	}
	return p
}

// dbPosition returns the position a read of database db answers now.
func dbPosition(t *testing.T, d *dt.Daemon, db string) string {
	t.Helper()
	return d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/"+db+"?count=0", nil).Header.Get("Sluice-Position")
}

// TestDiffPagesCompareOneState: a diff paged through its Link header
// compares the same two states on every page, whatever is committed
// between pages: every change of the diff is on exactly one page, as it
// was at the diff's to; the last page's position is that to, so a diff
// from it gives exactly the commits made meanwhile, none lost. Read on the
// other replica.
func TestDiffPagesCompareOneState(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	b := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL))
	a.CreateDatabase(t, "pages", "type Person { name: String! }")
	from := headPosition(t, a, "pages")
	var body strings.Builder
	var want []string
	for i := range 20 {
		fmt.Fprintf(&body, `{"@type":"Person","@id":"p%02d","name":"P%d"}`+"\n", i, i)
		want = append(want, fmt.Sprintf("Person/p%02d", i))
	}
	a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/pages", body.String(), "Content-Type", "application/x-ndjson")

	first := getDiff(t, b, "/api/diff/admin/pages?count=7&from="+url.QueryEscape(from))
	to := first.To
	if first.Position != to || first.header.Header.Get("Sluice-Position") != to || !first.More {
		t.Fatalf("the first page: to %s, position %s (header %s), more %v", to, first.Position, first.header.Header.Get("Sluice-Position"), first.More)
	}
	// Between pages: a document of the first page changes, one of a later
	// page is deleted, one is added where the last page is.
	a.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/pages", `{"@type":"Person","@id":"Person/p01","name":"Changed"}`)
	a.MustDo(t, 200, dt.Admin(), "DELETE", "/api/document/admin/pages?id=Person/p15", nil)
	a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/pages", `{"@type":"Person","@id":"p99","name":"Late"}`)

	var got []string
	page := first
	for pages := 1; ; pages++ {
		for _, e := range page.Changes {
			if e.Op != "added" || e.Before != nil && string(e.Before) != "null" || !strings.Contains(string(e.After), `"name":"P`) {
				t.Errorf("page %d: %s %s %s -> %s, want it added as it was at %s", pages, e.ID, e.Op, e.Before, e.After, to)
			}
			got = append(got, e.ID)
		}
		if page.To != to || page.Position != to || page.header.Header.Get("Sluice-Position") != to {
			t.Errorf("page %d compares with %s (position %s), want %s", pages, page.To, page.Position, to)
		}
		link := page.header.Header.Get("Link")
		if page.More != (link != "") {
			t.Fatalf("page %d: more %v, Link %q", pages, page.More, link)
		}
		if !page.More {
			break
		}
		page = getDiff(t, b, strings.TrimSuffix(strings.TrimPrefix(link, "<"), `>; rel="next"`))
	}
	if !slices.Equal(got, want) {
		t.Errorf("the pages hold %v, want each of %v once", got, want)
	}

	// What changed since: from the last page's position, the commits made
	// between the pages, and nothing else.
	since := getDiff(t, b, "/api/diff/admin/pages?from="+url.QueryEscape(page.Position))
	var ops []string
	for _, e := range since.Changes {
		ops = append(ops, e.ID+" "+e.Op)
	}
	if w := []string{"Person/p01 updated", "Person/p15 deleted", "Person/p99 added"}; !slices.Equal(ops, w) {
		t.Errorf("since the last page: %v, want %v", ops, w)
	}
}

// TestDiffThroughSchemaChanges: a diff says what it cannot show, as a read
// as of its positions does: a field whose values a schema change dropped
// after from (a forced type change; or a field added after from and then
// changed) is left out of every image and named in hidden_fields and
// Sluice-Hidden-Fields; a class dropped and made again after from, or
// made after from and dropped before to, is refused (400 naming it), for
// the whole database, type= or id=. An unknown class in id= is a 400 as
// in type=.
func TestDiffThroughSchemaChanges(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	a.CreateDatabase(t, "shift", "type T { n: Int s: String }\ntype A { x: Int }")
	a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/shift", `[{"@type":"T","@id":"a","n":1,"s":"a"},{"@type":"T","@id":"b","n":2,"s":"b"},{"@type":"A","@id":"k","x":1}]`)
	p1 := dbPosition(t, a, "shift")
	a.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/shift", `{"@type":"T","@id":"T/b","n":2,"s":"b2"}`)
	// m is added, written, then forced to another type; n changes type;
	// A is dropped and made again; B is made, written and dropped.
	a.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/shift", "type T { n: Int s: String m: Int }\ntype A { x: Int }\ntype B { y: Int }")
	a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/shift", `[{"@type":"T","@id":"c","m":5},{"@type":"B","@id":"z","y":1}]`)
	a.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/shift?force=true", "type T { n: String s: String m: String }")
	a.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/shift", "type T { n: String s: String m: String }\ntype A { x: Int }\ntype B { y: Int }")
	a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/shift", `{"@type":"A","@id":"m","x":2}`)
	p2 := dbPosition(t, a, "shift")

	// As of p1, REST hides T.n; the diff from p1 too, and T.m, changed
	// between p1 and now.
	asOf := a.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/shift?type=T&as_of="+url.QueryEscape(p1), nil)
	if h := asOf.Header.Get("Sluice-Hidden-Fields"); h != "T.n" {
		t.Fatalf("as of p1: Sluice-Hidden-Fields %q", h)
	}
	d := getDiff(t, a, "/api/diff/admin/shift?type=T&from="+url.QueryEscape(p1))
	if h := d.header.Header.Get("Sluice-Hidden-Fields"); h != "T.m, T.n" || !slices.Equal(d.HiddenFields, []string{"T.m", "T.n"}) {
		t.Errorf("diff from p1: Sluice-Hidden-Fields %q, hidden_fields %v", h, d.HiddenFields)
	}
	var got []string
	for _, e := range d.Changes {
		got = append(got, e.ID+" "+e.Op+" "+string(e.Before)+" "+string(e.After))
	}
	if w := []string{
		`T/b updated {"@id":"T/b","@type":"T","s":"b"} {"@id":"T/b","@type":"T","s":"b2"}`,
		`T/c added null {"@id":"T/c","@type":"T"}`,
	}; !slices.Equal(got, w) {
		t.Errorf("diff from p1:\n got %q\nwant %q", got, w)
	}
	// Nothing hidden where nothing was dropped.
	if d := getDiff(t, a, "/api/diff/admin/shift?type=T&from="+url.QueryEscape(p2)); d.header.Header.Get("Sluice-Hidden-Fields") != "" || len(d.HiddenFields) != 0 || d.HiddenFields == nil {
		t.Errorf("diff from p2: %q %v", d.header.Header.Get("Sluice-Hidden-Fields"), d.HiddenFields)
	}
	if d := getDiff(t, a, "/api/diff/admin/shift?type=A&from="+url.QueryEscape(p2)); len(d.Changes) != 0 {
		t.Errorf("A from p2: %+v", d.Changes)
	}

	for _, c := range []struct{ query, want string }{
		{"from=" + p1, "the documents of A as of " + p1 + " cannot be shown: a schema change after that position (in effect from commit"},
		{"from=" + p1, "a diff of another class (type=) can be shown"},
		{"from=" + p1 + "&type=A", "the documents of A as of " + p1 + " cannot be shown"},
		{"from=" + p1 + "&id=A/k", "the documents of A as of " + p1 + " cannot be shown"},
		{"from=" + p1 + "&type=B", "the documents of B between " + p1 + " and " + p2 + " cannot be shown: a schema change between them"},
		{"from=" + p1 + "&id=Nope/x", `invalid document id "Nope/x": Nope is not a document class of admin/shift`},
		{"from=" + p1 + "&type=Nope", `type "Nope" is not a document class of admin/shift`},
	} {
		r := a.Do(t, dt.Admin(), "GET", "/api/diff/admin/shift?"+c.query, nil)
		var e struct {
			Message string `json:"api:message"`
		}
		if err := json.Unmarshal(r.Body, &e); err != nil || r.Status != 400 || !strings.Contains(e.Message, c.want) {
			t.Errorf("diff %s: %d %s, want 400 %q", c.query, r.Status, r.Body, c.want)
		}
	}
	// As a read as of p1 of A is.
	if r := a.Do(t, dt.Admin(), "GET", "/api/document/admin/shift?type=A&as_of="+url.QueryEscape(p1), nil); r.Status != 400 {
		t.Errorf("A as of p1: %d %s", r.Status, r.Body)
	}
}

// deepJSON returns a JSON value of 20 nested objects, each under a key of
// 100 bytes, the innermost holding 200 numbers (number i is i+add): 4 KB,
// each number's path 2 KB.
func deepJSON(add int) string {
	var b strings.Builder
	for i := range 20 {
		b.WriteString(`{"` + strings.Repeat(string(rune('a'+i)), 100) + `":`)
	}
	b.WriteByte('{')
	for i := range 200 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"l%d":%d`, i, i+add)
	}
	b.WriteString(strings.Repeat("}", 21))
	return b.String()
}

// TestDiffPatchesWithinThePageBudget: a document whose every leaf changed
// has, with deep long keys, a patch a hundred times its size (400 KB for
// 4 KB); /api/diff answers the whole replace instead, and counts patches
// in history_page_bytes with the images: every page of several documents
// holds at most the budget. Before, each patch was 400 KB, a page of
// four documents 1.6 MB against a budget of 32 KB.
func TestDiffPatchesWithinThePageBudget(t *testing.T) {
	t.Parallel()
	const budget = 32 << 10
	d := dt.Start(t, func(c *config.Config) { c.HistoryPageBytes = budget })
	d.CreateDatabase(t, "deep", "type D { data: JSON }")
	var want []string
	for i := range 6 {
		d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/deep", fmt.Sprintf(`{"@type":"D","@id":"d%d","data":%s}`, i, deepJSON(0)))
		want = append(want, fmt.Sprintf("D/d%d", i))
	}
	from := dbPosition(t, d, "deep")
	for i := range 6 {
		d.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/deep", fmt.Sprintf(`{"@type":"D","@id":"D/d%d","data":%s}`, i, deepJSON(1)))
	}

	var got []string
	page := getDiff(t, d, "/api/diff/admin/deep?from="+url.QueryEscape(from))
	for pages := 1; ; pages++ {
		size := 0
		for _, e := range page.Changes {
			got = append(got, e.ID)
			if !strings.HasPrefix(string(e.Patch), `[{"op":"replace","path":"","value":`) || len(e.Patch) > jsonpatch.ReplaceSize(e.After)+64 {
				t.Errorf("page %d: %s: a patch of %d bytes for a %d-byte document, not the whole replace: %.200s", pages, e.ID, len(e.Patch), len(e.After), e.Patch)
			}
			size += len(e.Before) + len(e.After) + len(e.Patch)
		}
		if len(page.Changes) > 1 && size > budget {
			t.Errorf("page %d: %d documents with %d bytes of images and patches, more than history_page_bytes %d", pages, len(page.Changes), size, budget)
		}
		link := page.header.Header.Get("Link")
		if page.More != (link != "") {
			t.Fatalf("page %d: more %v, Link %q", pages, page.More, link)
		}
		if !page.More {
			break
		}
		page = getDiff(t, d, strings.TrimSuffix(strings.TrimPrefix(link, "<"), `>; rel="next"`))
	}
	if !slices.Equal(got, want) {
		t.Errorf("the pages hold %v, want each of %v once", got, want)
	}
}

// TestDiffNamesWhatItLeavesOut: a diff names in hidden_fields and
// Sluice-Hidden-Fields every field it leaves out of its images for being
// protected from the reader's role at some time since from, from the
// position before the first commit (which Sluice's errors suggest) too,
// of a document class and of a subdocument type, and of a class made
// after from. Before, a diff from before the first commit left P.ssn and
// Address.street out of its after images and named nothing, and one of
// Q, made after from, left Q.x out unnamed; a diff of a class from before
// the first commit, when another class was dropped since, answered 500.
func TestDiffNamesWhatItLeavesOut(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "named", "type P { name: String! ssn: String @private home: Address }\ntype Address @subdocument { street: String @private city: String }\ntype Gone { g: Int }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/named", `{"user":"rita","role":"read"}`)
	rita := dt.Basic("rita", "rita-password")
	p0 := dbPosition(t, d, "named")
	if !strings.Contains(p0, "-0-") {
		t.Fatalf("the position of a database without commits: %s", p0)
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/named", `{"@type":"P","@id":"a","name":"A","ssn":"SSN-WHILE-PRIVATE","home":{"@type":"Address","street":"STREET-WHILE-PRIVATE","city":"Oslo"}}`)
	p1 := dbPosition(t, d, "named")
	// ssn and street are made public, Q is made with x protected; x is
	// written, then made public.
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/named", "type P { name: String! ssn: String home: Address }\ntype Address @subdocument { street: String city: String }\ntype Gone { g: Int }\ntype Q { x: String @private }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/named", `{"@type":"Q","@id":"q","x":"X-WHILE-PRIVATE"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/named", "type P { name: String! ssn: String home: Address }\ntype Address @subdocument { street: String city: String }\ntype Gone { g: Int }\ntype Q { x: String }")

	for _, c := range []struct {
		query   string
		changes int
		hidden  []string
	}{
		{"type=P&from=" + p0, 1, []string{"Address.street", "P.ssn"}},
		{"type=P&from=" + p1, 0, []string{"Address.street", "P.ssn"}},
		{"type=Q&from=" + p0, 1, []string{"Q.x"}},
		{"type=Q&from=" + p1, 1, []string{"Q.x"}},
	} {
		r := d.Do(t, rita, "GET", "/api/diff/admin/named?"+c.query, nil)
		var page diffPage
		if err := json.Unmarshal(r.Body, &page); err != nil || r.Status != 200 {
			t.Errorf("rita's diff %s: %d %s (%v)", c.query, r.Status, r.Body, err)
			continue
		}
		if strings.Contains(string(r.Body), "WHILE-PRIVATE") || len(page.Changes) != c.changes {
			t.Errorf("rita's diff %s: %s, want %d changes without what was protected", c.query, r.Body, c.changes)
		}
		if h := r.Header.Get("Sluice-Hidden-Fields"); !slices.Equal(page.HiddenFields, c.hidden) || h != strings.Join(c.hidden, ", ") {
			t.Errorf("rita's diff %s: hidden_fields %q, Sluice-Hidden-Fields %q, want %q", c.query, page.HiddenFields, h, c.hidden)
		}
	}
	// The admin's shows them, and names nothing.
	if r := d.Do(t, dt.Admin(), "GET", "/api/diff/admin/named?type=P&from="+p0, nil); r.Status != 200 || !strings.Contains(string(r.Body), `"ssn":"SSN-WHILE-PRIVATE"`) || !strings.Contains(string(r.Body), `"hidden_fields":[]`) {
		t.Errorf("the admin's diff from %s: %d %s", p0, r.Status, r.Body)
	}
	// Gone is dropped: a diff of every class from p0 is refused for it,
	// one of P is answered.
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/named?force=true", "type P { name: String! ssn: String home: Address }\ntype Address @subdocument { street: String city: String }\ntype Q { x: String }")
	if r := d.Do(t, rita, "GET", "/api/diff/admin/named?from="+p0, nil); r.Status != 400 || !strings.Contains(string(r.Body), "the documents of Gone between") {
		t.Errorf("rita's diff of every class from %s: %d %s", p0, r.Status, r.Body)
	}
	if r := d.Do(t, rita, "GET", "/api/diff/admin/named?type=P&from="+p0, nil); r.Status != 200 || !strings.Contains(string(r.Body), `"hidden_fields":["Address.street","P.ssn"]`) {
		t.Errorf("rita's diff of P from %s, after Gone was dropped: %d %s", p0, r.Status, r.Body)
	}
}

// TestDiffNamesNoDocumentItLeavesOut: a diff leaves out a document whose
// only change is to a field the reader may not see, and no page names
// it: not its next, not its Link. Before, a page's next was the last
// document of the store's page, shown or not: rita's diff of a database
// where only P/z's @private ssn changed answered {"changes":[],
// "next":"P/z","more":false}. Now next is there only when more is, and
// names the last document the page shows; a page that reads as much of
// the store as it may (here one document a read, history_page_bytes
// being 1) and ends on documents it left out gives a sealed cursor
// instead, which goes on after them with the same diff only.
func TestDiffNamesNoDocumentItLeavesOut(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.HistoryPageBytes = 1 })
	d.CreateDatabase(t, "leak", "type P { name: String! ssn: String @private }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/leak", `{"user":"rita","role":"read"}`)
	rita := dt.Basic("rita", "rita-password")
	hidden := []string{"h1", "h2", "h3", "h4", "h5"}
	var docs []string
	for _, id := range append([]string{"a", "z"}, hidden...) {
		docs = append(docs, fmt.Sprintf(`{"@type":"P","@id":"%s","name":"N","ssn":"1"}`, id))
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/leak", "["+strings.Join(docs, ",")+"]")
	from := url.QueryEscape(dbPosition(t, d, "leak"))
	// Only the private field of P/z changes.
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/leak", `{"@type":"P","@id":"P/z","name":"N","ssn":"2"}`)
	// ritaDiff reads a page of rita's, which must name none of leftOut.
	ritaDiff := func(path string, leftOut []string) diffPage {
		t.Helper()
		r := d.Do(t, rita, "GET", path, nil)
		var page diffPage
		if err := json.Unmarshal(r.Body, &page); err != nil || r.Status != 200 {
			t.Fatalf("rita's %s: %d %s (%v)", path, r.Status, r.Body, err)
		}
		page.header = r
		for _, id := range leftOut {
			if link := r.Header.Get("Link"); strings.Contains(string(r.Body), "P/"+id) || strings.Contains(link, "P%2F"+id) || strings.Contains(link, "P/"+id) {
				t.Errorf("rita's %s leaves P/%s out (only its @private ssn changed) but names it: Link %q, body %s", path, id, link, r.Body)
			}
		}
		return page
	}
	page := ritaDiff("/api/diff/admin/leak?from="+from, []string{"z"})
	if len(page.Changes) != 0 || page.More || strings.Contains(string(page.header.Body), `"next"`) {
		t.Errorf("rita's diff: %s, want no change, no next and more false", page.header.Body)
	}

	// P/a's name changes, and the private fields of P/h1 to P/h5: paged
	// through its Link, rita's diff shows P/a and no other, and P/z's
	// name change too once it is made.
	var puts []string
	for _, id := range hidden {
		puts = append(puts, fmt.Sprintf(`{"@type":"P","@id":"P/%s","name":"N","ssn":"2"}`, id))
	}
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/leak", "["+strings.Join(puts, ",")+"]")
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/leak", `{"@type":"P","@id":"P/a","name":"A","ssn":"1"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/leak", `{"@type":"P","@id":"P/z","name":"Z","ssn":"2"}`)
	var got []string
	var sealed string
	page = ritaDiff("/api/diff/admin/leak?from="+from, hidden)
	for pages := 1; ; pages++ {
		for _, e := range page.Changes {
			got = append(got, e.ID)
		}
		link := page.header.Header.Get("Link")
		if page.More != (link != "") || page.More != (page.Next != "") {
			t.Fatalf("page %d: more %v, next %q, Link %q", pages, page.More, page.Next, link)
		}
		if !page.More {
			break
		}
		if strings.HasPrefix(page.Next, "~") {
			sealed = page.Next
		} else if len(page.Changes) == 0 || page.Next != page.Changes[len(page.Changes)-1].ID {
			t.Errorf("page %d: next %q, not the last document it shows: %s", pages, page.Next, page.header.Body)
		}
		if pages > 10 {
			t.Fatalf("more than 10 pages: %s", page.header.Body)
		}
		page = ritaDiff(strings.TrimSuffix(strings.TrimPrefix(link, "<"), `>; rel="next"`), hidden)
	}
	if want := []string{"P/a", "P/z"}; !slices.Equal(got, want) {
		t.Errorf("rita's pages hold %v, want %v", got, want)
	}
	if sealed == "" {
		t.Fatal("no page ended on the documents it left out with a sealed cursor")
	}
	// A sealed cursor goes on with its own diff only (its from, to, type,
	// id and the reader's role), and one made up is refused.
	to := url.QueryEscape(page.To)
	// A character in the middle: the last one of unpadded base64 may
	// carry only bits the decoding ignores (…B and …A can decode alike).
	k := len(sealed) / 2
	forged := sealed[:k] + "A" + sealed[k+1:]
	if forged == sealed {
		forged = sealed[:k] + "B" + sealed[k+1:]
	}
	for _, c := range []struct {
		auth dt.Auth
		path string
	}{
		{rita, "/api/diff/admin/leak?from=" + url.QueryEscape(page.To) + "&to=" + to + "&after=" + url.QueryEscape(sealed)},
		{rita, "/api/diff/admin/leak?type=P&from=" + from + "&to=" + to + "&after=" + url.QueryEscape(sealed)},
		{dt.Admin(), "/api/diff/admin/leak?from=" + from + "&to=" + to + "&after=" + url.QueryEscape(sealed)},
		{rita, "/api/diff/admin/leak?from=" + from + "&to=" + to + "&after=" + url.QueryEscape(forged)},
	} {
		if r := d.Do(t, c.auth, "GET", c.path, nil); r.Status != 400 || !strings.Contains(string(r.Body), "not a cursor of this diff") {
			t.Errorf("%s: %d %s, want 400", c.path, r.Status, r.Body)
		}
	}
}

// TestDiffAfterIsADocumentOrACursor: after= is a document id, the diff
// going on after it (a page's next, or one given by hand), or a sealed
// cursor; anything else is a 400 naming it. A value that was neither
// (after=zzz) was compared with the ids as it was: a page of nothing,
// more false, as if the diff had ended there.
func TestDiffAfterIsADocumentOrACursor(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "after", "type Person { name: String! }")
	from := url.QueryEscape(dbPosition(t, d, "after"))
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/after", `[{"@type":"Person","@id":"a","name":"A"},{"@type":"Person","@id":"b","name":"B"},{"@type":"Person","@id":"c","name":"C"}]`)
	page := getDiff(t, d, "/api/diff/admin/after?from="+from+"&after=Person%2Fa")
	var got []string
	for _, e := range page.Changes {
		got = append(got, e.ID)
	}
	if want := []string{"Person/b", "Person/c"}; !slices.Equal(got, want) || page.More {
		t.Errorf("after Person/a: %v (more %v), want %v", got, page.More, want)
	}
	// An empty type= or id= (a script's unset variable) narrowed nothing:
	// the diff answered every document.
	for _, p := range []string{"type", "id"} {
		path := "/api/diff/admin/after?from=" + from + "&" + p + "="
		if r := d.Do(t, dt.Admin(), "GET", path, nil); r.Status != 400 || !strings.Contains(string(r.Body), "query parameter "+p+" is empty") {
			t.Errorf("%s=: %d %s, want 400 naming %s", p, r.Status, r.Body, p)
		}
	}
	for _, after := range []string{"zzz", "Person", "Person/", "/a", "Person/a b"} {
		path := "/api/diff/admin/after?from=" + from + "&after=" + url.QueryEscape(after)
		if r := d.Do(t, dt.Admin(), "GET", path, nil); r.Status != 400 || !strings.Contains(string(r.Body), "query parameter after") {
			t.Errorf("after=%s: %d %s, want 400 naming after", after, r.Status, r.Body)
		}
	}
}

// TestDiffOnAReplicaBehindASchemaChange: a diff read on a replica that
// still holds the schema from before a change another replica just made
// (its cache keeps a database up to a second) runs again with the
// current one, as every other read does. It answered 409, "the schema
// of admin/behind changed while the request ran; retry it", a conflict
// for a read that nothing conflicted with.
func TestDiffOnAReplicaBehindASchemaChange(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	b := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL))
	a.CreateDatabase(t, "behind", "type T { n: Int }")
	from := url.QueryEscape(dbPosition(t, a, "behind"))
	a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/behind", `{"@type":"T","@id":"a","n":1}`)
	sdl := "type T { n: Int }"
	for i := range 3 {
		getDiff(t, b, "/api/diff/admin/behind?from="+from) // b holds the schema now
		sdl += fmt.Sprintf("\ntype U%d { x: Int }", i)
		a.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/behind", sdl)
		if r := b.Do(t, dt.Admin(), "GET", "/api/diff/admin/behind?from="+from, nil); r.Status != 200 || !strings.Contains(string(r.Body), `"@id":"T/a"`) {
			t.Errorf("diff on b right after schema change %d on a: %d %s", i, r.Status, r.Body)
		}
	}
}

// TestDiffPageSortsNoImages: a page of a diff sorts the changes between
// its two positions by document without their images, and reads the
// images of its own documents alone: with Postgres given 64 kB of
// work_mem and 1 MB of temporary files, a page of one document of a diff
// over 5 MB of images is answered. Every page sorted every image of the
// range (twice, after materializing them), so a diff over a long log
// wrote several times its images to temporary files for each page, up to
// four times a page, for any reader; here it failed with "temporary file
// size exceeds temp_file_limit".
func TestDiffPageSortsNoImages(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	a.CreateDatabase(t, "wide", "type T { s: String }")
	from := url.QueryEscape(dbPosition(t, a, "wide"))
	big := func(c byte) string { return strings.Repeat(string(c), 200_000) }
	for i := range 8 {
		a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/wide", fmt.Sprintf(`{"@type":"T","@id":"d%d","s":%q}`, i, big('a')))
		a.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/wide", fmt.Sprintf(`{"@type":"T","@id":"T/d%d","s":%q}`, i, big('b')))
	}
	sqlExec(t, a.DatabaseURL, `DO $$ BEGIN
		EXECUTE format('ALTER DATABASE %I SET work_mem = %L', current_database(), '64kB');
		EXECUTE format('ALTER DATABASE %I SET temp_file_limit = %L', current_database(), '1MB');
	END $$`)
	b := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL)) // its connections take the settings
	p := getDiff(t, b, "/api/diff/admin/wide?count=1&from="+from)
	if len(p.Changes) != 1 || p.Changes[0].ID != "T/d0" || p.Changes[0].Op != "added" || !p.More || p.Next != "T/d0" {
		t.Fatalf("first page: %d changes, more %v, next %q", len(p.Changes), p.More, p.Next)
	}
	if !strings.Contains(string(p.Changes[0].After), big('b')) {
		t.Errorf("T/d0 after: %.100s", p.Changes[0].After)
	}
}

// TestDiffRangeBoundedBeforeItIsRead: a diff whose positions hold more
// than max_past_changes changes between them is refused, 400 naming the
// key and the position up to which a diff from its from fits, before any
// page reads the log (every page reads all of it, whatever type= and id=
// keep, so they are refused as well); a range of exactly that many, from
// a position inside a commit too, is read, and so are the two diffs the
// error suggests. Before, every diff read the whole range, however long,
// once per page, bounded only by statement_timeout.
func TestDiffRangeBoundedBeforeItIsRead(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.MaxPastChanges = 5 })
	d.CreateDatabase(t, "bound", "type Person { name: String! }")
	from := headPosition(t, d, "bound")
	epoch := from[:strings.LastIndex(from[:strings.LastIndex(from, "-")], "-")]
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/bound", `[{"@type":"Person","@id":"p0","name":"A"},{"@type":"Person","@id":"p1","name":"B"},{"@type":"Person","@id":"p2","name":"C"}]`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/bound", `{"@type":"Person","@id":"Person/p0","name":"A2"}`)
	second := headPosition(t, d, "bound")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/bound", `[{"@type":"Person","@id":"p3","name":"D"},{"@type":"Person","@id":"p4","name":"E"}]`)
	now := headPosition(t, d, "bound")

	// Six changes from from: the first five end at commit 3's first.
	fits := epoch + "-3-0"
	for _, q := range []string{
		"from=" + from,
		"from=" + from + "&to=" + now,
		"from=" + from + "&type=Person",
		"from=" + from + "&id=Person/p4",
	} {
		r := d.Do(t, dt.Admin(), "GET", "/api/diff/admin/bound?"+q, nil)
		var e struct {
			Message string `json:"api:message"`
		}
		want := "the log of admin/bound between from " + from + " and to " + now + " holds more than 5 changes, the most one diff reads (max_past_changes): from " + from + ", a diff reaches at most to=" + fits
		if err := json.Unmarshal(r.Body, &e); err != nil || r.Status != 400 || !strings.HasPrefix(e.Message, want) {
			t.Errorf("diff %s: %d %s, want 400 %q", q, r.Status, r.Body, want)
		}
	}

	ids := func(p diffPage) []string {
		var got []string
		for _, e := range p.Changes {
			got = append(got, e.ID+" "+e.Op)
		}
		return got
	}
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"from=" + from + "&to=" + fits, []string{"Person/p0 added", "Person/p1 added", "Person/p2 added", "Person/p3 added"}},
		{"from=" + fits, []string{"Person/p4 added"}},
		{"from=" + from + "&to=" + second, []string{"Person/p0 added", "Person/p1 added", "Person/p2 added"}},
		// Five: commit 1's changes after its first, and those of 2 and 3.
		{"from=" + epoch + "-1-0", []string{"Person/p0 updated", "Person/p1 added", "Person/p2 added", "Person/p3 added", "Person/p4 added"}},
	} {
		if got := ids(getDiff(t, d, "/api/diff/admin/bound?"+strings.ReplaceAll(c.query, "+", "%2B"))); !slices.Equal(got, c.want) {
			t.Errorf("diff %s: %v, want %v", c.query, got, c.want)
		}
	}
}
