package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/pgtest"
	"github.com/sluice-dev/sluice/internal/postgres"
)

// expandMigration is the migration the "next release" of the rolling
// upgrade test adds: an expand one, which this release's binaries may run
// beside.
const expandMigration = `-- A table the next release would use; this one ignores it.
-- sluice:readable-by %d
CREATE TABLE sluice.rolling_upgrade_test (id bigint PRIMARY KEY);
`

// buildNextRelease builds sluice from a copy of this module's source with
// one more migration, and returns the binary: the release after this one.
func buildNextRelease(t *testing.T, migration string) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			// The Go source is all a build needs: not the history, the
			// npm clients, the tools module or local data.
			switch {
			case d.Name() == ".git" || d.Name() == "node_modules",
				filepath.Dir(rel) == "." && (d.Name() == "test" || d.Name() == "tools" || d.Name() == "bin" || d.Name() == "data"):
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(src, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(src, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	next := postgres.LatestVersion() + 1
	if err := os.WriteFile(filepath.Join(src, "migrations", fmt.Sprintf("%04d_next_release.sql", next)), []byte(migration), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "sluice-next")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/sluice")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the next release: %v\n%s", err, out)
	}
	return bin
}

// TestRollingUpgrade runs this release's binary and the next one's (one
// more migration, an expand one) side by side on one Postgres, as during
// a rolling upgrade: a replica of this release runs while the next
// release migrates the database, another starts after it, writes go
// through all three and streams run on both releases; every stream
// receives every commit once and in order, and every acknowledged commit
// is in the log.
func TestRollingUpgrade(t *testing.T) {
	t.Parallel()
	next := buildNextRelease(t, fmt.Sprintf(expandMigration, postgres.LatestVersion()))
	url := pgtest.NewPrimary(t, nil).URL("postgres")
	start := func(bin string) (*dt.Daemon, *logLines, *dt.Proc) {
		logs := newLogLines()
		p := dt.StartProc(t, bin, []string{"serve", "--listen", "127.0.0.1:0"},
			[]string{"SLUICE_ADMIN_PASSWORD=" + dt.AdminPassword, "SLUICE_DATABASE_URL=" + url}, logs.add)
		return dt.Remote("http://" + p.Addr), logs, p
	}
	old1, _, old1Proc := start(binary)
	old1.CreateDatabase(t, "roll", "type Note { text: String! }")
	streams := []*dt.Stream{old1.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/roll/Note"})}
	streams[0].Next() // connected
	write := func(d *dt.Daemon, id string) {
		t.Helper()
		d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/roll", `{"@type":"Note","@id":"`+id+`","text":"x"}`)
	}
	write(old1, "before")

	// The next release starts and migrates while old1 runs.
	new1, newLogs, _ := start(next)
	if line := newLogs.find("applied migration"); !strings.Contains(line, "next_release") {
		t.Fatalf("the next release did not apply its migration: %q", line)
	}
	streams = append(streams, new1.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/roll/Note"}))
	streams[1].Next() // connected
	// A replica of this release starting after the migration runs beside it.
	old2, old2Logs, old2Proc := start(binary)
	if old2Logs.find("migrated by a newer sluice") == "" {
		t.Error("the old replica did not say it runs beside a newer one")
	}
	var ids []string
	for i := range 5 {
		for j, d := range []*dt.Daemon{old1, new1, old2} {
			id := fmt.Sprintf("w%d-%d", j, i)
			write(d, id)
			ids = append(ids, "Note/"+id)
		}
	}
	// Both releases' streams receive every commit, once and in order.
	receive := func(s *dt.Stream, name string, want []string) {
		t.Helper()
		for i, id := range want {
			var e struct{ Subject string }
			_ = json.Unmarshal([]byte(s.Event().Field("data")), &e)
			if e.Subject != id {
				t.Fatalf("stream on %s, event %d: %s, want %s", name, i, e.Subject, id)
			}
		}
	}
	receive(streams[0], "this release", append([]string{"Note/before"}, ids...))
	receive(streams[1], "the next release", ids)

	// The upgrade completes: the old replicas stop, their streams end,
	// and the next release goes on.
	for _, p := range []*dt.Proc{old1Proc, old2Proc} {
		if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		<-p.Exited()
		if p.Err() != nil {
			t.Errorf("an old replica exited with %v", p.Err())
		}
	}
	if rest := streams[0].Ended(); len(rest) != 1 || rest[0].String() != ": server shutting down" {
		t.Errorf("the old stream ended with %q, want only its shutdown frame", rest)
	}
	write(new1, "after")
	receive(streams[1], "the next release", []string{"Note/after"})
}
