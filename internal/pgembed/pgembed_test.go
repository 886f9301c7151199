package pgembed

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newDataDir returns a data dir path (not yet created) in a fresh temp dir
// removed after the test.
func newDataDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pgembed-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// When tests run as root the server runs as the postgres user, which
	// must be able to enter the 0700 temp dir.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "pg")
}

func testOptions(t *testing.T, dataDir string) Options {
	return Options{
		DataDir: dataDir,
		Logger:  slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
		Settings: map[string]string{
			"fsync":              "off",
			"synchronous_commit": "off",
			"full_page_writes":   "off",
		},
	}
}

// start starts a server and stops it when the test ends.
func start(t *testing.T, opts Options) *Postgres {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	p, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { stop(t, p) })
	return p
}

func stop(t *testing.T, p *Postgres) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.Stop(ctx); err != nil {
		t.Errorf("Stop: %v", err)
	}
}

// queryString runs sql on url and returns its single text result.
func queryString(t *testing.T, url, sql string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	defer conn.Close(context.Background())
	var s string
	if err := conn.QueryRow(ctx, sql).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

func exec1(t *testing.T, url, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func TestStartCreatesCluster(t *testing.T) {
	t.Parallel()
	dataDir := newDataDir(t)
	p := start(t, testOptions(t, dataDir))

	if _, err := os.Stat(filepath.Join(dataDir, "PG_VERSION")); err != nil {
		t.Errorf("initdb did not run: %v", err)
	}
	url := p.URL("postgres")
	if got := queryString(t, url, "SELECT 1::text"); got != "1" {
		t.Errorf("SELECT 1 = %q", got)
	}
	if got := queryString(t, url, "SHOW server_encoding"); got != "UTF8" {
		t.Errorf("server_encoding = %q, want UTF8", got)
	}
	if got := queryString(t, url, "SHOW listen_addresses"); got != "" {
		t.Errorf("listen_addresses = %q, want empty (no TCP)", got)
	}
	if got := queryString(t, url, "SHOW fsync"); got != "off" {
		t.Errorf("fsync = %q, want the extra setting off", got)
	}
}

// TestStartRedoesInterruptedInitdb: an initdb killed during the first
// start (here one that writes PG_VERSION, as initdb does first, and is
// SIGKILLed) leaves no cluster in the data dir, and the next start
// removes what it left and makes a whole cluster. The cluster made in
// place used to be taken for a whole one, and the server failed.
func TestStartRedoesInterruptedInitdb(t *testing.T) {
	t.Parallel()
	dataDir := newDataDir(t)
	real, err := findBinaries("")
	if err != nil {
		t.Fatal(err)
	}
	binDir := filepath.Join(filepath.Dir(dataDir), "bin") // enterable by the postgres user
	if err := os.Mkdir(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// initdb is run as initdb -D <dir> …
	killed := "#!/bin/sh\necho 15 > \"$2/PG_VERSION\"\nkill -9 $$\n"
	if err := os.WriteFile(filepath.Join(binDir, "initdb"), []byte(killed), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real.postgres, filepath.Join(binDir, "postgres")); err != nil {
		t.Fatal(err)
	}
	interrupted := testOptions(t, dataDir)
	interrupted.BinDir = binDir
	if p, err := Start(t.Context(), interrupted); err == nil {
		stop(t, p)
		t.Fatal("Start with an initdb killed midway succeeded")
	}
	if _, err := os.Stat(filepath.Join(dataDir, "PG_VERSION")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data dir's PG_VERSION after an interrupted initdb: %v, want none", err)
	}
	if _, err := os.Stat(filepath.Join(initdbDir(dataDir), "PG_VERSION")); err != nil {
		t.Fatalf("the interrupted initdb left no PG_VERSION aside: %v", err)
	}

	p := start(t, testOptions(t, dataDir))
	if got := queryString(t, p.URL("postgres"), "SELECT 1::text"); got != "1" {
		t.Errorf("SELECT 1 = %q", got)
	}
	if _, err := os.Lstat(initdbDir(dataDir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("what the interrupted initdb left: %v, want it removed", err)
	}
}

// TestStartKeepsClusterMadeInPlace: a cluster that initdb made in the data
// dir itself, as releases before createCluster did, is started as it is.
func TestStartKeepsClusterMadeInPlace(t *testing.T) {
	t.Parallel()
	dataDir := newDataDir(t)
	opts := testOptions(t, dataDir)
	bin, err := findBinaries("")
	if err != nil {
		t.Fatal(err)
	}
	cred, err := serverCredential()
	if err != nil {
		t.Fatal(err)
	}
	if err := makeDataDir(dataDir, cred); err != nil {
		t.Fatal(err)
	}
	if err := initdb(t.Context(), bin, dataDir, cred, opts.Logger); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(dataDir)
	if err != nil {
		t.Fatal(err)
	}

	p := start(t, opts)
	if got := queryString(t, p.URL("postgres"), "SELECT 1::text"); got != "1" {
		t.Errorf("SELECT 1 = %q", got)
	}
	if after, err := os.Stat(dataDir); err != nil || !os.SameFile(before, after) {
		t.Errorf("the data dir was replaced (%v): want the cluster made in place kept", err)
	}
}

// TestStartMakesClusterInSymlinkedDir: a data dir that is a symbolic
// link (or a mount point) cannot be replaced by the rename a cluster made
// aside is moved in with: the cluster is made in place, in the
// directory the link names, and the next start uses it.
func TestStartMakesClusterInSymlinkedDir(t *testing.T) {
	t.Parallel()
	dataDir := newDataDir(t)
	real := filepath.Join(filepath.Dir(dataDir), "real")
	if err := os.Mkdir(real, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, dataDir); err != nil {
		t.Fatal(err)
	}
	opts := testOptions(t, dataDir)
	first := start(t, opts)
	exec1(t, first.URL("postgres"), "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('survives')")
	stop(t, first)
	if fi, err := os.Lstat(dataDir); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the data dir after the first start: %v, %v; want the symbolic link kept", fi, err)
	}
	if _, err := os.Stat(filepath.Join(real, "PG_VERSION")); err != nil {
		t.Fatalf("the cluster is not in the linked directory: %v", err)
	}
	second := start(t, opts)
	if got := queryString(t, second.URL("postgres"), "SELECT v FROM kept"); got != "survives" {
		t.Errorf("after a restart: %q", got)
	}
}

func TestStartReusesCluster(t *testing.T) {
	t.Parallel()
	dataDir := newDataDir(t)
	opts := testOptions(t, dataDir)

	first := start(t, opts)
	exec1(t, first.URL("postgres"), "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('survives')")
	stop(t, first)

	second := start(t, opts)
	if got := queryString(t, second.URL("postgres"), "SELECT v FROM kept"); got != "survives" {
		t.Errorf("after restart, kept.v = %q", got)
	}
}

func TestStopIsCleanAndIdempotent(t *testing.T) {
	t.Parallel()
	dataDir := newDataDir(t)
	p := start(t, testOptions(t, dataDir))
	pid := p.PID()

	stop(t, p)
	if processAlive(pid) {
		t.Errorf("postgres pid %d still alive after Stop", pid)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "postmaster.pid")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("postmaster.pid after Stop: %v, want not exist", err)
	}
	if err := p.Stop(context.Background()); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestStartRefusesSecondOwner(t *testing.T) {
	t.Parallel()
	dataDir := newDataDir(t)
	opts := testOptions(t, dataDir)
	p := start(t, opts)

	_, err := Start(t.Context(), opts)
	if err == nil || !strings.Contains(err.Error(), "in use by another process") {
		t.Fatalf("second Start = %v, want an in-use error", err)
	}
	if got := queryString(t, p.URL("postgres"), "SELECT 1::text"); got != "1" {
		t.Errorf("first server broken by second Start: SELECT 1 = %q", got)
	}
}

func TestStartStopsLeftoverServer(t *testing.T) {
	t.Parallel()
	dataDir := newDataDir(t)
	opts := testOptions(t, dataDir)
	leftover := start(t, opts)
	leftoverPID := leftover.PID()
	// What a dead owner leaves behind when the server outlives it: the
	// kernel released its lock, the server still runs, nothing supervises
	// it.
	leftover.stopSuper()
	<-leftover.superDone
	leftover.lock.Close()

	p := start(t, opts)
	if processAlive(leftoverPID) {
		t.Errorf("leftover postgres pid %d still alive", leftoverPID)
	}
	if p.PID() == leftoverPID {
		t.Fatal("Start reused the leftover server instead of starting its own")
	}
	if got := queryString(t, p.URL("postgres"), "SELECT 1::text"); got != "1" {
		t.Errorf("SELECT 1 = %q", got)
	}
}

func TestStartIgnoresStalePIDFile(t *testing.T) {
	t.Parallel()
	dataDir := newDataDir(t)
	opts := testOptions(t, dataDir)
	first := start(t, opts)
	pidFile := filepath.Join(dataDir, "postmaster.pid")
	stale, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	stop(t, first)
	// The file a crashed server leaves: it names a process that is gone.
	if err := os.WriteFile(pidFile, stale, 0o600); err != nil {
		t.Fatal(err)
	}
	if cred, err := serverCredential(); err != nil {
		t.Fatal(err)
	} else if cred != nil {
		if err := os.Chown(pidFile, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}

	second := start(t, opts)
	if got := queryString(t, second.URL("postgres"), "SELECT 1::text"); got != "1" {
		t.Errorf("SELECT 1 = %q", got)
	}
}

// TestStartAfterOwnerKilled starts the server from a child copy of the test
// binary, SIGKILLs the child, and starts the server again on the same data
// dir.
func TestStartAfterOwnerKilled(t *testing.T) {
	if os.Getenv("PGEMBED_CHILD") == "1" {
		runChild(t)
		return
	}
	t.Parallel()
	dataDir := newDataDir(t)
	childServerPID := killedOwner(t, dataDir)

	p := start(t, testOptions(t, dataDir))
	if processAlive(childServerPID) {
		t.Errorf("child's postgres pid %d still alive", childServerPID)
	}
	if got := queryString(t, p.URL("postgres"), "SELECT 1::text"); got != "1" {
		t.Errorf("SELECT 1 = %q", got)
	}
}

// killedOwner runs TestStartAfterOwnerKilled's child, which starts a server
// on dataDir, checks that the server answers, SIGKILLs the child and waits
// for it to be reaped. It returns the server's pid.
func killedOwner(t *testing.T, dataDir string) int {
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^TestStartAfterOwnerKilled$")
	child.Env = append(os.Environ(), "PGEMBED_CHILD=1", "PGEMBED_DATA_DIR="+dataDir)
	child.Stderr = t.Output()
	stdin, err := child.StdinPipe() // held open: the child runs until killed
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	// Kill and reap the child however this ends; the reader stops at the
	// child's EOF.
	defer func() {
		_ = child.Process.Kill()
		for range lines {
		}
		_ = child.Wait()
	}()

	serverPID := 0
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for serverPID == 0 {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("child exited before its server was ready")
			}
			if rest, found := strings.CutPrefix(line, "READY "); found {
				serverPID, err = strconv.Atoi(rest)
				if err != nil {
					t.Fatalf("child said %q", line)
				}
			}
		case <-deadline.C:
			t.Fatal("child did not report a ready server within a minute")
		}
	}
	url := (&Postgres{dataDir: dataDir}).URL("postgres")
	if got := queryString(t, url, "SELECT 1::text"); got != "1" {
		t.Fatalf("child's server: SELECT 1 = %q", got)
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// A supervisor restarts Sluice only after the old process is gone.
	for range lines {
	}
	if err := child.Wait(); err == nil {
		t.Fatal("child exited cleanly, want killed")
	}
	return serverPID
}

// runChild is the child side of TestStartAfterOwnerKilled: it starts the
// server, reports its pid and runs until killed (or its stdin closes).
func runChild(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	p, err := Start(ctx, testOptions(t, os.Getenv("PGEMBED_DATA_DIR")))
	if err != nil {
		t.Fatalf("child Start: %v", err)
	}
	fmt.Printf("READY %d\n", p.PID())
	_, _ = io.Copy(io.Discard, os.Stdin)
	stop(t, p)
}

func TestStartWithoutBinaries(t *testing.T) {
	t.Parallel()
	opts := testOptions(t, newDataDir(t))
	opts.BinDir = t.TempDir()

	_, err := Start(t.Context(), opts)
	if !errors.Is(err, ErrBinariesNotFound) {
		t.Fatalf("Start = %v, want ErrBinariesNotFound", err)
	}
	for _, want := range []string{"apt-get install postgresql", "brew install postgresql@15", "SLUICE_DATABASE_URL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestStartRejectsLongDataDir(t *testing.T) {
	t.Parallel()
	opts := testOptions(t, "/tmp/"+strings.Repeat("d", 100))

	_, err := Start(t.Context(), opts)
	limit := strconv.Itoa(len(syscall.RawSockaddrUnix{}.Path) - 1)
	if err == nil || !strings.Contains(err.Error(), limit+"-byte limit") {
		t.Fatalf("Start = %v, want an error naming the %s-byte socket path limit", err, limit)
	}
}

// TestURLOfADataDirWithASpace: URL names the socket directory as it is,
// whatever the path holds, the way pgx reads a URL. A space used to be
// written "+", which pgx keeps, so Sluice looked for the socket in
// "/tmp/my+data/pg".
func TestURLOfADataDirWithASpace(t *testing.T) {
	t.Parallel()
	for _, dataDir := range []string{
		"/tmp/my data/pg",
		"/tmp/ lead and trail /pg",
		"/tmp/a+b/pg",
		"/tmp/100%/pg",
		"/tmp/a&host=b?c#d/pg",
		"/tmp/données/pg",
	} {
		cfg, err := pgconn.ParseConfig((&Postgres{dataDir: dataDir}).URL("sluice"))
		if err != nil {
			t.Errorf("data dir %q: parse URL: %v", dataDir, err)
			continue
		}
		if cfg.Host != dataDir || cfg.Port != port || cfg.Database != "sluice" || cfg.User != "postgres" {
			t.Errorf("data dir %q: URL reads as host %q, port %d, database %q, user %q", dataDir, cfg.Host, cfg.Port, cfg.Database, cfg.User)
		}
	}
}

// TestStartInDataDirWithASpace: Sluice connects to a server whose data
// dir has a space in its path (`sluice serve --data-dir "/tmp/x/sp ace"`
// used to fail).
func TestStartInDataDirWithASpace(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(filepath.Dir(newDataDir(t)), "sp ace", "pg")
	p := start(t, testOptions(t, dataDir))
	if got := queryString(t, p.URL("postgres"), "SHOW unix_socket_directories"); got != dataDir {
		t.Errorf("unix_socket_directories = %q, want %q", got, dataDir)
	}
}

// TestStartRejectsDataDirWithAComma: a data dir with a comma is refused
// before anything is made, naming data_dir and the comma: Postgres and pgx
// would take it for a list of directories or hosts. The server used to
// fail to start, saying only that it could not create ".../a/.s.PGSQL.5432.lock".
func TestStartRejectsDataDirWithAComma(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(filepath.Dir(newDataDir(t)), "a,b", "pg")
	p, err := Start(t.Context(), testOptions(t, dataDir))
	if err == nil {
		stop(t, p)
		t.Fatalf("Start in %s succeeded", dataDir)
	}
	for _, want := range []string{"data_dir", "comma"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Start in %s = %v, want it to say %q", dataDir, err, want)
		}
	}
	if _, err := os.Lstat(dataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Start in %s made it (%v)", dataDir, err)
	}
}

func TestStartRejectsManagedSettings(t *testing.T) {
	t.Parallel()
	opts := testOptions(t, newDataDir(t))
	opts.Settings["listen_addresses"] = "*"

	_, err := Start(t.Context(), opts)
	if err == nil || !strings.Contains(err.Error(), "listen_addresses") {
		t.Fatalf("Start = %v, want an error naming listen_addresses", err)
	}
}

func TestVersionOrdersBinDirs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		dir, prefix string
		want        float64
	}{
		{"/usr/lib/postgresql/15/bin", "", 15},
		{"/usr/lib/postgresql/9.6/bin", "", 9.6},
		{"/opt/homebrew/opt/postgresql@16/bin", "postgresql@", 16},
		{"/usr/lib/postgresql/devel/bin", "", -1},
	}
	for _, tt := range tests {
		if got := version(tt.dir, tt.prefix); got != tt.want {
			t.Errorf("version(%q) = %v, want %v", tt.dir, got, tt.want)
		}
	}
}

func TestStartFailureIncludesServerLog(t *testing.T) {
	t.Parallel()
	opts := testOptions(t, newDataDir(t))
	opts.Settings["shared_buffers"] = "lots"

	_, err := Start(t.Context(), opts)
	if err == nil || !strings.Contains(err.Error(), `invalid value for parameter "shared_buffers"`) {
		t.Fatalf("Start = %v, want an error quoting the server's complaint", err)
	}
}

func TestStopWithEndedContextStillStops(t *testing.T) {
	t.Parallel()
	p, err := Start(t.Context(), testOptions(t, newDataDir(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) }) // in case the test fails before its Stop
	pid := p.PID()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	// The server may finish its fast shutdown before Stop notices ctx, so
	// either result is right; what matters is that it is gone.
	if err := p.Stop(ctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("Stop = %v, want nil or context.Canceled", err)
	}
	if processAlive(pid) {
		t.Errorf("postgres pid %d alive after Stop returned", pid)
	}
}
