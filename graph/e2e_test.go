package graph_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// testSDL is a representative schema: inheritance both ways, enums,
// references, subdocuments, protected fields.
const testSDL = `
"A person."
type Person @index(fields: ["age", "name"]) {
  "The name."
  name: String! @index
  age: Int
  score: Float
  born: DateTime
  wealth: BigInt
  active: Boolean
  friends: [Person!]
  home: Address
  addresses: [Address!]
  favorite: Color
  tags: [String!]
  ssn: String @private @index
  salary: Int @protected(role: "write")
  extra: JSON
}

type Address @subdocument {
  street: String
  city: String
}

enum Color { RED GREEN BLUE }

interface Animal { name: String! @index }
type Dog implements Animal { breed: String owner: Person }

interface Pet @concrete { name: String! }
type Cat implements Pet & Animal { indoor: Boolean }
`

// gql posts a GraphQL request and decodes the response.
func gql(t *testing.T, d *daemontest.Daemon, path, query string, vars map[string]any) gqlResult {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	r := d.Do(t, daemontest.Admin(), http.MethodPost, path, body, "Content-Type", "application/json")
	if r.Status != http.StatusOK {
		t.Fatalf("POST %s: status %d: %s", path, r.Status, r.Body)
	}
	var res gqlResult
	if err := json.Unmarshal(r.Body, &res); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
	res.raw = string(r.Body)
	return res
}

type gqlResult struct {
	Data   json.RawMessage `json:"data"`
	Errors []struct {
		Message    string         `json:"message"`
		Path       []any          `json:"path"`
		Extensions map[string]any `json:"extensions"`
	} `json:"errors"`
	raw string
}

func (r gqlResult) mustOK(t testing.TB) gqlResult {
	t.Helper()
	if len(r.Errors) > 0 {
		t.Fatalf("unexpected errors: %s", r.raw)
	}
	return r
}

func insertDocs(t *testing.T, d *daemontest.Daemon, db, docs string) {
	t.Helper()
	d.MustDo(t, http.StatusOK, daemontest.Admin(), http.MethodPost, "/api/document/admin/"+db, docs, "Content-Type", "application/json")
}

func TestQueryBasics(t *testing.T) {
	t.Parallel()
	d := daemontest.Start(t)
	d.CreateDatabase(t, "people", testSDL)
	insertDocs(t, d, "people", `[
	 {"@type":"Person","@id":"alice","name":"Alice","age":31,"favorite":"RED","friends":["Person/bob"],"home":{"street":"Main","city":"Oslo"},"ssn":"123","tags":["a","b"]},
	 {"@type":"Person","@id":"bob","name":"Bob","age":42,"friends":["Person/alice"]},
	 {"@type":"Dog","@id":"rex","name":"Rex","breed":"lab","owner":"Person/alice"},
	 {"@type":"Cat","@id":"tom","name":"Tom","indoor":true},
	 {"@type":"Pet","@id":"generic","name":"Gen"}
	]`)
	path := "/api/graphql/admin/people"
	res := gql(t, d, path, `{ Person(orderBy: {name: ASC}) { _id _type name age favorite tags home { city } friends { name friends { name } } ssn _CommitMetadata { _id _author } } }`, nil).mustOK(t)
	want := `{"Person":[{"_id":"Person/alice","_type":"Person","name":"Alice","age":31,"favorite":"RED","tags":["a","b"],"home":{"city":"Oslo"},"friends":[{"name":"Bob","friends":[{"name":"Alice"}]}],"ssn":"123","_CommitMetadata":{"_id":"`
	if !strings.HasPrefix(string(res.Data), want) {
		t.Fatalf("got %s\nwant prefix %s", res.Data, want)
	}
	res = gql(t, d, path, `{ Animal { __typename _id name ... on Dog { breed owner { name } } ... on Cat { indoor } } }`, nil).mustOK(t)
	if got, want := string(res.Data), `{"Animal":[{"__typename":"Cat","_id":"Cat/tom","name":"Tom","indoor":true},{"__typename":"Dog","_id":"Dog/rex","name":"Rex","breed":"lab","owner":{"name":"Alice"}}]}`; got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
	res = gql(t, d, path, `{ Pet { _id _type name } own: Pet(include_children: false) { _id } }`, nil).mustOK(t)
	if got, want := string(res.Data), `{"Pet":[{"_id":"Cat/tom","_type":"Cat","name":"Tom"},{"_id":"Pet/generic","_type":"Pet","name":"Gen"}],"own":[{"_id":"Pet/generic"}]}`; got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
	res = gql(t, d, path, `{ _ChangeSet { _CommitMetadata { _change_type } Person_added { name } Animal_added { name } Dog_updated { name } } }`, nil).mustOK(t)
	if got, want := string(res.Data), `{"_ChangeSet":{"_CommitMetadata":{"_change_type":"commit"},"Person_added":[{"name":"Alice"},{"name":"Bob"}],"Animal_added":[{"name":"Rex"},{"name":"Tom"}],"Dog_updated":[]}}`; got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
	_ = url.Values{}
}

func TestHTTPBehaviour(t *testing.T) {
	t.Parallel()
	d := daemontest.Start(t)
	d.CreateDatabase(t, "h", testSDL)
	path := "/api/graphql/admin/h"
	ct := []string{"Content-Type", "application/json"}
	deep := `{"query":"{ Person { ` + strings.Repeat("friends { ", 21) + "name" + strings.Repeat(" }", 23) + `"}`
	for _, c := range []struct {
		name, method, path, body, accept string
		status                           int
		contentType, bodyHas             string
	}{
		{"json parse error", "POST", path, `{ Person {`, "application/json", 400, "application/json", `"errors"`},
		{"syntax error, graphql-response", "POST", path, `{"query":"{ Person {"}`, "application/graphql-response+json", 400, "application/graphql-response+json", `GRAPHQL_PARSE_FAILED`},
		{"syntax error, json", "POST", path, `{"query":"{ Person {"}`, "application/json", 200, "application/json", `GRAPHQL_PARSE_FAILED`},
		{"validation error", "POST", path, `{"query":"{ Nope }"}`, "application/graphql-response+json", 400, "application/graphql-response+json", `GRAPHQL_VALIDATION_FAILED`},
		{"not acceptable", "POST", path, `{"query":"{ __typename }"}`, "text/html", 406, "application/json", `"errors"`},
		{"get query", "GET", path + "?query=" + url.QueryEscape("{ __typename }"), "", "", 200, "application/json", `{"data":{"__typename":"Query"}}`},
		{"get mutation", "GET", path + "?query=" + url.QueryEscape(`mutation { _deleteDocuments(ids: ["Person/x"]) }`), "", "", 405, "application/json", `"errors"`},
		{"put reserves a graphql-sse single connection stream", "PUT", path, "", "", 201, "text/plain", ""},
		{"unknown database", "POST", "/api/graphql/admin/nope", `{"query":"{ __typename }"}`, "", 404, "application/json", `NOT_FOUND`},
		{"system", "POST", "/api/graphql/_system", `{"query":"{ UserDatabase { name } }"}`, "", 200, "application/json", `{"name":"h"}`},
		{"depth limit", "POST", path, deep, "", 200, "application/json", `"the query nests selections 23 levels deep, more than 20 (limit graphql_max_depth)"`},
		{"subscription over json", "POST", path, `{"query":"subscription { Person_added { name } }"}`, "", 200, "application/json", `text/event-stream`},
	} {
		h := append([]string{}, ct...)
		if c.accept != "" {
			h = append(h, "Accept", c.accept)
		}
		r := d.Do(t, daemontest.Admin(), c.method, c.path, c.body, h...)
		if r.Status != c.status || !strings.Contains(r.Header.Get("Content-Type"), c.contentType) || !strings.Contains(string(r.Body), c.bodyHas) {
			t.Errorf("%s: got %d %s %s; want %d %s containing %s", c.name, r.Status, r.Header.Get("Content-Type"), r.Body, c.status, c.contentType, c.bodyHas)
		}
	}
	// Accept sent as two field lines is one list (RFC 9110 section 5.3):
	// the second line's type is acceptable.
	r := d.Do(t, daemontest.Admin(), "POST", path, `{"query":"{ __typename }"}`, "Content-Type", "application/json", "Accept", "text/html", "Accept", "application/graphql-response+json")
	if r.Status != 200 || r.Header.Get("Content-Type") != "application/graphql-response+json; charset=utf-8" {
		t.Errorf("two Accept lines: got %d %s %s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	r = d.Do(t, daemontest.Admin(), "GET", "/api/graphiql/admin/h", nil)
	if r.Status != 200 || !strings.Contains(string(r.Body), "/api/graphql/admin/h") {
		t.Errorf("graphiql: %d %s", r.Status, r.Body)
	}
}

// TestEveryTypeReadsBackTheSame reads a document holding every field type
// through GraphQL's typed-column query path, with and without the commit
// join, and through REST (whole-row JSON), and checks they agree with what
// was written.
func TestEveryTypeReadsBackTheSame(t *testing.T) {
	t.Parallel()
	d := daemontest.Start(t)
	d.CreateDatabase(t, "types", testSDL)
	insertDocs(t, d, "types", `{"@type":"Person","@id":"all","name":"All","age":-7,"score":2.5,
		"born":"2001-02-03T04:05:06.789+01:00","wealth":"123456789012345678901234567890","active":false,
		"friends":["Person/all"],"home":{"street":"S","city":"C"},"addresses":[{"city":"X"}],"favorite":"BLUE",
		"tags":["t"],"ssn":"s","salary":9,"extra":{"k":[1,2.5,"x",null],"big":12345678901234567890}}`)
	fields := `name age score born wealth active friends { _id } home { street city } addresses { city } favorite tags ssn salary extra`
	want := `{"name":"All","age":-7,"score":2.5,"born":"2001-02-03T03:05:06.789Z","wealth":"123456789012345678901234567890","active":false,` +
		`"friends":[{"_id":"Person/all"}],"home":{"street":"S","city":"C"},"addresses":[{"city":"X"}],"favorite":"BLUE",` +
		`"tags":["t"],"ssn":"s","salary":9,"extra":{"big":12345678901234567890,"k":[1,2.5,"x",null]}}`
	projected := gql(t, d, "/api/graphql/admin/types", `{ Person { `+fields+` } }`, nil).mustOK(t)
	if got := string(projected.Data); got != `{"Person":[`+want+`]}` {
		t.Fatalf("typed columns:\n got %s\nwant %s", got, want)
	}
	whole := gql(t, d, "/api/graphql/admin/types", `{ Person(ids: ["Person/all"]) { `+fields+` _CommitMetadata { _id } } }`, nil).mustOK(t)
	if got := string(whole.Data); !strings.HasPrefix(got, `{"Person":[`+strings.TrimSuffix(want, "}")+`,"_CommitMetadata":{"_id":"1"}}]}`) {
		t.Fatalf("with commit:\n got %s", got)
	}
	rest := d.MustDo(t, http.StatusOK, daemontest.Admin(), http.MethodGet, "/api/document/admin/types?id=Person/all", nil)
	for _, part := range []string{`"born":"2001-02-03T03:05:06.789Z"`, `"wealth":"123456789012345678901234567890"`, `"extra":{"big":12345678901234567890,"k":[1,2.5,"x",null]}`, `"age":-7`} {
		if !strings.Contains(string(rest.Body), part) {
			t.Fatalf("REST document lacks %s: %s", part, rest.Body)
		}
	}
}
