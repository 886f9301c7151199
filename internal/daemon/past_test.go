package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/jsonpatch"
	"github.com/sluice-dev/sluice/internal/postgres"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// gqlAnswer is a GraphQL response, its data left as JSON.
type gqlAnswer struct {
	Data   json.RawMessage `json:"data"`
	Errors []struct {
		Message    string `json:"message"`
		Path       []any  `json:"path"`
		Extensions struct {
			Code string `json:"code"`
		} `json:"extensions"`
	} `json:"errors"`
	Extensions struct {
		Position string `json:"position"`
	} `json:"extensions"`
}

// gqlQuery runs a GraphQL query on database db of d as auth.
func gqlQuery(t *testing.T, d *dt.Daemon, auth dt.Auth, db, query string) gqlAnswer {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"query": query})
	r := d.MustDo(t, 200, auth, "POST", "/api/graphql/admin/"+db, body, "Content-Type", "application/json")
	var a gqlAnswer
	if err := json.Unmarshal(r.Body, &a); err != nil {
		t.Fatalf("%s: %v: %s", query, err, r.Body)
	}
	return a
}

// gqlData runs a query that must succeed and returns its data.
func gqlData(t *testing.T, d *dt.Daemon, auth dt.Auth, db, query string) string {
	t.Helper()
	a := gqlQuery(t, d, auth, db, query)
	if len(a.Errors) > 0 {
		t.Fatalf("%s: %+v", query, a.Errors)
	}
	return string(a.Data)
}

// gqlError runs a query that must fail and returns its first error's
// message and code.
func gqlError(t *testing.T, d *dt.Daemon, auth dt.Auth, db, query string) (string, string) {
	t.Helper()
	a := gqlQuery(t, d, auth, db, query)
	if len(a.Errors) == 0 || len(a.Data) > 0 && string(a.Data) != "null" {
		t.Fatalf("%s: want an error and no data, got %s %+v", query, a.Data, a.Errors)
	}
	return a.Errors[0].Message, a.Errors[0].Extensions.Code
}

// headPosition returns the position a read of database db answers now.
func headPosition(t *testing.T, d *dt.Daemon, db string) string {
	t.Helper()
	return d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/"+db+"?type=Person&count=0", nil).Header.Get("Sluice-Position")
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%v: %s", err, a)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return reflect.DeepEqual(x, y)
}

const pastSDL = `type Person { name: String! age: Int friend: Person }
interface Animal @concrete { name: String! }
type Dog implements Animal { breed: String }`

// pastFixture writes, on one daemon, an insert (of three documents), a
// replace, another insert and a delete, and returns the positions before
// and after each: p[0] before the first, p[i] after commit i.
func pastFixture(t *testing.T, a *dt.Daemon, db string) []string {
	t.Helper()
	a.CreateDatabase(t, db, pastSDL)
	p := []string{headPosition(t, a, db)}
	for _, w := range []struct{ method, path, body string }{
		{"POST", "?author=ann&message=import", `[{"@type":"Person","@id":"alice","name":"Alice","age":30},
			{"@type":"Dog","@id":"rex","name":"Rex","breed":"lab"},{"@type":"Animal","@id":"generic","name":"Thing"}]`},
		{"PUT", "?author=bea", `{"@type":"Person","@id":"Person/alice","name":"Alice","age":31}`},
		{"POST", "", `{"@type":"Person","@id":"bob","name":"Bob","age":25,"friend":"Person/alice"}`},
		{"DELETE", "?author=cy&message=cleanup", `["Person/alice","Dog/rex"]`},
	} {
		a.MustDo(t, 200, dt.Admin(), w.method, "/api/document/admin/"+db+w.path, w.body)
		p = append(p, headPosition(t, a, db))
	}
	return p
}

// TestPastStatesOnTheOtherReplica reads the states at the five positions
// around an insert, a replace, another insert and a delete, written on one
// daemon and read on another: REST and GraphQL show the same documents,
// the position they were asked for, filters, ordering, limits, references
// and subclasses evaluated then; a position inside a commit reads the
// changes up to it.
func TestPastStatesOnTheOtherReplica(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	b := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL))
	p := pastFixture(t, a, "past")

	alice30 := `{"@id":"Person/alice","@type":"Person","name":"Alice","age":30}`
	alice31 := `{"@id":"Person/alice","@type":"Person","name":"Alice","age":31}`
	bob := `{"@id":"Person/bob","@type":"Person","name":"Bob","age":25,"friend":"Person/alice"}`
	want := []struct {
		people  []string
		animals string // GraphQL: _id of Animal, children included
		friend  string // GraphQL: bob's friend's age
	}{
		{nil, `[]`, ``},
		{[]string{alice30}, `[{"_id":"Animal/generic"},{"_id":"Dog/rex"}]`, ``},
		{[]string{alice31}, `[{"_id":"Animal/generic"},{"_id":"Dog/rex"}]`, ``},
		{[]string{alice31, bob}, `[{"_id":"Animal/generic"},{"_id":"Dog/rex"}]`, `{"age":31}`},
		{[]string{bob}, `[{"_id":"Animal/generic"}]`, `null`},
	}
	for i, w := range want {
		q := url.QueryEscape(p[i])
		r := b.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/past?type=Person&as_list=true&as_of="+q, nil)
		if got := strings.TrimSpace(string(r.Body)); got != "["+strings.Join(w.people, ",")+"]" {
			t.Errorf("REST as of %s (position %d): %s", p[i], i, got)
		}
		if r.Header.Get("Sluice-Position") != p[i] {
			t.Errorf("REST as of %s answers position %s", p[i], r.Header.Get("Sluice-Position"))
		}
		single := b.Do(t, dt.Admin(), "GET", "/api/document/admin/past?id=Person/alice&as_of="+q, nil)
		switch {
		case i == 0 || i == 4:
			if single.Status != 404 {
				t.Errorf("alice as of position %d: %d %s, want 404", i, single.Status, single.Body)
			}
		case strings.TrimSpace(string(single.Body)) != w.people[0] || single.Header.Get("Sluice-Position") != p[i]:
			t.Errorf("alice as of position %d: %s (position %s)", i, single.Body, single.Header.Get("Sluice-Position"))
		}

		// GraphQL shows the same documents.
		g := gqlQuery(t, b, dt.Admin(), "past", `{ Person(asOf: "`+p[i]+`") { _id name age } Animal(asOf: "`+p[i]+`") { _id } }`)
		var data struct {
			Person []struct {
				ID   string `json:"_id"`
				Name string `json:"name"`
				Age  *int   `json:"age"`
			}
			Animal json.RawMessage
		}
		if err := json.Unmarshal(g.Data, &data); err != nil || len(g.Errors) > 0 {
			t.Fatalf("GraphQL as of %s: %v %+v", p[i], err, g.Errors)
		}
		var rest []struct {
			ID   string `json:"@id"`
			Name string `json:"name"`
			Age  *int   `json:"age"`
		}
		if err := json.Unmarshal(r.Body, &rest); err != nil {
			t.Fatal(err)
		}
		if len(rest) != len(data.Person) {
			t.Errorf("as of position %d REST holds %d people, GraphQL %d", i, len(rest), len(data.Person))
		}
		for j := range min(len(rest), len(data.Person)) {
			if rest[j].ID != data.Person[j].ID || rest[j].Name != data.Person[j].Name || !reflect.DeepEqual(rest[j].Age, data.Person[j].Age) {
				t.Errorf("as of position %d REST and GraphQL differ: %+v, %+v", i, rest[j], data.Person[j])
			}
		}
		if string(data.Animal) != w.animals || g.Extensions.Position != p[i] {
			t.Errorf("GraphQL as of %s: animals %s, position %s", p[i], data.Animal, g.Extensions.Position)
		}
		if w.friend != "" {
			got := gqlData(t, b, dt.Admin(), "past", `{ Person(asOf: "`+p[i]+`", id: "Person/bob") { friend { age } } }`)
			if got != `{"Person":[{"friend":`+w.friend+`}]}` {
				t.Errorf("bob's friend as of position %d: %s", i, got)
			}
		}
	}

	// Filters, ordering, limits, references and subclasses apply to the
	// state then.
	at3 := `asOf: "` + p[3] + `"`
	for _, c := range []struct{ query, want string }{
		{`{ Person(` + at3 + `, filter: {age: {ge: 30}}) { _id } }`, `{"Person":[{"_id":"Person/alice"}]}`},
		{`{ Person(` + at3 + `, orderBy: {age: ASC}, limit: 1) { _id } }`, `{"Person":[{"_id":"Person/bob"}]}`},
		{`{ Person(` + at3 + `, orderBy: {age: DESC}, offset: 1) { _id } }`, `{"Person":[{"_id":"Person/bob"}]}`},
		{`{ Person(` + at3 + `, filter: {friend: {age: {eq: 31}}}) { _id } }`, `{"Person":[{"_id":"Person/bob"}]}`},
		{`{ Person(filter: {friend: {age: {eq: 31}}}) { _id } }`, `{"Person":[]}`},
		{`{ Animal(` + at3 + `, include_children: false) { _id } }`, `{"Animal":[{"_id":"Animal/generic"}]}`},
		{`{ Dog(` + at3 + `, filter: {breed: {eq: "lab"}}) { _id name } }`, `{"Dog":[{"_id":"Dog/rex","name":"Rex"}]}`},
		{`{ Person(` + at3 + `, ids: ["Person/alice", "Person/carol"]) { name } }`, `{"Person":[{"name":"Alice"}]}`},
		// Backlinks and aggregates too.
		{`{ Person(` + at3 + `, id: "Person/alice") { _friend_of_Person { _id age } } }`, `{"Person":[{"_friend_of_Person":[{"_id":"Person/bob","age":25}]}]}`},
		{`{ Person(asOf: "` + p[2] + `", id: "Person/alice") { _friend_of_Person { _id } } }`, `{"Person":[{"_friend_of_Person":[]}]}`},
		{`{ Person_aggregate(` + at3 + `) { count max { age } } }`, `{"Person_aggregate":{"count":2,"max":{"age":31}}}`},
		{`{ Person_aggregate(asOf: "` + p[1] + `") { count max { age } } }`, `{"Person_aggregate":{"count":1,"max":{"age":30}}}`},
		{`{ Animal_aggregate(` + at3 + `) { count } Animal(` + at3 + `, include_children: false) { _id } }`, `{"Animal_aggregate":{"count":2},"Animal":[{"_id":"Animal/generic"}]}`},
		{`{ Person_aggregate { count } }`, `{"Person_aggregate":{"count":1}}`},
	} {
		if got := gqlData(t, b, dt.Admin(), "past", c.query); got != c.want {
			t.Errorf("%s: %s, want %s", c.query, got, c.want)
		}
	}

	// A position inside a commit (an event's id) reads its changes up to
	// that one: the first commit inserted Person/alice, then Dog/rex.
	epoch, _, _ := strings.Cut(p[0], "-")
	for idx, w := range []string{`{"Person":[{"_id":"Person/alice"}],"Animal":[]}`, `{"Person":[{"_id":"Person/alice"}],"Animal":[{"_id":"Dog/rex"}]}`} {
		inside := fmt.Sprintf("%s-1-%d", epoch, idx)
		g := gqlQuery(t, b, dt.Admin(), "past", `{ Person(asOf: "`+inside+`") { _id } Animal(asOf: "`+inside+`") { _id } }`)
		if string(g.Data) != w || g.Extensions.Position != inside {
			t.Errorf("as of %s: %s %+v (position %s)", inside, g.Data, g.Errors, g.Extensions.Position)
		}
	}
	// One query reads one state.
	if msg, code := gqlError(t, b, dt.Admin(), "past", `{ then: Person(`+at3+`) { _id } now: Person { _id } }`); code != "BAD_USER_INPUT" || !strings.Contains(msg, "read different states") {
		t.Errorf("a query of two states: %s %s", code, msg)
	}
}

// TestPastHistoryAndDiff lists a document's versions and the differences
// between states, on the replica that did not write them: versions newest
// first with their commits, paged by the Link header; one entry per
// document that differs, whose patch turns before into after.
func TestPastHistoryAndDiff(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	b := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL))
	p := pastFixture(t, a, "past")
	epoch, _, _ := strings.Cut(p[0], "-")

	type version struct {
		Position, Commit, Author, Message, User, Op, Datetime, Version string
		Document                                                       json.RawMessage
	}
	var versions []version
	path := "/api/history/admin/past?id=Person/alice&count=1"
	for range 4 {
		r := b.MustDo(t, 200, dt.Admin(), "GET", path, nil)
		var page []version
		if err := json.Unmarshal(r.Body, &page); err != nil || len(page) > 1 {
			t.Fatalf("history page: %v %s", err, r.Body)
		}
		versions = append(versions, page...)
		link := r.Header.Get("Link")
		if link == "" {
			break
		}
		next, ok := strings.CutSuffix(strings.TrimPrefix(link, "<"), `>; rel="next"`)
		if !ok {
			t.Fatalf("Link %s", link)
		}
		path = next
	}
	want := []version{
		{Position: epoch + "-4-0", Commit: "4", Author: "cy", Message: "cleanup", User: "admin", Op: "deleted", Document: json.RawMessage(`null`)},
		{Position: epoch + "-2-0", Commit: "2", Author: "bea", User: "admin", Op: "updated", Document: json.RawMessage(`{"@id":"Person/alice","@type":"Person","name":"Alice","age":31}`)},
		{Position: epoch + "-1-0", Commit: "1", Author: "ann", Message: "import", User: "admin", Op: "added", Document: json.RawMessage(`{"@id":"Person/alice","@type":"Person","name":"Alice","age":30}`)},
	}
	if len(versions) != len(want) {
		t.Fatalf("%d versions of alice, want 3: %+v", len(versions), versions)
	}
	seen := map[string]bool{}
	for i, v := range versions {
		if v.Datetime == "" {
			t.Errorf("version %d has no time", i)
		}
		// The document's version after each change but a delete, each
		// its own.
		if _, ok := sluice.ParseVersion(v.Version); ok == (v.Op == "deleted") || seen[v.Version] {
			t.Errorf("version %d: %q after %s", i, v.Version, v.Op)
		}
		seen[v.Version] = true
		v.Datetime, v.Version = "", ""
		if p := dt.Untag(v.Position); p == v.Position {
			t.Errorf("version %d: position %s without its commit's tag", i, v.Position)
		} else {
			v.Position = p
		}
		if !reflect.DeepEqual(v, want[i]) {
			t.Errorf("version %d: %+v, want %+v", i, v, want[i])
		}
	}
	// The whole history in one page has no Link.
	r := b.MustDo(t, 200, dt.Admin(), "GET", "/api/history/admin/past?id=Dog/rex", nil)
	if r.Header.Get("Link") != "" || strings.Count(string(r.Body), `"position"`) != 2 {
		t.Errorf("history of rex: %s (Link %q)", r.Body, r.Header.Get("Link"))
	}
	if r := b.MustDo(t, 200, dt.Admin(), "GET", "/api/history/admin/past?id=Person/nobody", nil); string(r.Body) != "[]\n" {
		t.Errorf("history of a document that never was: %s", r.Body)
	}

	type entry struct {
		ID     string          `json:"@id"`
		Type   string          `json:"@type"`
		Op     string          `json:"op"`
		Before json.RawMessage `json:"before"`
		After  json.RawMessage `json:"after"`
		Patch  json.RawMessage `json:"patch"`
	}
	diff := func(query string) []entry {
		t.Helper()
		r := b.MustDo(t, 200, dt.Admin(), "GET", "/api/diff/admin/past?"+query, nil)
		var page struct {
			From, To string
			More     bool
			Changes  []entry
		}
		if err := json.Unmarshal(r.Body, &page); err != nil || page.More {
			t.Fatalf("diff %s: %v %s", query, err, r.Body)
		}
		for _, e := range page.Changes {
			got, err := jsonpatch.Apply(e.Before, e.Patch)
			if err != nil || !sameJSON(t, got, e.After) {
				t.Errorf("diff %s: %s's patch %s turns %s into %s (%v), not %s", query, e.ID, e.Patch, e.Before, got, err, e.After)
			}
		}
		return page.Changes
	}
	ops := func(es []entry) string {
		var out []string
		for _, e := range es {
			out = append(out, e.ID+" "+e.Type+" "+e.Op)
		}
		return strings.Join(out, ", ")
	}
	for _, c := range []struct{ query, want string }{
		{"from=" + p[0], "Animal/generic Animal added, Person/bob Person added"},
		{"from=" + p[0] + "&to=" + p[4], "Animal/generic Animal added, Person/bob Person added"},
		{"from=" + p[1] + "&to=" + p[3], "Person/alice Person updated, Person/bob Person added"},
		{"from=" + p[2] + "&type=Person", "Person/alice Person deleted, Person/bob Person added"},
		{"from=" + p[2] + "&type=Animal", "Dog/rex Dog deleted"},
		{"from=" + p[0] + "&to=" + p[2] + "&id=Person/alice", "Person/alice Person added"},
		{"from=" + p[3] + "&to=" + p[3], ""},
		{"from=" + p[4], ""},
		{"from=" + epoch + "-1-0&to=" + epoch + "-1-1", "Dog/rex Dog added"},
	} {
		if got := ops(diff(c.query)); got != c.want {
			t.Errorf("diff %s: %s, want %s", c.query, got, c.want)
		}
	}
	if es := diff("from=" + p[1] + "&to=" + p[2]); len(es) != 1 || string(es[0].Patch) != `[{"op":"replace","path":"/age","value":31}]` ||
		string(es[0].Before) != `{"@id":"Person/alice","@type":"Person","name":"Alice","age":30}` {
		t.Errorf("diff of the replace: %+v", es)
	}
	if r := b.Do(t, dt.Admin(), "GET", "/api/diff/admin/past?from="+p[3]+"&to="+p[1], nil); r.Status != 400 || !strings.Contains(string(r.Body), "comes before") {
		t.Errorf("a diff backwards: %d %s", r.Status, r.Body)
	}

	// A large diff comes in pages, by id, each named by the Link header.
	var body strings.Builder
	for i := range 25 {
		fmt.Fprintf(&body, `{"@type":"Person","@id":"p%02d","name":"P%d"}`+"\n", i, i)
	}
	from := headPosition(t, a, "past")
	a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/past", body.String(), "Content-Type", "application/x-ndjson")
	var ids []string
	path = "/api/diff/admin/past?count=7&from=" + url.QueryEscape(from)
	for pages := 1; ; pages++ {
		r := b.MustDo(t, 200, dt.Admin(), "GET", path, nil)
		var page struct {
			More    bool
			Next    string
			Changes []entry
		}
		if err := json.Unmarshal(r.Body, &page); err != nil || len(page.Changes) > 7 {
			t.Fatalf("diff page %d: %v %s", pages, err, r.Body)
		}
		for _, e := range page.Changes {
			ids = append(ids, e.ID)
		}
		link := r.Header.Get("Link")
		if page.More != (link != "") {
			t.Fatalf("page %d: more %v, Link %q", pages, page.More, link)
		}
		if !page.More {
			if pages != 4 {
				t.Errorf("%d pages of 7 for 25 documents", pages)
			}
			break
		}
		path = strings.TrimSuffix(strings.TrimPrefix(link, "<"), `>; rel="next"`)
	}
	if len(ids) != 25 || ids[0] != "Person/p00" || ids[24] != "Person/p24" {
		t.Errorf("the pages hold %v", ids)
	}
}

// TestPastRedaction: a read-only user sees the past as it sees the
// present: a @private field is refused in an asOf query exactly as in a
// current one, and is in no as_of, history or diff answer; a change to it
// alone is no difference for that user. A field protected at any time
// since a position stays hidden as of that position after it is made
// public.
func TestPastRedaction(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	b := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL))
	a.CreateDatabase(t, "secret", "type Person { name: String! ssn: String @private }")
	a.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	a.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/secret", `{"user":"rita","role":"read"}`)
	rita := dt.Basic("rita", "rita-password")
	a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/secret", `{"@type":"Person","@id":"alice","name":"Alice","ssn":"123"}`)
	p1 := headPosition(t, a, "secret")
	a.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/secret", `{"@type":"Person","@id":"Person/alice","name":"Alice","ssn":"456"}`)
	p2 := headPosition(t, a, "secret")
	a.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/secret", `{"@type":"Person","@id":"Person/alice","name":"Alicia","ssn":"789"}`)

	now, nowCode := gqlError(t, b, rita, "secret", `{ Person { name ssn } }`)
	then, thenCode := gqlError(t, b, rita, "secret", `{ Person(asOf: "`+p1+`") { name ssn } }`)
	if now != then || nowCode != thenCode {
		t.Errorf("ssn now: %s %s; as of p1: %s %s", nowCode, now, thenCode, then)
	}
	if got := gqlData(t, b, rita, "secret", `{ Person(asOf: "`+p1+`") { name } }`); got != `{"Person":[{"name":"Alice"}]}` {
		t.Errorf("as of p1: %s", got)
	}
	for _, path := range []string{
		"/api/document/admin/secret?id=Person/alice&as_of=" + p1,
		"/api/document/admin/secret?type=Person&as_of=" + p2,
		"/api/history/admin/secret?id=Person/alice",
		"/api/diff/admin/secret?from=" + p1,
	} {
		r := b.MustDo(t, 200, rita, "GET", path, nil)
		// The values as JSON strings: a timestamp's digits may hold 123.
		if showsSSN(r.Body) || bytes.Contains(r.Body, []byte(`"123"`)) || bytes.Contains(r.Body, []byte(`"456"`)) {
			t.Errorf("%s shows rita the private field: %s", path, r.Body)
		}
		if !bytes.Contains(r.Body, []byte("Alice")) {
			t.Errorf("%s: %s", path, r.Body)
		}
	}
	// Only ssn changed between p1 and p2: a difference for the admin, not
	// for rita.
	if r := b.MustDo(t, 200, rita, "GET", "/api/diff/admin/secret?from="+p1+"&to="+p2, nil); !bytes.Contains(r.Body, []byte(`"changes":[]`)) {
		t.Errorf("rita's diff of a change to ssn alone: %s", r.Body)
	}
	if r := b.MustDo(t, 200, dt.Admin(), "GET", "/api/diff/admin/secret?from="+p1+"&to="+p2, nil); !bytes.Contains(r.Body, []byte(`"patch":[{"op":"replace","path":"/ssn","value":"456"}]`)) {
		t.Errorf("the admin's diff of a change to ssn: %s", r.Body)
	}

	// ssn is made public: rita reads it now, but not as of p1, when it
	// was protected. (Read where the schema changed: another replica
	// may serve the schema it had for up to a second.)
	a.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/secret", "type Person { name: String! ssn: String }")
	if got := gqlData(t, a, rita, "secret", `{ Person { ssn } }`); got != `{"Person":[{"ssn":"789"}]}` {
		t.Errorf("ssn now: %s", got)
	}
	if msg, code := gqlError(t, a, rita, "secret", `{ Person(asOf: "`+p1+`") { name ssn } }`); code != "BAD_USER_INPUT" || !strings.Contains(msg, "Person.ssn as of "+p1+" cannot be shown: it was protected from your role") {
		t.Errorf("ssn as of p1 after it was made public: %s %s", code, msg)
	}
	if msg, _ := gqlError(t, a, rita, "secret", `{ Person(asOf: "`+p1+`", filter: {ssn: {eq: "123"}}) { name } }`); !strings.Contains(msg, "Person.ssn") {
		t.Errorf("a filter on ssn as of p1: %s", msg)
	}
	r := a.MustDo(t, 200, rita, "GET", "/api/document/admin/secret?type=Person&as_of="+p1, nil)
	if showsSSN(r.Body) || r.Header.Get("Sluice-Hidden-Fields") != "Person.ssn" {
		t.Errorf("rita's listing as of p1: %s (hidden: %q)", r.Body, r.Header.Get("Sluice-Hidden-Fields"))
	}
	if got := gqlData(t, a, dt.Admin(), "secret", `{ Person(asOf: "`+p1+`") { ssn } }`); got != `{"Person":[{"ssn":"123"}]}` {
		t.Errorf("the admin's ssn as of p1: %s", got)
	}
}

// TestPastRedactionNested: what TestPastRedaction checks of a top-level
// field holds of a field of a subdocument, in a single subdocument, a
// list of them and a subdocument of a subdocument: protected from a
// read-only user at a position and made public since, it is left out of
// every as_of read (by id, listing) and diff and named in their
// Sluice-Hidden-Fields header and hidden_fields (as its class's field,
// Address.street, as a schema change names it), and an asOf query that
// selects it or filters by it is refused, naming it. What the user could
// read then is shown.
func TestPastRedactionNested(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "nest", `type Person { name: String! home: Address homes: [Address] }
type Address @subdocument { street: String @private city: String geo: Geo }
type Geo @subdocument { code: String @private note: String }`)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/nest", `{"user":"rita","role":"read"}`)
	rita := dt.Basic("rita", "rita-password")
	docs := "/api/document/admin/nest"
	d.MustDo(t, 200, dt.Admin(), "POST", docs, `{"@type":"Person","@id":"alice","name":"Alice",
		"home":{"@type":"Address","street":"WRITTEN-WHILE-PRIVATE","city":"Oslo","geo":{"@type":"Geo","code":"DEEP-WHILE-PRIVATE","note":"fjord"}},
		"homes":[{"@type":"Address","street":"LISTED-WHILE-PRIVATE","city":"Bergen"}]}`)
	p1 := headPosition(t, d, "nest")
	d.MustDo(t, 200, dt.Admin(), "PUT", docs, `{"@type":"Person","@id":"Person/alice","name":"Alice",
		"home":{"@type":"Address","street":"still private B","city":"Oslo","geo":{"@type":"Geo","code":"deep private B","note":"fjord"}},
		"homes":[{"@type":"Address","street":"listed private B","city":"Bergen"}]}`)
	secrets := []string{"WRITTEN-WHILE-PRIVATE", "DEEP-WHILE-PRIVATE", "LISTED-WHILE-PRIVATE", "still private B", "deep private B", "listed private B"}

	// street and code are made public: rita reads them now.
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/nest", `type Person { name: String! home: Address homes: [Address] }
type Address @subdocument { street: String city: String geo: Geo }
type Geo @subdocument { code: String note: String }`)
	// A write after: a diff from p1 leaves its street out too.
	d.MustDo(t, 200, dt.Admin(), "PUT", docs, `{"@type":"Person","@id":"Person/alice","name":"Alicia",
		"home":{"@type":"Address","street":"public C","city":"Oslo","geo":{"@type":"Geo","code":"deep public C","note":"fjord"}},
		"homes":[{"@type":"Address","street":"listed public C","city":"Bergen"}]}`)
	if got := gqlData(t, d, rita, "nest", `{ Person { home { street geo { code } } homes { street } } }`); got != `{"Person":[{"home":{"street":"public C","geo":{"code":"deep public C"}},"homes":[{"street":"listed public C"}]}]}` {
		t.Errorf("street and code now: %s", got)
	}

	// As of p1, when they were protected, REST leaves them out and names
	// them (a diff from p1 leaves them out of its after images too, as a
	// top-level field); what rita could read then is shown.
	for _, path := range []string{
		docs + "?id=Person/alice&as_of=" + p1,
		docs + "?type=Person&as_of=" + p1,
		"/api/diff/admin/nest?from=" + p1,
		"/api/history/admin/nest?id=Person/alice",
	} {
		r := d.MustDo(t, 200, rita, "GET", path, nil)
		history := strings.HasPrefix(path, "/api/history/")
		for _, s := range append(secrets, "public C") {
			if s == "public C" && history {
				continue // the version written when street was public
			}
			if bytes.Contains(r.Body, []byte(s)) {
				t.Errorf("%s shows rita %q, protected from her then: %s", path, s, r.Body)
			}
		}
		if !bytes.Contains(r.Body, []byte("Oslo")) || !bytes.Contains(r.Body, []byte("Bergen")) || !bytes.Contains(r.Body, []byte("fjord")) {
			t.Errorf("%s leaves out what rita could read: %s", path, r.Body)
		}
		if history {
			continue // it redacts each version through the schema of its commit
		}
		if got := r.Header.Get("Sluice-Hidden-Fields"); got != "Address.street, Geo.code" {
			t.Errorf("%s: Sluice-Hidden-Fields %q, want %q", path, got, "Address.street, Geo.code")
		}
	}
	if r := d.MustDo(t, 200, rita, "GET", "/api/diff/admin/nest?from="+p1, nil); !bytes.Contains(r.Body, []byte(`"hidden_fields":["Address.street","Geo.code"]`)) {
		t.Errorf("rita's diff from p1: %s", r.Body)
	}

	// GraphQL refuses to select them or filter by them as of p1, at any
	// depth, in a list too, as it refuses a top-level field.
	for _, c := range []struct{ query, field string }{
		{`{ Person(asOf: "` + p1 + `") { name home { street } } }`, "Address.street"},
		{`{ Person(asOf: "` + p1 + `") { home { geo { code } } } }`, "Geo.code"},
		{`{ Person(asOf: "` + p1 + `") { homes { street } } }`, "Address.street"},
		{`{ Person(asOf: "` + p1 + `", filter: {home: {street: {eq: "WRITTEN-WHILE-PRIVATE"}}}) { name } }`, "Address.street"},
		{`{ Person(asOf: "` + p1 + `", filter: {home: {geo: {code: {eq: "DEEP-WHILE-PRIVATE"}}}}) { name } }`, "Geo.code"},
		{`{ Person(asOf: "` + p1 + `", filter: {homes: {someHave: {street: {eq: "LISTED-WHILE-PRIVATE"}}}}) { name } }`, "Address.street"},
		{`{ Person_aggregate(asOf: "` + p1 + `", filter: {home: {street: {eq: "WRITTEN-WHILE-PRIVATE"}}}) { count } }`, "Address.street"},
	} {
		a := gqlQuery(t, d, rita, "nest", c.query)
		want := c.field + " as of " + p1 + " cannot be shown: it was protected from your role"
		if len(a.Errors) == 0 || a.Errors[0].Extensions.Code != "BAD_USER_INPUT" || !strings.Contains(a.Errors[0].Message, want) {
			t.Errorf("%s: %s %+v, want BAD_USER_INPUT %q", c.query, a.Data, a.Errors, want)
		}
	}
	if got := gqlData(t, d, rita, "nest", `{ Person(asOf: "`+p1+`") { home { city geo { note } } homes { city } } }`); got != `{"Person":[{"home":{"city":"Oslo","geo":{"note":"fjord"}},"homes":[{"city":"Bergen"}]}]}` {
		t.Errorf("what rita could read as of p1: %s", got)
	}
	if got := gqlData(t, d, rita, "nest", `{ Person(asOf: "`+p1+`", filter: {home: {city: {eq: "Oslo"}}}) { name } }`); got != `{"Person":[{"name":"Alice"}]}` {
		t.Errorf("a filter on a field rita could read as of p1: %s", got)
	}
	// An admin reads them as of p1.
	if got := gqlData(t, d, dt.Admin(), "nest", `{ Person(asOf: "`+p1+`") { home { street geo { code } } homes { street } } }`); got != `{"Person":[{"home":{"street":"WRITTEN-WHILE-PRIVATE","geo":{"code":"DEEP-WHILE-PRIVATE"}},"homes":[{"street":"LISTED-WHILE-PRIVATE"}]}]}` {
		t.Errorf("the admin's as of p1: %s", got)
	}
	if r := d.MustDo(t, 200, dt.Admin(), "GET", docs+"?id=Person/alice&as_of="+p1, nil); !bytes.Contains(r.Body, []byte("WRITTEN-WHILE-PRIVATE")) || r.Header.Get("Sluice-Hidden-Fields") != "" {
		t.Errorf("the admin's read as of p1: %s (hidden: %q)", r.Body, r.Header.Get("Sluice-Hidden-Fields"))
	}
}

// TestPastErrors: a position older than retained history is a 410 /
// GONE naming the oldest it can read; one ahead of the log, malformed, of
// another database or of an earlier database of the same name is a 400 /
// BAD_USER_INPUT, on every read of the past.
func TestPastErrors(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "gone", "type Person { name: String! }")
	d.CreateDatabase(t, "other", "type Person { name: String! }")
	for i := range 4 {
		d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/gone", fmt.Sprintf(`{"@type":"Person","@id":"p%d","name":"P"}`, i))
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/other", `{"@type":"Person","@id":"x","name":"X"}`)
	epoch, _, _ := strings.Cut(headPosition(t, d, "gone"), "-")
	other := headPosition(t, d, "other")
	// An earlier database of the same name.
	d.CreateDatabase(t, "again", "type Person { name: String! }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/again", `{"@type":"Person","@id":"x","name":"X"}`)
	earlier := headPosition(t, d, "again")
	d.MustDo(t, 200, dt.Admin(), "DELETE", "/api/db/admin/again", nil)
	d.CreateDatabase(t, "again", "type Person { name: String! }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/again", `{"@type":"Person","@id":"x","name":"X"}`)

	// Prune all but the newest commit of gone.
	ctx := context.Background()
	store, err := postgres.Open(ctx, d.DatabaseURL, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := store.Prune(ctx, time.Now().Add(time.Hour), 0, nil); err != nil {
		t.Fatal(err)
	}
	oldest := epoch + "-3-2147483647"
	for _, c := range []struct {
		db, pos    string
		status     int
		code, text string
	}{
		{"gone", epoch + "-1-2147483647", 410, "GONE", "older than the history admin/gone retains (log_retention); the oldest position it can read is " + oldest},
		{"gone", epoch + "-3-0", 410, "GONE", "the oldest position it can read is " + oldest},
		{"gone", epoch + "-5-2147483647", 400, "BAD_USER_INPUT", "ahead of the log of admin/gone, whose newest commit is 4"},
		{"gone", "yesterday", 400, "BAD_USER_INPUT", "is not a position"},
		{"gone", epoch + "-1", 400, "BAD_USER_INPUT", "is not a position"},
		{"gone", other, 400, "BAD_USER_INPUT", "is not a position of admin/gone: it is another database's"},
		{"again", earlier, 400, "BAD_USER_INPUT", "or an earlier database's of that name"},
	} {
		msg, code := gqlError(t, d, dt.Admin(), c.db, `{ Person(asOf: "`+c.pos+`") { _id } }`)
		if code != c.code || !strings.Contains(msg, c.text) {
			t.Errorf("GraphQL asOf %s on %s: %s %s, want %s %q", c.pos, c.db, code, msg, c.code, c.text)
		}
		apiCode := map[int]string{410: "api:HistoryGone", 400: "api:BadRequest"}[c.status]
		for _, path := range []string{
			"/api/document/admin/" + c.db + "?type=Person&as_of=" + url.QueryEscape(c.pos),
			"/api/document/admin/" + c.db + "?id=Person/x&as_of=" + url.QueryEscape(c.pos),
			"/api/diff/admin/" + c.db + "?from=" + url.QueryEscape(c.pos),
			"/api/history/admin/" + c.db + "?id=Person/x&before=" + url.QueryEscape(c.pos),
		} {
			r := d.Do(t, dt.Admin(), "GET", path, nil)
			if r.Status != c.status || !bytes.Contains(r.Body, []byte(apiCode)) {
				t.Errorf("%s: %d %s, want %d %s", path, r.Status, r.Body, c.status, apiCode)
			}
		}
	}
	// The oldest position it names reads.
	if got := gqlData(t, d, dt.Admin(), "gone", `{ Person(asOf: "`+oldest+`") { _id } }`); got != `{"Person":[{"_id":"Person/p0"},{"_id":"Person/p1"},{"_id":"Person/p2"}]}` {
		t.Errorf("as of the oldest retained position: %s", got)
	}
	if r := d.Do(t, dt.Admin(), "GET", "/api/diff/admin/gone", nil); r.Status != 400 || !bytes.Contains(r.Body, []byte("from is required")) {
		t.Errorf("a diff without from: %d %s", r.Status, r.Body)
	}
	// A pruned commit's change set is GONE, as a read as of it is; one
	// that never was is NOT_FOUND.
	for _, c := range []struct{ commit, code, text string }{
		{"2", "GONE", "commit 2 of admin/gone is older than the history it retains (log_retention); the oldest commit it holds is 4"},
		{"9", "NOT_FOUND", "commit 9 of admin/gone is not made yet: the newest is 4"},
	} {
		a := gqlQuery(t, d, dt.Admin(), "gone", `{ _ChangeSet(commit: "`+c.commit+`") { _CommitMetadata { _id } } }`)
		if string(a.Data) != `{"_ChangeSet":null}` || len(a.Errors) != 1 || a.Errors[0].Extensions.Code != c.code || !strings.Contains(a.Errors[0].Message, c.text) {
			t.Errorf("_ChangeSet(commit: %s): %s %+v, want %s %q", c.commit, a.Data, a.Errors, c.code, c.text)
		}
	}
}

// TestPastPositionErrorsSayWhy: a position a read of the past cannot
// parse is refused naming what is wrong with it, as /api/changes and the
// streams name it, on every read of the past: an index past 2^31-1 (no
// commit has more changes) was "not a position: want
// <epoch>-<seq>-<index>", which it looks like.
func TestPastPositionErrorsSayWhy(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "why", "type Person { name: String! }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/why", `{"@type":"Person","@id":"x","name":"X"}`)
	epoch, _, _ := strings.Cut(headPosition(t, d, "why"), "-")
	for _, c := range []struct{ pos, why string }{
		{epoch + "-1-2147483648", "index 2147483648 is above 2147483647"},
		{epoch + "-1-2147483647-zz", "bad tag"},
		{epoch + "-01-0", "bad sequence"},
		{"yesterday", "want <epoch>-<seq>-<index>-<tag> or, without its tag, <epoch>-<seq>-<index>"},
	} {
		if msg, code := gqlError(t, d, dt.Admin(), "why", `{ Person(asOf: "`+c.pos+`") { _id } }`); code != "BAD_USER_INPUT" || !strings.Contains(msg, c.why) {
			t.Errorf("GraphQL asOf %s: %s %s, want BAD_USER_INPUT %q", c.pos, code, msg, c.why)
		}
		for _, path := range []string{
			"/api/document/admin/why?type=Person&as_of=" + url.QueryEscape(c.pos),
			"/api/diff/admin/why?from=" + url.QueryEscape(c.pos),
			"/api/history/admin/why?id=Person/x&before=" + url.QueryEscape(c.pos),
		} {
			r := d.Do(t, dt.Admin(), "GET", path, nil)
			if r.Status != 400 || !bytes.Contains(r.Body, []byte(c.why)) {
				t.Errorf("%s: %d %s, want 400 naming %q", path, r.Status, r.Body, c.why)
			}
		}
	}
}

// TestPastSQLWrites: writes made in SQL are history like any other: a
// document's versions, reads as of their positions (with the commit that
// last wrote the document then) and diffs show them.
func TestPastSQLWrites(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	b := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL))
	a.CreateDatabase(t, "sqlpast", "type Person { name: String! age: Int }")
	w := newSQLWriter(t, a, "sqlpast")
	p := w.table("Person")
	p0 := headPosition(t, a, "sqlpast")
	sqlExec(t, w.url, "SET LOCAL sluice.author = 'etl'", "INSERT INTO "+p+" (_id, name, age) VALUES ('Person/ann', 'Ann', 40)")
	p1 := headPosition(t, a, "sqlpast")
	sqlExec(t, w.url, "UPDATE "+p+" SET age = 41 WHERE _id = 'Person/ann'")
	p2 := headPosition(t, a, "sqlpast")
	sqlExec(t, w.url, "DELETE FROM "+p+" WHERE _id = 'Person/ann'")

	r := b.MustDo(t, 200, dt.Admin(), "GET", "/api/history/admin/sqlpast?id=Person/ann", nil)
	var versions []struct {
		Commit, Author, User, Op string
		Document                 json.RawMessage
	}
	if err := json.Unmarshal(r.Body, &versions); err != nil || len(versions) != 3 {
		t.Fatalf("history of a document written in SQL: %v %s", err, r.Body)
	}
	for i, want := range []struct{ commit, op, doc string }{
		{"3", "deleted", "null"},
		{"2", "updated", `{"@id":"Person/ann","@type":"Person","name":"Ann","age":41}`},
		{"1", "added", `{"@id":"Person/ann","@type":"Person","name":"Ann","age":40}`},
	} {
		v := versions[i]
		if v.Commit != want.commit || v.Op != want.op || string(v.Document) != want.doc || v.User != "pg:"+w.role {
			t.Errorf("version %d: %+v %s", i, v, v.Document)
		}
	}
	if versions[2].Author != "etl" {
		t.Errorf("the insert's author: %q", versions[2].Author)
	}
	for _, c := range []struct{ pos, want string }{
		{p0, `{"Person":[]}`},
		{p1, `{"Person":[{"age":40,"_CommitMetadata":{"_id":"1","_author":"etl"}}]}`},
		{p2, `{"Person":[{"age":41,"_CommitMetadata":{"_id":"2","_author":""}}]}`},
	} {
		if got := gqlData(t, b, dt.Admin(), "sqlpast", `{ Person(asOf: "`+c.pos+`") { age _CommitMetadata { _id _author } } }`); got != c.want {
			t.Errorf("as of %s: %s, want %s", c.pos, got, c.want)
		}
	}
	if r := b.MustDo(t, 200, dt.Admin(), "GET", "/api/diff/admin/sqlpast?from="+p0+"&to="+p2, nil); !bytes.Contains(r.Body,
		[]byte(`"changes":[{"@id":"Person/ann","@type":"Person","op":"added","before":null,"after":{"@id":"Person/ann","@type":"Person","name":"Ann","age":41}`)) {
		t.Errorf("diff of SQL writes: %s", r.Body)
	}
}

// TestVersionsOfChangesWithinACommit: a commit that changes a document
// twice (two fields of one GraphQL mutation; two UPDATEs of one SQL
// transaction) makes two versions in its history, and only the second
// is the document's version after the commit. /api/history gave both
// the commit's version (a review's find): an If-Match of the first's,
// made when the document read as the first shows it, held over the
// second, which it never saw. Now the first has no version, as a
// delete has none; and a GraphQL read as of a position between the two
// changes answers an empty _version, no version (it answered the commit's, the
// document's version now, with the older content).
func TestVersionsOfChangesWithinACommit(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "twice", "type X { v: Int }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/twice", `[{"@type":"X","@id":"api","v":1},{"@type":"X","@id":"sql","v":1}]`)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/graphql/admin/twice",
		`{"query":"mutation { a: X_update(documents: [{_id: \"X/api\", v: 300}]) b: X_update(documents: [{_id: \"X/api\", v: 400}]) }"}`,
		"Content-Type", "application/json")
	w := newSQLWriter(t, d, "twice")
	x := w.table("X")
	sqlExec(t, w.url, "UPDATE "+x+" SET v = 300 WHERE _id = 'X/sql'", "UPDATE "+x+" SET v = 400 WHERE _id = 'X/sql'")
	end := headPositionOf(t, d, "twice", "X")
	var now struct {
		X []struct {
			ID      string `json:"_id"`
			Version string `json:"_version"`
		}
	}
	if err := json.Unmarshal([]byte(gqlData(t, d, dt.Admin(), "twice", `{ X { _id _version } }`)), &now); err != nil || len(now.X) != 2 {
		t.Fatalf("the documents now: %+v (%v)", now, err)
	}
	for i, id := range []string{"X/api", "X/sql"} {
		var versions []struct {
			Position string
			Version  string
			Document struct{ V int }
		}
		h := d.MustDo(t, 200, dt.Admin(), "GET", "/api/history/admin/twice?id="+id, nil)
		if err := json.Unmarshal(h.Body, &versions); err != nil || len(versions) != 3 {
			t.Fatalf("history of %s: %s (%v)", id, h.Body, err)
		}
		last, first, added := versions[0], versions[1], versions[2]
		if last.Document.V != 400 || last.Version != now.X[i].Version {
			t.Errorf("%s: the commit's last change: v=%d, version %q; want v=400 and the version now, %q", id, last.Document.V, last.Version, now.X[i].Version)
		}
		if first.Document.V != 300 || first.Version != "" {
			t.Errorf("%s: the commit's first change: v=%d, version %q; want v=300 and no version (%s)", id, first.Document.V, first.Version, h.Body)
			// An If-Match of it must not hold over v=400.
			if r := d.Do(t, dt.Admin(), "PUT", "/api/document/admin/twice", `{"@type":"X","@id":"`+id+`","v":301}`, "If-Match", `"`+first.Version+`"`); r.Status != 412 {
				t.Errorf("%s: PUT If-Match %q (v=300's) over v=400: %d %s, want 412", id, first.Version, r.Status, r.Body)
			}
		}
		if added.Version == "" {
			t.Errorf("%s: the insert has no version: %s", id, h.Body)
		}
	}
	// Paged one version at a time, the second page starts inside the
	// commit, before its last change: its version is still none.
	first := d.MustDo(t, 200, dt.Admin(), "GET", "/api/history/admin/twice?id=X/sql&count=1", nil)
	next := strings.TrimSuffix(strings.TrimPrefix(first.Header.Get("Link"), "<"), `>; rel="next"`)
	var page []struct {
		Version  string
		Document struct{ V int }
	}
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", next, nil).Body, &page); err != nil || len(page) != 1 || page[0].Document.V != 300 || page[0].Version != "" {
		t.Errorf("the second page of X/sql's history (%s): %+v (%v), want v=300 without a version", next, page, err)
	}
	// As of the SQL commit's first change: X/sql as it made it, with no
	// version; X/api as its mutation left it, with that version.
	mid := strings.TrimSuffix(dt.Untag(end), "2147483647") + "0"
	want := fmt.Sprintf(`{"X":[{"_id":"X/api","v":400,"_version":%q},{"_id":"X/sql","v":300,"_version":""}]}`, now.X[0].Version)
	if got := gqlData(t, d, dt.Admin(), "twice", `{ X(asOf: "`+mid+`") { _id v _version } }`); got != want {
		t.Errorf("as of %s: %s, want %s", mid, got, want)
	}
}

// TestPastThroughSchemaChanges: a past state is shown through today's
// schema: a field added since reads as null; one whose values a schema
// change dropped (a new type) cannot be shown and is said so, refused in
// GraphQL and left out (and named) in REST; so are the documents of a
// class dropped and made again.
func TestPastThroughSchemaChanges(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	a.CreateDatabase(t, "evolve", "type Person { name: String! age: Int }\ntype Tag { label: String! }")
	a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/evolve", `[{"@type":"Person","@id":"alice","name":"Alice","age":30},
		{"@type":"Person","@id":"bob","name":"Bob","age":40},{"@type":"Tag","@id":"t","label":"T"}]`)
	p1 := headPosition(t, a, "evolve")
	// age becomes a String (its values are dropped), email is added, Tag
	// is dropped and made again.
	a.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/evolve?force=true", "type Person { name: String! age: String email: String }")
	a.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/evolve", "type Person { name: String! age: String email: String }\ntype Tag { label: String! }")
	a.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/evolve", `{"@type":"Person","@id":"Person/alice","name":"Alicia","age":"thirty","email":"a@x"}`)

	if got := gqlData(t, a, dt.Admin(), "evolve", `{ Person(asOf: "`+p1+`") { _id name email } }`); got != `{"Person":[{"_id":"Person/alice","name":"Alice","email":null},{"_id":"Person/bob","name":"Bob","email":null}]}` {
		t.Errorf("as of p1: %s", got)
	}
	for _, q := range []string{
		`{ Person(asOf: "` + p1 + `") { name age } }`,
		`{ Person(asOf: "` + p1 + `", filter: {age: {eq: "30"}}) { name } }`,
		`{ Person(asOf: "` + p1 + `", orderBy: {age: ASC}) { name } }`,
		`{ Person_aggregate(asOf: "` + p1 + `") { count max { age } } }`,
	} {
		if msg, code := gqlError(t, a, dt.Admin(), "evolve", q); code != "BAD_USER_INPUT" || !strings.Contains(msg, "Person.age as of "+p1+" cannot be shown: a schema change after that position (in effect from commit 2) dropped its values") {
			t.Errorf("%s: %s %s", q, code, msg)
		}
	}
	r := a.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/evolve?type=Person&as_list=true&as_of="+p1, nil)
	if string(r.Body) != `[{"@id":"Person/alice","@type":"Person","name":"Alice"},{"@id":"Person/bob","@type":"Person","name":"Bob"}]`+"\n" || r.Header.Get("Sluice-Hidden-Fields") != "Person.age" {
		t.Errorf("REST as of p1: %s (hidden %q)", r.Body, r.Header.Get("Sluice-Hidden-Fields"))
	}
	// Dropped by commit 2's change, not commit 3's, which made it again.
	if msg, _ := gqlError(t, a, dt.Admin(), "evolve", `{ Tag(asOf: "`+p1+`") { label } }`); !strings.Contains(msg, "the documents of Tag as of "+p1+" cannot be shown: a schema change after that position (in effect from commit 2) dropped the class") {
		t.Errorf("Tag as of p1: %s", msg)
	}
	if r := a.Do(t, dt.Admin(), "GET", "/api/document/admin/evolve?as_of="+p1, nil); r.Status != 400 || !bytes.Contains(r.Body, []byte("the documents of Tag")) {
		t.Errorf("every document as of p1: %d %s", r.Status, r.Body)
	}
	// Today's state reads as before.
	if got := gqlData(t, a, dt.Admin(), "evolve", `{ Person(id: "Person/alice") { age email } }`); got != `{"Person":[{"age":"thirty","email":"a@x"}]}` {
		t.Errorf("now: %s", got)
	}
}

// TestDatabaseLogRetention: an admin of a database sets how long it keeps
// its commits (longer than the server's log_retention, or for ever), and
// resets it; shorter, malformed or by a reader is refused.
func TestDatabaseLogRetention(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "keep", "type Person { name: String! }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rob","organization":"admin","password":"rob-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/keep", `{"user":"rob","role":"read"}`)
	retention := func() string {
		var info struct {
			LogRetention *string `json:"log_retention"`
		}
		if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", "/api/db/admin/keep", nil).Body, &info); err != nil {
			t.Fatal(err)
		}
		if info.LogRetention == nil {
			return "null"
		}
		return *info.LogRetention
	}
	if got := retention(); got != "null" {
		t.Fatalf("a new database's log_retention: %s", got)
	}
	for _, c := range []struct {
		body   string
		status int
		want   string
	}{
		{`{"log_retention":"8760h"}`, 200, "8760h"},
		{`{"log_retention":"0"}`, 200, "0"},
		{`{"log_retention":"200h30m"}`, 200, "200h30m"},
		{`{"log_retention":null}`, 200, "null"},
		{`{"log_retention":"1h"}`, 400, "shorter than the server's (168h0m0s)"},
		{`{"log_retention":"soon"}`, 400, "want a duration"},
		{`{"log_retention":"100000000h"}`, 400, `log_retention \"100000000h\": too long: the largest duration is 2562047h47m16.854775807s (about 292 years)`},
		{`{"log_retention":"-5h"}`, 400, "whole number of seconds"},
		{`{"log_retention":168}`, 400, "want a duration"},
		{`{"retention":"8760h"}`, 400, "unknown field"},
		{`{}`, 400, "changes nothing"},
	} {
		r := d.Do(t, dt.Admin(), "PATCH", "/api/db/admin/keep", c.body)
		if r.Status != c.status || c.status != 200 && !strings.Contains(string(r.Body), c.want) {
			t.Errorf("PATCH %s: %d %s", c.body, r.Status, r.Body)
			continue
		}
		if c.status == 200 {
			if got := retention(); got != c.want {
				t.Errorf("after PATCH %s: log_retention %s, want %s", c.body, got, c.want)
			}
		}
	}
	d.MustDo(t, 403, dt.Basic("rob", "rob-password"), "PATCH", "/api/db/admin/keep", `{"log_retention":"8760h"}`)
}

// showsSSN reports whether body names the field ssn: as a key or value
// ("ssn") or in a patch's path (/ssn). Not "ssn" anywhere: a position's
// epoch is random letters and digits, and may hold it.
func showsSSN(body []byte) bool {
	return bytes.Contains(body, []byte(`"ssn"`)) || bytes.Contains(body, []byte(`/ssn`))
}

// TestPastOfDroppedClasses: the documents of a class a schema change
// dropped for good cannot be shown as of a position before the drop, and
// a read says so (by id, by type, every document, a class that held it
// then as an implementation, a diff of every class or of that one) rather than reading
// as if they never were.
func TestPastOfDroppedClasses(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	a.CreateDatabase(t, "drops", "interface Animal { name: String! }\ntype Dog implements Animal { name: String! }\ntype Cat implements Animal { name: String! }\ntype Note { text: String }")
	a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/drops", `[{"@type":"Dog","@id":"rex","name":"Rex"},
		{"@type":"Cat","@id":"tom","name":"Tom"},{"@type":"Note","@id":"n","text":"x"}]`)
	p1 := headPositionOf(t, a, "drops", "Note")
	a.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/drops?force=true", "interface Animal { name: String! }\ntype Cat implements Animal { name: String! }\ntype Note { text: String }")
	lost := "the documents of Dog as of " + p1 + " cannot be shown"
	for _, path := range []string{
		"/api/document/admin/drops?id=Dog/rex&as_of=" + p1,
		"/api/document/admin/drops?type=Dog&as_of=" + p1,
		"/api/document/admin/drops?type=Animal&as_of=" + p1,
		"/api/document/admin/drops?as_of=" + p1,
		"/api/diff/admin/drops?from=" + p1,
		"/api/diff/admin/drops?type=Animal&from=" + p1,
	} {
		if r := a.Do(t, dt.Admin(), "GET", path, nil); r.Status != 400 || !strings.Contains(string(r.Body), lost) {
			t.Errorf("%s: %d %s, want a 400 saying %q", path, r.Status, r.Body, lost)
		}
	}
	for _, q := range []string{`{ Animal(asOf: "` + p1 + `") { name } }`, `{ Animal_aggregate(asOf: "` + p1 + `") { count } }`} {
		if msg, _ := gqlError(t, a, dt.Admin(), "drops", q); !strings.Contains(msg, lost) {
			t.Errorf("%s: %s", q, msg)
		}
	}
	// What the drop did not touch reads as it was.
	if got := gqlData(t, a, dt.Admin(), "drops", `{ Cat(asOf: "`+p1+`") { name } Note(asOf: "`+p1+`") { text } }`); got != `{"Cat":[{"name":"Tom"}],"Note":[{"text":"x"}]}` {
		t.Errorf("Cat and Note as of p1: %s", got)
	}
	a.MustDo(t, 200, dt.Admin(), "GET", "/api/diff/admin/drops?type=Note&from="+p1, nil)
}

// TestPastOfDroppedReferences: a forced schema change that takes a class
// out of an interface (it stops implementing it, or is dropped) drops
// the references to its documents from the fields typed as the
// interface, with no change in the log; as of a position before it,
// those fields (single, in lists, in subdocuments) cannot be shown, and
// reads say so rather than showing what is left as what was.
func TestPastOfDroppedReferences(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	const sdl = `interface Animal { name: String! }
type Dog implements Animal { name: String! }
type Cat implements Animal { name: String! }
type Owner { name: String pet: Animal pets: [Animal] home: Home friend: Owner }
type Home @subdocument { pet: Animal }`
	for _, c := range []struct{ db, change string }{
		{"unimplemented", strings.Replace(sdl, "type Cat implements Animal", "type Cat", 1)},
		{"dropped", strings.Replace(sdl, "type Cat implements Animal { name: String! }\n", "", 1)},
	} {
		a.CreateDatabase(t, c.db, sdl)
		docs := "/api/document/admin/" + c.db
		a.MustDo(t, 200, dt.Admin(), "POST", docs, `[{"@type":"Dog","@id":"rex","name":"Rex"},{"@type":"Cat","@id":"tom","name":"Tom"},
			{"@type":"Owner","@id":"ann","name":"Ann"},
			{"@type":"Owner","@id":"o","name":"O","pet":"Cat/tom","pets":["Cat/tom","Dog/rex"],"home":{"@type":"Home","pet":"Cat/tom"},"friend":"Owner/ann"}]`)
		p1 := headPositionOf(t, a, c.db, "Owner")
		a.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/"+c.db+"?force=true", c.change)

		r := a.MustDo(t, 200, dt.Admin(), "GET", docs+"?id=Owner/o&as_of="+p1, nil)
		if want := `{"@id":"Owner/o","@type":"Owner","name":"O","home":{"@type":"Home"},"friend":"Owner/ann"}`; !sameJSON(t, r.Body, []byte(want)) ||
			r.Header.Get("Sluice-Hidden-Fields") != "Home.pet, Owner.pet, Owner.pets" {
			t.Errorf("%s: Owner/o as of p1: %s (hidden %q)", c.db, r.Body, r.Header.Get("Sluice-Hidden-Fields"))
		}
		for _, q := range []struct{ field, query string }{
			{"Owner.pet", `{ Owner(asOf: "` + p1 + `") { pet { _id } } }`},
			{"Owner.pets", `{ Owner(asOf: "` + p1 + `") { pets { _id } } }`},
			{"Home.pet", `{ Owner(asOf: "` + p1 + `") { home { pet { _id } } } }`},
			{"Owner.pet", `{ Owner_aggregate(asOf: "` + p1 + `", filter: {pet: {name: {eq: "Tom"}}}) { count } }`},
		} {
			want := q.field + " as of " + p1 + " cannot be shown"
			if msg, code := gqlError(t, a, dt.Admin(), c.db, q.query); code != "BAD_USER_INPUT" || !strings.Contains(msg, want) {
				t.Errorf("%s: %s: %s %s, want BAD_USER_INPUT saying %q", c.db, q.query, code, msg, want)
			}
		}
		// The rest of Owner, and a reference the change did not touch,
		// read as they were.
		if got := gqlData(t, a, dt.Admin(), c.db, `{ Owner(asOf: "`+p1+`", id: "Owner/o") { name friend { name } } }`); got != `{"Owner":[{"name":"O","friend":{"name":"Ann"}}]}` {
			t.Errorf("%s: Owner/o as of p1: %s", c.db, got)
		}
		if r := a.MustDo(t, 200, dt.Admin(), "GET", "/api/diff/admin/"+c.db+"?type=Owner&from="+p1, nil); !bytes.Contains(r.Body, []byte(`"hidden_fields":["Home.pet","Owner.pet","Owner.pets"]`)) {
			t.Errorf("%s: diff of Owner from p1: %s", c.db, r.Body)
		}
		// After the change, the same reads are answered.
		p2 := headPositionOf(t, a, c.db, "Owner")
		if r := a.MustDo(t, 200, dt.Admin(), "GET", docs+"?id=Owner/o&as_of="+p2, nil); r.Header.Get("Sluice-Hidden-Fields") != "" || !bytes.Contains(r.Body, []byte(`"pets":["Dog/rex"]`)) {
			t.Errorf("%s: Owner/o as of p2: %s (hidden %q)", c.db, r.Body, r.Header.Get("Sluice-Hidden-Fields"))
		}
	}
}

// TestPastBacklinksOfDroppedImplementations: a backlink of an interface
// as of a position before a schema change dropped one of its
// implementations then covered that class's documents pointing here: it
// is refused naming the class, as a query of the interface is.
func TestPastBacklinksOfDroppedImplementations(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	const sdl = `interface Animal { name: String! owner: Owner }
type Dog implements Animal { name: String! }
type Cat implements Animal { name: String! }
type Owner { name: String }`
	a.CreateDatabase(t, "backs", sdl)
	a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/backs", `[{"@type":"Owner","@id":"o","name":"O"},
		{"@type":"Dog","@id":"rex","name":"Rex","owner":"Owner/o"},{"@type":"Cat","@id":"tom","name":"Tom","owner":"Owner/o"}]`)
	p1 := headPositionOf(t, a, "backs", "Owner")
	q := `{ Owner(asOf: "` + p1 + `") { name _owner_of_Animal(orderBy: {name: ASC}) { name } } }`
	if got := gqlData(t, a, dt.Admin(), "backs", q); got != `{"Owner":[{"name":"O","_owner_of_Animal":[{"name":"Rex"},{"name":"Tom"}]}]}` {
		t.Fatalf("before the change: %s", got)
	}
	a.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/backs?force=true", strings.Replace(sdl, "type Cat implements Animal { name: String! }\n", "", 1))
	if msg, code := gqlError(t, a, dt.Admin(), "backs", q); code != "BAD_USER_INPUT" || !strings.Contains(msg, "the documents of Cat as of "+p1+" cannot be shown") {
		t.Errorf("%s: %s %s", q, code, msg)
	}
	// The backlink of Dog alone reads as it was.
	if got := gqlData(t, a, dt.Admin(), "backs", `{ Owner(asOf: "`+p1+`") { _owner_of_Dog { name } } }`); got != `{"Owner":[{"_owner_of_Dog":[{"name":"Rex"}]}]}` {
		t.Errorf("Dog's backlink as of p1: %s", got)
	}
}

// TestPastOfClassesThatStopImplementing: a read of an interface as of a
// position before a schema change made one of its implementations then
// stop implementing it (not dropped) would, through today's schema,
// leave that class's documents then out: it is refused naming the
// interface and the class (listing, aggregate, REST, diff, backlink),
// while the class itself reads as it was; a class that implements it
// again is read with it.
func TestPastOfClassesThatStopImplementing(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	const sdl = `interface Animal { name: String! owner: Owner }
type Dog implements Animal { name: String! }
type Cat implements Animal { name: String! }
type Owner { name: String }`
	apart := strings.Replace(sdl, "type Cat implements Animal { name: String! }", "type Cat { name: String! owner: Owner }", 1)
	a.CreateDatabase(t, "leave", sdl)
	a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/leave", `[{"@type":"Owner","@id":"o","name":"O"},
		{"@type":"Dog","@id":"rex","name":"Rex","owner":"Owner/o"},{"@type":"Cat","@id":"tom","name":"Tom","owner":"Owner/o"}]`)
	p1 := headPositionOf(t, a, "leave", "Owner")
	r := a.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/leave?force=true", apart)
	var change struct {
		Commit string `json:"commit"`
	}
	if err := json.Unmarshal(r.Body, &change); err != nil {
		t.Fatal(err)
	}
	want := "the documents of Animal as of " + p1 + " cannot be shown: they included those of Cat, which a schema change after that position (in effect from commit " + change.Commit + ") made stop implementing it"
	for _, q := range []string{
		`{ Animal(asOf: "` + p1 + `") { name } }`,
		`{ Animal_aggregate(asOf: "` + p1 + `") { count } }`,
		`{ Owner(asOf: "` + p1 + `") { _owner_of_Animal { name } } }`,
	} {
		if msg, code := gqlError(t, a, dt.Admin(), "leave", q); code != "BAD_USER_INPUT" || msg != want {
			t.Errorf("%s: %s %q, want %q", q, code, msg, want)
		}
	}
	for _, path := range []string{
		"/api/document/admin/leave?type=Animal&as_of=" + p1,
		"/api/diff/admin/leave?type=Animal&from=" + p1,
	} {
		if r := a.Do(t, dt.Admin(), "GET", path, nil); r.Status != 400 || !strings.Contains(string(r.Body), want) {
			t.Errorf("%s: %d %s, want a 400 saying %q", path, r.Status, r.Body, want)
		}
	}
	// Cat itself, Dog, and every document read as they were.
	if got := gqlData(t, a, dt.Admin(), "leave", `{ Cat(asOf: "`+p1+`") { name } Dog(asOf: "`+p1+`") { name } }`); got != `{"Cat":[{"name":"Tom"}],"Dog":[{"name":"Rex"}]}` {
		t.Errorf("Cat and Dog as of p1: %s", got)
	}
	a.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/leave?as_of="+p1, nil)
	// As of after the change, Animal is what it is today.
	p2 := headPositionOf(t, a, "leave", "Owner")
	if got := gqlData(t, a, dt.Admin(), "leave", `{ Animal_aggregate(asOf: "`+p2+`") { count } }`); got != `{"Animal_aggregate":{"count":1}}` {
		t.Errorf("Animal as of p2: %s", got)
	}
	// Cat implements Animal again: as of p1, Animal covers it again.
	a.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/leave", strings.Replace(apart, "type Cat {", "type Cat implements Animal {", 1))
	if got := gqlData(t, a, dt.Admin(), "leave", `{ Animal_aggregate(asOf: "`+p1+`") { count } }`); got != `{"Animal_aggregate":{"count":2}}` {
		t.Errorf("Animal as of p1, Cat back in it: %s", got)
	}
}

// TestReadsOfNothingHaveAPosition: a query of an interface without its
// implementations reads no table, and still answers the position of its
// snapshot, as every read does (a subscription resumes from it).
func TestReadsOfNothingHaveAPosition(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	a.CreateDatabase(t, "none", "interface Animal { name: String! }\ntype Dog implements Animal { name: String! }")
	a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/none", `{"@type":"Dog","@id":"rex","name":"Rex"}`)
	head := headPositionOf(t, a, "none", "Dog")
	for _, q := range []string{`{ Animal(include_children: false) { name } }`, `{ Animal_aggregate(include_children: false) { count } }`} {
		if r := gqlQuery(t, a, dt.Admin(), "none", q); len(r.Errors) > 0 || r.Extensions.Position != head {
			t.Errorf("%s: %s at %q, want the position %s", q, r.Data, r.Extensions.Position, head)
		}
	}
}

// headPositionOf returns the position a read of class of database db
// answers now.
func headPositionOf(t *testing.T, d *dt.Daemon, db, class string) string {
	t.Helper()
	return d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/"+db+"?type="+class+"&count=0", nil).Header.Get("Sluice-Position")
}

// TestPastOfSubdocumentFieldsDropped: a forced schema change that drops
// or retypes a field of a subdocument type drops its values inside the
// stored documents' subdocuments (at any depth, in lists too) with no
// change in the log, while the document fields holding them keep their
// type. As of a position before it, such a field cannot be shown: REST
// leaves it out of every subdocument of its type and names it by the
// type, GraphQL refuses selecting or filtering by it, a diff names it; a
// field of the type the change did not touch reads as it was. A field
// dropped for good is not shown either, though no read can name it.
func TestPastOfSubdocumentFieldsDropped(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	const sdl = `type Person { name: String home: Address homes: [Address] }
type Address @subdocument { city: String zip: Int geo: Geo }
type Geo @subdocument { code: Int note: String }`
	retyped := strings.Replace(strings.Replace(sdl, "zip: Int", "zip: String", 1), "code: Int", "code: String", 1)
	dropped := strings.Replace(strings.Replace(sdl, " zip: Int", "", 1), "code: Int ", "", 1)
	for _, c := range []struct {
		db      string
		changes []string // the first forced
		hidden  string
	}{
		{"retyped", []string{retyped}, "Address.zip, Geo.code"},
		{"readded", []string{dropped, sdl}, "Address.zip, Geo.code"},
		{"dropped", []string{dropped}, ""},
	} {
		a.CreateDatabase(t, c.db, sdl)
		docs := "/api/document/admin/" + c.db
		a.MustDo(t, 200, dt.Admin(), "POST", docs, `[{"@type":"Person","@id":"alice","name":"Alice",
			"home":{"@type":"Address","city":"Oslo","zip":12345,"geo":{"@type":"Geo","code":4711,"note":"fjord"}},
			"homes":[{"@type":"Address","city":"Bergen","zip":1}]},
			{"@type":"Person","@id":"bob","name":"Bob","home":{"@type":"Address","city":"Rome","zip":777}}]`)
		p1 := headPositionOf(t, a, c.db, "Person")
		// Bob changes after p1: his state then is the log's image, which
		// still holds his zip (alice's is today's row, which lost hers).
		a.MustDo(t, 200, dt.Admin(), "PUT", docs, `{"@type":"Person","@id":"Person/bob","name":"Robert","home":{"@type":"Address","city":"Rome","zip":777}}`)
		for i, change := range c.changes {
			a.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/"+c.db+map[bool]string{true: "?force=true"}[i == 0], change)
		}

		for _, path := range []string{
			docs + "?id=Person/alice&as_of=" + p1,
			docs + "?id=Person/bob&as_of=" + p1,
			docs + "?type=Person&as_of=" + p1,
			"/api/diff/admin/" + c.db + "?from=" + p1,
		} {
			r := a.MustDo(t, 200, dt.Admin(), "GET", path, nil)
			// The numbers as whole words: a diff's positions hold a
			// random epoch of letters and digits, which may hold 777.
			for _, s := range []string{`"zip"`, `"code"`, `\b12345\b`, `\b4711\b`, `\b777\b`} {
				if regexp.MustCompile(s).Match(r.Body) {
					t.Errorf("%s: %s shows %s, whose values a schema change since dropped: %s", c.db, path, s, r.Body)
				}
			}
			if !bytes.Contains(r.Body, []byte(`"Rome"`)) && !bytes.Contains(r.Body, []byte(`"Oslo"`)) || strings.Contains(path, "alice") && !bytes.Contains(r.Body, []byte(`"fjord"`)) {
				t.Errorf("%s: %s leaves out what the change did not touch: %s", c.db, path, r.Body)
			}
			if got := r.Header.Get("Sluice-Hidden-Fields"); got != c.hidden {
				t.Errorf("%s: %s: Sluice-Hidden-Fields %q, want %q", c.db, path, got, c.hidden)
			}
		}
		r := a.MustDo(t, 200, dt.Admin(), "GET", "/api/diff/admin/"+c.db+"?from="+p1, nil)
		if want := `"hidden_fields":[` + strings.ReplaceAll(strings.ReplaceAll(`"`+c.hidden+`"`, ", ", `","`), `""`, "") + `]`; !bytes.Contains(r.Body, []byte(want)) {
			t.Errorf("%s: diff from p1: %s, want %s", c.db, r.Body, want)
		}
		// What the change did not touch reads as it was.
		if got := gqlData(t, a, dt.Admin(), c.db, `{ Person(asOf: "`+p1+`", filter: {home: {city: {eq: "Oslo"}}}) { name home { city geo { note } } homes { city } } }`); got != `{"Person":[{"name":"Alice","home":{"city":"Oslo","geo":{"note":"fjord"}},"homes":[{"city":"Bergen"}]}]}` {
			t.Errorf("%s: as of p1: %s", c.db, got)
		}
		if c.hidden == "" {
			continue // no query can name a field today's schema lacks
		}
		eq := map[string]string{"retyped": `"12345"`, "readded": "12345"}[c.db]
		for _, q := range []struct{ field, query string }{
			{"Address.zip", `{ Person(asOf: "` + p1 + `") { name home { zip } } }`},
			{"Address.zip", `{ Person(asOf: "` + p1 + `") { homes { zip } } }`},
			{"Geo.code", `{ Person(asOf: "` + p1 + `") { home { geo { code } } } }`},
			{"Address.zip", `{ Person(asOf: "` + p1 + `", filter: {home: {zip: {eq: ` + eq + `}}}) { name } }`},
			{"Address.zip", `{ Person(asOf: "` + p1 + `", filter: {homes: {someHave: {zip: {eq: ` + eq + `}}}}) { name } }`},
			{"Address.zip", `{ Person_aggregate(asOf: "` + p1 + `", filter: {home: {zip: {eq: ` + eq + `}}}) { count } }`},
		} {
			want := q.field + " as of " + p1 + " cannot be shown: a schema change after that position"
			if r := gqlQuery(t, a, dt.Admin(), c.db, q.query); len(r.Errors) == 0 || r.Errors[0].Extensions.Code != "BAD_USER_INPUT" || !strings.Contains(r.Errors[0].Message, want) {
				t.Errorf("%s: %s: %s %+v, want BAD_USER_INPUT saying %q", c.db, q.query, r.Data, r.Errors, want)
			}
		}
		// As of after the change, zip reads as it is.
		p2 := headPositionOf(t, a, c.db, "Person")
		if r := a.MustDo(t, 200, dt.Admin(), "GET", docs+"?id=Person/alice&as_of="+p2, nil); r.Header.Get("Sluice-Hidden-Fields") != "" {
			t.Errorf("%s: Person/alice as of p2: %s (hidden %q)", c.db, r.Body, r.Header.Get("Sluice-Hidden-Fields"))
		}
	}
}

// TestPastReadsBeforeAnUpsert: a commit that replaces one document and
// adds another in one statement (PUT ?create=true through the API;
// INSERT … ON CONFLICT DO UPDATE in SQL) logs the added one's before
// image as JSON null beside the replaced one's. Every read as of a
// position before such a commit failed with an internal error (Postgres
// refused to read that null as a row): lists, aggregates, references and
// backlinks, REST as_of, and a _ChangeSet of an earlier commit (what a
// resumed subscription reads), until the commit left the log. A
// review's find.
func TestPastReadsBeforeAnUpsert(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "up", `type User { name: String! } type Note { owner: User rank: Int }`)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/up",
		`[{"@type":"User","@id":"u1","name":"Ann"},{"@type":"Note","@id":"n1","owner":"User/u1","rank":1}]`)
	p := headPositionOf(t, d, "up", "User")
	// One commit through the API: u1 replaced, u2 added.
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/up?create=true",
		`[{"@type":"User","@id":"u1","name":"Anna"},{"@type":"User","@id":"u2","name":"Bob"}]`)
	// One statement in SQL: u1 updated, u3 added.
	w := newSQLWriter(t, d, "up")
	sqlExec(t, w.url, "INSERT INTO "+w.table("User")+" (_id, name) VALUES ('User/u1', 'Annie'), ('User/u3', 'Cy') ON CONFLICT (_id) DO UPDATE SET name = excluded.name")
	for _, c := range []struct{ query, want string }{
		{`{ User(asOf: "` + p + `") { name } }`, `{"User":[{"name":"Ann"}]}`},
		{`{ User_aggregate(asOf: "` + p + `") { count min { name } } }`, `{"User_aggregate":{"count":1,"min":{"name":"Ann"}}}`},
		{`{ Note(asOf: "` + p + `") { owner { name } } }`, `{"Note":[{"owner":{"name":"Ann"}}]}`},
		{`{ Note(asOf: "` + p + `") { owner { _owner_of_Note { rank } } } }`, `{"Note":[{"owner":{"_owner_of_Note":[{"rank":1}]}}]}`},
		{`{ _ChangeSet(commit: "1") { Note_added { owner { name _owner_of_Note { rank } } } } }`, `{"_ChangeSet":{"Note_added":[{"owner":{"name":"Ann","_owner_of_Note":[{"rank":1}]}}]}}`},
		{`{ User { name } }`, `{"User":[{"name":"Annie"},{"name":"Bob"},{"name":"Cy"}]}`},
	} {
		r := gqlQuery(t, d, dt.Admin(), "up", c.query)
		if len(r.Errors) > 0 || string(r.Data) != c.want {
			t.Errorf("%s:\n got %s %+v\nwant %s", c.query, r.Data, r.Errors, c.want)
		}
	}
	if r := d.Do(t, dt.Admin(), "GET", "/api/document/admin/up?type=User&as_of="+p, nil); r.Status != 200 || !strings.Contains(string(r.Body), `"Ann"`) || strings.Contains(string(r.Body), "Bob") {
		t.Errorf("REST as of %s: %d %s", p, r.Status, r.Body)
	}
	if r := d.Do(t, dt.Admin(), "GET", "/api/diff/admin/up?from="+p, nil); r.Status != 200 || !strings.Contains(string(r.Body), `"@id":"User/u2","@type":"User","op":"added","before":null`) || !strings.Contains(string(r.Body), `"@id":"User/u3","@type":"User","op":"added","before":null`) {
		t.Errorf("diff from %s: %d %s", p, r.Status, r.Body)
	}
}

// TestReadAsOfSortsNoImages: a read as of a position finds the first
// change since of each document without reading and sorting the images
// before the others: with Postgres given 64 kB of work_mem and 1 MB of
// temporary files, a document changed 50 times since, one write at a
// time, 10 MB of images, reads as it was. Every statement of the read
// sorted the image before every change since the position, however many
// of one document, and failed here with "temporary file size exceeds
// temp_file_limit" (SQLSTATE 53400).
func TestReadAsOfSortsNoImages(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	a.CreateDatabase(t, "churn", "type T { s: String n: Int }")
	// Letters drawn at random, which Postgres cannot compress much: the
	// images are stored as they are in the log's rows, out of line.
	r := rand.New(rand.NewPCG(1, 2))
	letters := make([]byte, 200_000)
	for i := range letters {
		letters[i] = byte('a' + r.IntN(26))
	}
	big := string(letters)
	a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/churn", fmt.Sprintf(`{"@type":"T","@id":"d","s":%q,"n":0}`, big))
	then := dbPosition(t, a, "churn")
	for i := 1; i <= 50; i++ {
		a.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/churn", fmt.Sprintf(`{"@type":"T","@id":"T/d","s":%q,"n":%d}`, big, i))
	}
	sqlExec(t, a.DatabaseURL, `DO $$ BEGIN
		EXECUTE format('ALTER DATABASE %I SET work_mem = %L', current_database(), '64kB');
		EXECUTE format('ALTER DATABASE %I SET temp_file_limit = %L', current_database(), '1MB');
	END $$`)
	b := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL)) // its connections take the settings
	if got := gqlData(t, b, dt.Admin(), "churn", `{ T(asOf: "`+then+`") { _id n } }`); got != `{"T":[{"_id":"T/d","n":0}]}` {
		t.Errorf("as of %s: %s", then, got)
	}
	res := b.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/churn?id=T/d&as_of="+url.QueryEscape(then), nil)
	if !strings.Contains(string(res.Body), `"n":0`) {
		t.Errorf("REST as of %s: %.100s", then, res.Body)
	}
}
