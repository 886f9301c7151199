package daemontest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// ConnectAsNewRole creates a Postgres role that may log in and is granted
// nothing, named prefix and a unique suffix, and returns a connection as
// it to d's Postgres database, closed when the test ends: another role of
// the cluster, as an attacker with only a login would be.
func (d *Daemon) ConnectAsNewRole(t testing.TB, prefix string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, d.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	role := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano())
	if _, err := admin.Exec(ctx, "CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgx.ParseConfig(d.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.User = role
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
