package doctest_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// The settings the docs' examples say Sluice was started with: the admin
// password of the quick start, and the ones docs/security.md names for its
// JWT and CORS examples.
const (
	adminPassword = "root"
	jwtSecret     = "a-secret-of-at-least-32-bytes-to-try-jwts"
	corsOrigin    = "https://app.example.com"
)

// TestExamples runs the shell examples of README.md and docs/*.md: each
// file's ```sh blocks that call curl, in document order, against a daemon
// of its own started the way the docs say, each block in one bash with
// `set -euo pipefail`. Every curl must succeed (2xx) unless its comment
// says `answers <status>`; `prints "…"` names what its output contains. A
// stream (curl -N) runs in the background, as in a second terminal: the
// next block starts once it has printed its first bytes (it is then
// registered), and before the file's last block (which cleans up: the
// docs' pages end by deleting what they made) it must have printed what
// its comment names (a trailing & on a stream, for one terminal, changes
// nothing).
func TestExamples(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("the docs' examples need curl: apt-get install curl")
	}
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"../../README.md"}, files...)
	for _, path := range files {
		name := strings.TrimPrefix(path, "../../")
		doc, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := shellBlocks(string(doc))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(blocks) == 0 {
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runFile(t, name, blocks)
		})
	}
}

// runFile runs one document's blocks in order against a fresh daemon.
func runFile(t *testing.T, name string, blocks []block) {
	d := dt.Start(t, func(c *config.Config) {
		c.AdminPassword = adminPassword
		c.JWTHS256Secret = jwtSecret
		c.CORSOrigins = []string{corsOrigin}
	})
	addr := strings.TrimPrefix(d.URL, "http://")
	waitReady(t, d)
	dir := t.TempDir()
	var streams []*stream
	var groups []int // process groups that may hold streams
	defer func() {
		for _, pgid := range groups {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
		for _, s := range streams {
			s.close()
		}
	}()
	for i, b := range blocks {
		where := fmt.Sprintf("%s:%d", name, b.line)
		if i == len(blocks)-1 && len(blocks) > 1 {
			awaitStreams(t, streams) // before the last block, which cleans up
		}
		script, bs, err := prepare(b, dir, len(streams))
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		for _, s := range bs {
			s.where = fmt.Sprintf("%s:%d", name, b.line+1+s.line)
			if err := s.open(dir); err != nil {
				t.Fatal(err)
			}
			streams = append(streams, s)
		}
		script = strings.ReplaceAll(script, "localhost:6363", addr)
		out, pgid, err := runBash(dir, script, time.Minute)
		if len(bs) > 0 {
			groups = append(groups, pgid)
		}
		t.Logf("%s:\n%s", where, out)
		if err != nil {
			t.Fatalf("%s: the block failed (%v); its output is above", where, err)
		}
	}
	if len(blocks) == 1 {
		awaitStreams(t, streams)
	}
}

// awaitStreams waits for each stream to print what its comment names.
func awaitStreams(t *testing.T, streams []*stream) {
	t.Helper()
	for _, s := range streams {
		if missing := s.wait(30 * time.Second); missing != "" {
			t.Fatalf("%s: the stream printed no %q before the file's last block; it printed:\n%s", s.where, missing, s.output())
		}
	}
}

// waitReady waits until the daemon's /readyz answers 200, as a reader's
// Sluice does before they paste anything: it serves a little before its
// change feed has read the log once.
func waitReady(t *testing.T, d *dt.Daemon) {
	t.Helper()
	eventually.True(t, 30*time.Second, "GET /readyz answers 200", func() bool {
		return d.Do(t, dt.NoAuth(), http.MethodGet, "/readyz", nil).Status == http.StatusOK
	})
}

// prelude defines the functions a block's commands are rewritten to call.
const prelude = `set -euo pipefail
# curl as the examples run it: quiet but for errors, failing on an HTTP
# error status, never reading a ~/.curlrc.
curl() { command curl -q -sS --fail-with-body --max-time 60 "$@"; }
# sluice_expect STATUS STRING... -- curl ARGS: curl that must answer STATUS
# (any 2xx when empty) and print each STRING.
sluice_expect() {
  local want=$1; shift
  local strs=()
  while [ "$1" != -- ]; do strs+=("$1"); shift; done
  shift 2
  local out code
  out=$(command curl -q -sS --max-time 60 -w '\n%{http_code}' "$@")
  code=${out##*$'\n'}
  out=${out%$'\n'*}
  printf '%s\n' "$out"
  if [ -z "$want" ] && [[ $code != 2* ]]; then echo "docs test: HTTP status $code" >&2; return 1; fi
  if [ -n "$want" ] && [ "$code" != "$want" ]; then echo "docs test: HTTP status $code, want $want" >&2; return 1; fi
  local s
  for s in "${strs[@]}"; do
    [[ $out == *"$s"* ]] || { echo "docs test: the output has no \"$s\"" >&2; return 1; }
  done
}
# sluice_stream N curl ARGS: a stream, run in the background as in another
# terminal, its output read by the test; returns once it printed anything.
sluice_stream() {
  local n=$1; shift 2
  command curl -q -sS "$@" >"$SLUICE_DOCTEST/stream-$n.out" 2>&1 &
  read -r _ <"$SLUICE_DOCTEST/stream-$n.ready"
}
`

// prepare rewrites a block into a bash script: commands with expectations
// call sluice_expect, streams sluice_stream (numbered from n).
func prepare(b block, dir string, n int) (string, []*stream, error) {
	var streams []*stream
	var script strings.Builder
	script.WriteString(prelude)
	at := 0
	for _, c := range commands(b.text) {
		e, err := expect(c)
		if err != nil {
			return "", nil, err
		}
		if !e.stream && e.status == "" && e.prints == nil {
			continue
		}
		i := c.start + strings.Index(b.text[c.start:], "curl")
		script.WriteString(b.text[at:i])
		at = i
		if e.stream {
			streams = append(streams, &stream{n: n + len(streams), line: c.line, prints: e.prints})
			fmt.Fprintf(&script, "sluice_stream %d ", n+len(streams)-1)
			// A stream the docs start in the background (a trailing &,
			// for a block pasted into one terminal) is in the background
			// already: sluice_stream must return only once it is ready.
			if text := strings.TrimRight(c.text, " \t\n"); strings.HasSuffix(text, "&") && !strings.HasSuffix(text, "&&") {
				end := c.start + len(text)
				script.WriteString(b.text[at : end-1])
				at = end
			}
			continue
		}
		script.WriteString("sluice_expect " + quote(e.status))
		for _, s := range e.prints {
			script.WriteString(" " + quote(s))
		}
		script.WriteString(" -- ")
	}
	script.WriteString(b.text[at:])
	return script.String(), streams, nil
}

// quote quotes s for bash.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// runBash runs script in dir in a process group of its own, which it
// returns so that the caller can stop the streams the script leaves
// running. It kills the group when the script runs longer than limit.
func runBash(dir, script string, limit time.Duration) (string, int, error) {
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "LANG=C.UTF-8", "SLUICE_DOCTEST=" + dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", 0, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case err := <-done:
		return out.String(), cmd.Process.Pid, err
	case <-timer.C:
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err := <-done
		return out.String(), cmd.Process.Pid, fmt.Errorf("still running after %s, killed: %v", limit, err)
	}
}

// A stream is a curl -N that a block starts in the background. Its output
// and readiness go through two named pipes in the block's directory,
// which the test holds open for reading and writing, so that neither side
// ever blocks on opening them or sees them end.
type stream struct {
	n      int
	line   int // in its block
	where  string
	prints []string

	out, ready *os.File
	mu         sync.Mutex
	buf        bytes.Buffer
	grew       chan struct{} // closed and replaced whenever buf grows
}

func (s *stream) open(dir string) error {
	s.grew = make(chan struct{})
	for _, f := range []struct {
		name string
		file **os.File
	}{{"out", &s.out}, {"ready", &s.ready}} {
		path := filepath.Join(dir, fmt.Sprintf("stream-%d.%s", s.n, f.name))
		if err := syscall.Mkfifo(path, 0o600); err != nil {
			return fmt.Errorf("mkfifo %s: %w", path, err)
		}
		file, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		*f.file = file
	}
	go s.read()
	return nil
}

// read collects the stream's output, and says it is ready at its first
// bytes.
func (s *stream) read() {
	p := make([]byte, 32<<10)
	first := true
	for {
		n, err := s.out.Read(p)
		if n > 0 {
			s.mu.Lock()
			s.buf.Write(p[:n])
			close(s.grew)
			s.grew = make(chan struct{})
			s.mu.Unlock()
			if first {
				first = false
				_, _ = s.ready.Write([]byte("\n"))
			}
		}
		if err != nil {
			return
		}
	}
}

func (s *stream) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// wait waits up to limit for the output to hold every string the stream
// prints, and returns the first it does not hold ("" when all are there).
func (s *stream) wait(limit time.Duration) string {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		s.mu.Lock()
		out, grew := s.buf.String(), s.grew
		s.mu.Unlock()
		missing := ""
		for _, p := range s.prints {
			if !strings.Contains(out, p) {
				missing = p
				break
			}
		}
		if missing == "" {
			return ""
		}
		select {
		case <-grew:
		case <-timer.C:
			return missing
		}
	}
}

func (s *stream) close() {
	_ = s.out.Close()
	_ = s.ready.Close()
}
