package graph_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/postgres"
)

func lastCommit(t testing.TB, st *stack) *sluice.Commit {
	t.Helper()
	c, err := st.eng.CommitChanges(context.Background(), mustDB(t, st), nil, sluice.RoleAdmin, 0, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestTypedAndGenericMutationsSameCommit writes the same documents through
// _insertDocuments and through Person_insert, in two databases, and
// compares the commits.
func TestTypedAndGenericMutationsSameCommit(t *testing.T) {
	t.Parallel()
	generic, typed := newStack(t, testSDL), newStack(t, testSDL)
	doc := `{"@type":"Person","@id":"Person/zed","name":"Zed","age":7,"score":0.5,"born":"2001-02-03T04:05:06Z","wealth":"12345678901234567890","active":true,"home":{"@type":"Address","city":"Rome"},"addresses":[{"@type":"Address","street":"Via"}],"favorite":"BLUE","tags":["x"],"friends":["Person/zed"],"extra":{"k":[1,2]}}`
	generic.query(t, `mutation($j: JSON!) { _insertDocuments(json: $j, author: "me", message: "hi") }`, map[string]any{"j": doc}).mustOK(t)
	res := typed.query(t, `mutation { Person_insert(author: "me", message: "hi", documents: [{_id: "Person/zed", name: "Zed", age: 7, score: 0.5, born: "2001-02-03T04:05:06Z", wealth: "12345678901234567890", active: true, home: {city: "Rome"}, addresses: [{street: "Via"}], favorite: BLUE, tags: ["x"], friends: ["Person/zed"], extra: {k: [1, 2]}}]) }`, nil).mustOK(t)
	if got, want := string(res.Data), `{"Person_insert":["Person/zed"]}`; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	a, b := lastCommit(t, generic), lastCommit(t, typed)
	if a.Author != b.Author || a.Message != b.Message || a.Author != "me" || a.Message != "hi" {
		t.Fatalf("commit metadata differs: %+v vs %+v", a, b)
	}
	if len(a.Changes) != 1 || len(b.Changes) != 1 {
		t.Fatalf("changes: %d and %d, want 1", len(a.Changes), len(b.Changes))
	}
	ca, cb := a.Changes[0], b.Changes[0]
	if ca.DocID != cb.DocID || ca.Op != cb.Op || string(ca.After) != string(cb.After) {
		t.Fatalf("changes differ:\n%s %v %s\n%s %v %s", ca.DocID, ca.Op, ca.After, cb.DocID, cb.Op, cb.After)
	}
}

func TestMutationsOneCommitAndRollback(t *testing.T) {
	t.Parallel()
	st := newStack(t, testSDL)
	st.insert(t, people)
	before := lastCommit(t, st).Seq

	// Two mutation fields are one commit.
	res := st.query(t, `mutation {
	  a: _insertDocuments(json: "[{\"@type\":\"Person\",\"@id\":\"x1\",\"name\":\"X1\"}]", message: "m")
	  skipped: _deleteDocuments(ids: ["Person/bob"]) @skip(if: true)
	  c: _deleteDocuments(ids: ["Person/dave"])
	}`, nil)
	res.mustOK(t)
	if got, want := string(res.Data), `{"a":["Person/x1"],"c":["Person/dave"]}`; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	c := lastCommit(t, st)
	if c.Seq != before+1 || len(c.Changes) != 2 || c.Message != "m" {
		t.Fatalf("want one commit with 2 changes, got seq %d (before %d) with %d changes", c.Seq, before, len(c.Changes))
	}

	// An error in the second field rolls back the first.
	res = st.query(t, `mutation {
	  a: Person_insert(documents: [{_id: "x2", name: "X2"}])
	  b: _insertDocuments(json: {name: "no type"})
	}`, nil)
	if string(res.Data) != "null" || len(res.Errors) != 1 || res.Errors[0].Extensions["code"] != "BAD_USER_INPUT" {
		t.Fatalf("want data null and one BAD_USER_INPUT error, got %s", res.raw)
	}
	if got := lastCommit(t, st).Seq; got != before+1 {
		t.Fatalf("a failed request committed: seq %d", got)
	}
	if ids := st.query(t, `{ Person(id: "Person/x2") { _id } }`, nil).mustOK(t).ids(t, "Person"); len(ids) != 0 {
		t.Fatalf("rolled back document is visible: %v", ids)
	}
	// A duplicate id is a conflict; nothing is written.
	res = st.query(t, `mutation { Person_insert(documents: [{_id: "x3", name: "X3"}, {_id: "alice", name: "A"}]) }`, nil)
	if len(res.Errors) != 1 || res.Errors[0].Extensions["code"] != "CONFLICT" {
		t.Fatalf("want CONFLICT, got %s", res.raw)
	}
	if got := lastCommit(t, st).Seq; got != before+1 {
		t.Fatalf("a failed request committed: seq %d", got)
	}
	// Different authors in one request are refused.
	res = st.query(t, `mutation { a: _deleteDocuments(ids: ["Person/x1"], author: "p") b: _deleteDocuments(ids: ["Person/eve"], author: "q") }`, nil)
	if len(res.Errors) != 1 || res.Errors[0].Extensions["code"] != "BAD_USER_INPUT" {
		t.Fatalf("want BAD_USER_INPUT, got %s", res.raw)
	}
}

// TestMutationErrorNamesItsField checks, for every kind of mutation field,
// that the error of a request with several fields has the path of the
// field (its alias) that failed, including errors Postgres reports only
// when the statements are sent (a duplicate id), and that nothing is
// committed.
func TestMutationErrorNamesItsField(t *testing.T) {
	t.Parallel()
	st := newStack(t, testSDL)
	st.insert(t, people)
	before := lastCommit(t, st).Seq
	for _, c := range []struct {
		name, query, path, code string
	}{
		{"second delete", `mutation { a: _deleteDocuments(ids: ["Person/alice"]) b: _deleteDocuments(ids: ["Person/nobody"]) }`, "b", "NOT_FOUND"},
		{"second generic insert, a duplicate", `mutation { a: _insertDocuments(json: "{\"@type\":\"Person\",\"@id\":\"n1\",\"name\":\"N\"}") b: _insertDocuments(json: "{\"@type\":\"Person\",\"@id\":\"bob\",\"name\":\"B\"}") }`, "b", "CONFLICT"},
		{"first typed insert, a duplicate, before a delete", `mutation { a: Person_insert(documents: [{_id: "alice", name: "A"}]) b: _deleteDocuments(ids: ["Person/bob"]) }`, "a", "CONFLICT"},
		{"first typed insert, a duplicate, before an insert", `mutation { a: Person_insert(documents: [{_id: "alice", name: "A"}]) b: Person_insert(documents: [{_id: "n2", name: "N"}]) }`, "a", "CONFLICT"},
		{"second typed replace", `mutation { a: Person_insert(documents: [{_id: "n3", name: "N"}]) b: Person_replace(documents: [{_id: "nobody", name: "X"}]) }`, "b", "NOT_FOUND"},
		{"second generic replace", `mutation { a: _replaceDocuments(json: "{\"@type\":\"Person\",\"@id\":\"alice\",\"name\":\"A2\"}") b: _replaceDocuments(json: "{\"@type\":\"Person\",\"@id\":\"nobody\",\"name\":\"X\"}") }`, "b", "NOT_FOUND"},
		{"last typed insert, a duplicate", `mutation { a: _deleteDocuments(ids: ["Person/carol"]) b: Person_insert(documents: [{_id: "dave", name: "D"}]) }`, "b", "CONFLICT"},
		{"invalid document after __typename", `mutation { a: _deleteDocuments(ids: ["Person/eve"]) __typename b: _insertDocuments(json: {name: "no type"}) }`, "b", "BAD_USER_INPUT"},
	} {
		res := st.query(t, c.query, nil)
		if len(res.Errors) != 1 || string(res.Data) != "null" {
			t.Errorf("%s: want one error and data null, got %s", c.name, res.raw)
			continue
		}
		e := res.Errors[0]
		if len(e.Path) != 1 || e.Path[0] != c.path || e.Extensions["code"] != c.code {
			t.Errorf("%s: want %s at path [%s], got %s", c.name, c.code, c.path, res.raw)
		}
	}
	if got := lastCommit(t, st).Seq; got != before {
		t.Fatalf("a failed request committed: seq %d, was %d", got, before)
	}
}

// TestStatementCountIndependentOfRows runs a nested query over 10 and over
// 1,000 documents and counts SQL statements: one per level of references,
// and one per level of backlinks.
func TestStatementCountIndependentOfRows(t *testing.T) {
	t.Parallel()
	counts := map[int]int64{}
	for _, n := range []int{10, 1000} {
		st := newStack(t, testSDL)
		// Roots P reference F documents, which reference G documents, so
		// each level of the query needs documents of its own.
		var docs []string
		for i := range n {
			for _, lv := range []struct{ prefix, next string }{{"p", "f"}, {"f", "g"}, {"g", ""}} {
				friends := "[]"
				if lv.next != "" {
					friends = fmt.Sprintf(`["Person/%s%04d","Person/%s%04d"]`, lv.next, i, lv.next, (i+7)%n)
				}
				docs = append(docs, fmt.Sprintf(`{"@type":"Person","@id":"%s%04d","name":"%s%d","age":%d,"friends":%s,"home":{"city":"C%d"}}`,
					lv.prefix, i, strings.ToUpper(lv.prefix), i, i%90, friends, i%5))
			}
		}
		st.insert(t, "["+strings.Join(docs, ",")+"]")
		ctx, count := postgres.CountStatements(context.Background())
		res := st.do(ctx, t, nil, `{ Person(filter: {name: {startsWith: "P"}}) { _id name _CommitMetadata { _id } home { city } friends { name friends { name home { city } } } } }`, nil).mustOK(t)
		var data struct{ Person []json.RawMessage }
		if err := json.Unmarshal(res.Data, &data); err != nil || len(data.Person) != n {
			t.Fatalf("n=%d: got %d documents (%v)", n, len(data.Person), err)
		}
		counts[n] = count()

		// Backlinks: one statement per backlink selection and level.
		// Each G is the friend of two Fs, each F of two Ps.
		ctx, count = postgres.CountStatements(context.Background())
		res = st.do(ctx, t, nil, `{ Person(filter: {name: {startsWith: "G"}}) { _id _friends_of_Person { name _friends_of_Person(orderBy: {name: DESC}) { name friends { name } } } } }`, nil).mustOK(t)
		var linked struct {
			Person []struct {
				Links []struct {
					Links []json.RawMessage `json:"_friends_of_Person"`
				} `json:"_friends_of_Person"`
			}
		}
		if err := json.Unmarshal(res.Data, &linked); err != nil || len(linked.Person) != n || len(linked.Person[0].Links) != 2 || len(linked.Person[0].Links[0].Links) != 2 {
			t.Fatalf("n=%d: backlinks %.300s (%v)", n, res.Data, err)
		}
		counts[-n] = count()
	}
	if counts[10] != counts[1000] || counts[10] != 3 {
		t.Fatalf("statements: %d for 10 documents, %d for 1000; want 3 for both (one per level)", counts[10], counts[1000])
	}
	if counts[-10] != counts[-1000] || counts[-10] != 4 {
		t.Fatalf("statements with backlinks: %d for 10 documents, %d for 1000; want 4 for both (the roots, two levels of backlinks, then the references)", counts[-10], counts[-1000])
	}
}

// TestFieldProtection checks that readers without the role can neither
// select nor filter on a protected field.
func TestFieldProtection(t *testing.T) {
	t.Parallel()
	st := newStack(t, testSDL)
	st.insert(t, people)
	ctx := context.Background()
	st.insert(t, `[{"@type":"Person","@id":"sec","name":"S","ssn":"1","salary":5}]`)
	reader, err := st.eng.CreateUser(ctx, st.admin, "admin", "reader", "password1")
	if err != nil {
		t.Fatal(err)
	}
	writer, err := st.eng.CreateUser(ctx, st.admin, "admin", "writer", "password2")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.eng.SetRole(ctx, st.admin, "admin", "db", "reader", sluice.RoleRead); err != nil {
		t.Fatal(err)
	}
	if err := st.eng.SetRole(ctx, st.admin, "admin", "db", "writer", sluice.RoleWrite); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		u     *sluice.User
		query string
		ok    bool
	}{
		{reader, `{ Person(id: "Person/sec") { name } }`, true},
		{reader, `{ Person(id: "Person/sec") { ssn } }`, false},
		{reader, `{ Person(filter: {ssn: {eq: "1"}}) { name } }`, false},
		{reader, `{ Person(orderBy: {salary: ASC}) { name } }`, false},
		{reader, `{ _ChangeSet { Person_added { salary } } }`, false},
		{writer, `{ Person(id: "Person/sec") { salary } }`, true},
		{writer, `{ Person(id: "Person/sec") { ssn } }`, false},
		{st.admin, `{ Person(id: "Person/sec") { ssn salary } }`, true},
	} {
		res := st.do(ctx, t, c.u, c.query, nil)
		if ok := len(res.Errors) == 0; ok != c.ok {
			t.Errorf("%s as %s: got %s", c.query, c.u.Name, res.raw)
		}
	}
	res := st.do(ctx, t, reader, `mutation { _deleteDocuments(ids: ["Person/sec"]) }`, nil)
	if len(res.Errors) != 1 || res.Errors[0].Extensions["code"] != "FORBIDDEN" {
		t.Errorf("reader mutation: got %s, want FORBIDDEN", res.raw)
	}
}

// TestSingleValueIsAListOfOneInMutations: each mutation given a single
// document or id, literally or as a variable, writes or deletes exactly
// that document, in a commit of one change. They were refused as holding
// no documents ("the request holds no documents", "no documents to
// patch", "no document ids to delete"). A list field of a document given
// a single value holds a list of one (it was refused by the schema as not
// a list).
func TestSingleValueIsAListOfOneInMutations(t *testing.T) {
	t.Parallel()
	st := newStack(t, testSDL)
	st.insert(t, people)
	one := func(id string) map[string]any {
		return map[string]any{"_id": id, "name": "V", "tags": "t", "addresses": map[string]any{"city": "C"}, "friends": "Person/bob"}
	}
	for _, c := range []struct {
		name, query string
		vars        map[string]any
		id          string // the one document changed
	}{
		{"insert literal", `mutation { Person_insert(documents: {_id: "lit1", name: "L", tags: "t", addresses: {city: "C"}, friends: "Person/bob"}) }`, nil, "Person/lit1"},
		{"insert variable", `mutation($d: [Person_Input!]!) { Person_insert(documents: $d) }`, map[string]any{"d": one("var1")}, "Person/var1"},
		{"replace literal", `mutation { Person_replace(documents: {_id: "eve", name: "E", tags: "t", addresses: {city: "C"}, friends: "Person/bob"}) }`, nil, "Person/eve"},
		{"replace variable", `mutation($d: [Person_Input!]!) { Person_replace(documents: $d, create: true) }`, map[string]any{"d": one("var2")}, "Person/var2"},
		{"update literal", `mutation { Person_update(documents: {_id: "alice", name: "Z", tags: "u"}) }`, nil, "Person/alice"},
		{"update variable", `mutation($d: [Person_Patch!]!) { Person_update(documents: $d) }`, map[string]any{"d": map[string]any{"_id": "bob", "addresses": map[string]any{"city": "D"}}}, "Person/bob"},
		{"delete literal", `mutation { _deleteDocuments(ids: "Person/carol") }`, nil, "Person/carol"},
		{"delete variable", `mutation($i: [ID!]!) { _deleteDocuments(ids: $i) }`, map[string]any{"i": "Person/dave"}, "Person/dave"},
	} {
		before := lastCommit(t, st).Seq
		res := st.query(t, c.query, c.vars)
		if len(res.Errors) > 0 {
			t.Errorf("%s: %s", c.name, res.raw)
			continue
		}
		cm := lastCommit(t, st)
		if cm.Seq != before+1 || len(cm.Changes) != 1 || cm.Changes[0].DocID != c.id {
			var ids []string
			for _, ch := range cm.Changes {
				ids = append(ids, ch.DocID)
			}
			t.Errorf("%s: commit %d (was %d) changes %v, want %s alone", c.name, cm.Seq, before, ids, c.id)
		}
	}
	res := st.query(t, `{ Person { _id name tags addresses { city } friends { _id } } }`, nil).mustOK(t)
	want := `{"Person":[` +
		`{"_id":"Person/alice","name":"Z","tags":["u"],"addresses":[{"city":"Oslo"},{"city":"Bergen"}],"friends":[{"_id":"Person/bob"}]},` +
		`{"_id":"Person/bob","name":"Bob","tags":["b"],"addresses":[{"city":"D"}],"friends":[{"_id":"Person/alice"}]},` +
		`{"_id":"Person/eve","name":"E","tags":["t"],"addresses":[{"city":"C"}],"friends":[{"_id":"Person/bob"}]},` +
		`{"_id":"Person/lit1","name":"L","tags":["t"],"addresses":[{"city":"C"}],"friends":[{"_id":"Person/bob"}]},` +
		`{"_id":"Person/var1","name":"V","tags":["t"],"addresses":[{"city":"C"}],"friends":[{"_id":"Person/bob"}]},` +
		`{"_id":"Person/var2","name":"V","tags":["t"],"addresses":[{"city":"C"}],"friends":[{"_id":"Person/bob"}]}]}`
	if got := string(res.Data); got != want {
		t.Fatalf("documents:\ngot  %s\nwant %s", got, want)
	}
}
