package pgembed

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// nobody returns the credential of the OS user nobody, skipping the test
// unless it runs as root (only root runs Postgres as another user).
func nobody(t *testing.T) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: Postgres runs as the postgres user only when Sluice runs as root")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// TestStartRefusesClusterOfAnotherUser: a cluster made by Sluice run as
// another user (nobody) is not taken from that user by a start as root:
// the start fails naming both users, and the data dir stays nobody's. It
// used to be given to postgres, which could not read the cluster's files
// ("postgresql.conf: Permission denied"), and nobody could no longer
// enter it.
func TestStartRefusesClusterOfAnotherUser(t *testing.T) {
	t.Parallel()
	other := nobody(t)
	dataDir := newDataDir(t)
	opts := testOptions(t, dataDir)
	bin, err := findBinaries("")
	if err != nil {
		t.Fatal(err)
	}
	// What Sluice run as nobody makes.
	if err := makeDataDir(dataDir, other); err != nil {
		t.Fatal(err)
	}
	if err := initdb(t.Context(), bin, dataDir, other, opts.Logger); err != nil {
		t.Fatal(err)
	}

	p, err := Start(t.Context(), opts)
	if err == nil {
		stop(t, p)
		t.Fatal("Start as root on nobody's cluster succeeded")
	}
	cred, err2 := serverCredential()
	if err2 != nil {
		t.Fatal(err2)
	}
	for _, want := range []string{"a Postgres cluster of user " + userName(other.Uid), "as user " + userName(cred.Uid), "run sluice as " + userName(other.Uid), "chown -R"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Start = %v, want it to say %q", err, want)
		}
	}
	if owner, err := ownerOf(dataDir); err != nil || owner != other.Uid {
		t.Errorf("data dir owner after the refused start = %d (%v), want nobody's %d", owner, err, other.Uid)
	}
}

// TestStartTakesEmptyDirOfAnotherUser: an empty data dir of another user
// (a volume mounted there) is handed to the postgres user, and the start
// makes a cluster in it.
func TestStartTakesEmptyDirOfAnotherUser(t *testing.T) {
	t.Parallel()
	other := nobody(t)
	dataDir := newDataDir(t)
	if err := os.Mkdir(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dataDir, int(other.Uid), int(other.Gid)); err != nil {
		t.Fatal(err)
	}

	p := start(t, testOptions(t, dataDir))
	if got := queryString(t, p.URL("postgres"), "SELECT 1::text"); got != "1" {
		t.Errorf("SELECT 1 = %q", got)
	}
}

// TestStartFixesGroupWritableDataDir: a cluster whose directory became
// 2770, as Kubernetes makes every directory of a volume mounted with
// fsGroup, starts, and its directory is 0700 again. Postgres used to
// refuse it ("data directory ... has invalid permissions").
func TestStartFixesGroupWritableDataDir(t *testing.T) {
	t.Parallel()
	dataDir := newDataDir(t)
	opts := testOptions(t, dataDir)
	stop(t, start(t, opts))
	if err := syscall.Chmod(dataDir, 0o2770); err != nil {
		t.Fatal(err)
	}

	p := start(t, opts)
	if got := queryString(t, p.URL("postgres"), "SELECT 1::text"); got != "1" {
		t.Errorf("SELECT 1 = %q", got)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dataDir, &st); err != nil {
		t.Fatal(err)
	}
	if mode := st.Mode & 0o7777; mode != 0o700 {
		t.Errorf("data dir mode after the start = %04o, want 0700", mode)
	}
}

// TestStartAsAnotherUserNamesOwner: Sluice run as nobody on a cluster made
// by Sluice run as root (so the postgres user's) fails naming both users,
// the user to run as and the chown that hands the cluster over, as the
// opposite case does (TestStartRefusesClusterOfAnotherUser). It used to
// fail with only "open data dir: ... permission denied". The child, this
// test run as nobody, starts Sluice's Postgres and prints the error.
func TestStartAsAnotherUserNamesOwner(t *testing.T) {
	if dataDir := os.Getenv("PGEMBED_DENIED_DATA_DIR"); dataDir != "" {
		_, err := Start(t.Context(), testOptions(t, dataDir))
		fmt.Printf("START: %v\n", err)
		return
	}
	t.Parallel()
	other := nobody(t)
	dataDir := newDataDir(t)
	stop(t, start(t, testOptions(t, dataDir)))
	// The test binary's own directory is root's alone.
	bin := filepath.Join(filepath.Dir(dataDir), "pgembed.test")
	copyFile(t, os.Args[0], bin)
	child := exec.Command(bin, "-test.run=^TestStartAsAnotherUserNamesOwner$")
	child.Env = append(os.Environ(), "PGEMBED_DENIED_DATA_DIR="+dataDir)
	child.SysProcAttr = &syscall.SysProcAttr{Credential: other}
	out, err := child.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v; output:\n%s", err, out)
	}
	_, got, found := strings.Cut(string(out), "START: ")
	if !found {
		t.Fatalf("child printed no Start result; output:\n%s", out)
	}
	got, _, _ = strings.Cut(got, "\n")
	t.Logf("Start as nobody: %s", got)
	cred, err := serverCredential()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"belongs to user " + userName(cred.Uid),
		"Sluice runs as user " + userName(other.Uid),
		"run sluice as root",
		fmt.Sprintf("`chown -R %d:%d %s`", other.Uid, other.Gid, dataDir),
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Start as nobody = %s, want it to say %q", got, want)
		}
	}
}

// copyFile copies the file from to a new file to, executable by all.
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o755); err != nil {
		t.Fatal(err)
	}
}
