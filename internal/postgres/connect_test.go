package postgres

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSetsConnectTimeout(t *testing.T) {
	t.Parallel()
	none := func(string) (string, bool) { return "", false }
	for _, tt := range []struct {
		conn string
		env  map[string]string
		want bool
	}{
		{"postgres://sluice:pw@db/sluice", nil, false},
		{"postgresql://db/sluice?sslmode=disable&connect_timeout=3", nil, true},
		{"postgres://db/sluice?connect_timeout=0", nil, true},
		{"postgres://db/sluice?application_name=connect_timeout", nil, false},
		{"host=db user=sluice", nil, false},
		{"host=db connect_timeout=5 user=sluice", nil, true},
		{"connect_timeout = 5 host=db", nil, true},
		{"host=db application_name=my_connect_timeout=x", nil, false},
		{"postgres://db/sluice", map[string]string{"PGCONNECT_TIMEOUT": "4"}, true},
		{"postgres://db/sluice", map[string]string{"PGCONNECT_TIMEOUT": ""}, false},
	} {
		lookup := none
		if tt.env != nil {
			lookup = func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
		}
		if got := setsConnectTimeout(tt.conn, lookup); got != tt.want {
			t.Errorf("setsConnectTimeout(%q, %v) = %t, want %t", tt.conn, tt.env, got, tt.want)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use (a log's).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestOpenGivesUpOnAServerThatNeverAnswers: against a server that accepts
// the TCP connection and never answers, Open fails once the default
// connect timeout has passed, instead of waiting for good; it first logs
// the host it connects to, the database, the user and the timeout, never
// the password.
func TestOpenGivesUpOnAServerThatNeverAnswers(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held, never answered
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})

	var log syncBuffer
	url := "postgres://sluice:hunter2@" + ln.Addr().String() + "/shop?sslmode=disable"
	done := make(chan error, 1)
	go func() {
		db, err := Open(context.Background(), url, slog.New(slog.NewTextHandler(&log, nil)))
		if db != nil {
			db.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Open succeeded against a server that never answers")
		}
		if !strings.Contains(err.Error(), "timeout") || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open's error: %v", err)
		}
	case <-time.After(6 * defaultConnectTimeout):
		t.Fatalf("Open did not give up within %s", 6*defaultConnectTimeout)
	}
	want := `msg="connecting to postgres" hosts=` + ln.Addr().String() + " database=shop user=sluice connect_timeout=10s"
	if got := log.String(); !strings.Contains(got, want) || strings.Contains(got, "hunter2") {
		t.Errorf("the log:\n%s\nwant a line with %s, and no password", got, want)
	}
}

// TestParseURLErrorHidesThePassword: a database URL that does not parse
// is named by what is wrong with it, never shown: pgx hides its password
// as best it can, which a URL it cannot parse defeats.
func TestParseURLErrorHidesThePassword(t *testing.T) {
	t.Parallel()
	for _, url := range []string{
		"host=127.0.0.1 port=1 user=sluice password = hunter2SECRET sslmode=require-ssl",
		`host=127.0.0.1 user=sluice password=hunter2\ SECRET sslmode=nope`,
		"postgres://u:hunter2@SECRET@127.0.0.1:1/db?sslmode=nope",
	} {
		_, err := Open(context.Background(), url, slog.New(slog.DiscardHandler))
		if err == nil || strings.Contains(err.Error(), "SECRET") || !strings.HasPrefix(err.Error(), "config: database_url: cannot be parsed") {
			t.Errorf("%q: %v, want a parse error without the password", url, err)
		}
	}
}
