package graph_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/graph"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/engine"
)

// fragmentBomb is the document of nested fragment spreads the outside
// tester sent: each of levels fragments spreads the next one twice.
func fragmentBomb(levels int) string {
	var b strings.Builder
	b.WriteString("{ Person { ...F0 } }\n")
	for i := range levels {
		fmt.Fprintf(&b, "fragment F%d on Person { _id ...F%d ...F%d }\n", i, i+1, i+1)
	}
	fmt.Fprintf(&b, "fragment F%d on Person { _id }\n", levels)
	return b.String()
}

// TestFragmentBombRefusedOnEveryTransport sends the 30-level fragment bomb
// (before the limits, 24 levels took 15 s of CPU and 30 did not finish in
// 10 minutes) over GraphQL over HTTP and over the event-stream transport:
// each refuses it with the fields limit before validating it.
func TestFragmentBombRefusedOnEveryTransport(t *testing.T) {
	t.Parallel()
	d := daemontest.Start(t)
	d.CreateDatabase(t, "bomb", testSDL)
	path := "/api/graphql/admin/bomb"
	q := fragmentBomb(30)
	const want = `{"message":"the query selects 2147483648 fields once its fragments are expanded, more than 1000 (limit graphql_max_fields)","extensions":{"code":"GRAPHQL_VALIDATION_FAILED","limit":"graphql_max_fields"}}`
	body, _ := json.Marshal(map[string]any{"query": q})
	for _, c := range []struct {
		name, method, path, accept string
		body                       any
		status                     int
		has                        []string
	}{
		{"POST json", http.MethodPost, path, "application/json", body, 200, []string{`{"errors":[` + want + `]}`}},
		{"POST graphql-response", http.MethodPost, path, "application/graphql-response+json", body, 400, []string{`{"errors":[` + want + `]}`}},
		{"GET", http.MethodGet, path + "?query=" + url.QueryEscape(q), "", nil, 200, []string{`{"errors":[` + want + `]}`}},
		{"SSE", http.MethodPost, path, "text/event-stream", body, 200, []string{"event: next\ndata: {\"errors\":[" + want + "]}\n", "event: complete\n"}},
		{"NDJSON", http.MethodPost, path, "application/x-ndjson", body, 200, []string{"{\"errors\":[" + want + "]}\n"}},
	} {
		h := []string{"Content-Type", "application/json"}
		if c.accept != "" {
			h = append(h, "Accept", c.accept)
		}
		r := d.Do(t, daemontest.Admin(), c.method, c.path, c.body, h...)
		if r.Status != c.status {
			t.Errorf("%s: status %d, want %d: %s", c.name, r.Status, c.status, r.Body)
		}
		for _, s := range c.has {
			if !strings.Contains(string(r.Body), s) {
				t.Errorf("%s: got %s\nwant it to contain %s", c.name, r.Body, s)
			}
		}
	}
}

// TestIntrospectionWithDefaultLimits runs introspection as graphql-js and
// GraphiQL send it against the default limits.
func TestIntrospectionWithDefaultLimits(t *testing.T) {
	t.Parallel()
	d := daemontest.Start(t)
	d.CreateDatabase(t, "intro", testSDL)
	files, _ := filepath.Glob("testdata/introspection.*.graphql")
	if len(files) < 2 {
		t.Fatalf("want the introspection queries in testdata, found %v", files)
	}
	for _, f := range files {
		q, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		res := gql(t, d, "/api/graphql/admin/intro", string(q), nil)
		if len(res.Errors) > 0 || !strings.Contains(string(res.Data), `"name":"Person"`) {
			t.Errorf("%s: %.500s", f, res.raw)
		}
	}
}

// rowCounter is a graph.Store that records how many documents each read
// returns.
type rowCounter struct {
	graph.Store
	mu   sync.Mutex
	read []int
}

func (c *rowCounter) QueryDocuments(ctx context.Context, d *sluice.Database, s *sluice.Schema, q engine.DocQuery) ([]engine.QueryDoc, error) {
	docs, err := c.Store.QueryDocuments(ctx, d, s, q)
	c.record(len(docs))
	return docs, err
}

func (c *rowCounter) DocumentsByID(ctx context.Context, d *sluice.Database, s *sluice.Schema, ids []string, limit int) ([]engine.QueryDoc, error) {
	docs, err := c.Store.DocumentsByID(ctx, d, s, ids, limit)
	c.record(len(docs))
	return docs, err
}

func (c *rowCounter) Backlinks(ctx context.Context, d *sluice.Database, s *sluice.Schema, q engine.BacklinkQuery) ([][]engine.QueryDoc, error) {
	lists, err := c.Store.Backlinks(ctx, d, s, q)
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	c.record(n)
	return lists, err
}

func (c *rowCounter) record(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.read = append(c.read, n)
}

// take returns the reads since the last call and their total.
func (c *rowCounter) take() ([]int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	reads, total := c.read, 0
	for _, n := range reads {
		total += n
	}
	c.read = nil
	return reads, total
}

// people returns n Person documents p000…, each a friend of the next two.
func manyPeople(n int) string {
	docs := make([]string, n)
	for i := range n {
		docs[i] = fmt.Sprintf(`{"@type":"Person","@id":"p%03d","name":"P%d","age":%d,"friends":["Person/p%03d","Person/p%03d"]}`, i, i, i, (i+1)%n, (i+2)%n)
	}
	return "[" + strings.Join(docs, ",") + "]"
}

// TestResultRowLimit checks that one request reads at most
// graphql_max_result_rows documents over all its fields, aliases and
// levels of references, that the SQL never returns more than one past
// the bound, and that a request over it gets an error naming the limit
// on the field that passed it, with data null.
func TestResultRowLimit(t *testing.T) {
	t.Parallel()
	const bound = 10
	var counter *rowCounter
	st := newStackWith(t, testSDL, graph.Options{Limits: graph.Limits{MaxResultRows: bound}}, func(s graph.Store) graph.Store {
		counter = &rowCounter{Store: s}
		return counter
	})
	st.insert(t, manyPeople(40))
	const msg = "the request reads more than 10 documents; use limit and offset to read them page by page (limit graphql_max_result_rows)"
	aliases := make([]string, 10)
	for i := range aliases {
		aliases[i] = fmt.Sprintf("a%d: Person { _id name age }", i)
	}
	for _, c := range []struct {
		name, query string
		errPath     string // "" when the request must succeed
		rows        int    // documents it reads in all
	}{
		{"within", `{ Person(limit: 10) { _id } }`, "", 10},
		{"aliases within", `{ a: Person(limit: 4) { _id } b: Person(offset: 30, limit: 6) { _id } }`, "", 10},
		{"one field over", `{ Person { _id } }`, "Person", bound + 1},
		{"a limit over the bound", `{ Person(limit: 25) { _id } }`, "Person", bound + 1},
		{"the second alias passes it", `{ a: Person(limit: 7) { _id } b: Person(limit: 7) { _id } }`, "b", bound + 1},
		// The tester's shape: every alias reads the whole class.
		{"ten aliases", "{ " + strings.Join(aliases, " ") + " }", "a0", bound + 1},
		// p000…p005 have seven friends (p001…p007), read again in
		// full: 13 documents.
		{"references", `{ Person(limit: 6) { _id friends { name } } }`, "Person", bound + 1},
		{"references within", `{ Person(limit: 3) { _id friends { name } } }`, "", 3 + 4},
		// Each person is the friend of the two before it: a backlink
		// lists two documents per person, read by one statement, which
		// never returns more than one past the bound.
		{"backlinks within", `{ Person(limit: 2) { _id _friends_of_Person { name } } }`, "", 2 + 4},
		{"backlinks over", `{ Person(limit: 4) { _friends_of_Person { _id } } }`, "Person", bound + 1},
		{"a backlink's own limit", `{ Person(limit: 5) { _friends_of_Person(limit: 1) { _id } } }`, "", 5 + 5},
		{"backlinks of backlinks", `{ Person(limit: 2) { _friends_of_Person { _friends_of_Person { _id } } } }`, "Person", bound + 1},
	} {
		res := st.query(t, c.query, nil)
		reads, total := counter.take()
		if total != c.rows {
			t.Errorf("%s: read %d documents (%v), want %d", c.name, total, reads, c.rows)
		}
		if c.errPath == "" {
			if len(res.Errors) > 0 {
				t.Errorf("%s: %s", c.name, res.raw)
			}
			continue
		}
		want := `{"errors":[{"message":"` + msg + `","path":["` + c.errPath + `"],"extensions":{"code":"BAD_USER_INPUT","limit":"graphql_max_result_rows"}}],"data":null}`
		if res.raw != want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, res.raw, want)
		}
	}
}

// TestResponseBytesLimit checks that a response whose data would pass
// graphql_max_response_bytes is refused with an error naming the limit,
// and that one just within it is whole.
func TestResponseBytesLimit(t *testing.T) {
	t.Parallel()
	st := newStackWith(t, testSDL, graph.Options{Limits: graph.Limits{MaxResponseBytes: 300}}, nil)
	st.insert(t, manyPeople(40))
	// {"Person":[{"_id":"Person/p000"},…]}: 12 bytes and 22 a document.
	res := st.query(t, `{ Person(limit: 13) { _id } }`, nil).mustOK(t)
	if n := len(res.Data); n != 12+13*22 {
		t.Fatalf("data is %d bytes: %s", n, res.Data)
	}
	res = st.query(t, `{ Person(limit: 14) { _id } }`, nil)
	const want = `{"errors":[{"message":"the response is larger than 300 bytes; select fewer fields, or use limit and offset to read the documents page by page (limit graphql_max_response_bytes)","path":["Person"],"extensions":{"code":"BAD_USER_INPUT","limit":"graphql_max_response_bytes"}}],"data":null}`
	if res.raw != want {
		t.Fatalf("got  %s\nwant %s", res.raw, want)
	}
	// Introspection is held to it too.
	res = st.query(t, `{ __schema { types { name fields { name } } } }`, nil)
	if len(res.Errors) != 1 || res.Errors[0].Extensions["limit"] != "graphql_max_response_bytes" || string(res.Data) != "null" {
		t.Fatalf("introspection: %s", res.raw)
	}
}

// TestResponseBytesLimitCountsErrors: a response's errors count towards
// graphql_max_response_bytes with its data. A field error below a
// nullable reference nulls the reference alone, so each document read
// (graphql_max_result_rows) gave one for each alias of it: the errors
// were not bounded by the limit, and a query whose data fitted in 2.5 MB
// answered 36 MB of errors (a read of the past, whose documents may lack
// a field today's schema requires, could give a hundred per document).
func TestResponseBytesLimitCountsErrors(t *testing.T) {
	t.Parallel()
	const max = 16 << 10
	st := newStackWith(t, `type P { name: String friend: P }`, graph.Options{Limits: graph.Limits{MaxResponseBytes: max}}, nil)
	var docs strings.Builder
	docs.WriteString(`[{"@type":"P","@id":"root","name":"r"}`)
	for i := range 100 {
		fmt.Fprintf(&docs, `,{"@type":"P","@id":"p%03d","friend":"P/root"}`, i)
	}
	docs.WriteString("]")
	st.insert(t, docs.String())
	var sel []string
	for i := range 10 {
		// limit: -1 is refused when the backlink is read: an error
		// for each P whose friend it is selected through.
		sel = append(sel, fmt.Sprintf(`f%d: friend { _friend_of_P(limit: -1) { name } }`, i))
	}
	q := `{ P(limit: 3) { ` + strings.Join(sel, " ") + ` } }`
	// Within the limit: the data and each document's errors.
	res := st.query(t, q, nil)
	if len(res.Errors) != 30 || string(res.Data) == "null" {
		t.Fatalf("3 documents: %d errors, data %.200s; want 30 errors and data", len(res.Errors), res.Data)
	}
	// Past it: 1,000 errors (about 140 KB), their data about 10 KB.
	res = st.query(t, strings.Replace(q, "limit: 3", "limit: 101", 1), nil)
	last := res.Errors[len(res.Errors)-1]
	if string(res.Data) != "null" || last.Extensions["limit"] != "graphql_max_response_bytes" {
		t.Fatalf("101 documents: %d errors, the last %v, data %.100s; want data null and the error of graphql_max_response_bytes",
			len(res.Errors), last, res.Data)
	}
	if len(res.raw) > max+1024 {
		t.Fatalf("101 documents: the response is %d bytes, more than the %d of the limit and its error", len(res.raw), max)
	}
}

// TestDocumentLimitsFromConfig checks that the daemon applies the
// configured document limits (not the defaults).
func TestDocumentLimitsFromConfig(t *testing.T) {
	t.Parallel()
	d := daemontest.Start(t, func(c *config.Config) {
		c.GraphQLMaxAliases = 1
		c.GraphQLMaxDepth = 2
		c.GraphQLMaxQueryBytes = 100
		c.GraphQLMaxResultRows = 3
		c.GraphQLMaxStatements = 2
	})
	d.CreateDatabase(t, "conf", testSDL)
	insertDocs(t, d, "conf", manyPeople(5))
	path := "/api/graphql/admin/conf"
	for _, c := range []struct{ query, limit string }{
		{`{ a: Person { _id } b: Person { _id } }`, "graphql_max_aliases"},
		{`{ Person { friends { _id } } }`, "graphql_max_depth"},
		{`{ Person { _id } }` + strings.Repeat(" ", 100), "graphql_max_query_bytes"},
		{`{ Person { _id } }`, "graphql_max_result_rows"},
		{`{ Person(limit: 1) { _id } Person_aggregate { count } x: Person { _id } }`, "graphql_max_statements"},
	} {
		res := gql(t, d, path, c.query, nil)
		if len(res.Errors) != 1 || res.Errors[0].Extensions["limit"] != c.limit {
			t.Errorf("%q: got %s, want an error of %s", c.query, res.raw, c.limit)
		}
	}
	gql(t, d, path, `{ a: Person(limit: 3) { _id } }`, nil).mustOK(t)
	// A live query is refused before its first run (each run runs the
	// same statements).
	body, _ := json.Marshal(map[string]any{"query": `query @live { Person(limit: 1) { _id } Person_aggregate { count } x: Person { _id } }`})
	r := d.Do(t, daemontest.Admin(), http.MethodPost, path, body, "Content-Type", "application/json", "Accept", "text/event-stream")
	if !strings.Contains(string(r.Body), `"limit":"graphql_max_statements"`) || strings.Contains(string(r.Body), `"data"`) {
		t.Errorf("a live query over graphql_max_statements: %s", r.Body)
	}
}

// TestReadBytesLimit: what a request reads from Postgres is bounded too,
// at four times graphql_max_response_bytes, as it is read: a page of
// large documents, or their references, is refused before it is all in
// memory (10,000 documents of 1 MiB were read whole before the response's
// bound refused them as it was written). A page that reads little of
// large documents is not refused.
func TestReadBytesLimit(t *testing.T) {
	t.Parallel()
	st := newStackWith(t, testSDL, graph.Options{Limits: graph.Limits{MaxResponseBytes: 10000}}, nil)
	long := strings.Repeat("x", 2000)
	var docs, friends []string
	for i := range 30 {
		docs = append(docs, fmt.Sprintf(`{"@type":"Person","@id":"Person/p%02d","name":%q}`, i, long))
		friends = append(friends, fmt.Sprintf(`"Person/p%02d"`, i))
	}
	docs = append(docs, `{"@type":"Person","@id":"Person/hub","name":"hub","friends":[`+strings.Join(friends, ",")+`]}`)
	st.insert(t, "["+strings.Join(docs, ",")+"]")

	st.query(t, `{ Person(limit: 30) { _id } }`, nil).mustOK(t)
	const want = "the documents the request reads are larger than 40000 bytes, 4 times what its response may hold"
	for _, q := range []string{
		`{ Person(limit: 30) { name } }`,
		`{ Person(id: "Person/hub") { friends { name } } }`,
	} {
		res := st.query(t, q, nil)
		if len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Message, want) || res.Errors[0].Extensions["limit"] != "graphql_max_response_bytes" || string(res.Data) != "null" {
			t.Errorf("%s: %s", q, res.raw)
		}
	}
}
