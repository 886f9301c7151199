package daemon_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestReplaceKeepsHiddenFields: a writer whose role cannot read a field
// (@private) replaces a document, by REST PUT, PUT with create, POST
// NDJSON upsert and GraphQL's replace mutations, without it: the stored
// value is kept (in a single subdocument too), and nothing the writer
// reads (the answers, their headers, the document, the change log) holds
// it. A replacement that names the field writes it.
func TestReplaceKeepsHiddenFields(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "hr", `type Person { name: String! ssn: String @private home: Address }
type Address @subdocument { city: String code: String @private }`)
	docs := "/api/document/admin/hr"
	d.MustDo(t, 200, dt.Admin(), "POST", docs, `{"@type":"Person","@id":"alice","name":"Alice","ssn":"S-123","home":{"@type":"Address","city":"Oslo","code":"C-456"}}`)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"wren","organization":"admin","password":"wren-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/hr", `{"user":"wren","role":"write"}`)
	wren := dt.Basic("wren", "wren-password")
	secrets := []string{"S-123", "C-456"}
	hides := func(what string, r dt.Response) {
		t.Helper()
		all := string(r.Body)
		for k, v := range r.Header {
			all += k + ": " + strings.Join(v, ", ") + "\n"
		}
		for _, s := range secrets {
			if strings.Contains(all, s) {
				t.Errorf("%s: the writer got %s: %s", what, s, all)
			}
		}
	}
	stored := func(what, name string) {
		t.Helper()
		var doc struct {
			Name string
			SSN  string
			Home struct{ City, Code string }
		}
		r := d.MustDo(t, 200, dt.Admin(), "GET", docs+"?id=Person/alice", nil)
		if err := json.Unmarshal(r.Body, &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Name != name || doc.SSN != "S-123" || doc.Home.City != "Bergen" || doc.Home.Code != "C-456" {
			t.Errorf("after %s: %s, want name %q, the ssn and the code kept", what, r.Body, name)
		}
	}

	r := d.MustDo(t, 200, wren, "PUT", docs, `{"@type":"Person","@id":"alice","name":"Alice B","home":{"@type":"Address","city":"Bergen"}}`)
	hides("PUT", r)
	stored("PUT", "Alice B")
	r = d.MustDo(t, 200, wren, "PUT", docs+"?create=true", `{"@type":"Person","@id":"alice","name":"Alice C","home":{"@type":"Address","city":"Bergen"}}`)
	hides("PUT with create", r)
	stored("PUT with create", "Alice C")
	r = d.MustDo(t, 200, wren, "PUT", docs+"?create=true", `{"@type":"Person","@id":"alice","name":"Alice D","home":{"@type":"Address","city":"Bergen"}}`+"\n", "Content-Type", "application/x-ndjson")
	hides("NDJSON PUT", r)
	stored("NDJSON PUT", "Alice D")
	r = d.MustDo(t, 200, wren, "POST", "/api/graphql/admin/hr", `{"query":"mutation { Person_replace(documents: [{_id: \"alice\", name: \"Alice E\", home: {city: \"Bergen\"}}]) }"}`, "Content-Type", "application/json")
	if strings.Contains(string(r.Body), `"errors"`) {
		t.Fatalf("Person_replace: %s", r.Body)
	}
	hides("Person_replace", r)
	stored("Person_replace", "Alice E")
	r = d.MustDo(t, 200, wren, "POST", "/api/graphql/admin/hr", `{"query":"mutation($j: JSON!) { _replaceDocuments(json: $j) }","variables":{"j":{"@type":"Person","@id":"alice","name":"Alice F","home":{"@type":"Address","city":"Bergen"}}}}`, "Content-Type", "application/json")
	if strings.Contains(string(r.Body), `"errors"`) {
		t.Fatalf("_replaceDocuments: %s", r.Body)
	}
	hides("_replaceDocuments", r)
	stored("_replaceDocuments", "Alice F")
	r = d.MustDo(t, 200, wren, "PATCH", docs+"?id=Person/alice", `{"name":"Alice G"}`, "Content-Type", "application/merge-patch+json")
	hides("PATCH", r)
	stored("PATCH", "Alice G")

	// What the writer reads: the document, its ETag, the log of the
	// commits that kept the values.
	hides("GET", d.MustDo(t, 200, wren, "GET", docs+"?id=Person/alice", nil))
	hides("GET of the class", d.MustDo(t, 200, wren, "GET", docs+"?type=Person", nil))
	hides("changes", d.MustDo(t, 200, wren, "GET", "/api/changes/admin/hr", nil))
	hides("GraphQL read", d.MustDo(t, 200, wren, "POST", "/api/graphql/admin/hr", `{"query":"{ Person { _id _version name home { city } } }"}`, "Content-Type", "application/json"))
	// The log's images hold what was stored: each after image the kept
	// values (an admin reads them).
	changes := string(d.MustDo(t, 200, dt.Admin(), "GET", "/api/changes/admin/hr", nil).Body)
	if n := strings.Count(changes, "S-123"); n < 7 {
		t.Errorf("the log shows the kept ssn %d times, want it in every image (at least 7): %s", n, changes)
	}

	// A replacement that names the field writes it.
	d.MustDo(t, 200, wren, "PUT", docs, `{"@type":"Person","@id":"alice","name":"Alice","ssn":"S-999"}`)
	if b := d.MustDo(t, 200, dt.Admin(), "GET", docs+"?id=Person/alice", nil).Body; !strings.Contains(string(b), `"ssn":"S-999"`) || strings.Contains(string(b), "home") {
		t.Errorf("after a replace naming ssn, without home: %s", b)
	}
}

// TestReplaceKeepsAnUnchangedList: a list of subdocuments whose items
// have fields the writer cannot read is kept as stored when the
// replacement sends it as the writer reads it (the writer changed other
// fields), by REST and GraphQL; a changed list is replaced whole, its
// items' hidden fields with it (which stored item a changed one was
// cannot be told).
func TestReplaceKeepsAnUnchangedList(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "orders", `type Order { ref: String! lines: [Line] }
type Line @subdocument { item: String qty: Int cost: Float @private extra: Note }
type Note @subdocument { text: String secret: String @private }`)
	docs := "/api/document/admin/orders"
	d.MustDo(t, 200, dt.Admin(), "POST", docs, `{"@type":"Order","@id":"o1","ref":"A","lines":[
		{"@type":"Line","item":"nut","qty":2,"cost":1.5,"extra":{"@type":"Note","text":"t","secret":"S-1"}},
		{"@type":"Line","item":"bolt","qty":10,"cost":0.25}]}`)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"wren","organization":"admin","password":"wren-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/orders", `{"user":"wren","role":"write"}`)
	wren := dt.Basic("wren", "wren-password")
	stored := func() string {
		t.Helper()
		return string(d.MustDo(t, 200, dt.Admin(), "GET", docs+"?id=Order/o1", nil).Body)
	}

	// The writer reads the order and sends it back with another ref.
	var seen map[string]any
	if err := json.Unmarshal(d.MustDo(t, 200, wren, "GET", docs+"?id=Order/o1", nil).Body, &seen); err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(seen); strings.Contains(string(b), "cost") || strings.Contains(string(b), "S-1") {
		t.Fatalf("the writer reads %s", b)
	}
	delete(seen, "@version")
	seen["ref"] = "B"
	body, _ := json.Marshal(seen)
	d.MustDo(t, 200, wren, "PUT", docs, string(body))
	if got := stored(); !strings.Contains(got, `"ref":"B"`) || !strings.Contains(got, `"cost":1.5`) || !strings.Contains(got, `"cost":0.25`) || !strings.Contains(got, `"secret":"S-1"`) {
		t.Errorf("after a PUT of the list as read: %s, want the costs and the secret kept", got)
	}
	// The same by GraphQL.
	r := d.MustDo(t, 200, wren, "POST", "/api/graphql/admin/orders", `{"query":"mutation { Order_replace(documents: [{_id: \"o1\", ref: \"C\", lines: [{item: \"nut\", qty: 2, extra: {text: \"t\"}}, {item: \"bolt\", qty: 10}]}]) }"}`, "Content-Type", "application/json")
	if strings.Contains(string(r.Body), `"errors"`) {
		t.Fatalf("Order_replace: %s", r.Body)
	}
	if got := stored(); !strings.Contains(got, `"ref":"C"`) || !strings.Contains(got, `"cost":1.5`) || !strings.Contains(got, `"secret":"S-1"`) {
		t.Errorf("after Order_replace with the list as read: %s, want the costs and the secret kept", got)
	}

	// A changed list is replaced whole.
	d.MustDo(t, 200, wren, "PUT", docs, `{"@type":"Order","@id":"o1","ref":"D","lines":[{"@type":"Line","item":"nut","qty":3}]}`)
	if got := stored(); !strings.Contains(got, `"qty":3`) || strings.Contains(got, "cost") || strings.Contains(got, "bolt") {
		t.Errorf("after a PUT of a changed list: %s, want the list as sent", got)
	}
}

// TestPatchKeepsAnUnchangedList: a merge patch replaces a list it names
// whole, so a writer that sends back a list of subdocuments as it read
// it (the documented way to edit: a document as read, changed) would
// erase its items' hidden fields; the stored list is kept instead, by
// REST and GraphQL, in a subdocument the patch merges into too. A changed
// list is replaced whole, as a replace does.
func TestPatchKeepsAnUnchangedList(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "orders", `type Order { ref: String! lines: [Line] ship: Shipment }
type Line @subdocument { item: String qty: Int meta: JSON cost: Float @private }
type Shipment @subdocument { carrier: String parcels: [Parcel] }
type Parcel @subdocument { kg: Float code: String @private }`)
	docs := "/api/document/admin/orders"
	d.MustDo(t, 200, dt.Admin(), "POST", docs, `{"@type":"Order","@id":"o1","ref":"A",
		"lines":[{"@type":"Line","item":"nut","qty":2,"meta":{"price":9.90},"cost":1.5},{"@type":"Line","item":"bolt","qty":10,"cost":0.25}],
		"ship":{"@type":"Shipment","carrier":"post","parcels":[{"@type":"Parcel","kg":2.5,"code":"P-1"}]}}`)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"wren","organization":"admin","password":"wren-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/orders", `{"user":"wren","role":"write"}`)
	wren := dt.Basic("wren", "wren-password")
	stored := func() string {
		t.Helper()
		return string(d.MustDo(t, 200, dt.Admin(), "GET", docs+"?id=Order/o1", nil).Body)
	}
	kept := func(after string) {
		t.Helper()
		if got := stored(); !strings.Contains(got, `"cost":1.5`) || !strings.Contains(got, `"cost":0.25`) || !strings.Contains(got, `"code":"P-1"`) {
			t.Errorf("after %s: %s, want the costs and the parcel's code kept", after, got)
		}
	}
	patch := func(body string) {
		t.Helper()
		d.MustDo(t, 200, wren, "PATCH", docs+"?id=Order/o1", body, "Content-Type", "application/merge-patch+json")
	}

	// The writer reads the order and sends it back with another ref
	// (decoding numbers as doubles, as JSON.parse does: 9.90 goes back as
	// 9.9, the same number).
	var seen map[string]any
	if err := json.Unmarshal(d.MustDo(t, 200, wren, "GET", docs+"?id=Order/o1", nil).Body, &seen); err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(seen); strings.Contains(string(b), "cost") || strings.Contains(string(b), "P-1") {
		t.Fatalf("the writer reads %s", b)
	}
	delete(seen, "@version")
	seen["ref"] = "B"
	body, _ := json.Marshal(seen)
	patch(string(body))
	kept("a patch of the document as read")
	if got := stored(); !strings.Contains(got, `"ref":"B"`) {
		t.Errorf("the patch's own change is not stored: %s", got)
	}
	lines, _ := json.Marshal(map[string]any{"lines": seen["lines"]})
	patch(string(lines))
	kept("a patch of the list as read")
	patch(`{"ship":{"carrier":"courier","parcels":[{"@type":"Parcel","kg":2.5}]}}`)
	kept("a patch of a subdocument with its list as read")
	r := d.MustDo(t, 200, wren, "POST", "/api/graphql/admin/orders", `{"query":"mutation { Order_update(documents: [{_id: \"o1\", ref: \"C\", lines: [{item: \"nut\", qty: 2, meta: {price: 9.9}}, {item: \"bolt\", qty: 10}]}]) }"}`, "Content-Type", "application/json")
	if strings.Contains(string(r.Body), `"errors"`) {
		t.Fatalf("Order_update: %s", r.Body)
	}
	kept("Order_update with the list as read")

	// A changed list is replaced whole.
	patch(`{"lines":[{"@type":"Line","item":"nut","qty":3}],"ship":{"parcels":[{"@type":"Parcel","kg":1}]}}`)
	if got := stored(); !strings.Contains(got, `"qty":3`) || strings.Contains(got, "cost") || strings.Contains(got, "bolt") || strings.Contains(got, "P-1") {
		t.Errorf("after a patch of changed lists: %s, want the lists as sent", got)
	}
}

// TestPatchKeepsAnUnchangedListWithoutTypes: "@type" is optional on input
// (a subdocument without it, or with null, is of its field's type), so a
// list of subdocuments that a merge patch sends as the writer reads it
// but without "@type", in its items or in the subdocuments they hold, is
// the list as read: it is kept as stored, hidden fields of its items
// included, as a PUT and GraphQL keep it, in a subdocument the patch
// merges into too. (A patch compared the list as sent with the stored one
// as read, "@type" included, and replaced it, erasing them.) A list
// changed without "@type" is still replaced whole; a JSON Patch is
// refused (415) and changes nothing.
func TestPatchKeepsAnUnchangedListWithoutTypes(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "f2x", `type P { name: String! homes: [Addr!] box: Box }
type Addr @subdocument { city: String secret: String @private note: Note notes: [Note] }
type Note @subdocument { text: String code: String @private }
type Box @subdocument { label: String addrs: [Addr] }`)
	docs := "/api/document/admin/f2x"
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"wes","organization":"admin","password":"wes-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/f2x", `{"user":"wes","role":"write"}`)
	wes := dt.Basic("wes", "wes-password")
	secrets := []string{`"secret":"s1"`, `"code":"c1"`, `"secret":"s2"`, `"code":"c2"`, `"secret":"s3"`}
	reset := func() {
		t.Helper()
		d.MustDo(t, 200, dt.Admin(), "PUT", docs+"?create=true", `{"@type":"P","@id":"a","name":"A",
			"homes":[{"@type":"Addr","city":"X","secret":"s1","note":{"@type":"Note","text":"n","code":"c1"}},
				{"@type":"Addr","city":"Y","secret":"s2","notes":[{"@type":"Note","text":"m","code":"c2"}]}],
			"box":{"@type":"Box","label":"L","addrs":[{"@type":"Addr","city":"Z","secret":"s3"}]}}`)
	}
	stored := func() string {
		t.Helper()
		return string(d.MustDo(t, 200, dt.Admin(), "GET", docs+"?id=P/a", nil).Body)
	}
	patch := func(body string) {
		t.Helper()
		d.MustDo(t, 200, wes, "PATCH", docs+"?id=P/a", body, "Content-Type", "application/merge-patch+json")
	}
	reset()

	// The list as read, without "@type": kept, with the patch's own
	// change.
	for _, tc := range []struct{ what, body, want string }{
		{"no @type anywhere", `{"name":"B","homes":[{"city":"X","note":{"text":"n"}},{"city":"Y","notes":[{"text":"m"}]}]}`, `"name":"B"`},
		{"items typed, what they hold not", `{"name":"C","homes":[{"@type":"Addr","city":"X","note":{"text":"n"}},{"@type":"Addr","city":"Y","notes":[{"text":"m"}]}]}`, `"name":"C"`},
		{"items untyped, what they hold typed", `{"name":"D","homes":[{"city":"X","note":{"@type":"Note","text":"n"}},{"city":"Y","notes":[{"@type":"Note","text":"m"}]}]}`, `"name":"D"`},
		{"@type null", `{"name":"E","homes":[{"@type":null,"city":"X","note":{"@type":null,"text":"n"}},{"city":"Y","notes":[{"text":"m"}]}]}`, `"name":"E"`},
		{"a list in a merged subdocument", `{"box":{"label":"L2","addrs":[{"city":"Z"}]}}`, `"label":"L2"`},
		{"a list in a merged subdocument of @type null", `{"box":{"@type":null,"label":"L3","addrs":[{"city":"Z"}]}}`, `"label":"L3"`},
	} {
		reset()
		patch(tc.body)
		got := stored()
		for _, s := range append(secrets, tc.want) {
			if !strings.Contains(got, s) {
				t.Errorf("after a patch with %s: %s, want %s", tc.what, got, s)
			}
		}
	}
	// As a PUT and GraphQL's X_update with the same lists keep them.
	reset()
	d.MustDo(t, 200, wes, "PUT", docs, `{"@type":"P","@id":"a","name":"F","homes":[{"city":"X","note":{"text":"n"}},{"city":"Y","notes":[{"text":"m"}]}],"box":{"label":"L2","addrs":[{"city":"Z"}]}}`)
	if got := stored(); !strings.Contains(got, `"name":"F"`) || strings.Count(got, `"secret"`) != 3 || strings.Count(got, `"code"`) != 2 {
		t.Errorf("after a PUT of the lists as read: %s, want every hidden value kept", got)
	}
	reset()
	r := d.MustDo(t, 200, wes, "POST", "/api/graphql/admin/f2x", `{"query":"mutation { P_update(documents: [{_id: \"a\", name: \"G\", homes: [{city: \"X\", note: {text: \"n\"}}, {city: \"Y\", notes: [{text: \"m\"}]}], box: {addrs: [{city: \"Z\"}]}}]) }"}`, "Content-Type", "application/json")
	if strings.Contains(string(r.Body), `"errors"`) {
		t.Fatalf("P_update: %s", r.Body)
	}
	if got := stored(); !strings.Contains(got, `"name":"G"`) || strings.Count(got, `"secret"`) != 3 || strings.Count(got, `"code"`) != 2 {
		t.Errorf("after P_update of the lists as read: %s, want every hidden value kept", got)
	}

	// A JSON Patch is refused and changes nothing.
	before := stored()
	r = d.Do(t, wes, "PATCH", docs+"?id=P/a", `[{"op":"replace","path":"/homes","value":[{"city":"X"}]}]`, "Content-Type", "application/json-patch+json")
	if r.Status != 415 || stored() != before {
		t.Errorf("a JSON Patch: %d %s; the document %s, was %s", r.Status, r.Body, stored(), before)
	}

	// A list changed without "@type" is replaced whole, its items'
	// hidden fields with it: a nested value changed, an item left out.
	for _, tc := range []struct {
		what, body, want string
		gone             []string
	}{
		{"a nested value changed", `{"homes":[{"city":"X","note":{"text":"other"}},{"city":"Y","notes":[{"text":"m"}]}]}`, `"text":"other"`, secrets[:4]},
		{"an item left out", `{"homes":[{"city":"X","note":{"text":"n"}}]}`, `"city":"X"`, secrets[:4]},
		{"a list in a merged subdocument changed", `{"box":{"addrs":[{"city":"W"}]}}`, `"city":"W"`, secrets[4:]},
	} {
		reset()
		patch(tc.body)
		got := stored()
		if !strings.Contains(got, tc.want) {
			t.Errorf("after a patch with %s: %s, want %s", tc.what, got, tc.want)
		}
		for _, s := range tc.gone {
			if strings.Contains(got, s) {
				t.Errorf("after a patch with %s: %s, want the list as sent, without %s", tc.what, got, s)
			}
		}
	}
}

// TestWriteErrorsTellNothingOfHiddenValues: a writer whose role cannot
// read some fields learns nothing of their stored values from a write
// that is refused. Found by review: the refusal of a patch or a replace
// that kept them counted their values ("holds 1000016 values"), and a
// merge patch into a hidden subdocument was refused naming its required
// field when it was unset and applied when it was set. Now the count is
// of what the writer reads or gives (the same answer whatever is hidden),
// a document that only the kept values take past the bound is refused
// without a count, and a patch cannot merge into a field hidden from its
// writer (it may still remove it, or set it with a replace).
func TestWriteErrorsTellNothingOfHiddenValues(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "hr", `type Person { name: String! notes: JSON @private hs: Address @private pub: JSON }
type Address @subdocument { city: String! zip: String }`)
	docs := "/api/document/admin/hr"
	// a holds 24 values in its hidden fields (hs's "@type" counted), b none.
	d.MustDo(t, 200, dt.Admin(), "POST", docs, `[{"@type":"Person","@id":"a","name":"A","notes":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20],"hs":{"city":"Oslo"}},{"@type":"Person","@id":"b","name":"B"}]`)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"wren","organization":"admin","password":"wren-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/hr", `{"user":"wren","role":"write"}`)
	wren := dt.Basic("wren", "wren-password")
	number := regexp.MustCompile(`[0-9]+`)
	asB := strings.NewReplacer("Person/a", "Person/b", "(a)", "(b)") // an answer about a, as it would be about b
	commits := logLength(t, d, "hr")
	list := func(n int) string { return `[` + strings.Repeat("0,", n-1) + `0]` }
	write := func(method, id, pub string) dt.Response {
		if method == "PATCH" {
			return d.Do(t, wren, "PATCH", docs+"?id=Person/"+id, `{"pub":`+pub+`}`, "Content-Type", "application/merge-patch+json")
		}
		return d.Do(t, wren, "PUT", docs, `{"@type":"Person","@id":"`+id+`","name":"N","pub":`+pub+`}`)
	}
	for _, method := range []string{"PATCH", "PUT"} {
		// Past the bound in what the writer gives (1,000,001 values,
		// the most a patch's body may hold): the same refusal, counting
		// those values alone, whatever the document hides.
		ra, rb := write(method, "a", list(999_999)), write(method, "b", list(999_999))
		_, ma := errBody(t, ra)
		_, mb := errBody(t, rb)
		if ra.Status != 400 || !strings.Contains(ma, "1000001 values") || asB.Replace(ma) != mb {
			t.Errorf("%s past the bound: %d %q, and without hidden values %d %q; want one 400 counting the writer's 1000001 values", method, ra.Status, ma, rb.Status, mb)
		}
		// Past the bound only with the hidden values: refused without
		// counting them. (That the document is past the bound, whole,
		// tells that the hidden values are more than the bound less
		// what the writer gives; security.md says so.)
		r := write(method, "a", list(999_990))
		if _, m := errBody(t, r); r.Status != 400 || !strings.Contains(m, "more than 1000000 values") || strings.Join(number.FindAllString(m, -1), " ") != "1000000" {
			t.Errorf("%s past the bound with the hidden values: %d %q, want a 400 with no count but the bound", method, r.Status, m)
		}
	}
	// A merge into a hidden subdocument (or JSON value) is refused alike,
	// set or not, by REST and GraphQL, naming nothing inside it.
	for _, p := range []string{`{"hs":{"zip":null}}`, `{"hs":{"city":"X"}}`, `{"notes":{"k":1}}`} {
		ra := d.Do(t, wren, "PATCH", docs+"?id=Person/a", p, "Content-Type", "application/merge-patch+json")
		rb := d.Do(t, wren, "PATCH", docs+"?id=Person/b", p, "Content-Type", "application/merge-patch+json")
		_, ma := errBody(t, ra)
		_, mb := errBody(t, rb)
		if ra.Status != 400 || asB.Replace(ma) != mb || strings.Contains(ma, "city") || !strings.Contains(ma, "your role cannot read") {
			t.Errorf("PATCH %s: %d %q, and of the document without it %d %q; want one 400 naming nothing inside", p, ra.Status, ma, rb.Status, mb)
		}
	}
	for _, id := range []string{"a", "b"} {
		r := d.MustDo(t, 200, wren, "POST", "/api/graphql/admin/hr", `{"query":"mutation { Person_update(documents: [{_id: \"`+id+`\", hs: {city: \"X\"}}]) }"}`, "Content-Type", "application/json")
		if !strings.Contains(string(r.Body), "BAD_USER_INPUT") || !strings.Contains(string(r.Body), "your role cannot read") {
			t.Errorf("Person_update merging into the hidden subdocument of %s: %s", id, r.Body)
		}
	}
	if n := logLength(t, d, "hr"); n != commits {
		t.Fatalf("refused writes made commits: %d, was %d", n, commits)
	}
	// Removing a hidden field, and writing it whole, stay allowed.
	d.MustDo(t, 200, wren, "PATCH", docs+"?id=Person/a", `{"hs":null,"notes":[1]}`, "Content-Type", "application/merge-patch+json")
	if b := string(d.MustDo(t, 200, dt.Admin(), "GET", docs+"?id=Person/a", nil).Body); strings.Contains(b, "Oslo") || !strings.Contains(b, `"notes":[1]`) {
		t.Errorf("after a patch removing hs and setting notes: %s", b)
	}
}
