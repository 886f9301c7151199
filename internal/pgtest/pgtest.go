// Package pgtest gives tests a real Postgres: one throwaway cluster per test
// binary, and a fresh database per test.
//
// A package whose tests need Postgres declares
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// and each test calls NewDatabase for a connection URL of its own database.
// Set SLUICE_TEST_DATABASE_URL to use an existing server instead of starting
// one; its user must be allowed to create databases.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/pgembed"
)

// server is the one piece of package state. testing.M gives Main no way to
// hand values to the tests it runs, so Main sets this before m.Run and
// NewDatabase reads it; nothing writes it while tests run.
var server struct {
	adminURL string                     // a database to run CREATE/DROP DATABASE from
	urlFor   func(dbname string) string // the URL of a database on the server
}

// Main runs the package's tests against one throwaway Postgres cluster,
// started for this test binary in a temp dir with durability turned off,
// or against the server at SLUICE_TEST_DATABASE_URL when that is set. It
// stops the cluster and removes its dir after the tests, then exits with
// their status. If the cluster cannot start, for example because Postgres
// is not installed, Main prints why and how to install it and exits with a
// failure: the tests fail rather than skip.
func Main(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if u := os.Getenv("SLUICE_TEST_DATABASE_URL"); u != "" {
		if _, err := pgx.ParseConfig(u); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: SLUICE_TEST_DATABASE_URL: %v\n", err)
			return 1
		}
		server.adminURL = u
		server.urlFor = func(dbname string) string { return withDatabase(u, dbname) }
		return m.Run()
	}

	dir, err := os.MkdirTemp("", "sluice-pgtest-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: create temp dir: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	// When tests run as root the server runs as the postgres user, which
	// must be able to enter the 0700 temp dir.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		return 1
	}
	// Only errors (the server dying) would help a failing test; the server's
	// routine lines, including FATALs from DROP DATABASE ... WITH (FORCE),
	// would bury the test output.
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	pg, err := pgembed.Start(ctx, pgembed.Options{
		DataDir: filepath.Join(dir, "pg"),
		Logger:  logger,
		Settings: map[string]string{
			// A throwaway cluster need not survive a crash.
			"fsync":              "off",
			"synchronous_commit": "off",
			"full_page_writes":   "off",
			// Parallel tests each open a pool.
			"max_connections": "300",
		},
	})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: cannot start a throwaway Postgres for the tests: %v\n"+
			"pgtest: to test against an existing server instead, set SLUICE_TEST_DATABASE_URL\n", err)
		return 1
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := pg.Stop(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stop throwaway Postgres: %v\n", err)
		}
	}()
	server.adminURL = pg.URL("postgres")
	server.urlFor = pg.URL
	return m.Run()
}

// NewDatabase creates an empty database for t, with a unique name, and
// returns its pgx connection URL. The database is dropped when t's cleanup
// runs, after the cleanups t registers later (such as closing a pool), and
// any connections still open to it are terminated. It fails t if the
// package's TestMain does not call Main. Safe for parallel tests.
func NewDatabase(t testing.TB) string {
	t.Helper()
	if server.urlFor == nil {
		t.Fatal("pgtest: NewDatabase needs the package's TestMain to call pgtest.Main: func TestMain(m *testing.M) { pgtest.Main(m) }")
	}
	name := databaseName(t.Name())
	ident := pgx.Identifier{name}.Sanitize()
	// template0 is pristine: whatever was installed into template1 on an
	// existing server does not leak into tests.
	if err := admin("CREATE DATABASE " + ident + " TEMPLATE template0"); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := admin("DROP DATABASE IF EXISTS " + ident + " WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return server.urlFor(name)
}

// admin runs sql on the admin database over a connection of its own.
// It does not take the test's context, which is canceled before cleanups.
func admin(sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, server.adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

// databaseName returns a unique database name that still says which test
// made it: test binaries of several packages may share one server.
func databaseName(testName string) string {
	var slug strings.Builder
	for _, r := range strings.ToLower(testName) {
		if slug.Len() == 40 {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			slug.WriteRune(r)
		} else {
			slug.WriteByte('_')
		}
	}
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix) // never fails
	return "test_" + slug.String() + "_" + hex.EncodeToString(suffix)
}

// withDatabase returns connection string connString pointing at dbname
// instead. dbname is plain ASCII (see databaseName), so needs no quoting.
func withDatabase(connString, dbname string) string {
	if strings.HasPrefix(connString, "postgres://") || strings.HasPrefix(connString, "postgresql://") {
		u, err := url.Parse(connString)
		if err != nil {
			return connString // run checked it parses; pgx would report the error
		}
		u.Path = "/" + dbname
		u.RawPath = ""
		return u.String()
	}
	// Keyword/value form: a later keyword wins.
	return connString + " dbname=" + dbname
}
