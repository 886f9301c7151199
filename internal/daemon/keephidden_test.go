package daemon_test

import (
	"encoding/json"
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
