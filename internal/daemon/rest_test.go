package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

const peopleSDL = `
enum Color { RED GREEN BLUE }
type Address @subdocument { street: String! city: String }
interface Animal { name: String! }
type Dog implements Animal { name: String! breed: String }
type Person {
  name: String!
  age: Int
  favorite: Color
  home: Address
  friends: [Person!]
  pet: Animal
  ssn: String @private
}
`

// errBody decodes a REST error body and checks its shape.
func errBody(t *testing.T, r dt.Response) (typ, msg string) {
	t.Helper()
	var b struct {
		Status string            `json:"api:status"`
		Error  map[string]string `json:"api:error"`
		Msg    string            `json:"api:message"`
	}
	if err := json.Unmarshal(r.Body, &b); err != nil {
		t.Fatalf("error body is not JSON: %s", r.Body)
	}
	if !strings.HasPrefix(b.Status, "api:") || b.Error["@type"] == "" || b.Msg == "" {
		t.Fatalf("error body has the wrong shape: %s", r.Body)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("error Content-Type %q", ct)
	}
	return b.Error["@type"], b.Msg
}

func TestRESTDocumentsRoundTrip(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "people", peopleSDL)

	ins := d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/people?author=ann&message=first",
		`[{"@type":"Dog","@id":"rex","name":"Rex"},
		  {"@type":"Person","@id":"Person/alice","name":"Alice","age":30,"favorite":"RED","home":{"street":"Main St"},"pet":"Dog/rex","ssn":"123"}]`)
	var res struct {
		IDs    []string `json:"ids"`
		Commit string   `json:"commit"`
	}
	if err := json.Unmarshal(ins.Body, &res); err != nil {
		t.Fatal(err)
	}
	if strings.Join(res.IDs, ",") != "Dog/rex,Person/alice" || res.Commit != "1" {
		t.Fatalf("insert answered %s", ins.Body)
	}

	got := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/people?id=Person/alice", nil)
	want := `{"@id":"Person/alice","@type":"Person","name":"Alice","age":30,"favorite":"RED","home":{"@type":"Address","street":"Main St"},"pet":"Dog/rex","ssn":"123"}` + "\n"
	if withoutVersion(string(got.Body)) != want || got.Header.Get("ETag") == "" {
		t.Fatalf("get by id (ETag %q):\n got %s\nwant %s", got.Header.Get("ETag"), got.Body, want)
	}

	// NDJSON insert of several documents is one commit.
	ndjson := "{\"@type\":\"Person\",\"@id\":\"bob\",\"name\":\"Bob\"}\n{\"@type\":\"Person\",\"@id\":\"carol\",\"name\":\"Carol\",\"friends\":[\"Person/bob\"]}\n"
	r := d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/people", ndjson, "Content-Type", "application/x-ndjson")
	if !strings.Contains(string(r.Body), `"commit":"2"`) {
		t.Fatalf("ndjson insert: %s", r.Body)
	}

	// Listing by type, paging, as_list.
	list := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/people?type=Person&skip=1&count=1&as_list=true", nil)
	if withoutVersion(string(list.Body)) != `[{"@id":"Person/bob","@type":"Person","name":"Bob"}]`+"\n" {
		t.Fatalf("paged list: %s", list.Body)
	}
	all := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/people?type=Animal", nil)
	if strings.Count(string(all.Body), "\n") != 1 || !strings.Contains(string(all.Body), `"@id":"Dog/rex"`) {
		t.Fatalf("list of the abstract parent: %s", all.Body)
	}
	if ct := all.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Fatalf("listing Content-Type %q", ct)
	}

	// Replace, upsert, delete.
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/people", `{"@type":"Person","@id":"Person/bob","name":"Robert","age":41}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/people?create=true", `{"@type":"Person","@id":"Person/dave","name":"Dave"}`)
	d.MustDo(t, 200, dt.Admin(), "DELETE", "/api/document/admin/people", `["Person/carol","Person/dave"]`)
	d.MustDo(t, 200, dt.Admin(), "DELETE", "/api/document/admin/people?id=Dog/rex", nil)

	names := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/people?type=Person", nil)
	if strings.Count(string(names.Body), "\n") != 2 || !strings.Contains(string(names.Body), `"name":"Robert","age":41`) {
		t.Fatalf("after replace and delete: %s", names.Body)
	}

	// The log has one commit per request, newest first, with author and message.
	var log []struct {
		ID      string `json:"id"`
		Author  string `json:"author"`
		Message string `json:"message"`
		Changes int    `json:"changes"`
	}
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", "/api/log/admin/people", nil).Body, &log); err != nil {
		t.Fatal(err)
	}
	if len(log) != 6 || log[0].ID != "6" || log[5].Author != "ann" || log[5].Message != "first" || log[5].Changes != 2 {
		t.Fatalf("log: %+v", log)
	}

	// The change history has before and after images.
	var page struct {
		Commits []struct {
			ID      string `json:"id"`
			Changes []struct {
				Op     string          `json:"op"`
				ID     string          `json:"id"`
				Before json.RawMessage `json:"before"`
				After  json.RawMessage `json:"after"`
			} `json:"changes"`
		} `json:"commits"`
	}
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", "/api/changes/admin/people?after=2", nil).Body, &page); err != nil {
		t.Fatal(err)
	}
	changes := page.Commits
	if len(changes) != 4 {
		t.Fatalf("changes after 2: %d commits", len(changes))
	}
	up := changes[0].Changes[0]
	if up.Op != "updated" || string(up.Before) != `{"@id":"Person/bob","@type":"Person","name":"Bob"}` ||
		string(up.After) != `{"@id":"Person/bob","@type":"Person","name":"Robert","age":41}` {
		t.Fatalf("update change: %+v", up)
	}
	del := changes[2].Changes
	if len(del) != 2 || del[0].Op != "deleted" || del[0].ID != "Person/carol" || string(del[0].After) != "null" ||
		!strings.Contains(string(del[0].Before), `"friends":["Person/bob"]`) {
		t.Fatalf("delete changes: %+v", del)
	}
}

// TestAllowNamesTheMethodsOfTheURL: a 405's Allow names the methods the
// URL serves, whichever method was refused and whoever refused it (the
// router, the REST change stream, GraphQL over HTTP or single connection
// mode). The change stream and the GraphQL URLs serve no HEAD (their GET
// opens a stream or runs a query), and the GraphQL URLs serve PUT and
// DELETE (single connection mode). Without the change a method unknown to
// the router (PROPFIND) got every method listed there, HEAD and PATCH
// included, and a PATCH or HEAD of a GraphQL URL "GET, POST".
func TestAllowNamesTheMethodsOfTheURL(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "people", "type Person { name: String! }")
	const (
		stream  = "GET, OPTIONS"
		graphQL = "GET, POST, PUT, DELETE, OPTIONS"
	)
	token := []string{"X-GraphQL-Event-Stream-Token", "no-such-reservation"}
	cases := []struct {
		method, path string
		header       []string
		allow        string
	}{
		{"PROPFIND", "/api/subscribe/admin/people/Person", nil, stream},
		{"PATCH", "/api/subscribe/admin/people/Person", nil, stream},
		{"HEAD", "/api/subscribe/admin/people/Person", nil, stream},
		{"PROPFIND", "/api/graphql/admin/people", nil, graphQL},
		{"PATCH", "/api/graphql/admin/people", nil, graphQL},
		{"HEAD", "/api/graphql/admin/people", nil, graphQL},
		{"PATCH", "/api/graphql/admin/people", token, graphQL},
		{"HEAD", "/api/graphql/admin/people", token, graphQL},
		{"PATCH", "/api/graphql/_system", nil, graphQL},
		{"PROPFIND", "/api/info", nil, "GET, HEAD, OPTIONS"},
		{"POST", "/api/info", nil, "GET, HEAD, OPTIONS"},
	}
	for _, c := range cases {
		r := d.Do(t, dt.Admin(), c.method, c.path, nil, c.header...)
		if r.Status != http.StatusMethodNotAllowed || r.Header.Get("Allow") != c.allow {
			t.Errorf("%s %s %v: %d, Allow %q, want 405 and %q: %s", c.method, c.path, c.header, r.Status, r.Header.Get("Allow"), c.allow, r.Body)
		}
	}
}

func TestRESTErrors(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "people", peopleSDL)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/people", `{"@type":"Person","@id":"alice","name":"Alice"}`)

	cases := []struct {
		method, path, body string
		status             int
		typ, msg           string
	}{
		{"GET", "/api/nope", "", 404, "api:NotFound", "no route for GET /api/nope"},
		{"PATCH", "/api/log/admin/people", "", 405, "api:MethodNotAllowed", "method PATCH is not allowed"},
		{"GET", "/api/db/admin/missing", "", 404, "api:NotFound", "database admin/missing does not exist"},
		{"POST", "/api/db/admin/people", "", 409, "api:Conflict", "database admin/people already exists"},
		{"POST", "/api/db/admin/bad%20name", "", 400, "api:BadRequest", `invalid database name "bad name"`},
		{"POST", "/api/db/nosuchorg/x", "", 404, "api:NotFound", `organization "nosuchorg" does not exist`},
		{"POST", "/api/db/admin/badsdl", `{"schema":"type Person {\n  name: Strin\n}"}`, 400, "api:BadRequest", "line 2, column"},
		{"POST", "/api/db/admin/x", `{"labl":"x"}`, 400, "api:BadRequest", `unknown field "labl"`},
		{"GET", "/api/document/admin/people?typ=Person", "", 400, "api:BadRequest", `unknown query parameter "typ"`},
		{"GET", "/api/document/admin/people?count=-1", "", 400, "api:BadRequest", "count"},
		{"GET", "/api/document/admin/people?id=Person/nobody", "", 404, "api:NotFound", "document Person/nobody does not exist"},
		// An empty id is no id: it listed the documents.
		{"GET", "/api/document/admin/people?id=&skip=0&count=1", "", 400, "api:BadRequest", "query parameter id is empty"},
		{"DELETE", "/api/document/admin/people?id=", `["Person/alice"]`, 400, "api:BadRequest", "query parameter id is empty"},
		{"GET", "/api/document/admin/people?type=Nope", "", 400, "api:BadRequest", `type "Nope" is not a document class`},
		// An empty type (a script's unset variable) listed every class.
		{"GET", "/api/document/admin/people?type=", "", 400, "api:BadRequest", "query parameter type is empty"},
		{"POST", "/api/document/admin/people", "", 400, "api:BadRequest", "the request body is empty"},
		{"POST", "/api/document/admin/people", `{"@type":"Person","name":`, 400, "api:BadRequest", "document 0: invalid JSON"},
		{"POST", "/api/document/admin/people", `[{"@type":"Person","name":"A"},{"@type":"Person","age":"x","name":"B"}]`, 400, "api:BadRequest", `document 1: Person: field "age"`},
		{"POST", "/api/document/admin/people", `{"@type":"Person","@id":"alice","name":"Again"}`, 409, "api:Conflict", "document Person/alice already exists"},
		{"POST", "/api/document/admin/people", `{"@type":"Person","name":"A","shoe":1}`, 400, "api:BadRequest", `"shoe"`},
		{"POST", "/api/document/admin/people", `{"@type":"Nope","name":"A"}`, 400, "api:BadRequest", "Nope"},
		{"POST", "/api/document/admin/people", `[{"@type":"Person","@id":"x","name":"A"},{"@type":"Person","@id":"x","name":"B"}]`, 400, "api:BadRequest", "appears twice"},
		{"POST", "/api/document/admin/people", `[1]`, 400, "api:BadRequest", "document 0: not a JSON object"},
		{"POST", "/api/document/admin/people", `"x"`, 400, "api:BadRequest", "must be a JSON object"},
		{"PUT", "/api/document/admin/people", `{"@type":"Person","@id":"nobody","name":"N"}`, 404, "api:NotFound", "document Person/nobody does not exist"},
		{"PUT", "/api/document/admin/people", `{"@type":"Person","name":"N"}`, 400, "api:BadRequest", "needs an @id"},
		{"PUT", "/api/document/admin/people?create=maybe", `{}`, 400, "api:BadRequest", "create"},
		{"DELETE", "/api/document/admin/people?id=Person/nobody", "", 404, "api:NotFound", "document Person/nobody does not exist"},
		{"DELETE", "/api/document/admin/people", `{"x":1}`, 400, "api:BadRequest", "JSON array of document ids"},
		{"DELETE", "/api/document/admin/people", `[]`, 400, "api:BadRequest", "no document ids"},
		{"DELETE", "/api/document/admin/people", `["nonsense"]`, 400, "api:BadRequest", `invalid document id "nonsense"`},
		{"PUT", "/api/schema/admin/people", "type Person { name: String! }", 409, "api:Conflict", "repeat with force=true"},
		{"PUT", "/api/schema/admin/people?force=yes", "type X { a: Int }", 400, "api:BadRequest", "force"},
		{"PUT", "/api/schema/admin/people", "type {", 400, "api:BadRequest", "line 1, column"},
		{"GET", "/api/changes/admin/people?after=zzz-1-0", "", 410, "api:Gone", "is not a position of admin/people: it is another database's, or an earlier database's of that name"},
		{"GET", "/api/changes/admin/people?after=a-b-c", "", 400, "api:BadRequest", "after"},
		{"GET", "/api/changes/admin/people?after=99", "", 400, "api:BadRequest", "ahead of the newest commit"},
		{"GET", "/api/log/admin/people?count=0", "", 400, "api:BadRequest", "want an integer from 1 to 1000"},
		{"GET", "/api/log/admin/people?count=-1", "", 400, "api:BadRequest", "want an integer from 1 to 1000"},
		{"GET", "/api/history/admin/people?id=Person/x&count=1001", "", 400, "api:BadRequest", "want an integer from 1 to 1000"},
		{"DELETE", "/api/tokens/abc", "", 400, "api:BadRequest", `token id "abc" is not a number`},
		{"DELETE", "/api/tokens/999", "", 404, "api:NotFound", "token 999 does not exist"},
		{"PUT", "/api/roles/admin/people", `{"user":"admin","role":"owner"}`, 400, "api:BadRequest", `role "owner"`},
		// A missing organization is named, not looked up as "" (404).
		{"POST", "/api/users", `{"name":"sam","password":"sam-password"}`, 400, "api:BadRequest", "organization is required"},
		{"POST", "/api/users", `{"name":"sam","organization":"","password":"sam-password"}`, 400, "api:BadRequest", "organization is required"},
		{"POST", "/api/document/_system/_system", `{"@type":"Organization","name":"x"}`, 403, "api:Forbidden", "written only by Sluice"},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s %s", c.method, c.path), func(t *testing.T) {
			var body any
			if c.body != "" {
				body = c.body
			}
			r := d.Do(t, dt.Admin(), c.method, c.path, body)
			if r.Status != c.status {
				t.Fatalf("status %d, want %d; body %s", r.Status, c.status, r.Body)
			}
			typ, msg := errBody(t, r)
			if typ != c.typ || !strings.Contains(msg, c.msg) {
				t.Fatalf("error %s %q, want %s containing %q", typ, msg, c.typ, c.msg)
			}
		})
	}

	// None of the failed writes left a trace: one commit, one document.
	log := d.MustDo(t, 200, dt.Admin(), "GET", "/api/log/admin/people", nil)
	if n := strings.Count(string(log.Body), `"id":`); n != 1 {
		t.Fatalf("failed requests left commits: %s", log.Body)
	}
	docs := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/people", nil)
	if withoutVersion(string(docs.Body)) != `{"@id":"Person/alice","@type":"Person","name":"Alice"}`+"\n" {
		t.Fatalf("failed requests left documents: %s", docs.Body)
	}
}

// TestNDJSONStreamLimitsEachDocument: a JSON body is limited as a whole,
// an NDJSON stream (its media type may carry parameters) only document by
// document, and a stream with one document over the limit writes nothing.
func TestNDJSONStreamLimitsEachDocument(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.MaxBodyBytes = 2000 })
	d.CreateDatabase(t, "lim", "type Note { text: String! }")
	note := func(i, size int) string {
		return fmt.Sprintf(`{"@id":"Note/n%d","@type":"Note","text":%q}`, i, strings.Repeat("x", size))
	}
	var stream, array []string
	for i := range 50 {
		stream = append(stream, note(i, 60))
		array = append(array, note(i, 60))
	}
	r := d.MustDo(t, 413, dt.Admin(), "POST", "/api/document/admin/lim", "["+strings.Join(array, ",")+"]")
	if !strings.Contains(string(r.Body), "the request body is larger than 2000 bytes, the most max_body_bytes allows") {
		t.Fatalf("JSON body over the limit: %s", r.Body)
	}
	r = d.MustDo(t, 413, dt.Admin(), "POST", "/api/document/admin/lim", strings.Join(append(stream[:3:3], note(99, 3000)), "\n"),
		"Content-Type", "application/x-ndjson")
	var e struct {
		Message string `json:"api:message"`
	}
	if err := json.Unmarshal(r.Body, &e); err != nil || e.Message != "document 3 is larger than 2000 bytes, the most max_body_bytes allows for one document of an NDJSON stream" {
		t.Fatalf("NDJSON document over the limit: %s", r.Body)
	}
	if r := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/lim?type=Note&as_list=true", nil); strings.TrimSpace(string(r.Body)) != "[]" {
		t.Fatalf("a refused stream wrote documents: %s", r.Body)
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/lim", strings.Join(stream[:25], "\n"),
		"Content-Type", "application/x-ndjson; charset=utf-8")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/lim", strings.Join(stream[25:], "\n"),
		"Content-Type", "Application/X-NDJSON; charset") // a malformed parameter

	var docs []json.RawMessage
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/lim?type=Note&as_list=true", nil).Body, &docs); err != nil || len(docs) != 50 {
		t.Fatalf("read back %d documents (%v), want 50", len(docs), err)
	}
}

// TestStalledUploadFails: a large write whose body stops arriving fails
// after body_idle_timeout, rolling back what it had written, instead of
// holding its transaction for as long as the client stays connected.
func TestStalledUploadFails(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.BodyIdleTimeout = 300 * time.Millisecond })
	d.CreateDatabase(t, "stall", "type Note { text: String! }")
	body, feed := io.Pipe()
	defer feed.Close()
	go func() {
		for i := range 150 { // more than a group-commit request: its own transaction
			if _, err := fmt.Fprintf(feed, `{"@id":"Note/n%d","@type":"Note","text":"x"}`+"\n", i); err != nil {
				return
			}
		}
		// ... and then nothing, without closing the body.
	}()
	req, err := http.NewRequest("POST", d.URL+"/api/document/admin/stall", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	dt.Admin()(req)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(out), "the request body sent nothing for 300ms (body_idle_timeout)") {
		t.Fatalf("stalled upload: %d %s", resp.StatusCode, out)
	}
	if r := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/stall?type=Note&as_list=true", nil); strings.TrimSpace(string(r.Body)) != "[]" {
		t.Fatalf("a stalled upload wrote documents: %s", r.Body)
	}
}

// TestDeleteTakesIDsInOnePlace: a DELETE gives its ids either in ?id= or
// in its body; one with both is refused with a 400 that says so, before
// anything is deleted, whatever the body holds (ids, text that is not
// JSON, a chunked body, with an Idempotency-Key), and its connection
// closes, as for any body refused unread; a user who may not write is
// refused that first (403). It deleted ?id= alone and ignored the body.
// An empty body (a proxy's empty chunked one) is none.
func TestDeleteTakesIDsInOnePlace(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "gc", "type P { n: Int }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/gc", `[{"@type":"P","@id":"e3"},{"@type":"P","@id":"e4"},{"@type":"P","@id":"e5"}]`)
	commits := logLength(t, d, "gc")
	const says = "a DELETE gives the ids to delete either in ?id= or in its body, not both"
	for _, tc := range []struct {
		body   string
		header []string
	}{
		{`["P/e4","P/e5"]`, nil},
		{`"P/e4"`, nil},
		{`not JSON`, nil},
		{`["P/e4"]`, []string{"Idempotency-Key", "del-1"}},
	} {
		r := d.Do(t, dt.Admin(), "DELETE", "/api/document/admin/gc?id=P/e3", tc.body, tc.header...)
		if _, msg := errBody(t, r); r.Status != 400 || !strings.Contains(msg, says) {
			t.Errorf("DELETE ?id= with the body %s %v: %d %s, want 400 saying %q", tc.body, tc.header, r.Status, msg, says)
		}
	}
	// A user who may not write is told so first, as for a body of ids.
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rae","organization":"admin","password":"rae-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/gc", `{"user":"rae","role":"read"}`)
	d.MustDo(t, 403, dt.Basic("rae", "rae-password"), "DELETE", "/api/document/admin/gc?id=P/e3", `["P/e4"]`)
	addr := strings.TrimPrefix(d.URL, "http://")
	head := "DELETE /api/document/admin/gc?id=P/e3 HTTP/1.1\r\nAuthorization: Basic " + basic("admin", dt.AdminPassword)
	resp := readAnswer(t, openBody(t, addr, head), "DELETE ?id= with a chunked body", true)
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 400 || !strings.Contains(string(b), says) {
		t.Errorf("DELETE ?id= with a chunked body: %d %s", resp.StatusCode, b)
	}
	if n := logLength(t, d, "gc"); n != commits {
		t.Fatalf("refused deletes made commits: %d, was %d", n, commits)
	}
	for _, id := range []string{"P/e3", "P/e4", "P/e5"} {
		d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/gc?id="+id, nil)
	}

	// An empty chunked body is no body.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "%s\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", head)
	if resp := readAnswer(t, conn, "DELETE ?id= with an empty chunked body", false); resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Errorf("DELETE ?id= with an empty chunked body: %d %s", resp.StatusCode, b)
	}
	d.MustDo(t, 404, dt.Admin(), "GET", "/api/document/admin/gc?id=P/e3", nil)
	// Ids in one place or the other.
	d.MustDo(t, 200, dt.Admin(), "DELETE", "/api/document/admin/gc?id=P/e4", nil)
	d.MustDo(t, 200, dt.Admin(), "DELETE", "/api/document/admin/gc", `["P/e5"]`)
	d.MustDo(t, 404, dt.Admin(), "GET", "/api/document/admin/gc?id=P/e5", nil)
}
