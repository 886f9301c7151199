package main

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/eventually"
)

func TestReadyURL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ listen, want, err string }{
		{":6363", "http://127.0.0.1:6363/readyz", ""},
		{"0.0.0.0:8080", "http://127.0.0.1:8080/readyz", ""},
		{"[::]:6363", "http://[::1]:6363/readyz", ""},
		{"127.0.0.1:7000", "http://127.0.0.1:7000/readyz", ""},
		{"[::1]:7000", "http://[::1]:7000/readyz", ""},
		{"10.1.2.3:6363", "http://10.1.2.3:6363/readyz", ""},
		{"sluice.internal:6363", "http://sluice.internal:6363/readyz", ""},
		{"127.0.0.1:0", "", `listen address "127.0.0.1:0" has no fixed port to check`},
		{"6363", "", `healthcheck: listen address "6363": address 6363: missing port in address`},
	} {
		got, err := readyURL(c.listen)
		if got != c.want || (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("readyURL(%q) = %q, %v; want %q, %q", c.listen, got, err, c.want, c.err)
		}
	}
}

// TestHealthcheckCommand runs `sluice healthcheck` against a running
// daemon (exit 0, found through SLUICE_LISTEN as in the Docker image),
// a daemon that is not ready (503: exit 1) and a closed port (exit 1).
func TestHealthcheckCommand(t *testing.T) {
	t.Parallel()
	p := start(t, filepath.Join(tempDir(t), "data"))
	run := func(env string, args ...string) (string, error) {
		cmd := exec.Command(binary, append([]string{"healthcheck"}, args...)...)
		// Without the test run's own SLUICE_ variables (SLUICE_BROWSER_TEST
		// …), which the check warns about as unknown.
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "SLUICE_") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, env)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// The daemon serves once its change feed runs (TestReadyOnceServing);
	// start returned once the port was bound, before it serves.
	eventually.True(t, 30*time.Second, "the healthcheck of a daemon that becomes ready", func() bool {
		out, err := run("SLUICE_LISTEN=" + p.Addr)
		if err != nil && !strings.Contains(out, "503") {
			t.Fatalf("ready daemon: %v %q", err, out)
		}
		return err == nil && out == ""
	})

	// A misspelt variable is warned about, as serve warns; the check
	// still answers.
	out, err := run("SLUICE_LISTN=x", "--listen", p.Addr)
	if err != nil || !strings.Contains(out, "ignoring unknown environment variable") || !strings.Contains(out, "SLUICE_LISTN") {
		t.Fatalf("misspelt variable: %v %q, want a warning naming it", err, out)
	}

	notReady := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			t.Errorf("healthcheck asked for %s", r.URL.Path)
		}
		http.Error(w, "starting", http.StatusServiceUnavailable)
	}))
	defer notReady.Close()
	out, err = run("", "--listen", strings.TrimPrefix(notReady.URL, "http://"))
	if code := exitCode(err); code != 1 || !strings.Contains(out, "503 Service Unavailable: starting") {
		t.Fatalf("daemon not ready: exit %d %q", code, out)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	out, err = run("", "--listen", closed, "--timeout", "2s")
	if code := exitCode(err); code != 1 || !strings.Contains(out, "connection refused") {
		t.Fatalf("nothing listening: exit %d %q", code, out)
	}
}

// TestHealthcheckTimeoutMustBePositive: `sluice healthcheck --timeout 0`
// (or a negative one) is refused naming the flag; it was taken, and every
// check failed at once with "context deadline exceeded", which reads as
// a daemon that did not answer.
func TestHealthcheckTimeoutMustBePositive(t *testing.T) {
	t.Parallel()
	for timeout, shown := range map[string]string{"0": "0s", "-1s": "-1s"} {
		out, err := exec.Command(binary, "healthcheck", "--listen", "127.0.0.1:9", "--timeout", timeout).CombinedOutput()
		want := "sluice: healthcheck: --timeout " + shown + ": want a duration greater than zero, such as 5s\n"
		if code := exitCode(err); code != 1 || string(out) != want {
			t.Errorf("--timeout %s: exit %d %q, want 1 %q", timeout, code, out, want)
		}
	}
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
