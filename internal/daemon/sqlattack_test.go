package daemon_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
	"github.com/sluice-dev/sluice/internal/pgtest"
)

// dbID returns the id of database admin/db (from its Postgres schema's
// name, sluice_db_<id>).
func dbID(t testing.TB, d *dt.Daemon, db string) int64 {
	t.Helper()
	var info struct {
		Schema string `json:"postgres_schema"`
	}
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", "/api/db/admin/"+db, nil).Body, &info); err != nil {
		t.Fatal(err)
	}
	id, err := strconv.ParseInt(strings.TrimPrefix(info.Schema, "sluice_db_"), 10, 64)
	if err != nil {
		t.Fatalf("postgres_schema %q: %v", info.Schema, err)
	}
	return id
}

// logOf returns database admin/db's log as the API shows it.
func logOf(t testing.TB, d *dt.Daemon, db string) string {
	t.Helper()
	return string(d.MustDo(t, 200, dt.Admin(), "GET", "/api/log/admin/"+db, nil).Body)
}

// checkLogMatchesTables fails unless replaying database admin/db's log
// gives exactly the documents of class in its table.
func checkLogMatchesTables(t testing.TB, d *dt.Daemon, db, class string) {
	t.Helper()
	replayed, tables := replayLog(t, d, db), tableState(t, d, db, class)
	for id, doc := range tables {
		if replayed[id] != doc {
			t.Errorf("%s: the table holds\n%s\nthe replayed log\n%s", id, doc, replayed[id])
		}
	}
	for id := range replayed {
		if _, ok := tables[id]; !ok {
			t.Errorf("%s: in the replayed log, not in the table", id)
		}
	}
}

// checkCaptureConsistent fails unless, as Sluice sees its tables, no
// registration outlived its transaction, every change row belongs to a
// commit, and every commit's count is what it holds.
func checkCaptureConsistent(t testing.TB, adminURL string) {
	t.Helper()
	for _, c := range []struct{ what, query string }{
		{"registrations left", "SELECT count(*) FROM sluice.capture_commits"},
		{"change rows of no commit", "SELECT count(*) FROM sluice.changes ch WHERE NOT EXISTS (SELECT 1 FROM sluice.commits c WHERE c.uid = ch.commit_uid)"},
		{"SQL commits whose count is not what they hold", `SELECT count(*) FROM sluice.commits c WHERE c.row_images AND
			(c.n_changes <> (SELECT count(*) FROM sluice.changes ch WHERE ch.commit_uid = c.uid)
				OR c.n_changes <> (SELECT coalesce(max(idx), -1) + 1 FROM sluice.changes ch WHERE ch.commit_uid = c.uid))`},
	} {
		var n string
		if err := queryString(adminURL, "SELECT ("+c.query+")::text", &n); err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		if n != "0" {
			t.Errorf("%s: %s", c.what, n)
		}
	}
}

// TestSQLRoleCannotForgeTheLog: a Postgres role granted DML on one
// database's tables tries what the session settings of an earlier capture
// allowed (hiding its writes, attaching changes to another database's
// commits, planting change rows under the uids Sluice draws next,
// recording a huge count), calls every function of Sluice's it can, and
// reaches for Sluice's tables. Every change it makes is in its database's
// log as its own commit, or the statement fails; the other database's log
// is untouched; API writes to both still succeed; and replaying each log
// gives its tables.
func TestSQLRoleCannotForgeTheLog(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "mine", "type Note { text: String n: Int }")
	d.CreateDatabase(t, "victim", "type Note { text: String n: Int }")
	mine, victim := dbID(t, d, "mine"), dbID(t, d, "victim")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/victim", `{"@type":"Note","@id":"Note/v","text":"victim's"}`)
	w := newSQLWriter(t, d, "mine")
	tbl := w.table("Note")
	victimLog := logOf(t, d, "victim")

	// The uids Sluice draws next (the role cannot read them: say it
	// guessed).
	var txUID string
	if err := queryString(d.DatabaseURL, "SELECT nextval('sluice.commit_uid_seq')::text", &txUID); err != nil {
		t.Fatal(err)
	}
	next, _ := strconv.ParseInt(txUID, 10, 64)
	settings := func(uid int64, n string) []string {
		var out []string
		for _, db := range []int64{mine, victim} {
			out = append(out,
				fmt.Sprintf("SET LOCAL sluice.capture_uid_%d = '%d'", db, uid),
				fmt.Sprintf("SET LOCAL sluice.capture_n_%d = '%s'", db, n))
		}
		return out
	}
	// Each attempt either commits its changes as a commit of "mine" or
	// fails; which, is what the comments say.
	attempts := [][]string{
		// Hiding writes: the count set to 0 before an INSERT, an UPDATE,
		// a DELETE and a TRUNCATE.
		append(settings(next, "0"), "INSERT INTO "+tbl+" (_id, text) VALUES ('Note/a', 'hidden?')"),
		append(settings(next, "0"), "UPDATE "+tbl+" SET text = 'updated' WHERE _id = 'Note/a'"),
		append(settings(next, "0"), "INSERT INTO "+tbl+" (_id, text) VALUES ('Note/b', 'b')", "DELETE FROM "+tbl+" WHERE _id = 'Note/b'"),
		append(settings(next, ""), "INSERT INTO "+tbl+" (_id, text) VALUES ('Note/c', 'c')"),
		append(settings(next, "0"), "TRUNCATE "+tbl),
		// Attaching to the victim's latest commit, with a huge count, and
		// planting rows under the next 200 uids.
		append(settings(next-1, "2147483647"), "INSERT INTO "+tbl+" (_id, text) VALUES ('Note/d', 'forged?')"),
		append(settings(next+1, ""), "INSERT INTO "+tbl+" (text) VALUES ('planted?')"),
	}
	for k := 2; k < 200; k += 13 {
		attempts = append(attempts, append(settings(next+int64(k), strconv.Itoa(k)), fmt.Sprintf("INSERT INTO %s (text, n) VALUES ('planted', %d)", tbl, k)))
	}
	attempts = append(attempts,
		// An INSERT that inserts nothing; a savepoint rolled back.
		[]string{"INSERT INTO " + tbl + " (_id, text) VALUES ('Note/d', 'x') ON CONFLICT DO NOTHING"},
		[]string{"INSERT INTO " + tbl + " (_id, text) VALUES ('Note/e', 'e')", "SAVEPOINT s",
			"INSERT INTO " + tbl + " (_id, text) VALUES ('Note/f', 'rolled back')", "ROLLBACK TO s",
			"INSERT INTO " + tbl + " (_id, text) VALUES ('Note/g', 'g')"},
		// The commit made between two statements: two commits.
		[]string{"INSERT INTO " + tbl + " (_id, text) VALUES ('Note/h', 'h')", "SET CONSTRAINTS ALL IMMEDIATE",
			"SET CONSTRAINTS ALL DEFERRED", "UPDATE " + tbl + " SET n = 1 WHERE _id = 'Note/h'"},
	)
	for _, stmts := range attempts {
		if err := sqlTx(w.url, stmts...); err != nil {
			t.Errorf("%s: %v", strings.Join(stmts, "; "), err)
		}
	}

	// What may not be done fails, and leaves nothing.
	for _, c := range []struct {
		stmts []string
		want  string
	}{
		{[]string{"SET CONSTRAINTS ALL IMMEDIATE", "INSERT INTO " + tbl + " (_id, text) VALUES ('Note/i', 'i')"}, "leave Sluice's constraints deferred"},
		{[]string{"SET CONSTRAINTS ALL IMMEDIATE", "INSERT INTO " + tbl + " (_id, text) VALUES ('Note/i', 'i'), ('Note/j', 'j')"}, "leave Sluice's constraints deferred"},
		{[]string{"SET CONSTRAINTS ALL IMMEDIATE", "UPDATE " + tbl + " SET n = 2"}, "leave Sluice's constraints deferred"},
		{[]string{"SET CONSTRAINTS ALL IMMEDIATE", "DELETE FROM " + tbl + " WHERE _id = 'Note/h'"}, "leave Sluice's constraints deferred"},
		{[]string{"SET CONSTRAINTS ALL IMMEDIATE", "TRUNCATE " + tbl}, "leave Sluice's constraints deferred"},
		// Sluice's functions cannot even be named (the column defaults
		// call them all the same): registering commits of the victim.
		{[]string{fmt.Sprintf("SELECT sluice.tx_uid(%d)", victim), fmt.Sprintf("SELECT sluice.tx_uid(%d) FROM generate_series(1, 50)", victim)}, "permission denied for schema sluice"},
		{[]string{fmt.Sprintf("INSERT INTO %s (_id, _commit_uid, text) VALUES ('Note/k', sluice.tx_uid(%d), 'k')", tbl, victim)}, "permission denied for schema sluice"},
		{[]string{fmt.Sprintf("INSERT INTO %s (_id, _commit_uid, text) VALUES ('Note/k', %d, 'k')", tbl, next+500)}, "_commit_uid is Sluice's own"},
		{[]string{"INSERT INTO sluice.changes (commit_uid, idx, doc_ids, ops, afters) VALUES (1, 99, '{Note/x}', '{1}', '[{}]')"}, "permission denied"},
		{[]string{"INSERT INTO sluice.capture_commits VALUES (pg_current_xact_id(), 1, 1, 'x')"}, "permission denied"},
		{[]string{"DELETE FROM sluice.capture_commits"}, "permission denied"},
		{[]string{"UPDATE sluice.commits SET n_changes = 2147483647"}, "permission denied"},
		{[]string{"SELECT nextval('sluice.commit_uid_seq')"}, "permission denied"},
		{[]string{"SELECT setval('sluice.commit_uid_seq', 1)"}, "permission denied"},
		{[]string{"SELECT sluice.next_change(1)"}, "permission denied"},
		{[]string{"SELECT sluice.is_writer()"}, "permission denied"},
		{[]string{"SELECT sluice.check_document('Note', '{}', '{}')"}, "permission denied"},
	} {
		err := sqlTx(w.url, c.stmts...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", strings.Join(c.stmts, "; "), err, c.want)
		}
	}
	// Of Sluice's functions, the role may execute only the column
	// defaults'; of its tables and sequences, none.
	var fns, rels string
	if err := queryString(w.url, `SELECT coalesce(string_agg(p.proname, ',' ORDER BY p.proname), '') FROM pg_proc p
		WHERE p.pronamespace = 'sluice'::regnamespace AND has_function_privilege(p.oid, 'EXECUTE')`, &fns); err != nil {
		t.Fatal(err)
	}
	if fns != "new_id,tx_uid" {
		t.Errorf("functions of Sluice's another role may execute: %s", fns)
	}
	if err := queryString(w.url, `SELECT coalesce(string_agg(c.relname, ','), '') FROM pg_class c
		WHERE c.relnamespace = 'sluice'::regnamespace AND c.relkind IN ('r', 'S', 'v', 'm', 'p')
			AND (has_table_privilege(c.oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')
				OR c.relkind = 'S' AND has_sequence_privilege(c.oid, 'USAGE, SELECT, UPDATE'))`, &rels); err != nil {
		t.Fatal(err)
	}
	if rels != "" {
		t.Errorf("tables of Sluice's another role may reach: %s", rels)
	}

	// The victim's log is untouched; API writes to both databases succeed
	// (none trips on a planted uid), and so does one more SQL write.
	if got := logOf(t, d, "victim"); got != victimLog {
		t.Errorf("the victim's log changed:\n%s\nwas\n%s", got, victimLog)
	}
	for i := range 150 {
		for _, db := range []string{"victim", "mine"} {
			d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/"+db, fmt.Sprintf(`{"@type":"Note","@id":"Note/api%d","n":%d}`, i, i))
		}
	}
	sqlExec(t, w.url, "UPDATE "+tbl+" SET n = coalesce(n, 0) + 1")
	checkLogMatchesTables(t, d, "mine", "Note")
	checkLogMatchesTables(t, d, "victim", "Note")
	checkCaptureConsistent(t, d.DatabaseURL)

	// The log of "mine" names the role on every commit the role made: one
	// per successful attempt that changed something.
	var log []struct {
		User string `json:"user"`
	}
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", "/api/log/admin/mine?count=1000", nil).Body, &log); err != nil {
		t.Fatal(err)
	}
	sqlCommits := 0
	for _, c := range log {
		if c.User == "pg:"+w.role {
			sqlCommits++
		}
	}
	// Every attempt wrote but the ON CONFLICT; the IMMEDIATE one made two
	// commits; and the final UPDATE.
	if want := len(attempts) - 1 + 1 + 1; sqlCommits != want {
		t.Errorf("%d commits by the role in the log, want %d", sqlCommits, want)
	}
}

// TestForgedCountIsBounded: a commit row recording 2,147,483,647 changes
// over the one it holds (written as Sluice, the only role that can) is
// read with what it holds: by _ChangeSet(commit:), /api/changes, a
// stream and the log; the replica stays up, and later commits stream.
func TestForgedCountIsBounded(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "forged", "type Note { text: String }")
	id := dbID(t, d, "forged")
	st := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/forged/Note"})
	st.Next() // : connected
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/forged", `{"@type":"Note","@id":"Note/a","text":"a"}`)
	nextEvent(t, st)
	// As Sluice: the next commit, claiming the maximum count.
	sqlExec(t, d.DatabaseURL, "SET LOCAL sluice.writer = 'on'",
		fmt.Sprintf(`WITH s AS (UPDATE sluice.commit_counters SET last_seq = last_seq + 1 WHERE db_id = %d RETURNING last_seq)
			INSERT INTO sluice.commits (db_id, seq, uid, n_changes) SELECT %d, last_seq, 9000000000000, 2147483647 FROM s`, id, id),
		`INSERT INTO sluice.changes (commit_uid, idx, doc_ids, ops, befores, afters)
			VALUES (9000000000000, 0, '{Note/b}', '{1}', NULL, '[{"@id":"Note/b","@type":"Note","text":"b"}]')`,
		fmt.Sprintf(`INSERT INTO sluice_db_%d."Note" (_id, _commit_uid, text) VALUES ('Note/b', 9000000000000, 'b')`, id),
		"SELECT pg_notify(value, '"+strconv.FormatInt(id, 10)+"') FROM sluice.settings WHERE key = 'commits_channel'")
	if e := nextEvent(t, st); e.Subject != "Note/b" || !strings.HasSuffix(dt.Untag(e.ID), "-2-0") {
		t.Fatalf("the forged commit's event: %+v", e)
	}
	r := d.MustDo(t, 200, dt.Admin(), "POST", "/api/graphql/admin/forged", `{"query":"{ _ChangeSet(commit: \"2\") { Note_added { _id } } }"}`, "Content-Type", "application/json")
	if !strings.Contains(string(r.Body), `{"Note_added":[{"_id":"Note/b"}]}`) {
		t.Fatalf("_ChangeSet of the forged commit: %s", r.Body)
	}
	if got := replayLog(t, d, "forged"); len(got) != 2 {
		t.Fatalf("the replayed log: %v", got)
	}
	d.MustDo(t, 200, dt.Admin(), "GET", "/api/log/admin/forged", nil)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/forged", `{"@type":"Note","@id":"Note/c","text":"c"}`)
	if e := nextEvent(t, st); e.Subject != "Note/c" || !strings.HasSuffix(dt.Untag(e.ID), "-3-0") {
		t.Fatalf("the next commit's event: %+v", e)
	}
}

// maxSQLRowBytes is the most a row written in SQL may be as JSON, the
// text of its image in the log (migration 20).
const maxSQLRowBytes = 16 << 20

// TestSQLRowSizeIsCapped: a row written in SQL whose image in the log (the
// row as JSON) is more than 16 MiB is refused, on INSERT and UPDATE, with
// an error naming the cap. Postgres's own limit is jsonb's, 256 MB: one
// row of 249 MB took a replica's heap to 1.7 GB as its log was read, and
// stalled every database's streams. A row of exactly 16 MiB is taken and
// reads back; a row whose jsonb is small but whose text is not (a number
// of 1e-16000 is written with 16,000 zeros) is refused by its text; a
// large row can be deleted.
func TestSQLRowSizeIsCapped(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "big", "type Note { text: String n: Int data: JSON }")
	w := newSQLWriter(t, d, "big")
	tbl := w.table("Note")
	// grow sets Note/edge's text so that its row, as the log records it,
	// is over bytes more than the cap. The row is stamped with the
	// transaction's commit first, so that its size as measured is its
	// size as recorded.
	grow := func(over int) []string {
		return []string{
			"UPDATE " + tbl + " SET n = coalesce(n, 0) + 1 WHERE _id = 'Note/edge'",
			fmt.Sprintf(`DO $$ DECLARE s bigint; BEGIN
				SELECT octet_length(row_to_json(t.*)::text) - octet_length(t.text) INTO s FROM %[1]s t WHERE _id = 'Note/edge';
				UPDATE %[1]s SET text = repeat('x', (%[2]d - s + %[3]d)::int) WHERE _id = 'Note/edge';
			END $$`, tbl, maxSQLRowBytes, over),
		}
	}
	sqlExec(t, w.url, "INSERT INTO "+tbl+" (_id, text) VALUES ('Note/edge', '')")
	sqlExec(t, w.url, grow(0)...)
	before := logLength(t, d, "big")
	for _, c := range []struct {
		what  string
		stmts []string
	}{
		{"an UPDATE one byte over", grow(1)},
		{"an INSERT", []string{"INSERT INTO " + tbl + fmt.Sprintf(" (_id, text) VALUES ('Note/huge', repeat('x', %d))", maxSQLRowBytes)}},
		{"an INSERT of a small jsonb written large", []string{"INSERT INTO " + tbl + " (_id, data) VALUES ('Note/digits', (SELECT jsonb_agg(1e-16000) FROM generate_series(1, 1100)))"}},
	} {
		err := sqlTx(w.url, c.stmts...)
		if err == nil || !strings.Contains(err.Error(), "more than 16 MiB (16777216 bytes)") {
			t.Errorf("%s: %v, want an error naming the cap", c.what, err)
		}
	}
	if n := logLength(t, d, "big"); n != before {
		t.Fatalf("refused writes made %d commits", n-before)
	}
	checkLogMatchesTables(t, d, "big", "Note")
	if doc, _ := docOf(t, d, "big", "Note/edge"); len(doc["text"].(string)) < maxSQLRowBytes-100 {
		t.Fatalf("Note/edge reads with a text of %d bytes", len(doc["text"].(string)))
	}
	sqlExec(t, w.url, "DELETE FROM "+tbl+" WHERE _id = 'Note/edge'")
	checkLogMatchesTables(t, d, "big", "Note")
}

// FuzzSQLCapture: whatever sluice.* settings another role sets in its
// transaction (the names the capture read before, Sluice's writer flag,
// anything), whatever value it gives one of the ordinary settings that
// change how Postgres writes values as text or reads SQL
// (captureSessionSettings), and whichever write it then makes, its
// database's log replays to its table, every change row has its commit
// with the count it holds, no registration outlives its transaction, and
// the other database's log is untouched.
func FuzzSQLCapture(f *testing.F) {
	d := dt.Start(f)
	d.CreateDatabase(f, "fuzzed", "type Note { text: String n: Int x: Float at: DateTime xs: [Float!] }")
	d.CreateDatabase(f, "other", "type Note { text: String }")
	mine, other := dbID(f, d, "fuzzed"), dbID(f, d, "other")
	d.MustDo(f, 200, dt.Admin(), "POST", "/api/document/admin/other", `{"@type":"Note","@id":"Note/o","text":"o"}`)
	otherLog := logOf(f, d, "other")
	w := newSQLWriter(f, d, "fuzzed")
	tbl := w.table("Note")
	for _, s := range []struct {
		name, value string
		op          uint8
		setting     uint8
		to          string
	}{
		{fmt.Sprintf("capture_n_%d", mine), "0", 0, 0, "-15"},
		{fmt.Sprintf("capture_n_%d", mine), "2147483647", 1, 1, "Asia/Kolkata"},
		{fmt.Sprintf("capture_uid_%d", mine), "1", 0, 2, "SQL, DMY"},
		{fmt.Sprintf("capture_uid_%d", other), "1", 2, 3, "sql_standard"},
		{fmt.Sprintf("capture_n_%d", mine), "-5", 3, 1, "Europe/Amsterdam"},
		{"writer", "on", 0, 4, "off"},
		{"author", "x", 4, 5, "escape"},
		{fmt.Sprintf("capture_uid_%d", mine), "9223372036854775807", 5, 0, "0"},
		{"message", "", 6, 2, "German"},
	} {
		f.Add(s.name, s.value, s.op, s.setting, s.to)
	}
	f.Fuzz(func(t *testing.T, name, value string, op, setting uint8, to string) {
		stmts := []string{
			// A setting whose name or value Postgres refuses ends the
			// attempt: nothing to check but that it left nothing.
			fmt.Sprintf("SELECT set_config('sluice.' || %s, %s, true)", quote(name), quote(value)),
			fmt.Sprintf("SELECT set_config(%s, %s, true)", quote(captureSessionSettings[int(setting)%len(captureSessionSettings)]), quote(to)),
		}
		switch op % 7 {
		case 0:
			stmts = append(stmts, "INSERT INTO "+tbl+" (text, n, x, at, xs) VALUES ('ins', 1, 3.14159265, '1880-01-01T00:00:00.5Z', '[0.1, 1e300]')")
		case 1:
			stmts = append(stmts, "UPDATE "+tbl+" SET n = coalesce(n, 0) + 1, x = coalesce(x, 0) + 0.1, at = '1900-06-01T12:00:00Z' WHERE _id IN (SELECT _id FROM "+tbl+" ORDER BY _id LIMIT 2)")
		case 2:
			stmts = append(stmts, "DELETE FROM "+tbl+" WHERE _id IN (SELECT _id FROM "+tbl+" ORDER BY _id LIMIT 1)")
		case 3:
			stmts = append(stmts, "INSERT INTO "+tbl+" (text) VALUES ('before truncate')", "TRUNCATE "+tbl)
		case 4:
			stmts = append(stmts, fmt.Sprintf("SELECT sluice.tx_uid(%d)", other), "INSERT INTO "+tbl+" (text) VALUES ('after tx_uid')")
		case 5:
			stmts = append(stmts, "INSERT INTO "+tbl+" (text) VALUES ('a')", "SET CONSTRAINTS ALL IMMEDIATE", "INSERT INTO "+tbl+" (text) VALUES ('b')")
		case 6:
			stmts = append(stmts, "INSERT INTO "+tbl+" (text) VALUES ('a')", "SAVEPOINT s", "UPDATE "+tbl+" SET n = 7",
				"ROLLBACK TO s", fmt.Sprintf("SELECT set_config('sluice.' || %s, %s, true)", quote(name), quote(value)), "UPDATE "+tbl+" SET n = 8")
		}
		_ = sqlTx(w.url, stmts...) // may fail: the checks hold either way
		checkCaptureConsistent(t, d.DatabaseURL)
		checkLogMatchesTables(t, d, "fuzzed", "Note")
		if got := logOf(t, d, "other"); got != otherLog {
			t.Fatalf("the other database's log changed:\n%s", got)
		}
		if got := replayLog(t, d, "other"); len(got) != 1 {
			t.Fatalf("the other database's replayed log: %v", got)
		}
	})
}

// captureSessionSettings are the ordinary settings FuzzSQLCapture gives
// a value: those that change how Postgres writes a value as text, or how
// it reads SQL.
var captureSessionSettings = []string{"extra_float_digits", "TimeZone", "DateStyle", "IntervalStyle", "standard_conforming_strings", "bytea_output"}

// quote returns s as a SQL string literal (Postgres' standard strings:
// only the quote is special).
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// TestSQLRoleHoldsUpOnlyItsOwnDatabase: what a role granted DML on one
// class of a database can hold up, and what not (docs/security.md). A
// transaction whose commit it wrote early (SET CONSTRAINTS ALL IMMEDIATE
// after a write) holds that database's commit counter while it stays
// open: an API write to another class of that database, one the role has
// no grant on, waits for it, and is made once it ends. Writes to another
// database, and reads of its own, do not wait.
func TestSQLRoleHoldsUpOnlyItsOwnDatabase(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "held", "type Note { text: String } type Other { text: String }")
	d.CreateDatabase(t, "free", "type Note { text: String }")
	w := newSQLWriter(t, d, "held")
	sqlExec(t, d.DatabaseURL, "REVOKE ALL ON "+w.table("Other")+" FROM "+w.role)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, w.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, stmt := range []string{"BEGIN", "INSERT INTO " + w.table("Note") + " (text) VALUES ('sql')", "SET CONSTRAINTS ALL IMMEDIATE"} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if _, err := conn.Exec(ctx, "INSERT INTO "+w.table("Other")+" (text) VALUES ('no grant')"); err == nil {
		t.Fatal("the role wrote a class it has no grant on")
	}
	if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{"BEGIN", "INSERT INTO " + w.table("Note") + " (text) VALUES ('sql')", "SET CONSTRAINTS ALL IMMEDIATE"} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	answered := make(chan dt.Response, 1)
	go func() {
		answered <- d.Do(t, dt.Admin(), "POST", "/api/document/admin/held", `{"@type":"Other","@id":"Other/api","text":"api"}`)
	}()
	var sluiceRole string
	if err := queryString(d.DatabaseURL, "SELECT value FROM sluice.settings WHERE key = 'writer_role'", &sluiceRole); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 30*time.Second, "the API write waits for a lock", func() bool {
		var n string
		err := queryString(d.DatabaseURL, "SELECT count(*)::text FROM pg_stat_activity WHERE usename = '"+sluiceRole+
			"' AND wait_event_type = 'Lock' AND query LIKE '%commit_counters%'", &n)
		return err == nil && n != "0"
	})
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/free", `{"@type":"Note","@id":"Note/free","text":"free"}`)
	d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/held?type=Note", nil)
	select {
	case r := <-answered:
		t.Fatalf("the write to the held database answered %d %s while the SQL transaction was open", r.Status, r.Body)
	default:
	}
	if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if r := <-answered; r.Status != 200 {
		t.Fatalf("the write to the held database: %d %s", r.Status, r.Body)
	}
	replayed, tables := replayLog(t, d, "held"), tableState(t, d, "held", "Note")
	for id, doc := range tableState(t, d, "held", "Other") {
		tables[id] = doc
	}
	if len(replayed) != 2 || len(tables) != 2 || replayed["Other/api"] != tables["Other/api"] {
		t.Fatalf("the replayed log %v, the tables %v", replayed, tables)
	}
}

// TestOtherRolesFunctionsNeverRunAsSluice: Postgres picks, among the
// functions visible on the search path, the one whose argument types
// match best, in whatever schema; a role that may create in public (every
// role, on a database made before Postgres 15) defines unnest(text[])
// and to_jsonb of a table's row type, which Sluice's statements call
// unqualified (the commit's notification, every read), and would have
// them run as Sluice's role, with the capture off. Sluice's connections
// search pg_catalog alone: neither ever runs.
func TestOtherRolesFunctionsNeverRunAsSluice(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "shadow", "type Note { text: String }")
	w := newSQLWriter(t, d, "shadow")
	sqlExec(t, d.DatabaseURL, "GRANT CREATE ON SCHEMA public TO "+pgx.Identifier{w.role}.Sanitize())
	note := w.table("Note")
	sqlExec(t, w.url,
		"CREATE TABLE public.calls (fn text, who text)",
		"GRANT INSERT ON public.calls TO PUBLIC",
		`CREATE FUNCTION public.unnest(a text[]) RETURNS SETOF text LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO public.calls VALUES ('unnest', current_user);
			RETURN QUERY SELECT x FROM pg_catalog.unnest(a) x;
		END $$`,
		`CREATE FUNCTION public.to_jsonb(r `+note+`) RETURNS jsonb LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO public.calls VALUES ('to_jsonb', current_user);
			RETURN pg_catalog.to_jsonb(r);
		END $$`)
	// A replica started now: no statement of its was planned before the
	// functions existed.
	b := dt.Start(t, dt.WithDatabaseURL(d.DatabaseURL))
	b.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/shadow", `{"@type":"Note","@id":"n1","text":"one"}`)
	b.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/shadow?id=Note/n1", nil)
	b.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/shadow?type=Note&as_list=true", nil)
	b.MustDo(t, 200, dt.Admin(), "POST", "/api/graphql/admin/shadow", `{"query":"{ Note { text } }"}`, "Content-Type", "application/json")
	var calls string
	if err := queryString(d.DatabaseURL, "SELECT coalesce(string_agg(fn || ' as ' || who, ', '), '') FROM public.calls", &calls); err != nil {
		t.Fatal(err)
	}
	if calls != "" {
		t.Errorf("another role's functions ran in Sluice's statements: %s", calls)
	}
}

// grabSQL returns the statements with which role, granted TRIGGER on a
// class table (GRANT ALL grants it), attaches code of its own to table:
// a row trigger and a statement trigger whose name sorts before most, each
// recording in role's loot table the role it ran as, when that is not
// role itself, and what it read of Sluice's users table, then making
// role a superuser if it can. Schema role must exist, owned by role.
func grabSQL(role, table string) []string {
	mine := pgx.Identifier{role}.Sanitize()
	return []string{
		"CREATE TABLE " + mine + ".loot (who text, hashes text)",
		"GRANT INSERT ON " + mine + ".loot TO PUBLIC",
		"GRANT USAGE ON SCHEMA " + mine + " TO PUBLIC",
		`CREATE FUNCTION ` + mine + `.grab() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF current_user <> '` + role + `' THEN
				EXECUTE 'INSERT INTO ` + mine + `.loot SELECT current_user, string_agg(name || '':'' || left(password_hash, 7), '','') FROM sluice.users';
				IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
					EXECUTE 'ALTER ROLE ` + mine + ` SUPERUSER';
				END IF;
			END IF;
			RETURN NULL;
		END $$`,
		"CREATE TRIGGER grab AFTER INSERT OR UPDATE OR DELETE ON " + table + " FOR EACH ROW EXECUTE FUNCTION " + mine + ".grab()",
		`CREATE TRIGGER " " BEFORE INSERT OR UPDATE OR DELETE ON ` + table + " FOR EACH STATEMENT EXECUTE FUNCTION " + mine + ".grab()",
	}
}

// checkNoLoot fails t if role's trigger (grabSQL) ran as another role.
func checkNoLoot(t *testing.T, superURL, role string) {
	t.Helper()
	var loot, super string
	if err := queryString(superURL, "SELECT coalesce(string_agg(who || ' read ' || coalesce(hashes, 'no users'), '; '), '') FROM "+pgx.Identifier{role}.Sanitize()+".loot", &loot); err != nil {
		t.Fatal(err)
	}
	if err := queryString(superURL, "SELECT rolsuper::text FROM pg_roles WHERE rolname = '"+role+"'", &super); err != nil {
		t.Fatal(err)
	}
	if loot != "" || super == "true" {
		t.Errorf("a SQL role's trigger ran as another role: %s; the role is a superuser now: %s", loot, super)
	}
}

// TestSQLRoleTriggersAreRefused: a role granted what GRANT ALL ON ALL
// TABLES grants (TRIGGER among it) creates a trigger on a class table,
// whose function would run as Sluice's role (a superuser here) on every
// API write: it read Sluice's users table and made its role a superuser.
// Where Sluice is a superuser its event trigger refuses the CREATE
// TRIGGER (it judged DDL by the object's schema, and a trigger has none:
// it let every trigger through).
func TestSQLRoleTriggersAreRefused(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "trig", "type Note { text: String }")
	w := newSQLWriter(t, d, "trig")
	role := pgx.Identifier{w.role}.Sanitize()
	sqlExec(t, d.DatabaseURL,
		"GRANT ALL ON ALL TABLES IN SCHEMA "+pgx.Identifier{w.schema}.Sanitize()+" TO "+role,
		"CREATE SCHEMA AUTHORIZATION "+role)
	// In one transaction with the grant: Sluice revokes TRIGGER every
	// little while (TestSQLRoleTriggersNeverRunAsSluice).
	err := sqlTx(d.DatabaseURL, append([]string{
		"GRANT TRIGGER ON " + w.table("Note") + " TO " + role,
		"SET LOCAL ROLE " + role,
	}, grabSQL(w.role, w.table("Note"))...)...)
	if err == nil || !strings.Contains(err.Error(), "CREATE TRIGGER of grab") {
		t.Errorf("CREATE TRIGGER on a class table by another role: %v, want it refused", err)
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/trig", `{"@type":"Note","@id":"n1","text":"one"}`)
	if err == nil {
		checkNoLoot(t, d.DatabaseURL, w.role)
	}
}

// TestSQLRoleTriggersNeverRunAsSluice is TestSQLRoleTriggersAreRefused
// with Sluice connecting as an ordinary role owning its database (a
// managed Postgres): no event trigger refuses the CREATE TRIGGER, and the
// role's trigger read the password hashes in Sluice's users table on the
// next API write. Now every class table's guard, the first trigger of
// every statement, refuses the write while the table holds a trigger
// Sluice did not make; within seconds Sluice drops it and revokes TRIGGER
// and REFERENCES, and writes go through. A table made later under default
// privileges granting ALL is never granted either.
func TestSQLRoleTriggersNeverRunAsSluice(t *testing.T) {
	t.Parallel()
	superURL := pgtest.NewDatabase(t)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	owner := "sluice_" + hex.EncodeToString(b)
	var dbname string
	if err := queryString(superURL, "SELECT current_database()", &dbname); err != nil {
		t.Fatal(err)
	}
	sqlExec(t, superURL, "CREATE ROLE "+owner+" LOGIN", "ALTER DATABASE "+pgx.Identifier{dbname}.Sanitize()+" OWNER TO "+owner)
	ownerURL := withUser(t, superURL, owner)
	d := dt.Start(t, dt.WithDatabaseURL(ownerURL))
	d.CreateDatabase(t, "trig", "type Note { text: String }")
	w := newSQLWriterVia(t, d, "trig", superURL)
	role := pgx.Identifier{w.role}.Sanitize()
	schema := pgx.Identifier{w.schema}.Sanitize()
	sqlExec(t, ownerURL, "ALTER DEFAULT PRIVILEGES IN SCHEMA "+schema+" GRANT ALL ON TABLES TO "+role)
	sqlExec(t, superURL, "CREATE SCHEMA AUTHORIZATION "+role)
	// The grant and the triggers in one transaction: Sluice revokes
	// TRIGGER every little while, and could between them.
	sqlExec(t, superURL, append([]string{
		"GRANT ALL ON ALL TABLES IN SCHEMA " + schema + " TO " + role,
		"SET LOCAL ROLE " + role,
	}, grabSQL(w.role, w.table("Note"))...)...)
	// Refused (503), or written if Sluice removed the triggers already.
	r := d.Do(t, dt.Admin(), "POST", "/api/document/admin/trig", `{"@type":"Note","@id":"n1","text":"one"}`)
	if r.Status != 503 && r.Status != 200 {
		t.Errorf("an API write to a table holding another role's trigger: %d %s", r.Status, r.Body)
	}
	checkNoLoot(t, superURL, w.role)
	eventually.True(t, 30*time.Second, "Sluice removes the triggers and revokes TRIGGER and REFERENCES", func() bool {
		var left string
		err := queryString(superURL, `SELECT (SELECT count(*) FROM pg_trigger WHERE tgrelid = '`+w.table("Note")+`'::regclass AND tgname IN ('grab', ' '))::text
			|| has_table_privilege('`+w.role+`', '`+w.table("Note")+`', 'TRIGGER')::text
			|| has_table_privilege('`+w.role+`', '`+w.table("Note")+`', 'REFERENCES')::text`, &left)
		return err == nil && left == "0falsefalse"
	})
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/trig", `{"@type":"Note","@id":"n2","text":"two"}`)
	checkNoLoot(t, superURL, w.role)
	// A class added now: its table is made under the default privileges
	// (ALL), less TRIGGER and REFERENCES, in the schema change itself.
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/trig", "type Note { text: String }\ntype Extra { n: Int }")
	extra := w.table("Extra")
	var privs string
	if err := queryString(superURL, `SELECT has_table_privilege('`+w.role+`', '`+extra+`', 'INSERT')::text
		|| has_table_privilege('`+w.role+`', '`+extra+`', 'TRIGGER')::text
		|| has_table_privilege('`+w.role+`', '`+extra+`', 'REFERENCES')::text`, &privs); err != nil {
		t.Fatal(err)
	}
	if privs != "truefalsefalse" {
		t.Errorf("a new class's table under default privileges granting ALL: INSERT, TRIGGER, REFERENCES %s, want true, false, false", privs)
	}
}

// TestSQLReaderCannotRegisterACommit: a role granted only SELECT on a
// class table copied its column defaults into a temporary table of its
// own (CREATE TEMP TABLE … LIKE … INCLUDING DEFAULTS) and, inserting
// there, ran sluice.tx_uid, which runs as Sluice: it drew Sluice's commit
// uids and wrote sluice.capture_commits. tx_uid is executable by PUBLIC
// (every role writing a table calls it); it now refuses a role that may
// not write the database's tables.
func TestSQLReaderCannotRegisterACommit(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "rd", "type Note { text: String }")
	w := newSQLWriter(t, d, "rd")
	sqlExec(t, d.DatabaseURL, "REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA "+pgx.Identifier{w.schema}.Sanitize()+" FROM "+pgx.Identifier{w.role}.Sanitize())
	var before, after string
	if err := queryString(d.DatabaseURL, "SELECT last_value::text FROM sluice.commit_uid_seq", &before); err != nil {
		t.Fatal(err)
	}
	err := sqlTx(w.url,
		"CREATE TEMP TABLE x (LIKE "+w.table("Note")+" INCLUDING DEFAULTS) ON COMMIT DROP",
		"INSERT INTO x (text) SELECT 'n' FROM generate_series(1, 3)")
	if err == nil || !strings.Contains(err.Error(), "may not write the tables") {
		t.Errorf("a SELECT-only role inserting Sluice's column defaults: %v, want refused", err)
	}
	if err := queryString(d.DatabaseURL, "SELECT last_value::text FROM sluice.commit_uid_seq", &after); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("a SELECT-only role ran sluice.tx_uid: commit_uid_seq moved from %s to %s", before, after)
	}
}

// TestNotificationsArePrivate: Postgres lets any role LISTEN and NOTIFY on
// any channel, so Sluice announces commits, access changes and webhook
// changes on channels whose names only its role can read. A role that
// listens on the old fixed names hears none of them: not an API write,
// not a SQL write, not a deleted user, not a new webhook.
func TestNotificationsArePrivate(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "quiet", "type Note { text: String }")
	id := strconv.FormatInt(dbID(t, d, "quiet"), 10)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	admin, err := pgx.Connect(ctx, d.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	other := d.ConnectAsNewRole(t, "eavesdropper")
	var name string
	if err := other.QueryRow(ctx, "SELECT value FROM sluice.settings WHERE key = 'commits_channel'").Scan(&name); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("another role read the commits channel's name: %q, %v", name, err)
	}
	for _, ch := range []string{"sluice_commits", "sluice_webhooks"} {
		if _, err := other.Exec(ctx, "LISTEN "+ch); err != nil {
			t.Fatal(err)
		}
	}

	// Sluice's role listens on the channels Sluice uses and waits until
	// it has heard each kind of announcement.
	var commits, webhooks string
	if err := admin.QueryRow(ctx, "SELECT (SELECT value FROM sluice.settings WHERE key = 'commits_channel'), (SELECT value FROM sluice.settings WHERE key = 'webhooks_channel')").Scan(&commits, &webhooks); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []string{commits, webhooks} {
		if _, err := admin.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			t.Fatal(err)
		}
	}
	heard := func(what, channel, payload string) {
		t.Helper()
		for {
			n, err := admin.WaitForNotification(ctx)
			if err != nil {
				t.Fatalf("waiting for %s on %s: %v", what, channel, err)
			}
			if n.Channel == channel && n.Payload == payload {
				return
			}
		}
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/quiet", `{"@type":"Note","@id":"Note/a","text":"a"}`)
	heard("an API write", commits, id)
	sqlExec(t, d.DatabaseURL, `INSERT INTO sluice_db_`+id+`."Note" (_id, text) VALUES ('Note/b', 'b')`)
	heard("a SQL write", commits, id)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"leaver","organization":"admin","password":"leaver-password"}`)
	d.MustDo(t, 200, dt.Admin(), "DELETE", "/api/users/leaver", nil)
	heard("an access change", commits, "access")
	var hook struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal(d.MustDo(t, 201, dt.Admin(), "POST", "/api/webhooks/admin/quiet", `{"url":"https://hook.invalid/x"}`).Body, &hook); err != nil {
		t.Fatal(err)
	}
	heard("a webhook change", webhooks, strconv.FormatInt(hook.ID, 10))

	// Notifications reach a listener in the order they were sent: the
	// other role's first is the one sent after all of Sluice's.
	if _, err := admin.Exec(ctx, "NOTIFY sluice_commits, 'last'"); err != nil {
		t.Fatal(err)
	}
	n, err := other.WaitForNotification(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n.Payload != "last" {
		t.Fatalf("another role listening on %s heard %q before the last notification", n.Channel, n.Payload)
	}
}

// TestSQLMonitorRoleCannotReadChannelNames: a role granted pg_monitor
// reads every backend's last statement in pg_stat_activity, a listener's
// for as long as it listens; the names of the notification channels are
// not in any of them (the LISTEN reads the name inside a DO block).
func TestSQLMonitorRoleCannotReadChannelNames(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	monitor := d.ConnectAsNewRole(t, "monitor")
	sqlExec(t, d.DatabaseURL, "GRANT pg_monitor TO "+pgx.Identifier{monitor.Config().User}.Sanitize())

	var commits, webhooks string
	admin, err := pgx.Connect(ctx, d.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if err := admin.QueryRow(ctx, "SELECT (SELECT value FROM sluice.settings WHERE key = 'commits_channel'), (SELECT value FROM sluice.settings WHERE key = 'webhooks_channel')").Scan(&commits, &webhooks); err != nil {
		t.Fatal(err)
	}
	// The change feed's listener has read the name and listens (its last
	// statement is no longer the SELECT of the name).
	eventually.True(t, 30*time.Second, "the change feed listens", func() bool {
		var n int
		err := monitor.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'sluice changefeed'
			AND state = 'idle' AND query NOT LIKE 'SELECT (SELECT value FROM sluice.settings%'`).Scan(&n)
		return err == nil && n > 0
	})
	for _, name := range []string{commits, webhooks} {
		// The name is a parameter: not in this statement's own text.
		var seen []string
		rows, err := monitor.Query(ctx, "SELECT application_name || ': ' || query FROM pg_stat_activity WHERE strpos(query, $1) > 0", name)
		if err == nil {
			seen, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		if err != nil || len(seen) > 0 {
			t.Errorf("a pg_monitor role finds channel %s in pg_stat_activity: %q (%v)", name, seen, err)
		}
	}
}

// TestStatsRoleCannotReadChannelNames: with pg_stat_statements tracking
// nested statements (track = all), the LISTEN a listener runs inside its
// DO block was recorded with its text, the channel's secret name in it,
// for any role granted pg_read_all_stats. Sluice, a superuser here, turns
// pg_stat_statements.track_utility off for the block's transaction.
func TestStatsRoleCannotReadChannelNames(t *testing.T) {
	t.Parallel()
	primary := pgtest.NewPrimary(t, map[string]string{"shared_preload_libraries": "'pg_stat_statements'", "pg_stat_statements.track": "all"})
	url := primary.URL("postgres")
	sqlExec(t, url, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
	d := dt.Start(t, dt.WithDatabaseURL(url))
	monitor := d.ConnectAsNewRole(t, "monitor")
	sqlExec(t, url, "GRANT pg_read_all_stats TO "+pgx.Identifier{monitor.Config().User}.Sanitize())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var names string
	if err := queryString(url, "SELECT string_agg(value, ' ') FROM sluice.settings WHERE key LIKE '%\\_channel'", &names); err != nil || names == "" {
		t.Fatalf("channel names %q: %v", names, err)
	}
	// The block's own entry is recorded after the statements nested in it.
	eventually.True(t, 30*time.Second, "the change feed's listener listens", func() bool {
		var n int
		err := monitor.QueryRow(ctx, `SELECT count(*) FROM pg_stat_statements WHERE query LIKE 'DO %' AND strpos(query, 'commits_channel') > 0`).Scan(&n)
		return err == nil && n > 0
	})
	rows, err := monitor.Query(ctx, "SELECT query FROM pg_stat_statements WHERE strpos($1, substring(query from 'sluice_[a-z]+_[0-9a-f]{32}')) > 0", names)
	if err != nil {
		t.Fatal(err)
	}
	seen, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range seen {
		t.Errorf("a pg_read_all_stats role reads %q in pg_stat_statements (the channels are %s)", q, names)
	}
}
