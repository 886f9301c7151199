package daemon_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/pgtest"
)

// TestOtherRolesObjectsNeverStandInForSluices: a role granted CREATE on a
// database's Postgres schema (GRANT ALL ON SCHEMA grants it) made a table
// named as the index an @index would get; the schema change adding the
// index then succeeded without building it (CREATE INDEX IF NOT EXISTS
// kept the table in its place). The change is now refused naming the
// table; once a superuser dropped it the change builds the index, and
// Sluice revokes CREATE on the schema from the role, which keeps USAGE.
// Sluice's role is no superuser here: where it is one, its event trigger
// refuses other roles' DDL in its schemas.
func TestOtherRolesObjectsNeverStandInForSluices(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDatabase(t)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	owner := "sluice_owner_" + hex.EncodeToString(b)
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	sqlExec(t, dbURL, "CREATE ROLE "+owner+" LOGIN NOSUPERUSER NOREPLICATION NOCREATEROLE NOCREATEDB")
	sqlExec(t, dbURL, "ALTER DATABASE "+pgx.Identifier{cfg.Database}.Sanitize()+" OWNER TO "+owner)
	d := dt.Start(t, dt.WithDatabaseURL(withUser(t, dbURL, owner)))
	d.CreateDatabase(t, "standin", "type Note { title: String }")
	w := newSQLWriterVia(t, d, "standin", dbURL)
	schema, role := pgx.Identifier{w.schema}.Sanitize(), pgx.Identifier{w.role}.Sanitize()

	// The name Sluice gives the index of Note(title): class and fields,
	// and the FNV-1a hash of them.
	h := fnv.New32a()
	h.Write([]byte("Note\x00title"))
	index := fmt.Sprintf("Note_title_%08x", h.Sum32())
	standIn := pgx.Identifier{w.schema, index}.Sanitize()
	// In one transaction, so that Sluice's look every 10 seconds cannot
	// revoke the grant before the role uses it.
	sqlExec(t, dbURL, "GRANT ALL ON SCHEMA "+schema+" TO "+role,
		"SET ROLE "+role, "CREATE TABLE "+standIn+" (x int)", "RESET ROLE")

	indexed := `type Note @index(fields: ["title"]) { title: String }`
	r := d.Do(t, dt.Admin(), "PUT", "/api/schema/admin/standin", indexed)
	if r.Status != 409 || !strings.Contains(string(r.Body), index) {
		t.Fatalf("the schema change over a table of another role named as its index: %d %s, want 409 naming %s", r.Status, r.Body, index)
	}

	sqlExec(t, dbURL, "DROP TABLE "+standIn)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/standin", indexed)
	var kind, create string
	if err := queryString(dbURL, fmt.Sprintf("SELECT relkind::text FROM pg_class WHERE oid = to_regclass(%s)", quoteLit(standIn)), &kind); err != nil || kind != "i" {
		t.Errorf("%s after the change: relkind %q (%v), want an index", index, kind, err)
	}
	if err := queryString(dbURL, fmt.Sprintf("SELECT has_schema_privilege(%s, %s, 'CREATE')::text || ' ' || has_schema_privilege(%s, %s, 'USAGE')::text",
		quoteLit(w.role), quoteLit(w.schema), quoteLit(w.role), quoteLit(w.schema)), &create); err != nil || create != "false true" {
		t.Errorf("the role's CREATE and USAGE on the schema after the change: %q (%v), want false true", create, err)
	}
}

// quoteLit returns s as a SQL string literal.
func quoteLit(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
