package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestEmbeddedPostgresRecipes runs what docs/running.md says of the
// embedded Postgres, as root (as the tests run): psql reaches it through
// its socket as the postgres user, and a second Sluice on the same
// machine shares it as a replica, a write on the first reaching a stream
// on the second.
func TestEmbeddedPostgresRecipes(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("this test follows the docs' recipes for Sluice run as root: run the tests as root, as .ci/run does")
	}
	psql, err := exec.LookPath("psql")
	if err != nil {
		t.Fatal("this test runs psql as the docs do: apt-get install postgresql-client")
	}
	dir := tempDir(t)
	data := filepath.Join(dir, "data")
	first := start(t, data)
	if code, body := first.do(t, "POST", "/api/db/admin/shared", `{"schema":"type Note { text: String! }"}`); code != 201 {
		t.Fatalf("create database: %d %s", code, body)
	}

	// psql -h "$PWD/data/pg" -U postgres sluice
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, psql, "-h", filepath.Join(data, "pg"), "-U", "postgres", "sluice", "-At",
		"-c", "SELECT name FROM sluice.databases ORDER BY name").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "shared") {
		t.Fatalf("psql: %v\n%s", err, out)
	}

	// SLUICE_DATABASE_URL="postgres:///sluice?host=$PWD/data/pg&user=postgres" sluice serve --listen … --data-dir ./data-2
	p := dt.StartProc(t, binary, []string{"serve", "--data-dir", filepath.Join(dir, "data-2"), "--listen", "127.0.0.1:0"},
		[]string{"SLUICE_ADMIN_PASSWORD=secret-pw", "SLUICE_DATABASE_URL=postgres:///sluice?host=" + filepath.Join(data, "pg") + "&user=postgres"}, nil)
	second := dt.Remote("http://" + p.Addr)
	auth := dt.Basic("admin", "secret-pw")
	s := second.MustOpenStream(t, auth, dt.StreamRequest{Path: "/api/subscribe/admin/shared/Note"})
	s.Next() // connected
	if code, body := first.do(t, "POST", "/api/document/admin/shared", `{"@type":"Note","@id":"n","text":"from the first"}`); code != 200 {
		t.Fatalf("write on the first: %d %s", code, body)
	}
	if f := s.Event(); !strings.Contains(f.String(), "from the first") {
		t.Fatalf("the second's stream: %q", f)
	}
}
