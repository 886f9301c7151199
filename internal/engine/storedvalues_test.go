package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/pgtest"
)

// TestSchemaChangeRefusesDocumentPastValueBound: a schema change that
// reads a field of a stored document holding more than 1,000,000 values
// (schema.MaxValues; written in SQL past migration 28's check, as
// Sluice's own role with the triggers skipped) is refused, forced or
// not, and so is its dry run, with a Conflict naming the document, its
// class and the field, rather than decoding the value (a value each) or
// dropping it: nothing of the change is applied, and once the document is
// deleted the same change applies. Before, it was decoded whole and the
// change applied.
func TestSchemaChangeRefusesDocumentPastValueBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.NewDatabase(t)
	e, _, admin := newEngineOn(t, dbURL)
	d, err := e.CreateDatabase(ctx, admin, engine.NewDatabase{Org: engine.AdminOrg, Name: "many", Schema: "enum E { A B }\ntype W { es: [E!] n: Int }"})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tbl := pgx.Identifier{engine.PostgresSchema(d), "W"}.Sanitize()
	sqlRows := func(sql string) {
		t.Helper()
		if _, err := conn.Exec(ctx, "SET sluice.writer = 'on'"); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	sqlRows("INSERT INTO " + tbl + ` (_id, _commit_uid, es) VALUES ('W/ok', 1, '["A"]'),
		('W/old', 1, (SELECT jsonb_agg('A'::text) FROM generate_series(1, 1000000)))`)

	// Dropping B reads es, where no document holds it.
	next := "enum E { A }\ntype W { es: [E!] n: Int }"
	want := "cannot change the schema: document W/old of class W holds 1000001 values in field es, more than 1000000, the most a document may"
	_, err = e.PreviewSchema(ctx, admin, engine.AdminOrg, "many", next, 0)
	var se *sluice.Error
	if !errors.As(err, &se) || se.Code != sluice.CodeConflict || !strings.Contains(se.Message, want) {
		t.Errorf("dry run: %.300v, want a Conflict: %s", err, want)
	}
	_, err = e.PutSchema(ctx, admin, engine.AdminOrg, "many", next, engine.PutSchemaOptions{Force: true})
	if !errors.As(err, &se) || se.Code != sluice.CodeConflict || !strings.Contains(se.Message, want) {
		t.Fatalf("schema change: %.300v, want a Conflict: %s", err, want)
	}
	text, err := e.Schema(ctx, admin, engine.AdminOrg, "many")
	if err != nil {
		t.Fatal(err)
	}
	if text.Version != d.SchemaVersion {
		t.Fatalf("schema version %d after the refused change, want %d", text.Version, d.SchemaVersion)
	}

	sqlRows("DELETE FROM " + tbl + " WHERE _id = 'W/old'")
	if _, err := e.PutSchema(ctx, admin, engine.AdminOrg, "many", next, engine.PutSchemaOptions{Force: true}); err != nil {
		t.Fatalf("the change without W/old: %v", err)
	}
}
