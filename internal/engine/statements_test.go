package engine_test

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/pgtest"
)

// statementLog is a proxy in front of Postgres that records the SQL text
// of every statement its clients send. Its clients use the simple query
// protocol (default_query_exec_mode=simple_protocol), so each round trip
// is one Query message holding the whole statement.
type statementLog struct {
	mu    sync.Mutex
	texts []string
	// received counts the bytes Postgres sent its clients.
	received atomic.Int64
	// dbURL is the database behind the proxy, for a test to write to
	// directly.
	dbURL string
}

// take returns the statements recorded since the last take.
func (l *statementLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.texts
	l.texts = nil
	return out
}

// newEngineLogged is newEngine with the store connected through a
// statementLog.
func newEngineLogged(t *testing.T) (*engine.Engine, *statementLog, *sluice.User) {
	t.Helper()
	dbURL := pgtest.NewDatabase(t)
	cfg, err := pgconn.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	network, upstream := "tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	if strings.HasPrefix(cfg.Host, "/") {
		network, upstream = "unix", cfg.Host+"/.s.PGSQL."+strconv.Itoa(int(cfg.Port))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := &statementLog{dbURL: dbURL}
	var conns sync.WaitGroup
	t.Cleanup(func() { ln.Close(); conns.Wait() })
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial(network, upstream)
			if err != nil {
				client.Close()
				continue
			}
			conns.Add(2)
			go func() {
				defer conns.Done()
				io.Copy(client, countingReader{server, &log.received}) //nolint:errcheck // ends with either side
				client.Close()
			}()
			go func() {
				defer conns.Done()
				log.relay(server, client)
				server.Close()
			}()
		}
	}()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Del("host")
	q.Del("port")
	q.Set("sslmode", "disable")
	q.Set("default_query_exec_mode", "simple_protocol")
	u.RawQuery = q.Encode()
	u.Host = ln.Addr().String()
	e, _, admin := newEngineOn(t, u.String())
	return e, log, admin
}

// countingReader adds the bytes read from r to n.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n.Add(int64(k))
	return k, err
}

// relay copies a client's messages to server, recording each Query's
// text (pings aside: the pool sends them on its own schedule).
func (l *statementLog) relay(server io.Writer, client io.Reader) {
	r := bufio.NewReader(client)
	// The startup message has no type byte.
	if err := copyMessage(server, r, false, nil); err != nil {
		return
	}
	for {
		err := copyMessage(server, r, true, func(typ byte, body []byte) {
			if typ != 'Q' {
				return
			}
			text := strings.TrimRight(string(body), "\x00")
			if strings.HasPrefix(text, "-- ping") {
				return
			}
			l.mu.Lock()
			l.texts = append(l.texts, text)
			l.mu.Unlock()
		})
		if err != nil {
			return
		}
	}
}

// copyMessage copies one protocol message from r to w, handing its type
// and body to seen.
func copyMessage(w io.Writer, r *bufio.Reader, typed bool, seen func(byte, []byte)) error {
	var head []byte
	var typ byte
	if typed {
		b, err := r.ReadByte()
		if err != nil {
			return err
		}
		typ, head = b, []byte{b}
	}
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return err
	}
	body := make([]byte, binary.BigEndian.Uint32(n[:])-4)
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	if seen != nil {
		seen(typ, body)
	}
	_, err := w.Write(append(append(head, n[:]...), body...))
	return err
}
