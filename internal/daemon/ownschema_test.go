package daemon_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/daemon"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/pgtest"
)

// squatter makes a login role granted CREATE on url's database (it may
// create schemas there), and a schema loot of its own, whose table
// loot.who records each role other than its own that runs loot.grab(),
// a trigger function. It returns the role's name and a URL connecting as
// it.
func squatter(t *testing.T, url string) (name, asIt string) {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name = "squatter_" + hex.EncodeToString(b)
	var dbname string
	if err := queryString(url, "SELECT current_database()", &dbname); err != nil {
		t.Fatal(err)
	}
	sqlExec(t, url, "CREATE ROLE "+name+" LOGIN", "GRANT CREATE ON DATABASE "+pgx.Identifier{dbname}.Sanitize()+" TO "+name)
	asIt = withUser(t, url, name)
	sqlExec(t, asIt,
		"CREATE SCHEMA loot",
		"GRANT ALL ON SCHEMA loot TO PUBLIC",
		"CREATE TABLE loot.who (who text, super boolean)",
		"GRANT ALL ON loot.who TO PUBLIC",
		`CREATE FUNCTION loot.grab() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF current_user <> '`+name+`' THEN
				INSERT INTO loot.who SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user;
			END IF;
			RETURN NEW;
		END $$`)
	return name, asIt
}

// grabbed returns the roles other than the squatter's that ran its
// trigger function, with whether each is a superuser ("" for none).
func grabbed(t *testing.T, url string) string {
	t.Helper()
	var who string
	if err := queryString(url, "SELECT coalesce(string_agg(who || ' (superuser ' || super || ')', ', '), '') FROM loot.who", &who); err != nil {
		t.Fatal(err)
	}
	return who
}

// TestStartRefusesASchemaSluiceAnotherRoleMade: a role that may create
// schemas in Sluice's database makes schema sluice and the table
// sluice.locks, with a trigger of its own, before Sluice first starts.
// Sluice refuses to start, naming the schema, the table, the trigger and
// their owner, having run nothing of that role's (its INSERT into
// sluice.locks ran the trigger as Sluice's role, a superuser here, three
// times, and Sluice then served from a schema the other role owned).
// Once a superuser drops what the role made, Sluice starts and owns
// schema sluice.
func TestStartRefusesASchemaSluiceAnotherRoleMade(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	name, asIt := squatter(t, url)
	sqlExec(t, asIt,
		"CREATE SCHEMA sluice",
		"GRANT ALL ON SCHEMA sluice TO PUBLIC",
		"CREATE TABLE sluice.locks (name text PRIMARY KEY)",
		"GRANT ALL ON sluice.locks TO PUBLIC",
		"CREATE TRIGGER grab BEFORE INSERT ON sluice.locks FOR EACH ROW EXECUTE FUNCTION loot.grab()")

	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.DatabaseURL = url
	cfg.AdminPassword = dt.AdminPassword
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d := daemon.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), daemon.Options{BcryptCost: 4})
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var err error
	select {
	case err = <-done:
	case <-d.Started():
		cancel()
		<-done
		t.Fatalf("Sluice started on a schema sluice another role made; another role's trigger ran as: %s", grabbed(t, url))
	}
	if err == nil {
		t.Fatal("Run returned no error")
	}
	for _, want := range []string{
		"schema sluice (owned by " + name + ")",
		"table sluice.locks (owned by " + name + ")",
		"trigger grab on sluice.locks, which runs loot.grab() (its function owned by " + name + ")",
		"REVOKE CREATE ON DATABASE",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the start's error does not say %q: %v", want, err)
		}
	}
	if who := grabbed(t, url); who != "" {
		t.Errorf("another role's trigger ran as: %s", who)
	}
	var rows string
	if err := queryString(url, "SELECT count(*)::text FROM sluice.locks", &rows); err != nil || rows != "0" {
		t.Errorf("sluice.locks holds %s rows (%v), want none", rows, err)
	}

	// The remedy the error gives: a superuser drops what the role made.
	sqlExec(t, url, "DROP SCHEMA sluice CASCADE", "DROP SCHEMA loot CASCADE")
	dt.Start(t, dt.WithDatabaseURL(url))
	var owner, me string
	if err := queryString(url, "SELECT pg_get_userbyid(nspowner)::text FROM pg_namespace WHERE nspname = 'sluice'", &owner); err != nil {
		t.Fatal(err)
	}
	if err := queryString(url, "SELECT current_user::text", &me); err != nil {
		t.Fatal(err)
	}
	if owner != me {
		t.Errorf("schema sluice is owned by %s, want %s", owner, me)
	}
	// Nor does Sluice grant another role anything on the schema or its
	// tables (TRIGGER and REFERENCES among them: no other role can put a
	// trigger or a foreign key on them).
	var grants string
	if err := queryString(url, `SELECT coalesce(string_agg(what || ' to ' || grantee, ', '), '') FROM (
		SELECT 'schema ' || a.privilege_type AS what, pg_get_userbyid(a.grantee) AS grantee
			FROM pg_namespace n, aclexplode(n.nspacl) a WHERE n.nspname = 'sluice' AND a.grantee <> n.nspowner
		UNION ALL
		SELECT c.relname || ' ' || a.privilege_type, pg_get_userbyid(a.grantee)
			FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace, aclexplode(c.relacl) a
			WHERE n.nspname = 'sluice' AND a.grantee <> c.relowner) g`, &grants); err != nil {
		t.Fatal(err)
	}
	if grants != "" {
		t.Errorf("Sluice granted other roles: %s", grants)
	}
}

// TestNewDatabaseRefusesASchemaAnotherRoleMade: a role that may create
// schemas in Sluice's database makes the schema Sluice's next database
// would use (sluice_db_<id>). Making that database is refused, 503, and
// nothing of it is made in that schema; the retry takes the next id, and
// its own schema, owned by Sluice's role.
func TestNewDatabaseRefusesASchemaAnotherRoleMade(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	_, asIt := squatter(t, d.DatabaseURL)
	var next string
	if err := queryString(d.DatabaseURL, "SELECT (last_value + 1)::text FROM sluice.databases_id_seq", &next); err != nil {
		t.Fatal(err)
	}
	taken := "sluice_db_" + next
	sqlExec(t, asIt, "CREATE SCHEMA "+taken, "GRANT ALL ON SCHEMA "+taken+" TO PUBLIC")

	body, _ := json.Marshal(map[string]string{"schema": "type Note { text: String }"})
	r := d.Do(t, dt.Admin(), "POST", "/api/db/admin/notes", body)
	if r.Status != 503 || !strings.Contains(string(r.Body), "exists already, made by another Postgres role") {
		t.Fatalf("POST /api/db/admin/notes on a taken schema: %d %s, want 503 saying the schema is taken", r.Status, r.Body)
	}
	var n string
	if err := queryString(d.DatabaseURL, "SELECT count(*)::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = '"+taken+"'", &n); err != nil || n != "0" {
		t.Errorf("the taken schema holds %s relations (%v), want none", n, err)
	}
	d.MustDo(t, 404, dt.Admin(), "GET", "/api/db/admin/notes", nil)

	d.MustDo(t, 201, dt.Admin(), "POST", "/api/db/admin/notes", body)
	var owner, me string
	if err := queryString(d.DatabaseURL, `SELECT pg_get_userbyid(n.nspowner)::text FROM sluice.databases d
		JOIN pg_namespace n ON n.nspname = 'sluice_db_' || d.id WHERE d.name = 'notes'`, &owner); err != nil {
		t.Fatal(err)
	}
	if err := queryString(d.DatabaseURL, "SELECT current_user::text", &me); err != nil {
		t.Fatal(err)
	}
	if owner != me {
		t.Errorf("the new database's schema is owned by %s, want %s", owner, me)
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/notes", `{"@type":"Note","text":"hi"}`)
}
