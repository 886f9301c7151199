package daemon_test

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
	"github.com/sluice-dev/sluice/internal/pgtest"
)

// TestGrantsToRolesOfAnyNameAreRevoked: Sluice revokes TRIGGER and
// REFERENCES on its tables, and CREATE on its schemas, from a role whose
// name needs quoting as an identifier ("App-Writer": upper case, a hyphen,
// a space, a quote), as from any other, when it changes a schema and in
// its sweep every little while. The REVOKE named such a role quoted twice
// ("""App-Writer"""), a role that does not exist: the sweep took the error
// for the role's dropping meanwhile and went on, so the role kept both
// privileges for good (a trigger it made again after each sweep kept the
// table's API writes refused), and every schema change of the database
// failed with 500 while a grant of ALL to it was in force.
func TestGrantsToRolesOfAnyNameAreRevoked(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "quoted", "type Note { text: String }")
	d.CreateDatabase(t, "swept", "type Note { text: String }")
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := `App-Writer "` + hex.EncodeToString(b) + `"`
	role := pgx.Identifier{name}.Sanitize()
	quoted, swept := newSQLWriter(t, d, "quoted"), newSQLWriter(t, d, "swept")
	sqlExec(t, d.DatabaseURL, "CREATE ROLE "+role+" LOGIN")
	for _, w := range []*sqlWriter{quoted, swept} {
		schema := pgx.Identifier{w.schema}.Sanitize()
		sqlExec(t, d.DatabaseURL, "GRANT ALL ON SCHEMA "+schema+" TO "+role,
			"GRANT ALL ON ALL TABLES IN SCHEMA "+schema+" TO "+role,
			"ALTER DEFAULT PRIVILEGES IN SCHEMA "+schema+" GRANT ALL ON TABLES TO "+role)
	}
	// privileges returns what the role may do to w's table of class, and
	// to its schema: INSERT, TRIGGER, REFERENCES, CREATE.
	privileges := func(w *sqlWriter, class string) string {
		t.Helper()
		var s string
		tbl := quote(w.table(class))
		if err := queryString(d.DatabaseURL, `SELECT has_table_privilege(`+quote(name)+`, `+tbl+`, 'INSERT')::text
			|| ',' || has_table_privilege(`+quote(name)+`, `+tbl+`, 'TRIGGER')::text
			|| ',' || has_table_privilege(`+quote(name)+`, `+tbl+`, 'REFERENCES')::text
			|| ',' || has_schema_privilege(`+quote(name)+`, `+quote(w.schema)+`, 'CREATE')::text`, &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	const revoked = "true,false,false,false"

	// The sweep revokes them on every database's tables.
	eventually.True(t, 30*time.Second, "the sweep revokes TRIGGER, REFERENCES and CREATE from "+name, func() bool {
		return privileges(swept, "Note") == revoked && privileges(quoted, "Note") == revoked
	})
	// A schema change revokes them on the table of a class it adds, made
	// under the default privileges granting ALL.
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/quoted", "type Note { text: String }\ntype Extra { n: Int }")
	for _, class := range []string{"Note", "Extra"} {
		if got := privileges(quoted, class); got != revoked {
			t.Errorf("after a schema change, the role's INSERT, TRIGGER, REFERENCES on %s and CREATE on its schema: %s, want %s", class, got, revoked)
		}
	}
}

// TestSQLForeignKeyRefusesDeletesWithConflict: a table of another
// Postgres role holding a foreign key to a class table (made while the
// role was granted REFERENCES, before Sluice revoked it: the key stays)
// refuses the deletion of the documents its rows reference. The API
// answers that with 409 naming the document, the table and the key, REST
// and GraphQL alike, and deletes the others; it answered 500 "internal
// error".
func TestSQLForeignKeyRefusesDeletesWithConflict(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "fk", "type Note { text: String }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/fk",
		`[{"@type":"Note","@id":"Note/a","text":"a"},{"@type":"Note","@id":"Note/b","text":"b"},{"@type":"Note","@id":"Note/c","text":"c"}]`)
	w := newSQLWriter(t, d, "fk")
	role := pgx.Identifier{w.role}.Sanitize()
	sqlExec(t, d.DatabaseURL, "CREATE SCHEMA AUTHORIZATION "+role)
	// In one transaction with the grant: Sluice revokes REFERENCES every
	// little while.
	sqlExec(t, d.DatabaseURL, "GRANT REFERENCES ON "+w.table("Note")+" TO "+role, "SET LOCAL ROLE "+role,
		"CREATE TABLE "+role+".keep (note text CONSTRAINT keeps_note REFERENCES "+w.table("Note")+" (_id))",
		"INSERT INTO "+role+".keep VALUES ('Note/a')")
	before := logLength(t, d, "fk")
	want := `document Note/a cannot be deleted: table ` + pgx.Identifier{w.role, "keep"}.Sanitize() + ` of another Postgres role references it by foreign key "keeps_note"`
	r := d.Do(t, dt.Admin(), "DELETE", "/api/document/admin/fk?id=Note/a", nil)
	if r.Status != 409 || !strings.HasPrefix(errorMessage(r.Body), want) {
		t.Errorf("REST DELETE of a document another role's foreign key references: %d %s, want 409 saying %q", r.Status, r.Body, want)
	}
	r = d.Do(t, dt.Admin(), "POST", "/api/graphql/admin/fk", `{"query":"mutation { _deleteDocuments(ids: [\"Note/a\"]) }"}`, "Content-Type", "application/json")
	if !strings.Contains(string(r.Body), `"code":"CONFLICT"`) || !strings.HasPrefix(errorMessage(r.Body), want) {
		t.Errorf("GraphQL _deleteDocuments of it: %d %s, want CONFLICT saying %q", r.Status, r.Body, want)
	}
	if n := logLength(t, d, "fk"); n != before {
		t.Errorf("the refused deletions made %d commits", n-before)
	}
	// The others are deleted, and that one once the key lets it.
	d.MustDo(t, 200, dt.Admin(), "DELETE", "/api/document/admin/fk?id=Note/b", nil)
	d.MustDo(t, 404, dt.Admin(), "GET", "/api/document/admin/fk?id=Note/b", nil)
	sqlExec(t, d.DatabaseURL, "DELETE FROM "+role+".keep")
	d.MustDo(t, 200, dt.Admin(), "DELETE", "/api/document/admin/fk?id=Note/a", nil)
}

// TestRoleMakingTriggersLosesTheGrantFirst: a role granted ALL on a class
// table (TRIGGER among it) makes 600 triggers on it, and goes on making
// one more every second, each in a transaction holding the table for a
// second. Sluice (not a superuser: no event trigger refuses them) revokes
// TRIGGER in its first sweep (every 10 s), then drops them all, and the table's API
// writes, refused meanwhile, go through. It dropped them first, one
// transaction each, each waiting for the table behind the role's next
// trigger, and revoked last: 3,000 triggers kept the database's writes
// refused for more than 8 minutes, the role making 27,500 more meanwhile.
func TestRoleMakingTriggersLosesTheGrantFirst(t *testing.T) {
	t.Parallel()
	superURL, ownerURL := ordinaryOwner(t)
	d := dt.Start(t, dt.WithDatabaseURL(ownerURL))
	d.CreateDatabase(t, "trig", "type Note { text: String }")
	w := newSQLWriterVia(t, d, "trig", superURL)
	role := pgx.Identifier{w.role}.Sanitize()
	tbl := w.table("Note")
	sqlExec(t, superURL, "CREATE SCHEMA AUTHORIZATION "+role)
	sqlExec(t, superURL, "SET LOCAL ROLE "+role, "CREATE FUNCTION "+role+".f() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$")
	triggers := func(name string, n int) string {
		return fmt.Sprintf(`DO $$ BEGIN FOR i IN 1..%d LOOP EXECUTE format('CREATE TRIGGER %%I AFTER INSERT ON %s FOR EACH ROW EXECUTE FUNCTION %s.f()', %s || i); END LOOP; END $$`,
			n, tbl, role, quote(name))
	}
	// The grant and the first triggers in one transaction: Sluice revokes
	// TRIGGER every little while.
	sqlExec(t, superURL, "GRANT ALL ON "+tbl+" TO "+role, "SET LOCAL ROLE "+role, triggers("first_", 600))
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for k := 0; ; k++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if err := sqlTx(w.url, triggers(fmt.Sprintf("more_%d_", k), 1), "SELECT pg_sleep(1)"); err != nil {
				done <- err
				return
			}
		}
	}()
	defer func() {
		close(stop)
		<-done
	}()
	eventually.True(t, 20*time.Second, "Sluice revokes TRIGGER from the role making triggers, in its first sweep", func() bool {
		var s string
		err := queryString(superURL, "SELECT has_table_privilege("+quote(w.role)+", "+quote(tbl)+", 'TRIGGER')::text", &s)
		return err == nil && s == "false"
	})
	eventually.True(t, time.Minute, "the table's API writes go through", func() bool {
		return d.Do(t, dt.Admin(), "POST", "/api/document/admin/trig", `{"@type":"Note","@id":"n1","text":"one"}`).Status == 200
	})
}

// ordinaryOwner returns the URL of a superuser's connection to a new
// Postgres database, and of one as a new role owning it, no superuser, as
// Sluice connects to a managed Postgres.
func ordinaryOwner(t *testing.T) (superURL, ownerURL string) {
	t.Helper()
	superURL = pgtest.NewDatabase(t)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	owner := "sluice_" + hex.EncodeToString(b)
	var dbname string
	if err := queryString(superURL, "SELECT current_database()", &dbname); err != nil {
		t.Fatal(err)
	}
	sqlExec(t, superURL, "CREATE ROLE "+owner+" LOGIN", "ALTER DATABASE "+pgx.Identifier{dbname}.Sanitize()+" OWNER TO "+owner)
	return superURL, withUser(t, superURL, owner)
}

// TestForeignTriggersErrorIsBounded: a write to a table holding triggers
// Sluice did not make is refused naming the first 10 of them (by name)
// and how many there are, however many: the error, which the API's
// refused writes log, named every one (300 triggers of 60-byte names, 17
// KB a refused statement).
func TestForeignTriggersErrorIsBounded(t *testing.T) {
	t.Parallel()
	superURL, ownerURL := ordinaryOwner(t)
	d := dt.Start(t, dt.WithDatabaseURL(ownerURL))
	d.CreateDatabase(t, "trig", "type Note { text: String }")
	w := newSQLWriterVia(t, d, "trig", superURL)
	role := pgx.Identifier{w.role}.Sanitize()
	tbl := w.table("Note")
	sqlExec(t, superURL, "CREATE SCHEMA AUTHORIZATION "+role)
	sqlExec(t, superURL, "SET LOCAL ROLE "+role, "CREATE FUNCTION "+role+".f() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$")
	// In one transaction: Sluice drops the triggers within seconds.
	err := sqlTx(superURL, "GRANT ALL ON "+tbl+" TO "+role, "SET LOCAL ROLE "+role,
		fmt.Sprintf(`DO $$ BEGIN FOR i IN 1..300 LOOP EXECUTE format('CREATE TRIGGER %%I AFTER INSERT ON %s FOR EACH ROW EXECUTE FUNCTION %s.f()', 'a_trigger_of_a_long_name_to_fill_sixty_bytes_of_it_' || lpad(i::text, 3, '0')); END LOOP; END $$`, tbl, role),
		"INSERT INTO "+tbl+" (text) VALUES ('x')")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "SLFT1" {
		t.Fatalf("a write beside 300 triggers of another role: %v, want SLFT1", err)
	}
	want := "has 300 triggers Sluice did not make (a_trigger_of_a_long_name_to_fill_sixty_bytes_of_it_001, "
	if !strings.Contains(pe.Message, want) || strings.Contains(pe.Message, "_011") || len(pe.Message) > 1000 {
		t.Errorf("the refusal (%d bytes): %.300s…, want it to name the first 10 of 300 (%q)", len(pe.Message), pe.Message, want)
	}
}

// TestSQLForeignKeyActionsNeverRunAsSluice: a role granted REFERENCES
// (GRANT ALL) makes, in a schema of its own, tables with foreign keys to a
// class table that cascade a deletion (ON DELETE CASCADE, SET NULL), and
// triggers on them. Postgres fires those triggers after the statement that
// deleted, as its role: an API deletion ran the role's code as Sluice's
// (a superuser here), which could read Sluice's users' password hashes
// and make the role a superuser. Sluice now refuses to delete the
// documents of a class whose table such a key references (409 naming
// it), and nothing of the role's runs.
func TestSQLForeignKeyActionsNeverRunAsSluice(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "fk", "type Note { text: String }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/fk", `[{"@type":"Note","@id":"Note/a","text":"a"},{"@type":"Note","@id":"Note/b","text":"b"}]`)
	w := newSQLWriter(t, d, "fk")
	role := pgx.Identifier{w.role}.Sanitize()
	sqlExec(t, d.DatabaseURL, "CREATE SCHEMA AUTHORIZATION "+role)
	sqlExec(t, d.DatabaseURL, "GRANT REFERENCES ON "+w.table("Note")+" TO "+role, "SET LOCAL ROLE "+role,
		"CREATE TABLE "+role+".loot (who text)",
		"CREATE FUNCTION "+role+".grab() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO "+role+".loot VALUES (current_user); RETURN NULL; END $$",
		"CREATE TABLE "+role+".keep_c (note text CONSTRAINT keeps_c REFERENCES "+w.table("Note")+" (_id) ON DELETE CASCADE)",
		"CREATE TABLE "+role+".keep_n (note text CONSTRAINT keeps_n REFERENCES "+w.table("Note")+" (_id) ON DELETE SET NULL)",
		"CREATE TRIGGER grab AFTER UPDATE OR DELETE ON "+role+".keep_c FOR EACH ROW EXECUTE FUNCTION "+role+".grab()",
		"CREATE TRIGGER grab AFTER UPDATE OR DELETE ON "+role+".keep_n FOR EACH ROW EXECUTE FUNCTION "+role+".grab()",
		"INSERT INTO "+role+".keep_c VALUES ('Note/a')", "INSERT INTO "+role+".keep_n VALUES ('Note/a')")
	want := "documents of class Note cannot be deleted: table " + pgx.Identifier{w.role, "keep_c"}.Sanitize() + ` of another Postgres role references its table by foreign key "keeps_c"`
	for _, id := range []string{"Note/a", "Note/b"} {
		r := d.Do(t, dt.Admin(), "DELETE", "/api/document/admin/fk?id="+id, nil)
		if r.Status != 409 || !strings.HasPrefix(errorMessage(r.Body), want) {
			t.Errorf("DELETE of %s: %d %s, want 409 saying %q", id, r.Status, r.Body, want)
		}
	}
	var loot string
	if err := queryString(d.DatabaseURL, "SELECT coalesce(string_agg(who, ','), '') FROM "+role+".loot", &loot); err != nil {
		t.Fatal(err)
	}
	if loot != "" {
		t.Errorf("the role's trigger ran as %s", loot)
	}
	// Once the keys are gone (dropped as Sluice: its event trigger
	// refuses the drop of their triggers on its table to anyone else),
	// deletions go through.
	sqlExec(t, d.DatabaseURL, "SET LOCAL sluice.writer = on", "DROP TABLE "+role+".keep_c, "+role+".keep_n")
	d.MustDo(t, 200, dt.Admin(), "DELETE", "/api/document/admin/fk?id=Note/a", nil)
}

// TestSQLDeferredForeignKeyRefusesDeletesFirst: a foreign key of another
// Postgres role's table that refuses only at COMMIT (DEFERRABLE
// INITIALLY DEFERRED) let an API deletion's DELETE through and refused
// its COMMIT: a 500, and in group commit every write of the batch with
// it failed. Sluice refuses the class's deletions before it deletes,
// with 409 naming the key, and other writes go on.
func TestSQLDeferredForeignKeyRefusesDeletesFirst(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "fk", "type Note { text: String }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/fk", `[{"@type":"Note","@id":"Note/a","text":"a"},{"@type":"Note","@id":"Note/b","text":"b"}]`)
	w := newSQLWriter(t, d, "fk")
	role := pgx.Identifier{w.role}.Sanitize()
	sqlExec(t, d.DatabaseURL, "CREATE SCHEMA AUTHORIZATION "+role)
	sqlExec(t, d.DatabaseURL, "GRANT REFERENCES ON "+w.table("Note")+" TO "+role, "SET LOCAL ROLE "+role,
		"CREATE TABLE "+role+".keep (note text CONSTRAINT keeps_late REFERENCES "+w.table("Note")+" (_id) DEFERRABLE INITIALLY DEFERRED)",
		"INSERT INTO "+role+".keep VALUES ('Note/a')")
	before := logLength(t, d, "fk")
	want := "documents of class Note cannot be deleted: table " + pgx.Identifier{w.role, "keep"}.Sanitize() + ` of another Postgres role references its table by foreign key "keeps_late", checked only at commit`
	for _, id := range []string{"Note/a", "Note/b"} {
		r := d.Do(t, dt.Admin(), "DELETE", "/api/document/admin/fk?id="+id, nil)
		if r.Status != 409 || !strings.HasPrefix(errorMessage(r.Body), want) {
			t.Errorf("DELETE of %s: %d %s, want 409 saying %q", id, r.Status, r.Body, want)
		}
	}
	if n := logLength(t, d, "fk"); n != before {
		t.Errorf("the refused deletions made %d commits", n-before)
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/fk", `{"@type":"Note","@id":"Note/c","text":"c"}`)
}
