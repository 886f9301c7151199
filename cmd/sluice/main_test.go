package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// These tests run the real binary with its embedded Postgres: first start,
// restart on existing data, clean stop, and a start after SIGKILL.

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-bin-")
	if err != nil {
		panic(err)
	}
	if binary, err = dt.SluiceBinary(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// tempDir returns a directory the postgres user can enter: the embedded
// cluster runs as that user when the tests run as root, and t.TempDir's
// parent is private to the current user.
func tempDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "sluice-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

type proc struct {
	*dt.Proc
	url string
}

// start runs `sluice serve` on dataDir and waits until it serves.
func start(t *testing.T, dataDir string, extraEnv ...string) *proc {
	t.Helper()
	p := dt.StartProc(t, binary, []string{"serve", "--data-dir", dataDir, "--listen", "127.0.0.1:0"},
		append([]string{"SLUICE_ADMIN_PASSWORD=secret-pw"}, extraEnv...), nil)
	return &proc{Proc: p, url: "http://" + p.Addr}
}

func (p *proc) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, p.url+path, strings.NewReader(body))
	req.SetBasicAuth("admin", "secret-pw")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (p *proc) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-p.Exited():
		return p.Err()
	case <-time.After(60 * time.Second):
		t.Fatal("sluice did not exit within 60s")
		return nil
	}
}

// postmasterRunning reports whether dataDir's embedded cluster has a live
// postmaster.
func postmasterRunning(dataDir string) bool {
	b, err := os.ReadFile(filepath.Join(dataDir, "pg", "postmaster.pid"))
	if err != nil {
		return false
	}
	var pid int
	for _, c := range strings.SplitN(string(b), "\n", 2)[0] {
		pid = pid*10 + int(c-'0')
	}
	return syscall.Kill(pid, 0) == nil
}

func TestEmbeddedPostgresLifecycle(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(tempDir(t), "data")

	// First start: initdb, migrate, bootstrap.
	p := start(t, dataDir)
	if code, body := p.do(t, "POST", "/api/db/admin/keep", `{"schema":"type Note { text: String! }"}`); code != 201 {
		t.Fatalf("create database: %d %s", code, body)
	}
	if code, body := p.do(t, "POST", "/api/document/admin/keep", `{"@type":"Note","@id":"n1","text":"kept"}`); code != 200 {
		t.Fatalf("insert: %d %s", code, body)
	}

	// Clean stop: SIGTERM exits 0 and stops the postmaster.
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(t); err != nil {
		t.Fatalf("sluice exited with %v after SIGTERM", err)
	}
	if postmasterRunning(dataDir) {
		t.Fatal("the embedded postmaster still runs after a clean stop")
	}

	// Restart on existing data.
	p = start(t, dataDir)
	if code, body := p.do(t, "GET", "/api/document/admin/keep?id=Note/n1", ""); code != 200 || !strings.Contains(body, `"kept"`) {
		t.Fatalf("after restart: %d %s", code, body)
	}

	// SIGKILL: the next start must not be blocked by a leftover postmaster.
	if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.wait(t)
	p = start(t, dataDir)
	if code, body := p.do(t, "GET", "/api/document/admin/keep?id=Note/n1", ""); code != 200 || !strings.Contains(body, `"kept"`) {
		t.Fatalf("after SIGKILL and restart: %d %s", code, body)
	}
	if code, _ := p.do(t, "GET", "/readyz", ""); code != 200 {
		t.Fatalf("readyz: %d", code)
	}
}

func TestCommands(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(binary, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "sluice ") {
		t.Fatalf("version: %v %s", err, out)
	}
	dir := tempDir(t)
	cfg := filepath.Join(dir, "sluice.yaml")
	if err := os.WriteFile(cfg, []byte("listen: \":1\"\nlisten_port: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(binary, "serve", "--config", cfg).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "listen_port") {
		t.Fatalf("unknown config key: %v %s", err, out)
	}
	out, err = exec.Command(binary, "serve", "--nope").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "unknown flag: --nope") {
		t.Fatalf("unknown flag: %v %s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dataDir := filepath.Join(dir, "data")
	out, err = exec.CommandContext(ctx, binary, "migrate", "--data-dir", dataDir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "applied migration") {
		t.Fatalf("migrate: %v %s", err, out)
	}
	if postmasterRunning(dataDir) {
		t.Fatal("migrate left the embedded postmaster running")
	}
}

// TestShowAdminPassword: with log_format json the generated password is
// one JSON log record, its message saying what it is and the password in
// a field; in text it is the plain notice.
func TestShowAdminPassword(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	showAdminPassword(&b, config.LogFormatJSON, "pw-12345")
	var rec struct {
		Level, Msg, User, Password string
	}
	if err := json.Unmarshal(b.Bytes(), &rec); err != nil || strings.Count(b.String(), "\n") != 1 {
		t.Fatalf("json: not one JSON record: %q (%v)", b.String(), err)
	}
	if !strings.HasPrefix(rec.Msg, "Generated password for user admin") || rec.Password != "pw-12345" || rec.User != "admin" || rec.Level != "WARN" {
		t.Fatalf("json: %+v", rec)
	}
	b.Reset()
	showAdminPassword(&b, config.LogFormatText, "pw-12345")
	if !strings.Contains(b.String(), "Generated password for user admin: pw-12345\n") {
		t.Fatalf("text: %q", b.String())
	}
}
