package pgembed

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
)

// tailLines is how many server log lines a start error includes.
const tailLines = 30

// logWriter turns the server's output into log records and remembers the
// last lines for error messages. It is the server's stdout and stderr.
type logWriter struct {
	logger *slog.Logger

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
	// about the server or a whole session, worth seeing by default.
	level := slog.LevelDebug
	if strings.HasPrefix(line, "FATAL:") || strings.HasPrefix(line, "PANIC:") {
		level = slog.LevelWarn
	}
	w.logger.Log(context.Background(), level, "postgres", "line", line)
}

// tail returns the last lines the server wrote.
func (w *logWriter) tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.last, "\n")
}
