package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/eventually"
	"github.com/sluice-dev/sluice/internal/pgtest"
	"github.com/sluice-dev/sluice/internal/postgres"
)

func TestReadableByHeader(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		sql  string
		want int
		err  string
	}{
		{"ALTER TABLE x ADD COLUMN y int;", 11, ""},
		{"-- An index.\n-- sluice:readable-by 10\nCREATE INDEX ...;", 10, ""},
		{"  -- sluice:readable-by 11  \nCREATE TABLE t ();", 11, ""},
		{"-- sluice:readable-by 9\n", 0, "want a schema version from 10 to 11"},
		{"-- sluice:readable-by 12\n", 0, "want a schema version from 10 to 11"},
		{"-- sluice:readable-by eleven\n", 0, "0011_x.sql"},
	} {
		got, err := postgres.ReadableByForTest("0011_x.sql", 11, tt.sql)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: %v, want an error with %q", tt.sql, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%q: %d, %v; want %d", tt.sql, got, err, tt.want)
		}
	}
}

// logBuffer is a log destination tests read while the logger writes.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestMigrationDoesNotHoldWritesBehindALongTransaction: a migration
// whose ALTER TABLE waits for a transaction reading the table (a psql
// session left open) gives up after the lock timeout and tries again,
// logging the session it waits for, so a write on the table, queued
// behind it, goes through within that timeout instead of waiting for the
// reader to end; the migration is applied once the reader ends.
func TestMigrationDoesNotHoldWritesBehindALongTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.NewDatabase(t)
	logs := &logBuffer{}
	db, err := postgres.Open(ctx, dbURL, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	d, s := noteDatabase(t, db, "n")
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["application_name"] = "long_reader"
	reader, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reader.Close(context.Background()) })
	if _, err := reader.Exec(ctx, "BEGIN; SELECT count(*) FROM sluice.commits"); err != nil {
		t.Fatal(err)
	}
	waiting := lockWaiters(ctx, t, dbURL)
	migrated := make(chan error, 1)
	go func() {
		_, err := db.MigrateWithForTest(ctx, "ALTER TABLE sluice.commits ADD COLUMN test_extra integer")
		migrated <- err
	}()
	eventually.True(t, 30*time.Second, "the migration waits for the reader", func() bool { return waiting() == 1 })

	// A write queued behind the migration's lock waits at most the lock
	// timeout (2 s), not for the reader.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	doc := &sluice.Document{ID: "Note/w", Type: "Note", Fields: map[string]any{"text": "x"}}
	if _, err := db.Write(wctx, postgres.WriteSpec{Database: d, Schema: s, Meta: postgres.CommitMeta{User: "admin"},
		Documents: func(ctx context.Context, w *postgres.Writer) error { return w.Insert(ctx, []*sluice.Document{doc}) }}); err != nil {
		t.Fatalf("a write while the migration waits for the reader: %v (after %s)", err, time.Since(start))
	}
	eventually.True(t, 30*time.Second, "the migration logs that it waits for the reader", func() bool {
		return strings.Contains(logs.String(), "waits for locks") && strings.Contains(logs.String(), "long_reader")
	})
	select {
	case err := <-migrated:
		t.Fatalf("the migration ended while the reader holds the table: %v", err)
	default:
	}
	if _, err := reader.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-migrated:
		if err != nil {
			t.Fatalf("the migration after the reader ended: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the migration was not applied within 30 s of the reader's end")
	}
	if v, err := db.SchemaVersion(ctx); err != nil || v != postgres.LatestVersion()+1 {
		t.Fatalf("schema version %d (%v), want %d", v, err, postgres.LatestVersion()+1)
	}
}

// TestMigrateRefusesObjectsOfAnotherRoleInSchemaSluice: Sluice's role
// owns schema sluice, but a table and a function in it are another
// role's (as a superuser could make them, or an older Sluice left them
// after it adopted a schema another role had made). Migrate, which runs
// at every start, refuses, naming both and their owner, and not the
// schema; given back to Sluice's role, they pass.
func TestMigrateRefusesObjectsOfAnotherRoleInSchemaSluice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := postgres.Open(ctx, pgtest.NewDatabase(t), slog.New(slog.DiscardHandler))
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
	alter := func(to string) {
		t.Helper()
		if _, err := db.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
			return tx.ExecForTest(ctx, "ALTER TABLE sluice.settings OWNER TO "+to+"; ALTER FUNCTION sluice.new_id(text) OWNER TO "+to)
		}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
		return tx.ExecForTest(ctx, "CREATE ROLE "+other)
	}}); err != nil {
		t.Fatal(err)
	}
	alter(other)
	_, err = db.Migrate(ctx)
	if err == nil {
		t.Fatal("Migrate used a table and a function of another role in schema sluice")
	}
	for _, want := range []string{
		"table sluice.settings (owned by " + other + ")",
		"function sluice.new_id(text) (owned by " + other + ")",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Migrate's error does not say %q: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "schema sluice (owned") {
		t.Errorf("Migrate's error names schema sluice, which Sluice's role owns: %v", err)
	}
	alter("CURRENT_USER")
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestMigrateRefusesADatabaseNotInUTF8: Sluice starts only on a database
// encoded in UTF8, refusing one in SQL_ASCII (where Postgres checks no
// text it stores, so a role granted writes stored ids and strings that
// are not UTF-8, which Sluice read with U+FFFD in their place: two
// documents whose ids differ in such a byte were listed with one id, and
// the API could reach neither by it) or in LATIN1 (where Postgres refuses the API's
// text LATIN1 lacks), naming the encoding, and makes nothing there.
func TestMigrateRefusesADatabaseNotInUTF8(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, enc := range []string{"SQL_ASCII", "LATIN1"} {
		url := pgtest.NewDatabase(t)
		recreateWithEncoding(t, url, enc)
		db, err := postgres.Open(ctx, url, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(db.Close)
		_, err = db.Migrate(ctx)
		if err == nil || !strings.Contains(err.Error(), "is encoded in "+enc+": Sluice needs one encoded in UTF8") {
			t.Errorf("Migrate on a database in %s: %v, want an error naming the encoding", enc, err)
		}
		var made bool
		if err := db.QueryRowForTest(ctx, "SELECT to_regnamespace('sluice') IS NOT NULL", &made); err != nil || made {
			t.Errorf("Migrate on a database in %s made schema sluice (%v)", enc, err)
		}
	}
}

// recreateWithEncoding drops the empty database of url and makes it again
// encoded in enc, through the server's database postgres.
func recreateWithEncoding(t *testing.T, url, enc string) {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	name := pgx.Identifier{cfg.Database}.Sanitize()
	cfg.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, stmt := range []string{"DROP DATABASE " + name,
		"CREATE DATABASE " + name + " TEMPLATE template0 ENCODING '" + enc + "' LC_COLLATE 'C' LC_CTYPE 'C'"} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
}
