package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/pgtest"
)

// cutProxy relays Postgres connections and, once armed, cuts one as a
// network failure, or a server stopping, would: at Postgres' answer to
// COMMIT (which it then has committed), dropping that answer; or before a
// transaction's BEGIN reaches Postgres. Postgres' side stays
// open until the test ends, so it finishes what it received.
type cutProxy struct {
	ln       net.Listener
	upstream func() (net.Conn, error)
	mu       sync.Mutex
	mode     cutMode
	cut      chan struct{} // closed once a connection was cut
	conns    []net.Conn
}

type cutMode int

const (
	notArmed cutMode = iota
	atCommitAnswer
	beforeCommit
)

// newCutProxy starts a proxy in front of the Postgres database at dbURL
// and returns it with the URL that connects through it.
func newCutProxy(t *testing.T, dbURL string) (*cutProxy, string) {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	network, addr := "tcp", net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))
	if strings.HasPrefix(cfg.Host, "/") {
		network, addr = "unix", fmt.Sprintf("%s/.s.PGSQL.%d", cfg.Host, cfg.Port)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, upstream: func() (net.Conn, error) { return net.Dial(network, addr) }}
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			c.Close()
		}
	})
	go p.serve()
	port := ln.Addr().(*net.TCPAddr).Port
	u, err := url.Parse(dbURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return p, fmt.Sprintf("%s host=127.0.0.1 port=%d sslmode=disable", dbURL, port) // key=value: the last one counts
	}
	q := u.Query()
	q.Del("host")
	q.Del("port")
	q.Set("sslmode", "disable")
	u.RawQuery = q.Encode()
	u.Host = fmt.Sprintf("127.0.0.1:%d", port)
	return p, u.String()
}

// arm makes the proxy cut the next connection that mode says, and
// returns a channel closed once it has.
func (p *cutProxy) arm(mode cutMode) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode, p.cut = mode, make(chan struct{})
	return p.cut
}

// hit reports whether chunk, going the way toClient says, is where an
// armed proxy cuts, disarming it.
func (p *cutProxy) hit(chunk []byte, toClient bool) (bool, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	hit := p.mode == beforeCommit && !toClient && bytes.Contains(chunk, []byte("BEGIN\x00")) ||
		// CommandComplete's tag: Postgres committed.
		p.mode == atCommitAnswer && toClient && bytes.Contains(chunk, []byte("COMMIT\x00"))
	if hit {
		p.mode = notArmed
	}
	return hit, p.cut
}

func (p *cutProxy) serve() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := p.upstream()
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		cut := new(atomic.Bool)
		go p.relay(server, client, true, cut)
		go p.relay(client, server, false, cut)
	}
}

// relay copies from to to until either fails or the proxy cuts, which
// closes the client's side, the chunk that hit left unsent. When from
// ends on its own, to is closed too (a client closing its connection
// waits for the server to close it), unless the connection was cut:
// Postgres' side then stays open.
func (p *cutProxy) relay(from, to net.Conn, toClient bool, cut *atomic.Bool) {
	buf := make([]byte, 64<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			if hit, done := p.hit(buf[:n], toClient); hit {
				cut.Store(true)
				close(done) // before the client can see the cut
				client := to
				if !toClient {
					client = from
				}
				client.Close()
				return
			}
			if _, err := to.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			if !cut.Load() {
				to.Close()
			}
			return
		}
	}
}

// TestCommitOutcomeUnknown: a connection lost after a commit's COMMIT was
// sent answers sluice.ErrOutcomeUnknown, never the Unavailable error that
// says nothing was written: here Postgres did commit, and only its answer
// was lost; in group commit too. A connection lost before anything of the
// commit reached Postgres answers Unavailable, and nothing is written.
func TestCommitOutcomeUnknown(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDatabase(t)
	proxy, viaProxy := newCutProxy(t, dbURL)
	db, d, s, _ := openNotesAt(t, viaProxy)
	ctx := context.Background()
	direct, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close(ctx)
	exists := func(id string) bool {
		var n int
		if err := direct.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s WHERE _id = $1", tableName(d.ID, "Note")), id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	for _, tc := range []struct {
		key   string
		group bool
		mode  cutMode
		want  sluice.Code
	}{
		{"answer", false, atCommitAnswer, sluice.CodeOutcomeUnknown},
		{"grouped", true, atCommitAnswer, sluice.CodeOutcomeUnknown},
		{"before", false, beforeCommit, sluice.CodeUnavailable},
	} {
		cut := proxy.arm(tc.mode)
		_, err := db.Write(ctx, WriteSpec{Database: d, Schema: s, Group: tc.group,
			Documents: func(ctx context.Context, w *Writer) error { return w.Insert(ctx, note(tc.key)) }})
		select {
		case <-cut:
		default:
			t.Fatalf("%s: the proxy cut no connection (error %v)", tc.key, err)
		}
		if sluice.ErrorCode(err) != tc.want || errors.Is(err, sluice.ErrOutcomeUnknown) != (tc.want == sluice.CodeOutcomeUnknown) {
			t.Fatalf("%s: error %v (code %s), want %s", tc.key, err, sluice.ErrorCode(err), tc.want)
		}
		if tc.want == sluice.CodeOutcomeUnknown {
			// Postgres answered COMMIT: the write is there, although
			// its writer cannot know.
			if !exists("Note/" + tc.key) {
				t.Fatalf("%s: not committed", tc.key)
			}
		} else if exists("Note/" + tc.key) {
			t.Fatalf("%s: written, although the answer says nothing was", tc.key)
		}
	}
	// The store works on: another write commits.
	if _, err := db.Write(ctx, WriteSpec{Database: d, Schema: s, Documents: func(ctx context.Context, w *Writer) error { return w.Insert(ctx, note("after")) }}); err != nil {
		t.Fatal(err)
	}
}

// TestCommitErrorMapping: what Postgres answers before COMMIT's answer
// says nothing was committed (its own error, or Unavailable when it ended
// the connection); only a lost connection, or one Postgres ended in place
// of COMMIT's answer, leaves the outcome unknown.
func TestCommitErrorMapping(t *testing.T) {
	t.Parallel()
	shutdown := &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}
	for _, tc := range []struct {
		name string
		err  error
		want sluice.Code
	}{
		{"statement error before COMMIT", sentCommit(mapError, &pgconn.PgError{Code: "23505"}), sluice.CodeInternal},
		{"shutdown before COMMIT", sentCommit(mapError, shutdown), sluice.CodeUnavailable},
		{"lost before COMMIT's answer", sentCommit(mapError, io.ErrUnexpectedEOF), sluice.CodeOutcomeUnknown},
		{"closed connection", sentCommit(mapError, errors.New("conn closed")), sluice.CodeOutcomeUnknown},
		{"not sent: dead connection", sentCommit(mapError, notSent{io.EOF}), sluice.CodeUnavailable},
		{"not sent: COMMIT alone", commitResult(pgconn.CommandTag{}, notSent{io.EOF}), sluice.CodeUnavailable},
		{"shutdown answering COMMIT", commitResult(pgconn.CommandTag{}, shutdown), sluice.CodeOutcomeUnknown},
		{"COMMIT lost", commitResult(pgconn.CommandTag{}, io.EOF), sluice.CodeOutcomeUnknown},
		{"serialization failure at COMMIT", commitResult(pgconn.CommandTag{}, &pgconn.PgError{Code: "40001"}), sluice.CodeConflict},
		{"committed", commitResult(pgconn.NewCommandTag("COMMIT"), nil), ""},
	} {
		got := sluice.Code("")
		if tc.err != nil {
			got = sluice.ErrorCode(tc.err)
		}
		if got != tc.want {
			t.Errorf("%s: %v (%s), want %s", tc.name, tc.err, got, tc.want)
		}
	}
}

// notSent is an error pgconn marks safe to retry: nothing was sent.
type notSent struct{ err error }

func (e notSent) Error() string     { return "not sent: " + e.err.Error() }
func (e notSent) Unwrap() error     { return e.err }
func (e notSent) SafeToRetry() bool { return true }
