package daemon_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/pgtest"
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
func newSQLWriter(t testing.TB, d *dt.Daemon, db string) *sqlWriter {
	t.Helper()
	return newSQLWriterVia(t, d, db, d.DatabaseURL)
}

// newSQLWriterVia is newSQLWriter through adminURL, a superuser's
// connection to the daemon's database.
func newSQLWriterVia(t testing.TB, d *dt.Daemon, db, adminURL string) *sqlWriter {
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
	sqlExec(t, adminURL, "CREATE ROLE "+role+" LOGIN",
		"GRANT USAGE ON SCHEMA "+schema+" TO "+role,
		"GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA "+schema+" TO "+role)
	w.url = withUser(t, adminURL, w.role)
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
	Version string          `json:"version"`
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
	d.CreateDatabase(t, "sqlw", "enum Team { RED BLUE }\ntype Person { name: String! team: Team age: Int tags: [String!] ssn: String @private }")
	w := newSQLWriter(t, d, "sqlw")
	p := w.table("Person")
	st := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/sqlw/Person"})
	st.Next() // : connected
	// A reader follows the updates over GraphQL: the field it may not see
	// is left out of its events, as for any commit.
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/sqlw", `{"user":"rita","role":"read"}`)
	gst := d.MustOpenStream(t, dt.Basic("rita", "rita-password"), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/sqlw",
		Body: `{"query":"subscription { Person_updated { name _CommitMetadata { _author _change_type } } }"}`, Header: []string{"Accept", "text/event-stream"}})
	gst.Next() // : connected
	redacted := d.MustOpenStream(t, dt.Basic("rita", "rita-password"), dt.StreamRequest{Path: "/api/subscribe/admin/sqlw/Person"})
	redacted.Next()
	gql := func(query string) string {
		body, _ := json.Marshal(map[string]string{"query": query})
		out := string(d.MustDo(t, 200, dt.Admin(), "POST", "/api/graphql/admin/sqlw", string(body), "Content-Type", "application/json").Body)
		if data, _, ok := strings.Cut(out, `,"extensions":`); ok {
			return data + "}" // without the position
		}
		return out
	}

	// An INSERT without _id gets one, and _CommitMetadata names its commit.
	sqlExec(t, w.url, "INSERT INTO "+p+" (name, team, age, tags, ssn) VALUES ('Ann', 'RED', 30, '[\"x\"]', '123-45')")
	e := nextEvent(t, st)
	ann := e.Subject
	if e.Kind != "entity.create" || !strings.HasPrefix(ann, "Person/") || len(ann) != len("Person/")+16 || e.User != "pg:"+w.role ||
		string(e.Data) != `{"@id":"`+ann+`","@type":"Person","name":"Ann","team":"RED","age":30,"tags":["x"],"ssn":"123-45"}` {
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
	if f := gst.Event(); f.Field("data") != `{"data":{"Person_updated":{"name":"Zed","_CommitMetadata":{"_author":"migration-7","_change_type":"updated"}}}}` {
		t.Fatalf("the reader's GraphQL event: %s", f)
	}
	for range 2 {
		// The field's key, quoted: a random id may hold "ssn" (one did).
		if e := nextEvent(t, redacted); strings.Contains(string(e.Data), `"ssn"`) || strings.Contains(string(e.Data), "123-45") {
			t.Fatalf("a reader's event shows a field it may not see: %s", e.Data)
		}
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
		got = append(got, dt.Untag(e.ID)+" "+e.Kind+" "+e.Subject)
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
		got = append(got, dt.Untag(e.ID)+" "+e.Kind+" "+e.Subject)
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
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/sqlw", "enum Team { RED BLUE }\ntype Person { name: String! team: Team age: Int tags: [String!] ssn: String @private nick: String! }")
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

// replayLog reads database admin/db's whole history through /api/changes
// and returns the documents it leaves: each change's after image, by id.
func replayLog(t testing.TB, d *dt.Daemon, db string) map[string]string {
	t.Helper()
	return walkLog(t, d, db, nil)
}

// walkLog is replayLog calling each, when not nil, with every change's
// id, its before image and the document the log left before it ("" for
// none).
func walkLog(t testing.TB, d *dt.Daemon, db string, each func(id, before, left string)) map[string]string {
	t.Helper()
	state := map[string]string{}
	after := "0"
	for {
		var page struct {
			Next    string `json:"next"`
			More    bool   `json:"more"`
			Commits []struct {
				Changes []struct {
					ID     string          `json:"id"`
					Before json.RawMessage `json:"before"`
					After  json.RawMessage `json:"after"`
				} `json:"changes"`
			} `json:"commits"`
		}
		r := d.MustDo(t, 200, dt.Admin(), "GET", "/api/changes/admin/"+db+"?limit=1000&after="+url.QueryEscape(after), nil)
		if err := json.Unmarshal(r.Body, &page); err != nil {
			t.Fatal(err)
		}
		for _, c := range page.Commits {
			for _, ch := range c.Changes {
				if each != nil {
					before := string(ch.Before)
					if before == "null" {
						before = ""
					}
					each(ch.ID, before, state[ch.ID])
				}
				if string(ch.After) == "null" || ch.After == nil {
					delete(state, ch.ID)
				} else {
					state[ch.ID] = string(ch.After)
				}
			}
		}
		if !page.More {
			return state
		}
		after = page.Next
	}
}

// tableState reads every document of class in database admin/db.
func tableState(t testing.TB, d *dt.Daemon, db, class string) map[string]string {
	t.Helper()
	state := map[string]string{}
	r := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/"+db+"?type="+class, nil)
	for _, line := range strings.Split(strings.TrimSpace(string(r.Body)), "\n") {
		if line == "" {
			continue
		}
		var doc struct {
			ID string `json:"@id"`
		}
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			t.Fatal(err)
		}
		state[doc.ID] = withoutVersion(line)
	}
	return state
}

// TestSQLAndAPIWritersRace: 4 API writers and 2 SQL writers change the
// same 5 documents for 5 s, on two replicas; then the log, replayed from
// its start, gives the tables exactly, document by document and byte by
// byte: the commit sequence is commit order whoever writes.
func TestSQLAndAPIWritersRace(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	a.CreateDatabase(t, "race", "type Note { text: String n: Int }")
	b := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL))
	w := newSQLWriter(t, a, "race")
	tbl := w.table("Note")
	for i := range 5 {
		a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/race", fmt.Sprintf(`{"@type":"Note","@id":"Note/d%d","text":"start","n":0}`, i))
	}
	stop := time.After(5 * time.Second)
	done := make(chan struct{})
	go func() { <-stop; close(done) }()
	var wg sync.WaitGroup
	var apiCommits, sqlCommits atomic.Int64
	for k := range 4 {
		d := a
		if k%2 == 1 {
			d = b
		}
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				x, y := (k+i)%5, (k+2*i+1)%5
				body := fmt.Sprintf(`[{"@type":"Note","@id":"Note/d%d","text":"api%d-%d","n":%d},{"@type":"Note","@id":"Note/d%d","text":"api%d-%d","n":%d}]`, x, k, i, i, y, k, i, i)
				if x == y {
					body = fmt.Sprintf(`{"@type":"Note","@id":"Note/d%d","text":"api%d-%d","n":%d}`, x, k, i, i)
				}
				r := d.Do(t, dt.Admin(), "PUT", "/api/document/admin/race", body)
				if r.Status == 409 && strings.Contains(string(r.Body), "retry") {
					continue // a deadlock with a SQL writer: Postgres chose this one
				}
				if r.Status != 200 {
					t.Errorf("API writer %d: %d %s", k, r.Status, r.Body)
					return
				}
				apiCommits.Add(1)
			}
		})
	}
	for k := range 2 {
		wg.Go(func() {
			ctx := context.Background()
			conn, err := pgx.Connect(ctx, w.url)
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close(ctx)
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				x, y := (k+i)%5, (k+3*i+2)%5
				// The rows are locked in id order first, as Sluice locks
				// them: fewer deadlocks, more commits.
				err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
					for _, q := range []string{
						fmt.Sprintf("SELECT 1 FROM %s WHERE _id IN ('Note/d%d', 'Note/d%d') ORDER BY _id FOR UPDATE", tbl, x, y),
						fmt.Sprintf("UPDATE %s SET text = 'sql%d-%d', n = n + 1 WHERE _id IN ('Note/d%d', 'Note/d%d')", tbl, k, i, x, y),
						fmt.Sprintf("UPDATE %s SET text = text || '!' WHERE _id = 'Note/d%d'", tbl, y),
					} {
						if _, err := tx.Exec(ctx, q); err != nil {
							return err
						}
					}
					return nil
				})
				var pe interface{ SQLState() string }
				if errors.As(err, &pe) && (pe.SQLState() == "40P01" || pe.SQLState() == "40001") {
					continue // a deadlock with another writer: Postgres chose this one
				}
				if err != nil {
					t.Errorf("SQL writer %d: %v", k, err)
					return
				}
				sqlCommits.Add(1)
			}
		})
	}
	wg.Wait()
	t.Logf("%d API commits, %d SQL commits", apiCommits.Load(), sqlCommits.Load())
	if apiCommits.Load() == 0 || sqlCommits.Load() == 0 {
		t.Fatal("a kind of writer made no commit")
	}
	replayed, tables := replayLog(t, b, "race"), tableState(t, a, "race", "Note")
	if len(tables) != 5 {
		t.Fatalf("the table holds %d documents", len(tables))
	}
	for id, doc := range tables {
		if replayed[id] != doc {
			t.Errorf("%s: the table holds\n%s\nthe replayed log\n%s", id, doc, replayed[id])
		}
	}
}

// TestSQLCaptureWithoutSuperuser: capture works where Sluice's role owns
// its database but is no superuser and has no replication privilege, with
// wal_level replica (managed Postgres): a SQL write streams; the writer
// cannot alter Sluice's tables, not owning them.
func TestSQLCaptureWithoutSuperuser(t *testing.T) {
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
	var walLevel string
	if err := queryString(dbURL, "SHOW wal_level", &walLevel); err != nil || walLevel != "replica" {
		t.Fatalf("wal_level %q (%v), want replica", walLevel, err)
	}
	d := dt.Start(t, dt.WithDatabaseURL(withUser(t, dbURL, owner)))
	d.CreateDatabase(t, "nosuper", "type Note { text: String }")
	w := newSQLWriterVia(t, d, "nosuper", dbURL)
	st := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/nosuper/Note"})
	st.Next()
	sqlExec(t, w.url, "INSERT INTO "+w.table("Note")+" (_id, text) VALUES ('Note/a', 'x')")
	if e := nextEvent(t, st); e.Kind != "entity.create" || e.Subject != "Note/a" || e.User != "pg:"+w.role {
		t.Fatalf("event %+v", e)
	}
	if err := sqlTx(w.url, "ALTER TABLE "+w.table("Note")+" ADD COLUMN x int"); err == nil || !strings.Contains(err.Error(), "must be owner") {
		t.Errorf("ALTER TABLE by the writer: %v", err)
	}
}

// queryString scans the one value of query into dst.
func queryString(url, query string, dst *string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return conn.QueryRow(ctx, query).Scan(dst)
}
