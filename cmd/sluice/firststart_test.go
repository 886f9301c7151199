package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// adminStatus answers GET /api/users, which only a super user may read,
// as admin with password.
func adminStatus(t *testing.T, p *proc, password string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", p.url+"/api/users", nil)
	req.SetBasicAuth("admin", password)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// The generated admin password is shown on the first start only: a first
// start whose port is taken must fail before it makes the admin user (and
// before initdb), so the start that serves is the one that shows it. A
// lost password is recovered by a start with SLUICE_ADMIN_PASSWORD
// (README.md, docs/running.md).
func TestFirstStartOnATakenPortShowsNoPassword(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(tempDir(t), "data")
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "serve", "--data-dir", dataDir, "--listen", taken.Addr().String())
	// Empty is unset: a password is generated (the last of a key wins).
	cmd.Env = append(os.Environ(), "SLUICE_ADMIN_PASSWORD=")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("sluice on a taken port: %v, want exit status 1\n%s", err, out)
	}
	if !strings.Contains(string(out), "address already in use") {
		t.Fatalf("sluice on a taken port did not say why:\n%s", out)
	}
	if strings.Contains(string(out), "Generated password") {
		t.Fatalf("sluice on a taken port showed the generated password, which the next start does not show again:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "pg")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("sluice on a taken port made its embedded cluster (%v) before failing after %v:\n%s", err, time.Since(start), out)
	}

	// The next start, on a free port, shows the password, which works.
	logs := newLogLines()
	p := dt.StartProc(t, binary, []string{"serve", "--data-dir", dataDir, "--listen", "127.0.0.1:0"},
		[]string{"SLUICE_ADMIN_PASSWORD="}, logs.add)
	p1 := &proc{Proc: p, url: "http://" + p.Addr}
	// The password is printed before the line StartProc waits for.
	line := logs.find("Generated password for user admin: ")
	if line == "" {
		t.Fatalf("the first start that serves showed no password:\n%s", logs.all())
	}
	generated := strings.TrimSpace(line[strings.Index(line, ": ")+2:])
	if code := adminStatus(t, p1, generated); code != 200 {
		t.Fatalf("GET /api/users as admin with the generated password: %d", code)
	}
	if err := p.Cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := p1.wait(t); err != nil {
		t.Fatalf("sluice exited with %v after SIGINT", err)
	}

	// A lost password: a start with SLUICE_ADMIN_PASSWORD sets it.
	logs = newLogLines()
	p = dt.StartProc(t, binary, []string{"serve", "--data-dir", dataDir, "--listen", "127.0.0.1:0"},
		[]string{"SLUICE_ADMIN_PASSWORD=recovered-pw"}, logs.add)
	p2 := &proc{Proc: p, url: "http://" + p.Addr}
	if line := logs.find("Generated password"); line != "" {
		t.Fatalf("a start on existing data showed a password: %s", line)
	}
	if code := adminStatus(t, p2, "recovered-pw"); code != 200 {
		t.Fatalf("GET /api/users as admin with SLUICE_ADMIN_PASSWORD's password: %d", code)
	}
	if code := adminStatus(t, p2, generated); code != 401 {
		t.Fatalf("GET /api/users as admin with the replaced generated password: %d, want 401", code)
	}
}
