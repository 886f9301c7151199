package pgembed

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
)

// tailLines is how many server log lines a start error includes.
const tailLines = 30

// logWriter turns the server's output into log records and remembers the
// last lines for error messages. It is the server's stdout and stderr.
type logWriter struct {
	logger *slog.Logger
	// stopping, when set, says the server is being stopped (Stop);
	// draining, that the daemon is stopping and may end its sessions
	// abruptly (Draining).
	stopping, draining *atomic.Bool

	mu      sync.Mutex
	partial []byte   // output after the last newline
	last    []string // at most tailLines lines
}

func newLogWriter(logger *slog.Logger) *logWriter {
	return &logWriter{logger: logger}
}

// Write logs every complete line in b. It never fails, so the server's
// output is never cut off.
func (w *logWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, b...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		w.line(string(w.partial[:i]))
		w.partial = w.partial[i+1:]
	}
	// Postgres ends every message with a newline; this only bounds memory
	// if something writes without one.
	if len(w.partial) > 64<<10 {
		w.line(string(w.partial))
		w.partial = nil
	}
	return len(b), nil
}

func (w *logWriter) line(line string) {
	w.last = append(w.last, line)
	if len(w.last) > tailLines {
		w.last = w.last[len(w.last)-tailLines:]
	}
	// Client errors (ERROR) are the client's to report; FATAL and PANIC are
	// about the server or a whole session, worth seeing by default, unless
	// they only tell what the server's own lifecycle does to sessions
	// (expected).
	level := slog.LevelDebug
	if strings.HasPrefix(line, "PANIC:") || strings.HasPrefix(line, "FATAL:") && !w.expected(strings.TrimSpace(strings.TrimPrefix(line, "FATAL:"))) {
		level = slog.LevelWarn
	}
	w.logger.Log(context.Background(), level, "postgres", "line", line)
}

// expected reports whether FATAL message msg is what starting, stopping
// or supervising the server does to sessions, which Stop and the
// supervisor report themselves: connections refused while the server
// starts, recovers or stops, and sessions ended by its death or its
// stop. (Sluice itself does not connect while the server is not up: see
// Postgres.Up.)
func (w *logWriter) expected(msg string) bool {
	switch msg {
	case "the database system is starting up",
		"the database system is not yet accepting connections",
		"the database system is in recovery mode",
		"the database system is shutting down",
		"terminating connection due to unexpected postmaster exit":
		return true
	case "terminating connection due to administrator command", "connection to client lost":
		// Otherwise an operator's pg_terminate_backend, or a client gone
		// during a statement: worth seeing.
		return w.stopping != nil && w.stopping.Load() || w.draining != nil && w.draining.Load()
	}
	return false
}

// tail returns the last lines the server wrote.
func (w *logWriter) tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.last, "\n")
}
