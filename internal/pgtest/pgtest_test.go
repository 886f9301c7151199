package pgtest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/pgtest"
)

func TestMain(m *testing.M) {
	pgtest.Main(m)
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	return conn
}

func TestNewDatabaseIsEmptyAndIsolated(t *testing.T) {
	t.Parallel()
	a := connect(t, pgtest.NewDatabase(t))
	t.Cleanup(func() { a.Close(context.Background()) })
	b := connect(t, pgtest.NewDatabase(t))
	t.Cleanup(func() { b.Close(context.Background()) })
	ctx := t.Context()

	for i, conn := range []*pgx.Conn{a, b} {
		var tables int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')").Scan(&tables); err != nil {
			t.Fatal(err)
		}
		if tables != 0 {
			t.Errorf("database %d has %d tables, want an empty database", i, tables)
		}
	}
	if _, err := a.Exec(ctx, "CREATE TABLE only_in_a (v int)"); err != nil {
		t.Fatal(err)
	}
	var found bool
	if err := b.QueryRow(ctx, "SELECT to_regclass('only_in_a') IS NOT NULL").Scan(&found); err != nil {
		t.Fatal(err)
	}
	if found {
		t.Error("a table created in one test database is visible in another")
	}
}

// TestNewDatabaseParallel has parallel tests each create their own database
// and checks they get distinct ones, each holding only its own row, dropped
// after each test even though a connection to it is still open.
func TestNewDatabaseParallel(t *testing.T) {
	t.Parallel()
	const n = 8
	var names [n]string
	var conns [n]*pgx.Conn
	t.Run("group", func(t *testing.T) {
		for i := range n {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				conn := connect(t, pgtest.NewDatabase(t))
				conns[i] = conn // closed by the parent, after this test's database is dropped
				ctx := t.Context()
				// The same table in every database: sharing one would make
				// CREATE fail or the count wrong.
				if _, err := conn.Exec(ctx, "CREATE TABLE marker (test int)"); err != nil {
					t.Fatal(err)
				}
				if _, err := conn.Exec(ctx, "INSERT INTO marker VALUES ($1)", i); err != nil {
					t.Fatal(err)
				}
				var count, got int
				if err := conn.QueryRow(ctx, "SELECT count(*), max(test) FROM marker").Scan(&count, &got); err != nil {
					t.Fatal(err)
				}
				if count != 1 || got != i {
					t.Errorf("marker has %d rows, max %d; want 1 row, %d", count, got, i)
				}
				if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&names[i]); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
	for _, conn := range conns {
		if conn != nil {
			conn.Close(context.Background())
		}
	}
	if t.Failed() {
		return
	}

	seen := map[string]bool{}
	for _, name := range names {
		if seen[name] {
			t.Errorf("database %s handed to two tests", name)
		}
		seen[name] = true
	}
	admin := connect(t, pgtest.NewDatabase(t))
	defer admin.Close(context.Background())
	var left int
	if err := admin.QueryRow(t.Context(), "SELECT count(*) FROM pg_database WHERE datname = ANY($1)", names[:]).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d of the tests' databases still exist after their tests", left)
	}
}
