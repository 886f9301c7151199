package graph_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/graph"
	"github.com/sluice-dev/sluice/internal/postgres"
)

// aliased returns the selection "{ a0: field … a(n-1): field }".
func aliased(n int, field string) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		fmt.Fprintf(&b, " a%d: %s", i, field)
	}
	b.WriteString(" }")
	return b.String()
}

// TestStatementLimitRefusesBeforeRunning: the reviewer's queries, a
// hundred aliased aggregates with a regex filter (100 statements, 58 s on
// 20,000 documents) and a hundred aliased sorted, filtered backlink pages
// (200 statements, 84 s), are refused with graphql_max_statements before
// any statement runs, for a reader too; a query within the default bound
// answers.
func TestStatementLimitRefusesBeforeRunning(t *testing.T) {
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
	aggregate := `User_aggregate(filter: {name: {regex: "^(A|B)"}}) { count max { name } }`
	backlinks := `User(id: "User/a") { _owner_of_Owned(filter: {title: {regex: "a"}}, orderBy: {title: DESC}, limit: 1) { _id } }`
	for _, c := range []struct {
		name, query string
		count       int
	}{
		{"a hundred aggregates", aliased(100, aggregate), 100},
		{"a hundred backlink pages", aliased(100, backlinks), 200},
		{"one over the default", aliased(26, aggregate), 26},
		{"through a fragment spread twice", `{ ...A b: User { ...B ...B } } fragment A on Query { x: User_aggregate { count } ` + aliased(24, aggregate)[1:] + ` fragment B on User { _owner_of_Owned { owner { name } } }`, 1 + 24 + 1 + 2*1 + 1},
	} {
		for _, u := range []*sluice.User{nil, reader} {
			cctx, count := postgres.CountStatements(ctx)
			res := st.do(cctx, t, u, c.query, nil)
			want := fmt.Sprintf(`{"errors":[{"message":"the query may run %d SQL statements (one for each class query, aggregate and backlink field, and one for each level of references below a class query), more than 25; split it into several requests (limit graphql_max_statements)","extensions":{"code":"GRAPHQL_VALIDATION_FAILED","limit":"graphql_max_statements"}}]}`, c.count)
			if res.raw != want {
				t.Errorf("%s:\n got %s\nwant %s", c.name, res.raw, want)
			}
			if n := count(); n != 0 {
				t.Errorf("%s: %d statements ran before the refusal, want 0", c.name, n)
			}
		}
	}
	// Within the bound: 25 aggregates answer, with one statement each.
	cctx, count := postgres.CountStatements(ctx)
	res := st.do(cctx, t, reader, aliased(25, aggregate), nil).mustOK(t)
	if !strings.Contains(string(res.Data), `"a24":{"count":2,"max":{"name":"Bob"}}`) {
		t.Errorf("25 aggregates: %s", res.Data)
	}
	if n := count(); n != 25 {
		t.Errorf("25 aggregates ran %d statements, want 25", n)
	}
}

// TestStatementCount checks the count of each kind of field against a
// bound of 1 (the error names it), and that a query within a bound of
// its count runs at most that many statements.
func TestStatementCount(t *testing.T) {
	t.Parallel()
	one := newStackWith(t, linkSDL, graph.Options{Limits: graph.Limits{MaxStatements: 1}}, nil)
	for _, c := range []struct {
		name, query string
		count       int // 1 or fewer: answered
	}{
		{"introspection and __typename", `{ __typename __type(name: "User") { name } }`, 0},
		{"a class query", `{ User { name } }`, 1},
		{"an aggregate", `{ User_aggregate { count min { name } } }`, 1},
		{"two root fields", `{ User { name } Note_aggregate { count } }`, 2},
		{"a change set", `{ _ChangeSet { _CommitMetadata { __typename } } }`, 1},
		// References of one level are read together, one statement a
		// level; subdocuments are read with their document.
		{"two references of one level", `{ Note { owner { name } watchers { name } } }`, 2},
		{"two levels of references", `{ Comment { on { owner { name } } } }`, 3},
		{"a backlink", `{ User { _owner_of_Owned { title } } }`, 2},
		{"two backlinks and a reference below one", `{ User { _owner_of_Owned { owner { name } } _watchers_of_Note { title } } }`, 4},
		{"a backlink and a reference on one level", `{ Note { owner { name } _on_of_Comment { _id } } }`, 3},
		{"a change set's per-class fields", `{ _ChangeSet { Note_added { owner { name } } User_added { name } } }`, 2},
		{"a subscription", `subscription { User { _owner_of_Owned { title } } }`, 2},
	} {
		res := one.query(t, c.query, nil)
		if c.count <= 1 {
			if strings.Contains(res.raw, "graphql_max_statements") {
				t.Errorf("%s: %s", c.name, res.raw)
			}
			continue
		}
		want := fmt.Sprintf("the query may run %d SQL statements", c.count)
		if len(res.Errors) != 1 || !strings.HasPrefix(res.Errors[0].Message, want) {
			t.Errorf("%s: got %s, want %q", c.name, res.raw, want)
		}
	}
	// The count is a bound of what runs.
	st := newStackWith(t, linkSDL, graph.Options{Limits: graph.Limits{MaxStatements: 4}}, nil)
	st.insert(t, linkDocs)
	for _, q := range []string{
		`{ Note { owner { name } watchers { name } } }`,
		`{ Comment { on { owner { name } } } }`,
		`{ User { _owner_of_Owned { owner { name } } _watchers_of_Note { title } } }`,
	} {
		ctx, count := postgres.CountStatements(context.Background())
		st.do(ctx, t, nil, q, nil).mustOK(t)
		if n := count(); n > 4 {
			t.Errorf("%s ran %d statements, more than its count", q, n)
		}
	}
}
