package daemontest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"
)

// SluiceBinaryEnv names the environment variable that holds the path of a
// sluice binary built for a test run. `make test-go` builds the release
// binary once and sets it, so every package that starts sluice as its own
// process runs that one binary, the one that ships, instead of building
// its own.
const SluiceBinaryEnv = "SLUICE_TEST_BINARY"

// SluiceBinary returns the path of a sluice binary of this module for
// tests that run it as a process: the one named by $SLUICE_TEST_BINARY, or
// else one it builds into dir (go build caches, so a rebuild of unchanged
// sources takes under a second). It takes no testing.TB so that TestMain
// can call it.
func SluiceBinary(dir string) (string, error) {
	if p := os.Getenv(SluiceBinaryEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s: %w", SluiceBinaryEnv, err)
		}
		return p, nil
	}
	out := filepath.Join(dir, "sluice")
	if msg, err := exec.Command("go", "build", "-o", out, "github.com/sluice-dev/sluice/cmd/sluice").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/sluice: %w\n%s", err, msg)
	}
	return out, nil
}

// Proc is a server process started by StartProc.
type Proc struct {
	Cmd *exec.Cmd
	// Addr is the host:port it serves on.
	Addr string

	exited chan struct{}
	err    error // how it exited, set before exited is closed
}

// Exited is closed once the process has exited; Err then says how.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Err returns the process's exit error (nil: exit status 0) once Exited
// is closed.
func (p *Proc) Err() error { return p.err }

// servingLine matches the line a server logs once it accepts connections:
// `sluice serve` and the benchmarks' minimal SSE server log the same.
var servingLine = regexp.MustCompile(`is serving" addr=(\S+)`)

// StartProc runs bin with args, with env added to this process's
// environment, passes every other line it logs to onLine (nil: dropped),
// and waits until it logs the address it serves on (90 s at most). When
// the test ends it is stopped with SIGTERM, then SIGKILL after 30 s.
func StartProc(tb testing.TB, bin string, args, env []string, onLine func(string)) *Proc {
	tb.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	p := &Proc{Cmd: cmd, exited: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := servingLine.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			} else if onLine != nil {
				onLine(sc.Text())
			}
		}
		p.err = cmd.Wait()
		close(p.exited)
	}()
	select {
	case a := <-addr:
		p.Addr = a
	case <-p.exited:
		tb.Fatalf("%s exited before serving: %v", bin, p.err)
	case <-time.After(90 * time.Second):
		_ = cmd.Process.Kill()
		tb.Fatalf("%s did not serve within 90s", bin)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// Remote returns a Daemon for a server running at baseURL (such as a
// process StartProc started) whose HTTP and stream helpers (Do, MustDo,
// OpenStream…) tests can use; its in-process parts are nil.
func Remote(baseURL string) *Daemon { return &Daemon{URL: baseURL} }
