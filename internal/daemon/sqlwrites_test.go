package daemon_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// sqlWriter is a Postgres role other than Sluice's, granted DML on one
// database's tables, as an operator would set one up.
type sqlWriter struct {
	role   string
	schema string // the database's Postgres schema
	url    string // connects as role
}

// newSQLWriter creates a role (a fresh name: roles are cluster-wide and
// tests share the cluster) granted USAGE on database admin/db's Postgres
// schema and SELECT, INSERT, UPDATE, DELETE and TRUNCATE on its tables,
// through the daemon's own connection URL (a superuser's).
func newSQLWriter(t *testing.T, d *dt.Daemon, db string) *sqlWriter {
	t.Helper()
	var info struct {
		Schema string `json:"postgres_schema"`
	}
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", "/api/db/admin/"+db, nil).Body, &info); err != nil || info.Schema == "" {
		t.Fatalf("GET /api/db/admin/%s names no postgres_schema (%v)", db, err)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	w := &sqlWriter{role: "app_writer_" + hex.EncodeToString(b), schema: info.Schema}
	schema := pgx.Identifier{info.Schema}.Sanitize()
	role := pgx.Identifier{w.role}.Sanitize()
	sqlExec(t, d.DatabaseURL, "CREATE ROLE "+role+" LOGIN",
		"GRANT USAGE ON SCHEMA "+schema+" TO "+role,
		"GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA "+schema+" TO "+role)
	w.url = withUser(t, d.DatabaseURL, w.role)
	return w
}

// withUser returns the connection string connString with user role.
func withUser(t testing.TB, connString, role string) string {
	t.Helper()
	u, err := url.Parse(connString)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return connString + " user=" + role // key=value form: the last one counts
	}
	q := u.Query()
	q.Del("user")
	u.RawQuery = q.Encode()
	u.User = url.User(role)
	return u.String()
}

// table returns the quoted name of class's table.
func (w *sqlWriter) table(class string) string {
	return pgx.Identifier{w.schema, class}.Sanitize()
}

// sqlExec runs statements, in one transaction, on a connection to url.
func sqlExec(t testing.TB, url string, stmts ...string) {
	t.Helper()
	if err := sqlTx(url, stmts...); err != nil {
		t.Fatalf("%v", err)
	}
}

// sqlTx runs statements in one transaction on a connection to url and
// returns the first error.
func sqlTx(url string, stmts ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				return &stmtError{s, err}
			}
		}
		return nil
	})
}

type stmtError struct {
	stmt string
	err  error
}

func (e *stmtError) Error() string { return e.stmt + ": " + e.err.Error() }
func (e *stmtError) Unwrap() error { return e.err }

// restEvent is one event of the REST change stream, decoded.
type restEvent struct {
	ID      string
	Kind    string
	Subject string          `json:"subject"`
	User    string          `json:"user_id"`
	Data    json.RawMessage `json:"data"`
}

// nextEvent reads the stream's next event.
func nextEvent(t *testing.T, st *dt.Stream) restEvent {
	t.Helper()
	f := st.Event()
	var e restEvent
	if err := json.Unmarshal([]byte(f.Field("data")), &e); err != nil {
		t.Fatalf("event %s: %v", f, err)
	}
	e.ID, e.Kind = f.Field("id"), f.Field("event")
	return e
}

// TestSQLWritesJoinTheLog: every kind of write another role makes in SQL
// is a commit of the log, streamed like any: an INSERT without _id (which
// gets one), an UPDATE, a DELETE, one transaction of four statements (one
// commit, its changes in statement order), a rollback (nothing), TRUNCATE
// (one commit deleting every document); the commits name the role; the
// documents read back with the commit that last wrote them. Rows Sluice
// could not read back are refused, and so is DDL outside Sluice, naming
// the schema API.
func TestSQLWritesJoinTheLog(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "sqlw", "enum Team { RED BLUE }\ntype Person { name: String! team: Team age: Int tags: [String!] }")
	w := newSQLWriter(t, d, "sqlw")
	p := w.table("Person")
	st := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/sqlw/Person"})
	st.Next() // : connected
	gql := func(query string) string {
		body, _ := json.Marshal(map[string]string{"query": query})
		return string(d.MustDo(t, 200, dt.Admin(), "POST", "/api/graphql/admin/sqlw", string(body), "Content-Type", "application/json").Body)
	}

	// An INSERT without _id gets one, and _CommitMetadata names its commit.
	sqlExec(t, w.url, "INSERT INTO "+p+" (name, team, age, tags) VALUES ('Ann', 'RED', 30, '[\"x\"]')")
	e := nextEvent(t, st)
	ann := e.Subject
	if e.Kind != "entity.create" || !strings.HasPrefix(ann, "Person/") || len(ann) != len("Person/")+16 || e.User != "pg:"+w.role ||
		string(e.Data) != `{"@id":"`+ann+`","@type":"Person","name":"Ann","team":"RED","age":30,"tags":["x"]}` {
		t.Fatalf("the INSERT's event: %+v %s", e, e.Data)
	}
	if got := gql(`{ Person(id: "` + ann + `") { name _CommitMetadata { _id _author } } }`); got != `{"data":{"Person":[{"name":"Ann","_CommitMetadata":{"_id":"1","_author":""}}]}}` {
		t.Fatalf("the inserted document: %s", got)
	}

	// An UPDATE, with its author and message set in the transaction.
	sqlExec(t, w.url, "SET LOCAL sluice.author = 'migration-7'", "SET LOCAL sluice.message = 'rename'",
		"UPDATE "+p+" SET name = 'Zed' WHERE _id = '"+ann+"'")
	if e := nextEvent(t, st); e.Kind != "entity.update" || e.Subject != ann || !strings.Contains(string(e.Data), `"name":"Zed"`) {
		t.Fatalf("the UPDATE's event: %+v %s", e, e.Data)
	}
	if got := gql(`{ Person(id: "` + ann + `") { name _CommitMetadata { _id _author _message } } }`); got != `{"data":{"Person":[{"name":"Zed","_CommitMetadata":{"_id":"2","_author":"migration-7","_message":"rename"}}]}}` {
		t.Fatalf("the updated document: %s", got)
	}

	// One transaction of four statements is one commit, in statement order.
	sqlExec(t, w.url,
		"INSERT INTO "+p+" (_id, name) VALUES ('Person/a', 'A')",
		"INSERT INTO "+p+" (_id, name) VALUES ('Person/b', 'B')",
		"UPDATE "+p+" SET age = 5 WHERE _id = 'Person/a'",
		"DELETE FROM "+p+" WHERE _id = 'Person/b'")
	var got []string
	for range 4 {
		e := nextEvent(t, st)
		got = append(got, e.ID+" "+e.Kind+" "+e.Subject)
	}
	if want := []string{"-3-0 entity.create Person/a", "-3-1 entity.create Person/b", "-3-2 entity.update Person/a", "-3-3 entity.delete Person/b"}; !sameSuffixes(got, want) {
		t.Fatalf("one transaction's events:\n%s\nwant (after the epoch)\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// A rollback leaves nothing; a refused row neither.
	if err := sqlTx(w.url, "INSERT INTO "+p+" (_id, name) VALUES ('Person/gone', 'G')", "SELECT 1/0"); err == nil {
		t.Fatal("the failing transaction committed")
	}
	for _, c := range []struct{ stmt, want string }{
		{"INSERT INTO " + p + " (_id) VALUES ('Person/noname')", "field Person.name is required"},
		{"INSERT INTO " + p + " (name, team) VALUES ('X', 'GREEN')", "field Person.team is \"GREEN\", not one of {RED,BLUE}"},
		{"INSERT INTO " + p + " (_id, name) VALUES ('Dog/x', 'X')", "an id is \"Person/<key>\""},
		{"INSERT INTO " + p + " (_id, name) VALUES ('Person/a b', 'X')", "without whitespace"},
		{"INSERT INTO " + p + " (name, tags) VALUES ('X', '{\"a\":1}')", "field Person.tags is a list"},
		{"UPDATE " + p + " SET _id = 'Person/c' WHERE _id = 'Person/a'", "_id cannot change"},
		{"INSERT INTO " + p + " (_id, _commit_uid, name) VALUES ('Person/u', 1, 'X')", "_commit_uid is Sluice's own"},
	} {
		if err := sqlTx(w.url, c.stmt); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.stmt, err, c.want)
		}
	}

	// TRUNCATE is one commit deleting every document.
	sqlExec(t, w.url, "TRUNCATE "+p)
	got = got[:0]
	for range 2 {
		e := nextEvent(t, st)
		got = append(got, e.ID+" "+e.Kind+" "+e.Subject)
	}
	if want := []string{"-4-0 entity.delete " + ann, "-4-1 entity.delete Person/a"}; !sameSuffixes(got, want) {
		sortedWant := []string{"-4-0 entity.delete Person/a", "-4-1 entity.delete " + ann}
		if !sameSuffixes(got, sortedWant) {
			t.Fatalf("TRUNCATE's events:\n%s", strings.Join(got, "\n"))
		}
	}
	if r := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/sqlw?type=Person&as_list=true", nil); strings.TrimSpace(string(r.Body)) != "[]" {
		t.Fatalf("after TRUNCATE: %s", r.Body)
	}

	// The log names the role; nothing was written between the commits.
	var log []struct {
		ID   string `json:"id"`
		User string `json:"user"`
	}
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", "/api/log/admin/sqlw", nil).Body, &log); err != nil {
		t.Fatal(err)
	}
	if len(log) != 4 || log[0].ID != "4" || log[3].ID != "1" || log[0].User != "pg:"+w.role {
		t.Fatalf("the log: %+v", log)
	}

	// DDL outside Sluice: refused for a superuser (the event trigger), and
	// for the writer (not the owner).
	if err := sqlTx(d.DatabaseURL, "ALTER TABLE "+p+" ADD COLUMN x int"); err == nil || !strings.Contains(err.Error(), "PUT /api/schema/{org}/{db}") {
		t.Errorf("ALTER TABLE by a superuser: %v", err)
	}
	if err := sqlTx(d.DatabaseURL, "DROP TABLE "+p); err == nil || !strings.Contains(err.Error(), "schema API") {
		t.Errorf("DROP TABLE by a superuser: %v", err)
	}
	if err := sqlTx(d.DatabaseURL, "CREATE INDEX ON "+p+" (name)"); err == nil || !strings.Contains(err.Error(), "schema API") {
		t.Errorf("CREATE INDEX by a superuser: %v", err)
	}
	if err := sqlTx(w.url, "ALTER TABLE "+p+" ADD COLUMN x int"); err == nil || !strings.Contains(err.Error(), "must be owner") {
		t.Errorf("ALTER TABLE by the writer: %v", err)
	}
	// Sluice's own schema changes still work, and the triggers follow.
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/sqlw", "enum Team { RED BLUE }\ntype Person { name: String! team: Team age: Int tags: [String!] nick: String! }")
	if err := sqlTx(w.url, "INSERT INTO "+p+" (name) VALUES ('NoNick')"); err == nil || !strings.Contains(err.Error(), "field Person.nick is required") {
		t.Errorf("an INSERT missing a field the new schema requires: %v", err)
	}
}

// sameSuffixes reports whether every got[i] ends with want[i].
func sameSuffixes(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if !strings.HasSuffix(got[i], want[i]) {
			return false
		}
	}
	return true
}
