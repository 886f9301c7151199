package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// procStat is what /proc/<pid>/stat says of a process.
type procStat struct {
	pid, ppid int
	state     byte
	argv0     string
}

// children returns the processes whose parent is ppid.
func children(t *testing.T, ppid int) []procStat {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []procStat
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		f := bytes.Fields(stat[i+1:])
		if len(f) < 2 {
			continue
		}
		parent, _ := strconv.Atoi(string(f[1]))
		if parent != ppid {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		argv0, _, _ := bytes.Cut(cmdline, []byte{0})
		out = append(out, procStat{pid: pid, ppid: parent, state: f[0][0], argv0: string(argv0)})
	}
	return out
}

// TestEmbeddedPostgresKilled runs Sluice as PID 1 of a PID namespace of
// its own, as in a container without an init, and kills its embedded
// postmaster with SIGKILL while a change stream is open. The stream ends
// with api:Unavailable, Sluice restarts the server, /readyz answers 200
// again, the stream resumed from its last event id gets exactly the
// commits after it, and the dead server's backends, which became Sluice's
// children, are reaped: no zombie is left.
func TestEmbeddedPostgresKilled(t *testing.T) {
	t.Parallel()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatal("this test needs unshare (util-linux) to run sluice as PID 1 of a PID namespace: apt-get install util-linux")
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test makes a PID namespace, which needs root (CAP_SYS_ADMIN): run the tests as root, as .ci/run does")
	}
	dataDir := filepath.Join(tempDir(t), "data")
	logs := newLogLines()
	p := dt.StartProc(t, unshare, []string{"--pid", "--fork", "--mount-proc", "--kill-child=SIGKILL", binary,
		"serve", "--data-dir", dataDir, "--listen", "127.0.0.1:0"},
		[]string{"SLUICE_ADMIN_PASSWORD=secret-pw"}, logs.add)
	kids := children(t, p.Cmd.Process.Pid)
	if len(kids) != 1 {
		t.Fatalf("unshare has %d children, want sluice alone", len(kids))
	}
	sluicePID := kids[0].pid
	if ns, err := os.ReadFile("/proc/" + strconv.Itoa(sluicePID) + "/status"); err != nil || !strings.Contains(string(ns), "NSpid:\t"+strconv.Itoa(sluicePID)+"\t1\n") {
		t.Fatalf("sluice is not PID 1 of its namespace: %v\n%s", err, ns)
	}
	sluice := dt.Remote("http://" + p.Addr)
	auth := dt.Basic("admin", "secret-pw")
	sluice.MustDo(t, 201, auth, "POST", "/api/db/admin/crash", `{"schema":"type Note { text: String! }"}`)
	req := dt.StreamRequest{Path: "/api/subscribe/admin/crash/Note"}
	s := sluice.MustOpenStream(t, auth, req)
	s.Next() // connected
	sluice.MustDo(t, 200, auth, "POST", "/api/document/admin/crash", `{"@type":"Note","@id":"before","text":"before the crash"}`)
	f := s.Event()
	if f.Field("event") != "entity.create" || !strings.Contains(f.String(), "Note/before") {
		t.Fatalf("first event: %q", f)
	}
	last := f.Field("id")

	var postmaster int
	for _, c := range children(t, sluicePID) {
		if filepath.Base(c.argv0) == "postgres" {
			postmaster = c.pid
		}
	}
	if postmaster == 0 {
		t.Fatal("no postgres child of sluice")
	}
	if err := syscall.Kill(postmaster, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	// The stream ends with the error that says to reconnect.
	frames := s.Ended()
	if len(frames) == 0 || frames[len(frames)-1].Field("event") != "error" || !strings.Contains(frames[len(frames)-1].String(), "api:Unavailable") {
		t.Fatalf("stream after the crash: %q, want an api:Unavailable error", frames)
	}
	logs.waitFor(t, "embedded postgres restarted")
	eventually.True(t, time.Minute, "/readyz 200", func() bool {
		return sluice.Do(t, dt.NoAuth(), "GET", "/readyz", nil).Status == 200
	})
	// Every child of the dead postmaster was reparented to sluice (PID 1)
	// and must have been reaped.
	for _, c := range children(t, sluicePID) {
		if c.state == 'Z' {
			t.Errorf("zombie child of sluice: pid %d %s", c.pid, c.argv0)
		}
	}

	sluice.MustDo(t, 200, auth, "POST", "/api/document/admin/crash", `{"@type":"Note","@id":"after","text":"after the restart"}`)
	req.Header = []string{"Last-Event-ID", last}
	s = sluice.MustOpenStream(t, auth, req)
	s.Next() // connected
	if f := s.Event(); !strings.Contains(f.String(), "Note/after") {
		t.Fatalf("resumed stream: %q, want Note/after", f)
	}
	sluice.MustDo(t, 200, auth, "POST", "/api/document/admin/crash", `{"@type":"Note","@id":"live","text":"live"}`)
	if f := s.Event(); !strings.Contains(f.String(), "Note/live") {
		t.Fatalf("resumed stream, live: %q, want Note/live", f)
	}

	// A clean stop still works, through the namespace's PID 1.
	if err := syscall.Kill(sluicePID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Exited():
		if p.Err() != nil {
			t.Fatalf("sluice exited with %v after SIGTERM", p.Err())
		}
	case <-time.After(time.Minute):
		t.Fatal("sluice did not stop within a minute")
	}

	// The restart was told once, not line by line: no server line relayed
	// as a warning (Sluice does not connect while the server is down, and
	// the sessions its death ended are its supervisor's to report), and
	// no warning repeated at every retry.
	warned := map[string]int{}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	for _, line := range logs.lines {
		if !strings.Contains(line, "level=WARN") && !strings.Contains(line, "level=ERROR") {
			continue
		}
		if strings.Contains(line, "msg=postgres ") {
			t.Errorf("a server line relayed as a warning: %s", line)
		}
		_, msg, _ := strings.Cut(line, " msg=")
		if q, err := strconv.QuotedPrefix(msg); err == nil {
			msg = q
		} else {
			msg, _, _ = strings.Cut(msg, " ")
		}
		if warned[msg]++; warned[msg] == 2 {
			t.Errorf("warned more than once: %s", line)
		}
	}
}

// TestEmbeddedPostgresThatDoesNotComeBack: when every restart of the
// embedded server fails, Sluice gives up after its restarts (about 16 s of
// backoff) and exits non-zero, so that a restart policy acts.
func TestEmbeddedPostgresThatDoesNotComeBack(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(tempDir(t), "data")
	p, logs := startLogged(t, dataDir)
	conf, err := os.OpenFile(filepath.Join(dataDir, "pg", "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conf.WriteString("\nshared_buffers = 'not a size'\n"); err != nil {
		t.Fatal(err)
	}
	conf.Close()
	var postmaster int
	for _, c := range children(t, p.Cmd.Process.Pid) {
		if filepath.Base(c.argv0) == "postgres" {
			postmaster = c.pid
		}
	}
	if postmaster == 0 {
		t.Fatal("no postgres child of sluice")
	}
	if err := syscall.Kill(postmaster, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Exited():
	case <-time.After(2 * time.Minute):
		t.Fatal("sluice still runs two minutes after its Postgres stopped coming back")
	}
	var exit *exec.ExitError
	if !errors.As(p.Err(), &exit) || exit.ExitCode() != 1 {
		t.Fatalf("sluice exited with %v, want exit status 1", p.Err())
	}
	logs.waitFor(t, "embedded postgres does not come back")
	if logs.find("restarting it") == "" {
		t.Fatal("no restart was tried")
	}
}
