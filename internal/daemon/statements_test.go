package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// pgWatch is a connection of the test's own to the daemon's database, to
// hold locks the daemon must wait for and to watch its backends.
type pgWatch struct {
	t    *testing.T
	conn *pgx.Conn
}

func watchPostgres(t *testing.T, d *dt.Daemon) *pgWatch {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), d.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return &pgWatch{t: t, conn: conn}
}

// lockClass takes an exclusive lock on the table of class in database
// admin/<db> until the returned function is called: every statement of the
// daemon that reads the class waits for it, running until it is cancelled.
func (w *pgWatch) lockClass(d *dt.Daemon, db, class string) (release func()) {
	w.t.Helper()
	ctx := context.Background()
	var id int64
	if err := w.conn.QueryRow(ctx, "SELECT id FROM sluice.databases WHERE org = 'admin' AND name = $1", db).Scan(&id); err != nil {
		w.t.Fatal(err)
	}
	// A connection of its own: pg_stat_activity is read on w.conn, and
	// a transaction would see one snapshot of it.
	conn, err := pgx.Connect(ctx, d.DatabaseURL)
	if err != nil {
		w.t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	table := pgx.Identifier{fmt.Sprintf("sluice_db_%d", id), class}.Sanitize()
	if _, err := tx.Exec(ctx, "LOCK TABLE "+table+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		w.t.Fatal(err)
	}
	return func() {
		_ = tx.Rollback(ctx)
		_ = conn.Close(ctx)
	}
}

// waiting returns the pids of the daemon's backends waiting for a lock.
func (w *pgWatch) waiting() []int32 {
	w.t.Helper()
	rows, err := w.conn.Query(context.Background(), `SELECT pid FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = 'sluice'
		AND state = 'active' AND wait_event_type = 'Lock'`)
	if err != nil {
		w.t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		w.t.Fatal(err)
	}
	return pids
}

// until polls cond until it holds, failing the test after 20 seconds.
func (w *pgWatch) until(what string, cond func() bool) {
	w.t.Helper()
	eventually.True(w.t, 20*time.Second, what, cond)
}

// TestClientGoneEndsItsStatement: a request whose client goes away while
// its statement runs ends that statement in Postgres; no backend runs on
// for a request that is gone.
func TestClientGoneEndsItsStatement(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "people", "type Person { name: String! }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/people", `{"@type":"Person","@id":"x","name":"X"}`)
	pg := watchPostgres(t, d)
	release := pg.lockClass(d, "people", "Person")
	defer release()

	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", d.URL+"/api/document/admin/people?type=Person", nil)
	if err != nil {
		t.Fatal(err)
	}
	dt.Admin()(req)
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("answered %d while its statement waits", resp.StatusCode)
		}
		done <- err
	}()
	pg.until("the request's statement waits for the lock", func() bool { return len(pg.waiting()) == 1 })
	cancel() // the client goes away
	if err := <-done; !strings.Contains(fmt.Sprint(err), "context canceled") {
		t.Fatalf("client: %v", err)
	}
	pg.until("the statement ends in Postgres", func() bool { return len(pg.waiting()) == 0 })
}

// TestStatementTimeout: a statement that runs past statement_timeout is
// cancelled by Postgres and its request answers 503, while a large write,
// whose transaction lasts longer than statement_timeout but whose every
// statement is short, commits whole.
func TestStatementTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 2 * time.Second
	// Bodies are read as they arrive (as past write_spool_bytes), so that
	// a large write's transaction lasts as long as its body.
	d := dt.Start(t, func(c *config.Config) { c.StatementTimeout, c.WriteSpoolBytes = timeout, 0 })
	d.CreateDatabase(t, "people", "type Person { name: String! }")
	pg := watchPostgres(t, d)

	t.Run("a long statement is cancelled", func(t *testing.T) {
		release := pg.lockClass(d, "people", "Person")
		defer release()
		// The client's deadline only ends the test sooner should the
		// timeout not work.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, "GET", d.URL+"/api/document/admin/people?id=Person/x", nil)
		if err != nil {
			t.Fatal(err)
		}
		dt.Admin()(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("a statement waiting past statement_timeout: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 503 || !strings.Contains(string(b), "statement_timeout") {
			t.Fatalf("a statement waiting past statement_timeout: %d %s", resp.StatusCode, b)
		}
		if pids := pg.waiting(); len(pids) != 0 {
			t.Fatalf("backends still waiting: %v", pids)
		}
	})

	t.Run("a large write outlasts it", func(t *testing.T) {
		body, w := io.Pipe()
		req, err := http.NewRequest("POST", d.URL+"/api/document/admin/people", body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-ndjson")
		dt.Admin()(req)
		type answer struct {
			status int
			body   []byte
			err    error
		}
		done := make(chan answer, 1)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				done <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			done <- answer{resp.StatusCode, b, err}
		}()
		write := func(from, to int) {
			for i := from; i < to; i++ {
				if _, err := fmt.Fprintf(w, `{"@type":"Person","@id":"p%d","name":"P"}`+"\n", i); err != nil {
					t.Errorf("write body: %v", err)
					return
				}
			}
		}
		write(0, 300) // more than one chunk: its transaction has begun
		pg.until("the write's transaction is older than statement_timeout", func() bool {
			var old bool
			err := pg.conn.QueryRow(context.Background(), `SELECT count(*) > 0 FROM pg_stat_activity
				WHERE datname = current_database() AND application_name = 'sluice'
				AND state = 'idle in transaction' AND xact_start < now() - $1::interval`, fmt.Sprintf("%d ms", (timeout+500*time.Millisecond).Milliseconds())).Scan(&old)
			if err != nil {
				t.Fatal(err)
			}
			return old
		})
		write(300, 1000)
		w.Close()
		r := <-done
		if r.err != nil || r.status != 200 {
			t.Fatalf("the write failed: %v %d %s", r.err, r.status, r.body)
		}
		var res struct{ IDs []string }
		if err := json.Unmarshal(r.body, &res); err != nil || len(res.IDs) != 1000 {
			t.Fatalf("the write answered %s", r.body)
		}
		docs := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/people?type=Person", nil)
		if n := strings.Count(string(docs.Body), "\n"); n != 1000 {
			t.Fatalf("%d documents stored, want 1000", n)
		}
	})
}

// TestGraphQLRequestTimeout: a GraphQL query, and a live query's read,
// whose statements run longer in all than graphql_request_timeout end
// with an error naming it, their statement cancelled in Postgres, well
// before statement_timeout would end one statement (graphql_max_statements
// of them, each up to statement_timeout, held a backend their sum).
func TestGraphQLRequestTimeout(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.StatementTimeout, c.GraphQLRequestTimeout = 15*time.Second, time.Second })
	d.CreateDatabase(t, "people", "type Person { name: String! }")
	pg := watchPostgres(t, d)
	release := pg.lockClass(d, "people", "Person")
	defer release()
	const query = `{"query":"{ a: Person { name } b: Person_aggregate { count } }"}`

	t.Run("query", func(t *testing.T) {
		r := d.Do(t, dt.Admin(), "POST", "/api/graphql/admin/people", query, "Content-Type", "application/json")
		if !strings.Contains(string(r.Body), "graphql_request_timeout") || !strings.Contains(string(r.Body), `"data":null`) {
			t.Fatalf("a query waiting past graphql_request_timeout: %d %s", r.Status, r.Body)
		}
		pg.until("its statement ends in Postgres", func() bool { return len(pg.waiting()) == 0 })
	})
	t.Run("live query", func(t *testing.T) {
		s := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/people",
			Body: `{"query":"query @live { Person { name } }"}`, Header: []string{"Accept", "text/event-stream"}})
		f := s.Event()
		if f.Field("data") == "" {
			f = s.Event() // after the comment the stream opens with
		}
		if !strings.Contains(f.String(), "graphql_request_timeout") {
			t.Fatalf("a live query waiting past graphql_request_timeout: %+v", f)
		}

		pg.until("its statement ends in Postgres", func() bool { return len(pg.waiting()) == 0 })
	})
}

// TestSubscriptionEventsBoundedByRequestTimeout: what a commit's events
// read beyond its images (the documents their references point to, their
// backlinks) is bounded in all by graphql_request_timeout, as a query's
// fields are: past it the stream ends with the error naming the limit,
// and the statement ends in Postgres. Only statement_timeout bounded each
// statement, so one commit's events could hold a backend
// graphql_max_statements × statement_timeout, and the stream's every
// subscriber with it.
func TestSubscriptionEventsBoundedByRequestTimeout(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.StatementTimeout, c.GraphQLRequestTimeout = 15*time.Second, time.Second })
	d.CreateDatabase(t, "notes", "type User { name: String! } type Task { owner: User }")
	pg := watchPostgres(t, d)
	s := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/notes",
		Body:   `{"query":"subscription { User_added { name _owner_of_Task { _id } } }"}`,
		Header: []string{"Accept", "text/event-stream"}})
	defer s.Close()
	if f := s.Event(); f.String() != ": connected" {
		t.Fatalf("the stream opened with %q", f)
	}
	release := pg.lockClass(d, "notes", "Task") // the backlink's reads wait
	defer release()
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/notes", `{"@type":"User","@id":"a","name":"Ann"}`)
	frames := s.Ended()
	if len(frames) != 2 || frames[0].Field("event") != "next" || !strings.Contains(frames[0].Field("data"), "graphql_request_timeout") ||
		frames[1].Field("event") != "complete" {
		t.Fatalf("a subscription whose event's reads wait past graphql_request_timeout: %q", frames)
	}
	pg.until("its statement ends in Postgres", func() bool { return len(pg.waiting()) == 0 })
}
