package graph_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/graph"
	"github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/postgres"
)

// linkSDL has references of each kind: single (owner, declared by an
// interface), lists (watchers, patients), to a concrete parent
// (favorite), to an interface (on), and protected (secretOwner); and a
// field of each aggregatable scalar.
const linkSDL = `
type User { name: String! age: Int score: Float wealth: BigInt born: DateTime ssn: String @private }
interface Owned { owner: User title: String }
type Note implements Owned { watchers: [User!] rank: Int secretOwner: User @private }
type Task implements Owned { done: Boolean }
interface Animal @concrete { name: String! }
type Dog implements Animal { breed: String }
type Vet { patients: [Animal!] favorite: Animal }
type Comment { on: Owned }
`

const linkDocs = `[
{"@type":"User","@id":"a","name":"Ann","age":30,"score":1.5,"wealth":"10000000000000000000","born":"2000-01-01T00:00:00Z","ssn":"1"},
{"@type":"User","@id":"b","name":"Bob","age":40,"score":2.5,"wealth":"5","born":"1990-05-05T00:00:00Z"},
{"@type":"User","@id":"c","name":"Cy"},
{"@type":"Note","@id":"n1","owner":"User/a","title":"alpha","watchers":["User/a","User/b"],"rank":3,"secretOwner":"User/b"},
{"@type":"Note","@id":"n2","owner":"User/a","title":"beta","watchers":["User/b"],"rank":1},
{"@type":"Note","@id":"n3","owner":"User/b","title":"gamma","rank":2},
{"@type":"Task","@id":"t1","owner":"User/a","title":"task one","done":true},
{"@type":"Task","@id":"t2","owner":"User/b","title":"task two"},
{"@type":"Animal","@id":"generic","name":"Generic"},
{"@type":"Dog","@id":"rex","name":"Rex"},
{"@type":"Vet","@id":"v1","patients":["Dog/rex","Animal/generic"],"favorite":"Dog/rex"},
{"@type":"Vet","@id":"v2","favorite":"Animal/generic"},
{"@type":"Comment","@id":"c1","on":"Note/n1"},
{"@type":"Comment","@id":"c2","on":"Task/t1"}
]`

// TestBacklinks reads backlinks of each kind of reference, with their
// arguments, nested, and from change sets.
func TestBacklinks(t *testing.T) {
	t.Parallel()
	st := newStack(t, linkSDL)
	st.insert(t, linkDocs)
	for _, c := range []struct{ name, query, want string }{
		{"a single reference",
			`{ User(orderBy: {name: ASC}) { name _owner_of_Note { _id } } }`,
			`{"User":[{"name":"Ann","_owner_of_Note":[{"_id":"Note/n1"},{"_id":"Note/n2"}]},{"name":"Bob","_owner_of_Note":[{"_id":"Note/n3"}]},{"name":"Cy","_owner_of_Note":[]}]}`},
		{"declared by an interface: its classes' documents",
			`{ User(id: "User/a") { _owner_of_Owned { _id title } } }`,
			`{"User":[{"_owner_of_Owned":[{"_id":"Note/n1","title":"alpha"},{"_id":"Note/n2","title":"beta"},{"_id":"Task/t1","title":"task one"}]}]}`},
		{"filter, orderBy, limit and offset",
			`{ User(id: "User/a") {
				t: _owner_of_Owned(filter: {title: {startsWith: "t"}}) { _id }
				desc: _owner_of_Owned(orderBy: {title: DESC}) { title }
				page: _owner_of_Owned(limit: 1, offset: 1) { _id }
				last: _owner_of_Owned(orderBy: {_id: DESC}, limit: 1) { _id }
				via: _owner_of_Note(filter: {owner: {name: {eq: "Ann"}}, rank: {gt: 1}}) { _id }
			} }`,
			`{"User":[{"t":[{"_id":"Task/t1"}],"desc":[{"title":"task one"},{"title":"beta"},{"title":"alpha"}],"page":[{"_id":"Note/n2"}],"last":[{"_id":"Task/t1"}],"via":[{"_id":"Note/n1"}]}]}`},
		{"a list of references",
			`{ User(orderBy: {name: ASC}) { name _watchers_of_Note { _id } } }`,
			`{"User":[{"name":"Ann","_watchers_of_Note":[{"_id":"Note/n1"}]},{"name":"Bob","_watchers_of_Note":[{"_id":"Note/n1"},{"_id":"Note/n2"}]},{"name":"Cy","_watchers_of_Note":[]}]}`},
		{"references to a concrete parent, on it and its subclass",
			`{ Animal { _id _favorite_of_Vet { _id } _patients_of_Vet { _id } } Dog { _favorite_of_Vet { _id } } }`,
			`{"Animal":[{"_id":"Animal/generic","_favorite_of_Vet":[{"_id":"Vet/v2"}],"_patients_of_Vet":[{"_id":"Vet/v1"}]},{"_id":"Dog/rex","_favorite_of_Vet":[{"_id":"Vet/v1"}],"_patients_of_Vet":[{"_id":"Vet/v1"}]}],"Dog":[{"_favorite_of_Vet":[{"_id":"Vet/v1"}]}]}`},
		{"references to an interface, on it and its implementors",
			`{ Owned { _id _on_of_Comment { _id } } Task(id: "Task/t1") { _on_of_Comment { _id } } }`,
			`{"Owned":[{"_id":"Note/n1","_on_of_Comment":[{"_id":"Comment/c1"}]},{"_id":"Note/n2","_on_of_Comment":[]},{"_id":"Note/n3","_on_of_Comment":[]},{"_id":"Task/t1","_on_of_Comment":[{"_id":"Comment/c2"}]},{"_id":"Task/t2","_on_of_Comment":[]}],"Task":[{"_on_of_Comment":[{"_id":"Comment/c2"}]}]}`},
		{"nested through references and fragments",
			`{ Note(id: "Note/n1") { owner { name ...tasks } } } fragment tasks on User { _owner_of_Task { title owner { _watchers_of_Note { _id _CommitMetadata { _id } } } } }`,
			`{"Note":[{"owner":{"name":"Ann","_owner_of_Task":[{"title":"task one","owner":{"_watchers_of_Note":[{"_id":"Note/n1","_CommitMetadata":{"_id":"1"}}]}}]}}]}`},
		{"in a change set",
			`{ _ChangeSet { User_added(filter: {name: {eq: "Bob"}}) { _owner_of_Task { _id } } } }`,
			`{"_ChangeSet":{"User_added":[{"_owner_of_Task":[{"_id":"Task/t2"}]}]}}`},
	} {
		res := st.query(t, c.query, nil).mustOK(t)
		if string(res.Data) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, res.Data, c.want)
		}
	}
	// Arguments come from variables too, and are checked as a query
	// field's are.
	res := st.query(t, `query($f: Note_Filter, $n: Int) { User(id: "User/b") { _owner_of_Note(filter: $f, limit: $n) { _id } } }`,
		map[string]any{"f": map[string]any{"rank": map[string]any{"eq": 2}}, "n": 5}).mustOK(t)
	if want := `{"User":[{"_owner_of_Note":[{"_id":"Note/n3"}]}]}`; string(res.Data) != want {
		t.Errorf("variables: %s", res.Data)
	}
	// A refused argument is the backlink field's error, at its path (not
	// the root field's): the null goes up from there, through the non-null
	// lists to data here, to a nullable reference below.
	res = st.query(t, `{ User { _owner_of_Note(limit: -1) { _id } } }`, nil)
	if len(res.Errors) != 1 || res.Errors[0].Message != "Note: limit must be a whole number of at least 0, got -1" || string(res.Data) != "null" ||
		fmt.Sprint(res.Errors[0].Path) != "[User 0 _owner_of_Note]" {
		t.Errorf("a negative limit: %s", res.raw)
	}
	// As of a position too (it was the root field's, refused before the read).
	var pos struct {
		Extensions struct{ Position string } `json:"extensions"`
	}
	if err := json.Unmarshal([]byte(st.query(t, `{ User(limit: 0) { _id } }`, nil).mustOK(t).raw), &pos); err != nil || pos.Extensions.Position == "" {
		t.Fatalf("no position: %v", err)
	}
	res = st.query(t, `{ User(asOf: "`+pos.Extensions.Position+`") { _owner_of_Note(limit: -1) { _id } } }`, nil)
	if len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Message, "limit must be") || string(res.Data) != "null" ||
		fmt.Sprint(res.Errors[0].Path) != "[User 0 _owner_of_Note]" {
		t.Errorf("a negative limit as of a position: %s", res.raw)
	}
	res = st.query(t, `{ Note { _id owner { name _owner_of_Note(limit: -1) { _id } } } }`, nil)
	if want := `{"Note":[{"_id":"Note/n1","owner":null},{"_id":"Note/n2","owner":null},{"_id":"Note/n3","owner":null}]}`; string(res.Data) != want || len(res.Errors) != 3 {
		t.Fatalf("a negative limit below a reference: %s", res.raw)
	}
	for i, e := range res.Errors {
		if got, want := fmt.Sprint(e.Path), fmt.Sprintf("[Note %d owner _owner_of_Note]", i); got != want || !strings.Contains(e.Message, "limit must be") {
			t.Errorf("a negative limit below a reference: error %q at %s, want at %s", e.Message, got, want)
		}
	}
}

// TestAggregates counts and aggregates documents with filters, over an
// interface and a concrete parent, and answers nulls when nothing has a
// value.
func TestAggregates(t *testing.T) {
	t.Parallel()
	st := newStack(t, linkSDL)
	st.insert(t, linkDocs)
	for _, c := range []struct{ name, query, want string }{
		{"every aggregate of every type",
			`{ User_aggregate { count min { age name born wealth score } max { age name born wealth } sum { age score wealth } avg { age score wealth } } }`,
			`{"User_aggregate":{"count":3,"min":{"age":30,"name":"Ann","born":"1990-05-05T00:00:00Z","wealth":"5","score":1.5},"max":{"age":40,"name":"Cy","born":"2000-01-01T00:00:00Z","wealth":"10000000000000000000"},"sum":{"age":"70","score":4,"wealth":"10000000000000000005"},"avg":{"age":35,"score":2,"wealth":5e+18}}}`},
		{"filters",
			`{ a: Note_aggregate(filter: {rank: {ge: 2}}) { count sum { rank } } b: Note_aggregate(filter: {owner: {name: {eq: "Ann"}}}) { count } }`,
			`{"a":{"count":2,"sum":{"rank":"5"}},"b":{"count":2}}`},
		{"an interface, and a concrete parent with and without its children",
			`{ Owned_aggregate { count } t: Owned_aggregate(filter: {title: {startsWith: "t"}}) { count max { title } } Animal_aggregate { count } own: Animal_aggregate(include_children: false) { count } }`,
			`{"Owned_aggregate":{"count":5},"t":{"count":2,"max":{"title":"task two"}},"Animal_aggregate":{"count":2},"own":{"count":1}}`},
		{"nothing to aggregate",
			`{ Note_aggregate(filter: {title: {eq: "none"}}) { count min { rank } sum { rank } avg { rank } } }`,
			`{"Note_aggregate":{"count":0,"min":{"rank":null},"sum":{"rank":null},"avg":{"rank":null}}}`},
		{"aliases, __typename and fragments",
			`{ n: Note_aggregate { __typename c: count ...lo } } fragment lo on Note_Aggregate { lo: min { __typename r: rank } hi: max { rank } }`,
			`{"n":{"__typename":"Note_Aggregate","c":3,"lo":{"__typename":"Note_AggregateMinMax","r":1},"hi":{"rank":3}}}`},
	} {
		res := st.query(t, c.query, nil).mustOK(t)
		if string(res.Data) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, res.Data, c.want)
		}
	}
	// An aggregate is one statement, like a query without references.
	ctx, count := postgres.CountStatements(context.Background())
	st.do(ctx, t, nil, `{ Owned_aggregate(filter: {title: {startsWith: "t"}}) { count min { title } } }`, nil).mustOK(t)
	if n := count(); n != 1 {
		t.Errorf("an aggregate sent %d statements, want 1", n)
	}
	res := st.query(t, `{ Note_aggregate(filter: {title: {regex: "("}}) { count } }`, nil)
	if len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Message, "regex") || res.Errors[0].Path[0] != "Note_aggregate" || string(res.Data) != "null" {
		t.Errorf("a bad filter: %s", res.raw)
	}
	// Its error nulls data (the field is non-null): the fields after it
	// are not run, each of which could take a statement up to
	// statement_timeout.
	ctx, count = postgres.CountStatements(context.Background())
	res = st.do(ctx, t, nil, `{ a: Note_aggregate(filter: {title: {regex: "("}}) { count } b: Note { _id } c: Note_aggregate { count } d: Note { _id } }`, nil)
	if len(res.Errors) != 1 || res.Errors[0].Path[0] != "a" || string(res.Data) != "null" {
		t.Errorf("a bad filter before other fields: %s", res.raw)
	}
	if n := count(); n > 1 {
		t.Errorf("a query whose first field failed sent %d statements, want at most that field's", n)
	}
}

// TestAggregateTextIsBoundedByReads: the min and max of String and ID
// fields are whole stored values, a row of as many as twice the fields
// aggregated, so they count towards the bound on what a request's reads
// hold (4 × graphql_max_response_bytes) as documents do: past it, the
// aggregate is refused with that bound's error and Postgres sends none
// of them (postgres.TestAggregateTextIsBoundedByReads shows what is
// sent). They were read whole, unbounded, here 16 MB for a request
// whose reads may hold 400 KB, and refused only once written.
func TestAggregateTextIsBoundedByReads(t *testing.T) {
	t.Parallel()
	st := newStackWith(t, "type T { a: String b: String c: String d: String } type S { a: ID }",
		graph.Options{Limits: graph.Limits{MaxResponseBytes: 100_000}}, nil)
	const size = 2 << 20
	for _, f := range []string{"a", "b", "c", "d"} {
		st.insert(t, fmt.Sprintf(`[{"@type":"T","@id":"T/%s1",%q:%q},{"@type":"T","@id":"T/%s2",%q:%q}]`,
			f, f, strings.Repeat("a", size), f, f, strings.Repeat("b", size)))
	}
	st.insert(t, `[{"@type":"S","@id":"S/1","a":"one"},{"@type":"S","@id":"S/2","a":"two"}]`)
	small := st.query(t, `{ S_aggregate { count min { a } max { a } } }`, nil).mustOK(t)
	if want := `{"S_aggregate":{"count":2,"min":{"a":"one"},"max":{"a":"two"}}}`; string(small.Data) != want {
		t.Fatalf("small values: got %s, want %s", small.Data, want)
	}
	var ext struct {
		Extensions struct{ Position string } `json:"extensions"`
	}
	if err := json.Unmarshal([]byte(small.raw), &ext); err != nil || ext.Extensions.Position == "" {
		t.Fatalf("no position: %s", small.raw)
	}
	const want = "larger than 400000 bytes, 4 times what its response may hold"
	for _, q := range []string{
		`{ T { a b c d } }`, // the documents, as before
		`{ T_aggregate { count min { a b c d } max { a b c d } } }`,
		`{ T_aggregate { max { a } } }`, // one value past the bound
		`{ T_aggregate(asOf: "` + ext.Extensions.Position + `") { min { a b c d } } }`,
		`{ S_aggregate { min { a } } T_aggregate { count max { a b c d } } }`, // after another field's read
	} {
		res := st.query(t, q, nil)
		if len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Message, want) || res.Errors[0].Extensions["limit"] != "graphql_max_response_bytes" || string(res.Data) != "null" {
			t.Errorf("%s: %.500s", q, res.raw)
		}
	}
	// What fits is answered: the count, and values of other fields.
	res := st.query(t, `{ T_aggregate(filter: {a: {eq: "x"}}) { count min { a b } } }`, nil).mustOK(t)
	if want := `{"T_aggregate":{"count":0,"min":{"a":null,"b":null}}}`; string(res.Data) != want {
		t.Errorf("no values: got %s, want %s", res.Data, want)
	}
}

// TestBacklinksAndAggregatesHonourProtection: a reader that cannot read
// a field can neither aggregate it nor follow a backlink through it, as
// it cannot select it; the admin can.
func TestBacklinksAndAggregatesHonourProtection(t *testing.T) {
	t.Parallel()
	st := newStack(t, linkSDL)
	st.insert(t, linkDocs)
	ctx := context.Background()
	reader, err := st.eng.CreateUser(ctx, st.admin, "admin", "reader", "password1")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.eng.SetRole(ctx, st.admin, "admin", "db", "reader", sluice.RoleRead); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		query string
		want  string // the reader's error, or its data when it reads
	}{
		{`{ User(id: "User/b") { _secretOwner_of_Note { _id } } }`, `Cannot query field "_secretOwner_of_Note" on type "User".`},
		{`{ User_aggregate { min { ssn } } }`, `Cannot query field "ssn" on type "User_AggregateMinMax".`},
		{`{ User_aggregate(filter: {ssn: {eq: "1"}}) { count } }`, `Field "ssn" is not defined by type "User_Filter".`},
		{`{ User(id: "User/b") { _owner_of_Note(filter: {secretOwner: {name: {eq: "Bob"}}}) { _id } } }`, `Field "secretOwner" is not defined by type "Note_Filter".`},
		{`{ User(id: "User/b") { _owner_of_Note { _id } } User_aggregate { count max { age } } }`, `{"User":[{"_owner_of_Note":[{"_id":"Note/n3"}]}],"User_aggregate":{"count":3,"max":{"age":40}}}`},
	} {
		res := st.do(ctx, t, reader, c.query, nil)
		got := string(res.Data)
		if len(res.Errors) > 0 {
			got = res.Errors[0].Message
		}
		if !strings.HasPrefix(got, c.want) {
			t.Errorf("%s as a reader:\n got %s\nwant %s", c.query, res.raw, c.want)
		}
	}
	res := st.query(t, `{ User(id: "User/b") { _secretOwner_of_Note { _id } } User_aggregate { min { ssn } } }`, nil).mustOK(t)
	if want := `{"User":[{"_secretOwner_of_Note":[{"_id":"Note/n1"}]}],"User_aggregate":{"min":{"ssn":"1"}}}`; string(res.Data) != want {
		t.Errorf("as the admin: %s", res.Data)
	}
}

// TestBacklinkOffsetNearTheLargestInteger: an offset up to the largest
// bigint answers an empty page, for a backlink of several classes (an
// interface: its page's end, limit + offset, once wrapped negative and
// Postgres refused it as an internal error) as for one of one class and
// a root query, written in the query or given in a variable, for a
// reader.
func TestBacklinkOffsetNearTheLargestInteger(t *testing.T) {
	t.Parallel()
	st := newStack(t, linkSDL)
	st.insert(t, linkDocs)
	ctx := context.Background()
	reader, err := st.eng.CreateUser(ctx, st.admin, "admin", "reader", "password1")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.eng.SetRole(ctx, st.admin, "admin", "db", "reader", sluice.RoleRead); err != nil {
		t.Fatal(err)
	}
	const big = "9223372036854775806"
	for _, c := range []struct{ query, want string }{
		{`{ User(id: "User/a") { _owner_of_Owned(limit: 2, offset: ` + big + `) { _id } } }`, `{"User":[{"_owner_of_Owned":[]}]}`},
		{`{ User(id: "User/a") { _owner_of_Owned(limit: 2, offset: 9223372036854775807, orderBy: {title: DESC}) { _id } } }`, `{"User":[{"_owner_of_Owned":[]}]}`},
		{`query($o: Int) { User(id: "User/a") { _owner_of_Owned(limit: 2, offset: $o) { _id } } }`, `{"User":[{"_owner_of_Owned":[]}]}`},
		{`{ User(id: "User/a") { _watchers_of_Note(limit: 2, offset: ` + big + `) { _id } } }`, `{"User":[{"_watchers_of_Note":[]}]}`},
		{`{ Owned(limit: 2, offset: ` + big + `) { _id } }`, `{"Owned":[]}`},
		// An offset within the lists still pages them.
		{`{ User(id: "User/a") { _owner_of_Owned(limit: 2, offset: 2, orderBy: {title: ASC}) { _id } } }`, `{"User":[{"_owner_of_Owned":[{"_id":"Task/t1"}]}]}`},
	} {
		res := st.do(ctx, t, reader, c.query, map[string]any{"o": json.Number(big)})
		if len(res.Errors) > 0 || string(res.Data) != c.want {
			t.Errorf("%s:\n got %s\nwant data %s", c.query, res.raw, c.want)
		}
	}
}

// ownerSDL has a reference to an interface, whose backlink each of its
// types has: a backlink selected on the interface and in a fragment on
// one of its types is collected with a selection set for each type.
const ownerSDL = `
interface Owner { name: String }
type A implements Owner { x: Int }
type B implements Owner { y: Int }
type Note { owner: Owner title: String rank: Int }
`

const ownerDocs = `[
{"@type":"A","@id":"a","name":"Ann"},
{"@type":"B","@id":"b","name":"Bob"},
{"@type":"Note","@id":"n1","owner":"A/a","title":"t1","rank":1},
{"@type":"Note","@id":"n2","owner":"B/b","title":"t2","rank":2}
]`

// TestBacklinkSelectedInFragmentOnAType: the reviewer's queries. A
// backlink selected on an interface and again in a fragment on one of
// its types (with a reference below) answers what the fragment selects
// on that type's documents, whichever comes first in the query and
// whichever document is walked first; it answered rank and owner null
// when a document of another type came first (its backlinks were read
// and walked with the first document's selection). The backlink reads
// stay one statement per backlink field node and level: the one the
// fields are collected under on each type (fragment first: the
// fragment's on B, the plain one on A).
func TestBacklinkSelectedInFragmentOnAType(t *testing.T) {
	t.Parallel()
	st := newStack(t, ownerSDL)
	st.insert(t, ownerDocs)
	const onB = `... on B { _owner_of_Note { rank owner { name } } }`
	for _, c := range []struct {
		name, query, want string
		statements        int64
	}{
		{"plain first",
			`{ Owner { _id _owner_of_Note { title } ` + onB + ` } }`,
			`{"Owner":[{"_id":"A/a","_owner_of_Note":[{"title":"t1"}]},{"_id":"B/b","_owner_of_Note":[{"title":"t2","rank":2,"owner":{"name":"Bob"}}]}]}`,
			3},
		{"fragment first",
			`{ Owner { _id ` + onB + ` _owner_of_Note { title } } }`,
			`{"Owner":[{"_id":"A/a","_owner_of_Note":[{"title":"t1"}]},{"_id":"B/b","_owner_of_Note":[{"rank":2,"owner":{"name":"Bob"},"title":"t2"}]}]}`,
			4},
		{"fragment only",
			`{ Owner { _id ` + onB + ` } }`,
			`{"Owner":[{"_id":"A/a"},{"_id":"B/b","_owner_of_Note":[{"rank":2,"owner":{"name":"Bob"}}]}]}`,
			3},
		{"on the concrete type",
			`{ B { _id _owner_of_Note { title } ` + onB + ` } }`,
			`{"B":[{"_id":"B/b","_owner_of_Note":[{"title":"t2","rank":2,"owner":{"name":"Bob"}}]}]}`,
			3},
		{"the document walked first has the fragment",
			`{ Owner { _id _owner_of_Note { title } ... on A { _owner_of_Note { rank owner { name } } } } }`,
			`{"Owner":[{"_id":"A/a","_owner_of_Note":[{"title":"t1","rank":1,"owner":{"name":"Ann"}}]},{"_id":"B/b","_owner_of_Note":[{"title":"t2"}]}]}`,
			3},
		{"below a reference",
			`{ Note { title owner { _id _owner_of_Note { title } ` + onB + ` } } }`,
			`{"Note":[{"title":"t1","owner":{"_id":"A/a","_owner_of_Note":[{"title":"t1"}]}},{"title":"t2","owner":{"_id":"B/b","_owner_of_Note":[{"title":"t2","rank":2,"owner":{"name":"Bob"}}]}}]}`,
			3},
		// The fragment's field node is also selected two levels below,
		// with a narrower selection: its read there does not replace
		// the one of the first level.
		{"one field node on two levels",
			`{ Owner { _id ...titles ... on B { _owner_of_Note { rank } } _owner_of_Note { owner { ...titles } } } } fragment titles on Owner { _owner_of_Note { title } }`,
			`{"Owner":[{"_id":"A/a","_owner_of_Note":[{"title":"t1","owner":{"_owner_of_Note":[{"title":"t1"}]}}]},{"_id":"B/b","_owner_of_Note":[{"title":"t2","rank":2,"owner":{"_owner_of_Note":[{"title":"t2"}]}}]}]}`,
			4},
		{"in a change set",
			`{ _ChangeSet { Note_added { title owner { _id _owner_of_Note { title } ` + onB + ` } } } }`,
			`{"_ChangeSet":{"Note_added":[{"title":"t1","owner":{"_id":"A/a","_owner_of_Note":[{"title":"t1"}]}},{"title":"t2","owner":{"_id":"B/b","_owner_of_Note":[{"title":"t2","rank":2,"owner":{"name":"Bob"}}]}}]}}`,
			2},
	} {
		ctx, count := postgres.CountStatements(context.Background())
		res := st.do(ctx, t, nil, c.query, nil).mustOK(t)
		if string(res.Data) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, res.Data, c.want)
		}
		if n := count(); n != c.statements {
			t.Errorf("%s: %d statements, want %d", c.name, n, c.statements)
		}
	}
}

// TestBacklinkSelectedInFragmentOnATypeStreamed: the same selection in a
// subscription's events (the documents of one commit are walked
// together, an A's first) and in a live query's results.
func TestBacklinkSelectedInFragmentOnATypeStreamed(t *testing.T) {
	t.Parallel()
	d := daemontest.Start(t)
	d.CreateDatabase(t, "owners", ownerSDL)
	insertDocs(t, d, "owners", ownerDocs)
	path := "/api/graphql/admin/owners"
	const owner = `owner { _id _owner_of_Note { title } ... on B { _owner_of_Note { rank owner { name } } } }`
	open := func(query string) *daemontest.Stream {
		body, _ := json.Marshal(map[string]any{"query": query})
		s := d.MustOpenStream(t, daemontest.Admin(), daemontest.StreamRequest{
			Method: http.MethodPost, Path: path, Header: []string{"Accept", "text/event-stream"}, Body: string(body)})
		if f := s.Next(); f.String() != ": connected" {
			t.Fatalf("%s: first frame %q", query, f)
		}
		return s
	}
	// data returns the data of a stream's next event.
	data := func(s *daemontest.Stream) string {
		var ev struct{ Data json.RawMessage }
		f := s.Event().Field("data")
		if err := json.Unmarshal([]byte(f), &ev); err != nil {
			t.Fatalf("decode %q: %v", f, err)
		}
		return string(ev.Data)
	}
	const (
		ann = `{"_id":"A/a","_owner_of_Note":[{"title":"t1"}]}`
		bob = `{"_id":"B/b","_owner_of_Note":[{"title":"t2","rank":2,"owner":{"name":"Bob"}}]}`
		// After n3 (on A/a) and n4 (on B/b).
		ann2 = `{"_id":"A/a","_owner_of_Note":[{"title":"t1"},{"title":"t3"}]}`
		bob2 = `{"_id":"B/b","_owner_of_Note":[{"title":"t2","rank":2,"owner":{"name":"Bob"}},{"title":"t4","rank":4,"owner":{"name":"Bob"}}]}`
	)
	events := open(`subscription { Note_added { title ` + owner + ` } }`)
	live := open(`subscription { Note(orderBy: {_id: ASC}) { title ` + owner + ` } }`)
	if got, want := data(live), `{"Note":[{"title":"t1","owner":`+ann+`},{"title":"t2","owner":`+bob+`}]}`; got != want {
		t.Errorf("live query:\n got %s\nwant %s", got, want)
	}
	insertDocs(t, d, "owners", `[
{"@type":"Note","@id":"n3","owner":"A/a","title":"t3","rank":3},
{"@type":"Note","@id":"n4","owner":"B/b","title":"t4","rank":4}
]`)
	for _, want := range []string{
		`{"Note_added":{"title":"t3","owner":` + ann2 + `}}`,
		`{"Note_added":{"title":"t4","owner":` + bob2 + `}}`,
	} {
		if got := data(events); got != want {
			t.Errorf("event:\n got %s\nwant %s", got, want)
		}
	}
	if got, want := data(live), `{"Note":[{"title":"t1","owner":`+ann2+`},{"title":"t2","owner":`+bob2+`},{"title":"t3","owner":`+ann2+`},{"title":"t4","owner":`+bob2+`}]}`; got != want {
		t.Errorf("live query after the insert:\n got %s\nwant %s", got, want)
	}
}

// TestBacklinkToAnInterfaceOfOneClass: a backlink to an interface that one
// document class implements reads that class's own fields too: its rows'
// JSON was built by the interface, whose fields alone were projected, and
// text and rank answered null.
func TestBacklinkToAnInterfaceOfOneClass(t *testing.T) {
	t.Parallel()
	st := newStack(t, `type User { name: String! }
interface Owned { owner: User title: String }
type Note implements Owned { text: String rank: Int }`)
	st.insert(t, `[{"@type":"User","@id":"a","name":"Ann"},{"@type":"Note","@id":"n1","owner":"User/a","title":"T","text":"hello","rank":3}]`)
	res := st.query(t, `{ User { _owner_of_Owned { _id title ... on Note { text rank } } } }`, nil).mustOK(t)
	if want := `{"User":[{"_owner_of_Owned":[{"_id":"Note/n1","title":"T","text":"hello","rank":3}]}]}`; string(res.Data) != want {
		t.Errorf("got %s, want %s", res.Data, want)
	}
}

// TestBacklinkArgumentsOfStreamsRefused: a subscription or live query
// selecting a backlink whose arguments are refused is refused before it
// starts, the error located at the backlink field, as its root field's
// arguments are; a query answers it at the field's path (TestBacklinks).
func TestBacklinkArgumentsOfStreamsRefused(t *testing.T) {
	t.Parallel()
	d := daemontest.Start(t)
	d.CreateDatabase(t, "links", linkSDL)
	for _, q := range []string{
		`subscription { User_added { _id _owner_of_Note(limit: -1) { _id } } }`,
		`subscription { _ChangeSet { User_added { _id _owner_of_Note(limit: -1) { _id } } } }`,
		`subscription { User { _id _owner_of_Note(limit: -1) { _id } } }`,
		`query @live { User { _id _owner_of_Note(limit: -1) { _id } } }`,
	} {
		body, _ := json.Marshal(map[string]any{"query": q})
		s := d.MustOpenStream(t, daemontest.Admin(), daemontest.StreamRequest{
			Method: http.MethodPost, Path: "/api/graphql/admin/links", Header: []string{"Accept", "text/event-stream"}, Body: string(body)})
		frames := s.Ended()
		col := strings.Index(q, "_owner_of_Note") + 1
		want := `{"errors":[{"message":"_owner_of_Note: Note: limit must be a whole number of at least 0, got -1","locations":[{"line":1,"column":` +
			fmt.Sprint(col) + `}],"extensions":{"code":"BAD_USER_INPUT"}}]}`
		if len(frames) != 2 || frames[0].Field("data") != want || frames[1][0] != "event: complete" {
			t.Errorf("%s: %q\nwant the error %s and complete", q, frames, want)
		}
	}
}
