package postgres_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/sluice-dev/sluice/internal/filter"
	"github.com/sluice-dev/sluice/internal/postgres"
)

// TestQueryDocumentsEach: queries that differ in their values (as a
// cohort of live queries' do) are read by one statement, each getting
// exactly what QueryDocuments gives it, in its order; queries of
// different shapes are read one statement each; a query that reads no
// table gets nothing.
func TestQueryDocumentsEach(t *testing.T) {
	t.Parallel()
	db := open(t)
	d, s := indexedDatabase(t, db, "each", 40)
	where := func(class string, in map[string]any) filter.Expr {
		e, err := filter.Parse(s, class, in)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	person := func(age int, desc bool, limit int64, fields []string) postgres.DocQuery {
		return postgres.DocQuery{Class: "Person", Classes: []string{"Person"}, Filter: where("Person", map[string]any{"age": map[string]any{"eq": age}}),
			Order: []postgres.OrderKey{{Field: "name", Desc: desc}}, Limit: limit, Fields: fields}
	}
	animals := func(prefix string) postgres.DocQuery {
		return postgres.DocQuery{Class: "Animal", Classes: []string{"Animal", "Dog"}, Filter: where("Animal", map[string]any{"name": map[string]any{"startsWith": prefix}}),
			Order: []postgres.OrderKey{{Field: "name", Desc: true}}, Limit: 4}
	}
	fields := []string{"name", "age", "_CommitMetadata"}
	// More queries than one statement joins: two statements.
	var many []postgres.DocQuery
	for i := range 300 {
		many = append(many, person(i%5, i%2 == 0, int64(i%7), fields))
	}
	for _, c := range []struct {
		name       string
		qs         []postgres.DocQuery
		statements int64
	}{
		{"projections", []postgres.DocQuery{person(1, true, 3, fields), person(2, true, 3, fields), person(3, true, 0, fields), person(0, true, 100, fields)}, 1},
		{"whole documents of two tables", []postgres.DocQuery{animals("dog 0000"), animals("animal 0001"), animals("nothing")}, 1},
		{"with ids", []postgres.DocQuery{
			{Class: "Person", Classes: []string{"Person"}, IDs: []string{"Person/p00003", "Person/p00001"}, Limit: -1, Fields: []string{"email"}},
			{Class: "Person", Classes: []string{"Person"}, IDs: []string{"Person/p00010"}, Limit: -1, Fields: []string{"email"}},
		}, 1},
		{"shapes differ", []postgres.DocQuery{person(1, false, 2, fields), person(1, false, 2, []string{"name"}), animals("dog"), person(2, true, 3, fields), animals("animal")}, 3},
		{"more than one statement joins", many, 2},
		{"one reads no table", []postgres.DocQuery{{Class: "Person"}, person(2, false, 5, fields)}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, statements := postgres.CountStatements(context.Background())
			got, err := db.QueryDocumentsEach(ctx, d, s, c.qs)
			if err != nil {
				t.Fatal(err)
			}
			if n := statements(); n != c.statements {
				t.Errorf("%d statements, want %d", n, c.statements)
			}
			for i, q := range c.qs {
				want, err := db.QueryDocuments(context.Background(), d, s, q)
				if err != nil {
					t.Fatal(err)
				}
				if len(want) == 0 && len(got[i]) == 0 {
					continue
				}
				if !reflect.DeepEqual(got[i], want) {
					t.Errorf("query %d: got %d documents %v, want %d %v", i, len(got[i]), ids(got[i]), len(want), ids(want))
				}
			}
		})
	}
}

func ids(docs []postgres.QueryDoc) []string {
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = d.Doc.ID
	}
	return out
}
