package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// logLines collects a process's log lines and lets a test wait for one.
type logLines struct {
	mu    sync.Mutex
	lines []string
	added chan struct{} // closed and replaced on every line
}

func newLogLines() *logLines { return &logLines{added: make(chan struct{})} }

func (l *logLines) add(line string) {
	l.mu.Lock()
	l.lines = append(l.lines, line)
	close(l.added)
	l.added = make(chan struct{})
	l.mu.Unlock()
}

// find returns the first line containing s, or "".
func (l *logLines) find(s string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}

// has reports whether a line contains every one of parts.
func (l *logLines) has(parts ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// all returns every line.
func (l *logLines) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// waitFor waits up to a minute for a line containing s and returns it.
func (l *logLines) waitFor(t *testing.T, s string) string {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		l.mu.Lock()
		added := l.added
		l.mu.Unlock()
		if line := l.find(s); line != "" {
			return line
		}
		select {
		case <-added:
		case <-deadline:
			t.Fatalf("no log line containing %q within a minute", s)
		}
	}
}

// startLogged runs `sluice serve` on dataDir with debug logs (the embedded
// server's own lines among them) collected in the returned logLines.
func startLogged(t *testing.T, dataDir string, extraEnv ...string) (*proc, *logLines) {
	t.Helper()
	logs := newLogLines()
	env := append([]string{"SLUICE_ADMIN_PASSWORD=secret-pw", "SLUICE_LOG_LEVEL=debug"}, extraEnv...)
	p := dt.StartProc(t, binary, []string{"serve", "--data-dir", dataDir, "--listen", "127.0.0.1:0"}, env, logs.add)
	return &proc{Proc: p, url: "http://" + p.Addr}, logs
}

// openTransactions returns how many of Sluice's sessions on the embedded
// server in pgDir are inside a transaction.
func openTransactions(t *testing.T, pgDir string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, "postgres://postgres@/sluice?sslmode=disable&port=5432&host="+url.QueryEscape(pgDir))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE application_name = 'sluice' AND state = 'idle in transaction'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// checkCleanStart fails t unless the embedded server's start found a
// cluster that had been shut down cleanly: no crash recovery.
func checkCleanStart(t *testing.T, logs *logLines) {
	t.Helper()
	// StartProc returned once Sluice served: the server's start lines
	// came before.
	if line := logs.find("not properly shut down"); line != "" {
		t.Fatalf("the embedded Postgres ran crash recovery: %s", line)
	}
	if logs.find("database system was shut down at") == "" {
		t.Fatal(`the embedded Postgres did not log "database system was shut down at": it was not stopped cleanly`)
	}
}

// startUnfinishedWrite starts an NDJSON write to database keep whose body
// is never finished, and waits until its transaction is open: more
// documents than one chunk (250) are sent, and the handler writes the
// first chunk in its transaction, which shows the request is being served
// (a connection still in the listen queue at SIGTERM is not). Closing
// send ends the body; answered gets the request's outcome.
func startUnfinishedWrite(t *testing.T, p *proc, dataDir string) (send *io.PipeWriter, answered chan error) {
	t.Helper()
	body, send := io.Pipe()
	req, _ := http.NewRequest("POST", p.url+"/api/document/admin/keep", body)
	req.SetBasicAuth("admin", "secret-pw")
	req.Header.Set("Content-Type", "application/x-ndjson")
	answered = make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			var b []byte
			b, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil {
				err = fmt.Errorf("answered %d %s", resp.StatusCode, b)
			}
		}
		answered <- err
	}()
	var docs strings.Builder
	for i := range 300 {
		fmt.Fprintf(&docs, `{"@type":"Note","@id":"never-%d","text":"never finished"}`+"\n", i)
	}
	if _, err := io.WriteString(send, docs.String()); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, time.Minute, "the write's transaction is open", func() bool {
		return openTransactions(t, filepath.Join(dataDir, "pg")) > 0
	})
	return send, answered
}

// TestStopWithARequestInFlight: SIGTERM while a write's body is still
// being sent and a change stream is open. The stream gets its last frame
// at once, the write may finish within shutdown_timeout and commits, and
// Sluice exits 0 with its embedded Postgres shut down cleanly, so the next
// start runs no crash recovery.
func TestStopWithARequestInFlight(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(tempDir(t), "data")
	// Bodies read as they arrive (as past write_spool_bytes), so that the
	// write's transaction is open while its body is.
	p, _ := startLogged(t, dataDir, "SLUICE_SHUTDOWN_TIMEOUT=20s", "SLUICE_WRITE_SPOOL_BYTES=0")
	if code, body := p.do(t, "POST", "/api/db/admin/keep", `{"schema":"type Note { text: String! }"}`); code != 201 {
		t.Fatalf("create database: %d %s", code, body)
	}

	// A change stream, read until it ends.
	req, _ := http.NewRequest("GET", p.url+"/api/subscribe/admin/keep/Note", nil)
	req.SetBasicAuth("admin", "secret-pw")
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	frames := bufio.NewReader(stream.Body)
	if line, err := frames.ReadString('\n'); err != nil || !strings.HasPrefix(line, ": connected") {
		t.Fatalf("stream opened with %q, %v", line, err)
	}

	// An NDJSON write whose body is only half sent.
	body, send := io.Pipe()
	req, _ = http.NewRequest("POST", p.url+"/api/document/admin/keep", body)
	req.SetBasicAuth("admin", "secret-pw")
	req.Header.Set("Content-Type", "application/x-ndjson")
	type answer struct {
		code int
		body string
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		answered <- answer{resp.StatusCode, string(b), err}
	}()
	// More than one chunk (250 documents), so that the handler opens its
	// transaction, which shows the request is being served: a connection
	// still in the listen queue at SIGTERM would not be.
	var docs strings.Builder
	for i := range 300 {
		fmt.Fprintf(&docs, `{"@type":"Note","@id":"first-%d","text":"sent before SIGTERM"}`+"\n", i)
	}
	if _, err := io.WriteString(send, docs.String()); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, time.Minute, "the write's transaction is open", func() bool {
		return openTransactions(t, filepath.Join(dataDir, "pg")) > 0
	})

	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The stream ends first (the change feed stops before the HTTP
	// server drains), which is how the test knows shutdown has begun.
	rest, err := io.ReadAll(frames)
	if err != nil || !strings.Contains(string(rest), ": server shutting down") {
		t.Fatalf("stream ended with %q, %v; want its shutdown frame", rest, err)
	}
	if _, err := io.WriteString(send, `{"@type":"Note","@id":"second","text":"sent after SIGTERM"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	send.Close()
	a := <-answered
	if a.err != nil || a.code != 200 {
		t.Fatalf("write in flight at SIGTERM: %d %s %v", a.code, a.body, a.err)
	}
	if err := p.wait(t); err != nil {
		t.Fatalf("sluice exited with %v after SIGTERM", err)
	}

	p, logs := startLogged(t, dataDir)
	checkCleanStart(t, logs)
	for _, id := range []string{"first-0", "first-299", "second"} {
		if code, body := p.do(t, "GET", "/api/document/admin/keep?id=Note/"+id, ""); code != 200 {
			t.Fatalf("Note/%s after restart: %d %s", id, code, body)
		}
	}
}

// TestStopClosesARequestThatOutlastsTheTimeout: a request still running
// when shutdown_timeout ends is cut off; Sluice still exits 0, well within
// the grace a container runtime gives it after SIGTERM, and stops its
// embedded Postgres cleanly.
func TestStopClosesARequestThatOutlastsTheTimeout(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(tempDir(t), "data")
	const timeout = 2 * time.Second
	// Bodies read as they arrive (as past write_spool_bytes), so that the
	// write's transaction is open while its body is.
	p, logs := startLogged(t, dataDir, "SLUICE_SHUTDOWN_TIMEOUT="+timeout.String(), "SLUICE_WRITE_SPOOL_BYTES=0")
	if code, body := p.do(t, "POST", "/api/db/admin/keep", `{"schema":"type Note { text: String! }"}`); code != 201 {
		t.Fatalf("create database: %d %s", code, body)
	}
	send, answered := startUnfinishedWrite(t, p, dataDir)
	defer send.Close()
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	if err := p.wait(t); err != nil {
		t.Fatalf("sluice exited with %v after SIGTERM", err)
	}
	// Docker's default grace is 10 s; the image sets shutdown_timeout
	// well under it, and the rest of the stop must fit in what is left.
	if took := time.Since(stopped); took > timeout+3*time.Second {
		t.Errorf("stop took %v with shutdown_timeout %v", took, timeout)
	}
	t.Logf("stopped %v after SIGTERM", time.Since(stopped))
	if logs.find("http shutdown timed out") == "" {
		send.Close()
		t.Fatalf("the drain did not time out; the write got: %v", <-answered)
	}
	// The client learns it was cut off once it stops sending (the
	// transport is blocked reading the body until then); any answer will do.
	send.Close()
	<-answered

	p, logs = startLogged(t, dataDir)
	checkCleanStart(t, logs)
	if code, body := p.do(t, "GET", "/api/document/admin/keep?id=Note/never-0", ""); code != 404 {
		t.Fatalf("the cut-off write committed: %d %s", code, body)
	}
}

// TestCleanStopLogsNoWarnings: SIGINT (a Ctrl-C) with streams of each
// kind open and writes under way stops Sluice and its embedded Postgres
// without a warning: Sluice closes its sessions before it stops the
// server, which waits for them to end (no "terminating connection due to
// administrator command"), and its listening connections stop listening
// before they close (no "connection to client lost").
func TestCleanStopLogsNoWarnings(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(tempDir(t), "data")
	p, logs := startLogged(t, dataDir)
	if code, body := p.do(t, "POST", "/api/db/admin/quiet", `{"schema":"type Note { text: String! }"}`); code != 201 {
		t.Fatalf("create database: %d %s", code, body)
	}
	sluice := dt.Remote(p.url)
	auth := dt.Basic("admin", "secret-pw")
	var streams []*dt.Stream
	for _, req := range []dt.StreamRequest{
		{Path: "/api/subscribe/admin/quiet/Note"},
		{Method: "POST", Path: "/api/graphql/admin/quiet", Body: `{"query":"subscription { Note_added { text } }"}`, Header: []string{"Accept", "text/event-stream"}},
		{Method: "POST", Path: "/api/graphql/admin/quiet", Body: `{"query":"subscription { Note { text } }"}`, Header: []string{"Accept", "text/event-stream"}},
	} {
		s := sluice.MustOpenStream(t, auth, req)
		s.Next() // connected
		streams = append(streams, s)
	}
	// Writes that commit while Sluice stops: their notifications reach
	// the listening connections as they close.
	var writes sync.WaitGroup
	for i := range 8 {
		writes.Go(func() {
			for j := range 20 {
				req, _ := http.NewRequest("POST", p.url+"/api/document/admin/quiet", strings.NewReader(fmt.Sprintf(`{"@type":"Note","text":"%d-%d"}`, i, j)))
				req.SetBasicAuth("admin", "secret-pw")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return // Sluice has stopped
				}
				resp.Body.Close()
			}
		})
	}
	streams[0].Event() // a commit went out
	if err := p.Cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(t); err != nil {
		t.Fatalf("sluice exited with %v after SIGINT", err)
	}
	writes.Wait()
	for _, s := range streams {
		s.Ended()
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	for _, line := range logs.lines {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			t.Errorf("a clean stop logged: %s", line)
		}
	}
}

// TestSecondSignalCutsTheDrain: a second SIGTERM during the drain closes
// what the drain still waits for at once, instead of at the end of
// shutdown_timeout (ten minutes here; the old binary ignored the second
// signal and waited them out). Sluice exits 1, saying the drain was cut
// short, its embedded Postgres stopped cleanly, and the cut-off write
// does not commit.
func TestSecondSignalCutsTheDrain(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(tempDir(t), "data")
	// Bodies read as they arrive (as past write_spool_bytes), so that the
	// write's transaction is open while its body is, and not timed, so
	// that only the stop ends the write.
	p, logs := startLogged(t, dataDir, "SLUICE_SHUTDOWN_TIMEOUT=10m", "SLUICE_WRITE_SPOOL_BYTES=0", "SLUICE_BODY_IDLE_TIMEOUT=0")
	if code, body := p.do(t, "POST", "/api/db/admin/keep", `{"schema":"type Note { text: String! }"}`); code != 201 {
		t.Fatalf("create database: %d %s", code, body)
	}
	// A change stream, open through the stop.
	sluice := dt.Remote(p.url)
	stream := sluice.MustOpenStream(t, dt.Basic("admin", "secret-pw"), dt.StreamRequest{Path: "/api/subscribe/admin/keep/Note"})
	stream.Next() // connected

	// A write whose body is never finished holds the drain.
	send, answered := startUnfinishedWrite(t, p, dataDir)
	defer send.Close()

	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	logs.waitFor(t, `msg="shutting down"`)
	stream.Ended() // the drain has begun: streams got their last frame
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// p.wait gives up after 60 s, far below shutdown_timeout.
	err := p.wait(t)
	if err == nil {
		t.Fatal("sluice exited 0 after a second SIGTERM cut its drain; want 1")
	}
	if code := p.Cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("sluice exited with %v after a second SIGTERM; want exit status 1", err)
	}
	if n := strings.Count(logs.all(), `msg="stop hurried: closing`); n != 1 {
		t.Fatalf("%d log lines say the stop was hurried, want 1:\n%s", n, logs.all())
	}
	send.Close()
	<-answered

	p, logs = startLogged(t, dataDir)
	checkCleanStart(t, logs)
	if code, body := p.do(t, "GET", "/api/document/admin/keep?id=Note/never-0", ""); code != 404 {
		t.Fatalf("the cut-off write committed: %d %s", code, body)
	}
}
