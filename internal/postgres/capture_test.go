package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/eventually"
	"github.com/sluice-dev/sluice/internal/pgtest"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
)

// TestAnotherRoleCannotServe: the capture triggers tell Sluice's writes
// from other roles' by Sluice's role, so a process connecting as another
// role refuses to start (Migrate fails, naming both roles), rather than
// having every write it makes recorded twice.
func TestAnotherRoleCannotServe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.NewDatabase(t)
	db, err := postgres.Open(ctx, dbURL, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	other := "other_" + hex.EncodeToString(b)
	if _, err := db.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
		return tx.ExecForTest(ctx, "CREATE ROLE "+other+" LOGIN SUPERUSER")
	}}); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("user", other)
	u.RawQuery = q.Encode()
	odb, err := postgres.Open(ctx, u.String(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(odb.Close)
	if _, err := odb.Migrate(ctx); err == nil || !strings.Contains(err.Error(), "every replica must connect as") || !strings.Contains(err.Error(), other) {
		t.Fatalf("Migrate as another role: %v", err)
	}
}

// TestMigrationRepairsForgedLog: a database at schema version 10, whose
// log a role granted DML on one database forged through the session
// settings the capture of that version trusted (a hidden write, a change
// attached to another database's commit, a commit planted under a uid
// Sluice draws later, a commit claiming 2,147,483,647 changes), is
// repaired by migration 11: the hidden change is gone, the attached one
// too, the planted commit has a fresh uid (and the row it wrote follows
// it), the huge count is what the commit holds, numbered from 0, and
// Sluice's next commits, through the planted uid, succeed.
func TestMigrationRepairsForgedLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.NewDatabase(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	db, err := postgres.Open(ctx, dbURL, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if _, err := db.MigrateToForTest(ctx, 10); err != nil {
		t.Fatal(err)
	}
	s, err := schema.Parse("type Note { text: String }")
	if err != nil {
		t.Fatal(err)
	}
	mine, victim := &sluice.Database{Org: "o", Name: "mine"}, &sluice.Database{Org: "o", Name: "victim"}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	role := "forger_" + hex.EncodeToString(b)
	if _, err := db.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
		if err := tx.CreateOrganization(ctx, "o"); err != nil {
			return err
		}
		if err := tx.CreateDatabase(ctx, mine, s, postgres.Creator{}); err != nil {
			return err
		}
		if err := tx.CreateDatabase(ctx, victim, s, postgres.Creator{}); err != nil {
			return err
		}
		for _, stmt := range []string{"CREATE ROLE " + role + " LOGIN", "GRANT USAGE ON SCHEMA sluice_db_" + strconv.FormatInt(mine.ID, 10) + " TO " + role,
			"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA sluice_db_" + strconv.FormatInt(mine.ID, 10) + " TO " + role} {
			if err := tx.ExecForTest(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	write := func(d *sluice.Database, id string) error {
		doc := &sluice.Document{ID: id, Type: "Note", Fields: map[string]any{"text": "api"}}
		_, err := db.Write(ctx, postgres.WriteSpec{Database: d, Schema: s, Meta: postgres.CommitMeta{User: "admin"},
			Documents: func(ctx context.Context, w *postgres.Writer) error { return w.Insert(ctx, []*sluice.Document{doc}) }})
		return err
	}
	// The victim's commit: a SQL write, which the capture trigger
	// commits, made a commit of Sluice's own (no row images, as Sluice
	// writes them): this binary's commit statement needs the columns of
	// migration 34.
	if err := pgxExec(ctx, dbURL, "INSERT INTO sluice_db_"+strconv.FormatInt(victim.ID, 10)+`."Note" (_id, text) VALUES ('Note/v', 'api')`); err != nil {
		t.Fatal(err)
	}
	if err := pgxExec(ctx, dbURL, "UPDATE sluice.commits SET row_images = false, user_name = 'admin' WHERE db_id = "+strconv.FormatInt(victim.ID, 10)); err != nil {
		t.Fatal(err)
	}
	var victimUID int64
	if err := pgxQuery(ctx, dbURL, "SELECT uid FROM sluice.commits WHERE db_id = $1", []any{victim.ID}, &victimUID); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("user", role)
	u.RawQuery = q.Encode()
	tbl := "sluice_db_" + strconv.FormatInt(mine.ID, 10) + `."Note"`
	set := func(uid, n string) []string {
		id := strconv.FormatInt(mine.ID, 10)
		return []string{"SET LOCAL sluice.capture_uid_" + id + " = '" + uid + "'", "SET LOCAL sluice.capture_n_" + id + " = '" + n + "'"}
	}
	// The uid planted is the next the sequence gives, read when planting.
	next := "(SELECT last_value + 1 FROM sluice.commit_uid_seq)"
	// (The role reads where the sequence is; tx_uid told any role before.)
	if err := pgxExec(ctx, dbURL, "GRANT SELECT ON sluice.commit_uid_seq TO "+role); err != nil {
		t.Fatal(err)
	}
	for _, stmts := range [][]string{
		append(set("", "0"), "INSERT INTO "+tbl+" (_id, text) VALUES ('Note/hidden', 'h')"),
		append(set(strconv.FormatInt(victimUID, 10), "5"), "INSERT INTO "+tbl+" (_id, text) VALUES ('Note/attached', 'a')"),
		{"INSERT INTO " + tbl + " (_id, text) VALUES ('Note/h1', 'h')", "SET LOCAL sluice.capture_n_" + strconv.FormatInt(mine.ID, 10) + " = '2147483646'",
			"INSERT INTO " + tbl + " (_id, text) VALUES ('Note/h2', 'h')"},
		{"SELECT set_config('sluice.capture_uid_" + strconv.FormatInt(mine.ID, 10) + "', " + next + "::text, true)",
			"INSERT INTO " + tbl + " (_id, text) VALUES ('Note/planted', 'p')"},
	} {
		if err := pgxExec(ctx, u.String(), stmts...); err != nil {
			t.Fatalf("%s: %v", strings.Join(stmts, "; "), err)
		}
	}
	var n int
	if err := pgxQuery(ctx, dbURL, "SELECT max(n_changes) FROM sluice.commits", nil, &n); err != nil || n != 2147483647 {
		t.Fatalf("the forged count: %d, %v", n, err)
	}

	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		query string
		want  string
	}{
		{"SELECT count(*)::text FROM sluice.changes ch WHERE NOT EXISTS (SELECT 1 FROM sluice.commits c WHERE c.uid = ch.commit_uid)", "0"},
		{"SELECT string_agg(idx::text, ',' ORDER BY idx) FROM sluice.changes WHERE commit_uid = " + strconv.FormatInt(victimUID, 10), "0"},
		{"SELECT count(*)::text FROM sluice.commits WHERE uid > (SELECT last_value FROM sluice.commit_uid_seq)", "0"},
		{"SELECT string_agg(n_changes::text, ',' ORDER BY seq) FROM sluice.commits WHERE db_id = " + strconv.FormatInt(mine.ID, 10), "2,1"},
		{"SELECT string_agg(ch.idx::text, ',' ORDER BY ch.idx) FROM sluice.changes ch JOIN sluice.commits c ON c.uid = ch.commit_uid WHERE c.db_id = " +
			strconv.FormatInt(mine.ID, 10) + " AND c.n_changes = 2", "0,1"},
		{"SELECT (c.uid = t._commit_uid)::text FROM " + tbl + " t JOIN sluice.commits c ON c.seq = 2 AND c.db_id = " + strconv.FormatInt(mine.ID, 10) +
			" WHERE t._id = 'Note/planted'", "true"},
	} {
		var got string
		if err := pgxQuery(ctx, dbURL, c.query, nil, &got); err != nil || got != c.want {
			t.Errorf("%s: %q (%v), want %q", c.query, got, err, c.want)
		}
	}
	// Sluice's own commits draw past the planted uid.
	for i := range 70 {
		if err := write(victim, "Note/api"+strconv.Itoa(i)); err != nil {
			t.Fatalf("API commit %d after the repair: %v", i, err)
		}
	}
}

// pgxExec runs stmts in one transaction on a connection to connString.
func pgxExec(ctx context.Context, connString string, stmts ...string) error {
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				return err
			}
		}
		return nil
	})
}

// pgxQuery scans the one row of query into dst.
func pgxQuery(ctx context.Context, connString, query string, args []any, dst ...any) error {
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return conn.QueryRow(ctx, query, args...).Scan(dst...)
}

// TestCaptureLevels: a database's capture triggers made by a newer Sluice
// (a record of a higher level) are kept by this one, at start (Migrate)
// and by RepairCapture; those made by an older one (a lower level, the
// "capture/1" every Sluice before levels recorded), which check less
// (here: no ref: item, so an id of no Person passes), are made again by
// RepairCapture, the call the daemon repeats while it runs.
func TestCaptureLevels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, dbURL := migratedDB(ctx, t)
	s, err := schema.Parse("type Person { name: String friend: Person }")
	if err != nil {
		t.Fatal(err)
	}
	d := &sluice.Database{Org: "o", Name: "people"}
	createDatabases(t, db, s, d)
	tbl := `sluice_db_` + strconv.FormatInt(d.ID, 10) + `."Person"`
	trigger := func() string {
		t.Helper()
		var def string
		if err := pgxQuery(ctx, dbURL, `SELECT pg_get_triggerdef(oid) FROM pg_trigger
			WHERE tgrelid = $1::regclass AND tgname = 'sluice_capture'`, []any{tbl}, &def); err != nil {
			t.Fatal(err)
		}
		return def
	}
	record := func() string {
		t.Helper()
		var rec string
		if err := pgxQuery(ctx, dbURL, "SELECT capture FROM sluice.databases WHERE id = $1", []any{d.ID}, &rec); err != nil {
			t.Fatal(err)
		}
		return rec
	}
	// rewrite replaces the trigger by its definition with old replaced
	// by new, and the record's level by level, as another Sluice would.
	rewrite := func(old, new string, level int) {
		t.Helper()
		def := trigger()
		if !strings.Contains(def, old) {
			t.Fatalf("trigger %s has no %s", def, old)
		}
		def = strings.Replace(strings.Replace(def, old, new, 1), "CREATE TRIGGER", "CREATE OR REPLACE TRIGGER", 1)
		rec := record()
		rec = "capture/" + strconv.Itoa(level) + " " + strings.SplitN(rec, " ", 2)[1]
		// As Sluice's role does (sluice.writer): its event trigger
		// refuses other sessions' triggers on class tables.
		if err := pgxExec(ctx, dbURL, "SET LOCAL sluice.writer = on", def, "UPDATE sluice.databases SET capture = '"+strings.ReplaceAll(rec, "'", "''")+"' WHERE id = "+strconv.FormatInt(d.ID, 10)); err != nil {
			t.Fatal(err)
		}
	}
	garbage := func() error {
		return pgxExec(ctx, dbURL, "INSERT INTO "+tbl+" (friend) VALUES ('garbage')")
	}
	if got := postgres.RecordLevelForTest(record()); got != postgres.CaptureLevelForTest {
		t.Fatalf("record %q: level %d, want %d", record(), got, postgres.CaptureLevelForTest)
	}
	if err := garbage(); err == nil {
		t.Fatal("a SQL write of a reference to no Person passed this binary's triggers")
	}

	// A newer Sluice's triggers (one more check) are kept.
	rewrite("'ref:friend:Person')", "'ref:friend:Person', 'req:name')", postgres.CaptureLevelForTest+1)
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := db.RepairCapture(ctx); err != nil || n != 0 {
		t.Fatalf("RepairCapture beside a newer capture: made %d, %v", n, err)
	}
	if def := trigger(); !strings.Contains(def, "'req:name'") {
		t.Fatalf("a newer Sluice's trigger was replaced at start: %s", def)
	}

	// An older Sluice's (capture/1, no ref: item) are made again.
	rewrite(", 'ref:friend:Person', 'req:name')", ")", 1)
	if err := garbage(); err != nil {
		t.Fatalf("the older triggers (no ref:) refused a reference to no Person: %v", err)
	}
	if n, err := db.RepairCapture(ctx); err != nil || n != 1 {
		t.Fatalf("RepairCapture after an older Sluice: made %d, %v", n, err)
	}
	if def := trigger(); !strings.Contains(def, "'ref:friend:Person'") {
		t.Fatalf("RepairCapture left the older trigger: %s", def)
	}
	if got := postgres.RecordLevelForTest(record()); got != postgres.CaptureLevelForTest {
		t.Fatalf("record after the repair %q: level %d", record(), got)
	}
	if err := garbage(); err == nil {
		t.Fatal("a SQL write of a reference to no Person passed the repaired triggers")
	}
	if n, err := db.RepairCapture(ctx); err != nil || n != 0 {
		t.Fatalf("RepairCapture with nothing to do: made %d, %v", n, err)
	}

	// A repair beside a schema change, which locks the tables first and
	// the counter row next: the repair takes them in the same order, so
	// the two never deadlock (with the counter row held while it waited
	// for the tables, Postgres ended it, or the schema change, as
	// deadlocked); it waits for the tables, and gives up after
	// lockTimeout.
	rewrite(", 'ref:friend:Person')", ")", 1)
	change, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer change.Close(ctx)
	if _, err := change.Exec(ctx, "BEGIN; LOCK TABLE "+tbl+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	repaired := make(chan error, 1)
	go func() {
		_, err := db.RepairCapture(ctx)
		repaired <- err
	}()
	var repairErr error
	eventually.True(t, 30*time.Second, "the repair waits for the table, or is done", func() bool {
		select {
		case repairErr = <-repaired:
			repaired <- repairErr
			return true
		default:
		}
		var waiting bool
		err := pgxQuery(ctx, dbURL, `SELECT EXISTS (SELECT FROM pg_locks WHERE NOT granted AND relation = $1::regclass)`, []any{tbl}, &waiting)
		return err == nil && waiting
	})
	if _, err := change.Exec(ctx, "SELECT FROM sluice.commit_counters WHERE db_id = $1 FOR UPDATE", d.ID); err != nil {
		t.Fatalf("the schema change's lock of the counter row beside a repair: %v", err)
	}
	repairErr = <-repaired
	if postgres.DeadlockedForTest(repairErr) {
		t.Fatalf("the repair beside a schema change deadlocked: %v", repairErr)
	}
	if _, err := change.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if n, err := db.RepairCapture(ctx); err != nil || n != 1 {
		t.Fatalf("RepairCapture once the schema change ended: made %d, %v", n, err)
	}
}

// TestCaptureRepairGoesOnPastABrokenSchema: a database whose stored
// schema does not parse does not keep the others' capture triggers from
// being made again (the repair stopped at it, every database after it
// left with the older triggers); the error names it.
func TestCaptureRepairGoesOnPastABrokenSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, dbURL := migratedDB(ctx, t)
	s, err := schema.Parse("type Note { text: String }")
	if err != nil {
		t.Fatal(err)
	}
	a := &sluice.Database{Org: "o", Name: "a"}
	b := &sluice.Database{Org: "o", Name: "b"}
	createDatabases(t, db, s, a, b)
	// Both recorded by an older Sluice; a's schema does not parse.
	markCapturedByOlder(t, dbURL)
	if err := pgxExec(ctx, dbURL, "UPDATE sluice.databases SET schema_sdl = 'type {' WHERE id = "+strconv.FormatInt(a.ID, 10)); err != nil {
		t.Fatal(err)
	}
	n, err := db.RepairCapture(ctx)
	if n != 1 || err == nil || !strings.Contains(err.Error(), "database "+strconv.FormatInt(a.ID, 10)+" does not parse") {
		t.Fatalf("RepairCapture beside a broken schema: made %d, %v; want b's made and an error naming a", n, err)
	}
}

// TestCaptureRepairWaitsForReaders: making the capture triggers at start
// (Migrate, which tries again until its context ends) waits for a
// transaction reading a class table, as the API's reads do all the time
// on a busy database, and gets through when it commits. Asking for the
// tables without waiting (NOWAIT), it failed at every try for as long as
// any reader held one, and a new replica did not start.
func TestCaptureRepairWaitsForReaders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, dbURL := migratedDB(ctx, t)
	s, err := schema.Parse("type Person { name: String friend: Person }")
	if err != nil {
		t.Fatal(err)
	}
	d := &sluice.Database{Org: "o", Name: "people"}
	createDatabases(t, db, s, d)
	tbl := `sluice_db_` + strconv.FormatInt(d.ID, 10) + `."Person"`
	// Recorded by an older Sluice: to be made again.
	markCapturedByOlder(t, dbURL)
	reader, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close(ctx)
	if _, err := reader.Exec(ctx, "BEGIN; SELECT * FROM "+tbl); err != nil {
		t.Fatal(err)
	}
	// The reader commits only once the repair waits for the table: a
	// repair that never waits (NOWAIT) fails at every try until its
	// context ends.
	migrateCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	migrated := make(chan error, 1)
	go func() {
		_, err := db.Migrate(migrateCtx)
		migrated <- err
	}()
	var migrateErr error
	done := false
	eventually.True(t, 30*time.Second, "the repair waits for the table, or is done", func() bool {
		select {
		case migrateErr = <-migrated:
			done = true
			return true
		default:
		}
		var waiting bool
		err := pgxQuery(ctx, dbURL, `SELECT EXISTS (SELECT FROM pg_locks WHERE NOT granted AND relation = $1::regclass)`, []any{tbl}, &waiting)
		return err == nil && waiting
	})
	if done {
		t.Fatalf("Migrate beside a reader of a class table ended without waiting for it: %v", migrateErr)
	}
	if _, err := reader.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if err := <-migrated; err != nil {
		t.Fatalf("Migrate once the reader committed: %v", err)
	}
	var rec string
	if err := pgxQuery(ctx, dbURL, "SELECT capture FROM sluice.databases WHERE id = $1", []any{d.ID}, &rec); err != nil {
		t.Fatal(err)
	}
	if got := postgres.RecordLevelForTest(rec); got != postgres.CaptureLevelForTest {
		t.Fatalf("record after Migrate %q: level %d, want %d", rec, got, postgres.CaptureLevelForTest)
	}
}

// TestCaptureRepairBesideAnOlderSchemaChange: a repair that waited for
// the tables while another replica (here an older one, as SQL) changed
// the schema gives up without an error, rather than record triggers made
// for the schema it read before the change as the new schema's; the next
// repair makes them for the new one.
func TestCaptureRepairBesideAnOlderSchemaChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, dbURL := migratedDB(ctx, t)
	s, err := schema.Parse("type Person { name: String }")
	if err != nil {
		t.Fatal(err)
	}
	d := &sluice.Database{Org: "o", Name: "people"}
	createDatabases(t, db, s, d)
	id := strconv.FormatInt(d.ID, 10)
	tbl := `sluice_db_` + id + `."Person"`
	markCapturedByOlder(t, dbURL)
	change, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer change.Close(ctx)
	if _, err := change.Exec(ctx, "BEGIN; LOCK TABLE "+tbl+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	type result struct {
		n   int
		err error
	}
	repaired := make(chan result, 1)
	go func() {
		n, err := db.RepairCapture(ctx)
		repaired <- result{n, err}
	}()
	eventually.True(t, 30*time.Second, "the repair waits for the table", func() bool {
		var waiting bool
		err := pgxQuery(ctx, dbURL, `SELECT EXISTS (SELECT FROM pg_locks WHERE NOT granted AND relation = $1::regclass)`, []any{tbl}, &waiting)
		return err == nil && waiting
	})
	// The older replica's change (an enum more: no table changes), its
	// capture left older.
	if _, err := change.Exec(ctx, "UPDATE sluice.databases SET schema_sdl = 'type Person { name: String } enum Mood { HAPPY }' WHERE id = "+id+"; COMMIT"); err != nil {
		t.Fatal(err)
	}
	if r := <-repaired; r.err != nil || r.n != 0 {
		t.Fatalf("the repair beside a schema change: made %d, %v; want none, no error", r.n, r.err)
	}
	var rec string
	if err := pgxQuery(ctx, dbURL, "SELECT capture FROM sluice.databases WHERE id = $1", []any{d.ID}, &rec); err != nil {
		t.Fatal(err)
	}
	if got := postgres.RecordLevelForTest(rec); got != 1 {
		t.Fatalf("record after a repair beside a schema change %q: level %d, want the older one's", rec, got)
	}
	if n, err := db.RepairCapture(ctx); err != nil || n != 1 {
		t.Fatalf("the next repair: made %d, %v", n, err)
	}
	if err := pgxQuery(ctx, dbURL, "SELECT capture FROM sluice.databases WHERE id = $1", []any{d.ID}, &rec); err != nil {
		t.Fatal(err)
	}
	if got := postgres.RecordLevelForTest(rec); got != postgres.CaptureLevelForTest {
		t.Fatalf("record after the next repair %q: level %d", rec, got)
	}
}

// createDatabases creates organization o and, in it, the databases dbs
// with schema s.
func createDatabases(t *testing.T, db *postgres.DB, s *sluice.Schema, dbs ...*sluice.Database) {
	t.Helper()
	if _, err := db.Write(context.Background(), postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
		if err := tx.CreateOrganization(ctx, "o"); err != nil {
			return err
		}
		for _, d := range dbs {
			if err := tx.CreateDatabase(ctx, d, s, postgres.Creator{}); err != nil {
				return err
			}
		}
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
}

// markCapturedByOlder records every database's capture triggers as made
// by an older Sluice (level 1): the next repair makes them again.
func markCapturedByOlder(t *testing.T, dbURL string) {
	t.Helper()
	if err := pgxExec(context.Background(), dbURL, "UPDATE sluice.databases SET capture = 'capture/1 ' || split_part(capture, ' ', 2)"); err != nil {
		t.Fatal(err)
	}
}

// TestGuardFollowsTheDDLGuard: where Sluice's event trigger refuses other
// roles' CREATE TRIGGER on its tables (Sluice's role is a superuser, as
// here), class tables have no statement guard, which would cost every
// statement a catalog look; a superuser disabling the event trigger gets
// the statement guard on every class table at the next RepairCapture, and
// enabling it again takes the guard away.
func TestGuardFollowsTheDDLGuard(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, dbURL := migratedDB(ctx, t)
	s, err := schema.Parse("type Note { text: String }")
	if err != nil {
		t.Fatal(err)
	}
	d := &sluice.Database{Org: "o", Name: "notes"}
	createDatabases(t, db, s, d)
	tbl := `sluice_db_` + strconv.FormatInt(d.ID, 10) + `."Note"`
	state := func() string {
		t.Helper()
		var st string
		if err := pgxQuery(ctx, dbURL, `SELECT (SELECT count(*) FROM pg_trigger WHERE tgrelid = $1::regclass AND tgname = chr(1))::text
			|| ' ' || split_part(capture, E'\n', 2) FROM sluice.databases WHERE id = $2`, []any{tbl, d.ID}, &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	if got := state(); got != "0 guard: ddl" {
		t.Fatalf("statement guards and record under the DDL guard: %q, want none and guard: ddl", got)
	}
	if n, err := db.RepairCapture(ctx); err != nil || n != 0 {
		t.Fatalf("RepairCapture with nothing to do: made %d, %v", n, err)
	}

	if err := pgxExec(ctx, dbURL, "ALTER EVENT TRIGGER sluice_guard_ddl DISABLE"); err != nil {
		t.Fatal(err)
	}
	if n, err := db.RepairCapture(ctx); err != nil || n != 1 {
		t.Fatalf("RepairCapture after the DDL guard was disabled: made %d, %v", n, err)
	}
	if got := state(); got != "1 guard: statement" {
		t.Fatalf("statement guards and record without the DDL guard: %q, want one and guard: statement", got)
	}
	// Now another role's trigger can be made, and the guard refuses writes.
	if err := pgxExec(ctx, dbURL,
		"CREATE FUNCTION public.other() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NULL; END$$",
		"CREATE TRIGGER other AFTER INSERT ON "+tbl+" FOR EACH ROW EXECUTE FUNCTION public.other()"); err != nil {
		t.Fatal(err)
	}
	if err := pgxExec(ctx, dbURL, "INSERT INTO "+tbl+" (text) VALUES ('x')"); err == nil || !strings.Contains(err.Error(), "SLFT1") {
		t.Fatalf("a write beside another role's trigger under the statement guard: %v, want SLFT1", err)
	}

	// As Sluice's role does (sluice.writer): its sql_drop event trigger
	// refuses other sessions' drops.
	if err := pgxExec(ctx, dbURL, "SET LOCAL sluice.writer = on", "DROP TRIGGER other ON "+tbl, "ALTER EVENT TRIGGER sluice_guard_ddl ENABLE"); err != nil {
		t.Fatal(err)
	}
	if n, err := db.RepairCapture(ctx); err != nil || n != 1 {
		t.Fatalf("RepairCapture after the DDL guard was enabled again: made %d, %v", n, err)
	}
	if got := state(); got != "0 guard: ddl" {
		t.Fatalf("statement guards and record under the DDL guard again: %q, want none and guard: ddl", got)
	}
}
