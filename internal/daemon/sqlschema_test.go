package daemon_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// TestSQLDependentsRefuseForcedSchemaChange: objects of another role that
// depend on a database's tables (a view over two columns, a temporary
// table of a class's row type) make a forced schema change that would
// drop those columns and that class answer 409 naming them, not 500, and
// are left as they are; once they are gone the change is made. Its dry
// run names them among the reasons the change is refused (it named none,
// and the console offered a change that then answered 409).
func TestSQLDependentsRefuseForcedSchemaChange(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "deps", "type Person { name: String age: Int pet: Pet }\ntype Pet { name: String }")
	w := newSQLWriter(t, d, "deps")
	app := pgx.Identifier{w.role + "_app"}.Sanitize()
	sqlExec(t, d.DatabaseURL, "CREATE SCHEMA "+app+" AUTHORIZATION "+pgx.Identifier{w.role}.Sanitize())
	sqlExec(t, w.url, "CREATE VIEW "+app+".v AS SELECT name, age FROM "+w.table("Person"))
	// A temporary table lasts as long as its session: this one's.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hold, err := pgx.Connect(ctx, w.url)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close(context.WithoutCancel(ctx))
	if _, err := hold.Exec(ctx, "CREATE TEMP TABLE hold (p "+w.table("Pet")+")"); err != nil {
		t.Fatal(err)
	}

	const next = "type Person { name: Int }" // name retyped; age, pet and Pet dropped
	// A dry run answers the refusal the change would answer, among the
	// reasons it is refused even with force: the console shows the dry
	// run before every change, and confirming it led to this 409.
	var preview struct {
		Refused []string `json:"refused"`
	}
	pr := d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/deps?dry_run=true", next)
	if err := json.Unmarshal(pr.Body, &preview); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(preview.Refused, "; "); !strings.Contains(got, "view "+w.role+"_app.v") || !strings.Contains(got, ".hold") {
		t.Fatalf("the dry run of the change refuses it for %q, want the view and the temporary table named (%s)", got, pr.Body)
	}
	r := d.Do(t, dt.Admin(), "PUT", "/api/schema/admin/deps?force=true", next)
	if body := string(r.Body); r.Status != 409 || !strings.Contains(body, "view "+w.role+"_app.v") || !strings.Contains(body, ".hold") {
		t.Fatalf("forced change under other roles' objects: %d %s, want 409 naming the view and the temporary table", r.Status, body)
	}
	// Nothing of theirs was dropped.
	sqlExec(t, w.url, "SELECT name, age FROM "+app+".v")
	if _, err := hold.Exec(ctx, "SELECT p FROM hold"); err != nil {
		t.Fatal(err)
	}

	sqlExec(t, w.url, "DROP VIEW "+app+".v")
	if _, err := hold.Exec(ctx, "DROP TABLE hold"); err != nil {
		t.Fatal(err)
	}
	pr = d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/deps?dry_run=true", next)
	if err := json.Unmarshal(pr.Body, &preview); err != nil || len(preview.Refused) != 0 {
		t.Fatalf("the dry run once they are gone: %s (%v)", pr.Body, err)
	}
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/deps?force=true", next)
}

// TestSQLDependentsRefuseDatabaseDeletion: objects of another role that
// depend on a database's tables (a view over one, a table of its own with
// a column of a class's row type) make DELETE /api/db answer 409 naming
// them, as a forced schema change does, where DROP SCHEMA … CASCADE
// dropped them with the database; the database and they are left as they
// are. Deleting the database's organization is refused the same way,
// naming the database. One made after the look up, while the deletion
// waits for a table, gets the same 409 from Postgres' refusal. Once they
// are gone both deletions are made.
func TestSQLDependentsRefuseDatabaseDeletion(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "kept", "type Person { name: String age: Int }\ntype Pet { name: String }")
	w := newSQLWriter(t, d, "kept")
	app := pgx.Identifier{w.role + "_app"}.Sanitize()
	sqlExec(t, d.DatabaseURL, "CREATE SCHEMA "+app+" AUTHORIZATION "+pgx.Identifier{w.role}.Sanitize())
	sqlExec(t, w.url,
		"CREATE VIEW "+app+".v AS SELECT name, age FROM "+w.table("Person"),
		"CREATE TABLE "+app+".keep (id int, p "+w.table("Pet")+")",
		"INSERT INTO "+app+".keep VALUES (1, NULL)")

	r := d.Do(t, dt.Admin(), "DELETE", "/api/db/admin/kept", nil)
	if body := string(r.Body); r.Status != 409 || !strings.Contains(body, "admin/kept") ||
		!strings.Contains(body, "view "+w.role+"_app.v") || !strings.Contains(body, "table "+w.role+"_app.keep (column p)") {
		t.Fatalf("deletion under other roles' objects: %d %s, want 409 naming the view and the table's column", r.Status, body)
	}
	// Nothing was dropped: the database, its tables, the role's objects.
	d.MustDo(t, 200, dt.Admin(), "GET", "/api/db/admin/kept", nil)
	sqlExec(t, w.url, "SELECT name, age FROM "+app+".v", "SELECT id, p FROM "+app+".keep", "SELECT name FROM "+w.table("Pet"))

	// An organization's deletion deletes its databases: refused alike.
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/organizations", `{"name":"acme"}`)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/db/acme/held", `{"schema":"type Note { text: String }"}`)
	var info struct {
		Schema string `json:"postgres_schema"`
	}
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", "/api/db/acme/held", nil).Body, &info); err != nil || info.Schema == "" {
		t.Fatalf("GET /api/db/acme/held names no postgres_schema (%v)", err)
	}
	held := pgx.Identifier{info.Schema}.Sanitize()
	role := pgx.Identifier{w.role}.Sanitize()
	sqlExec(t, d.DatabaseURL, "GRANT USAGE ON SCHEMA "+held+" TO "+role, "GRANT SELECT ON ALL TABLES IN SCHEMA "+held+" TO "+role)
	sqlExec(t, w.url, "CREATE VIEW "+app+".notes AS SELECT text FROM "+pgx.Identifier{info.Schema, "Note"}.Sanitize())
	r = d.Do(t, dt.Admin(), "DELETE", "/api/organizations/acme", nil)
	if body := string(r.Body); r.Status != 409 || !strings.Contains(body, "acme/held") || !strings.Contains(body, "view "+w.role+"_app.notes") {
		t.Fatalf("organization's deletion under other roles' objects: %d %s, want 409 naming the database and the view", r.Status, body)
	}
	d.MustDo(t, 200, dt.Admin(), "GET", "/api/db/acme/held", nil)
	sqlExec(t, w.url, "SELECT text FROM "+app+".notes")

	sqlExec(t, w.url, "DROP VIEW "+app+".v", "DROP TABLE "+app+".keep", "DROP VIEW "+app+".notes")
	// One made after the look up, while the deletion waits for a table
	// another transaction reads: Postgres refuses the DROP (2BP01), and
	// that is the same 409.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reader, err := pgx.Connect(ctx, w.url)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close(context.WithoutCancel(ctx))
	for _, stmt := range []string{"BEGIN", "SELECT 1 FROM " + w.table("Person") + " LIMIT 0"} {
		if _, err := reader.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	answered := make(chan dt.Response, 1)
	go func() { answered <- d.Do(t, dt.Admin(), "DELETE", "/api/db/admin/kept", nil) }()
	eventually.True(t, 30*time.Second, "the deletion waits to drop the tables", func() bool {
		var n string
		err := queryString(d.DatabaseURL, "SELECT count(*)::text FROM pg_stat_activity WHERE datname = current_database()"+
			" AND wait_event_type = 'Lock' AND query LIKE 'DROP TABLE "+w.schema+".%'", &n)
		return err == nil && n != "0"
	})
	sqlExec(t, w.url, "CREATE TABLE "+app+".late (p "+w.table("Pet")+")")
	if _, err := reader.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if r := <-answered; r.Status != 409 || !strings.Contains(string(r.Body), "admin/kept") || !strings.Contains(string(r.Body), w.role+"_app.late") {
		t.Fatalf("deletion under a table made after the look up: %d %s, want 409 naming it", r.Status, r.Body)
	}
	sqlExec(t, w.url, "SELECT p FROM "+app+".late", "DROP TABLE "+app+".late")
	d.MustDo(t, 200, dt.Admin(), "DELETE", "/api/db/admin/kept", nil)
	d.MustDo(t, 200, dt.Admin(), "DELETE", "/api/organizations/acme", nil)
	d.MustDo(t, 404, dt.Admin(), "GET", "/api/db/admin/kept", nil)
}
