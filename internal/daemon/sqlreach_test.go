package daemon_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/pgtest"
)

// TestRolesReachingSluicesTablesAreNamed: Postgres lets a role granted
// pg_read_all_data read, and one granted pg_write_all_data write, every
// table whatever its schema's and its own grants: such a role read the
// password hashes and the key of the webhooks' signing secrets in schema
// sluice, or made a user Sluice's super user, and nothing said so. A
// start now logs a warning naming each, saying which; a role that may log
// in with no such grant is not named.
func TestRolesReachingSluicesTablesAreNamed(t *testing.T) {
	t.Parallel()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	suffix := hex.EncodeToString(b)
	reader, writer, plain := "reach_reader_"+suffix, "reach_writer_"+suffix, "reach_plain_"+suffix
	// Roles are the cluster's: made before the daemon starts, through a
	// database of their own.
	admin := pgtest.NewDatabase(t)
	sqlExec(t, admin, "CREATE ROLE "+reader+" LOGIN", "GRANT pg_read_all_data TO "+reader,
		"CREATE ROLE "+writer+" LOGIN", "GRANT pg_write_all_data, pg_read_all_data TO "+writer,
		"CREATE ROLE "+plain+" LOGIN")
	t.Cleanup(func() { _ = sqlTx(admin, "DROP ROLE "+reader, "DROP ROLE "+writer, "DROP ROLE "+plain) })
	_, logs := startLogged(t)
	named := map[string]string{} // role: "read" or "write"
	for _, what := range []string{"read", "write"} {
		for _, r := range logs.find("a postgres role may " + what + " sluice's own tables") {
			r.Attrs(func(a slog.Attr) bool {
				if a.Key == "role" {
					named[a.Value.String()] = what
				}
				return true
			})
		}
	}
	if named[reader] != "read" || named[writer] != "write" {
		t.Errorf("the warnings named %v, want %s as a reader and %s as a writer", named, reader, writer)
	}
	if _, ok := named[plain]; ok {
		t.Errorf("a role with no grant was named: %v", named)
	}
}

// TestSubscriptionsAreNamed: a logical replication subscription's worker
// applies its rows with session_replication_role = replica, in which the
// capture triggers do not fire, so what it writes to a class table was
// not in the log, and nothing said so (docs/security.md, "Writes that
// fire no trigger"). A start now logs a warning naming each subscription
// of Sluice's Postgres database. (Made here by a superuser, disabled and
// without a publisher: on Postgres 16 a role granted
// pg_create_subscription may make one.)
func TestSubscriptionsAreNamed(t *testing.T) {
	t.Parallel()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "sub_" + hex.EncodeToString(b)
	dbURL := pgtest.NewDatabase(t)
	if err := sqlConn(dbURL, "CREATE SUBSCRIPTION "+name+" CONNECTION 'dbname=nowhere' PUBLICATION p WITH (connect = false)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sqlConn(dbURL, "ALTER SUBSCRIPTION "+name+" SET (slot_name = NONE)")
		_ = sqlConn(dbURL, "DROP SUBSCRIPTION "+name)
	})
	_, logs := startLogged(t, func(c *config.Config) { c.DatabaseURL = dbURL })
	var named []string
	for _, r := range logs.find("a logical replication subscription applies rows to sluice's postgres database") {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "subscription" {
				named = append(named, a.Value.String())
			}
			return true
		})
	}
	if len(named) != 1 || named[0] != name {
		t.Errorf("the warnings named subscriptions %v, want %s", named, name)
	}
}

// sqlConn runs stmt alone on a connection to url, outside a transaction
// (CREATE and DROP SUBSCRIPTION refuse one).
func sqlConn(url, stmt string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, stmt)
	return err
}
