package pgembed

import (
	"log/slog"
	"sync/atomic"
	"testing"
)

// TestLogLevels: the server's FATAL and PANIC lines are warnings, except
// those that only tell what starting, stopping or supervising the server
// does to sessions.
func TestLogLevels(t *testing.T) {
	var stopping atomic.Bool
	for _, c := range []struct {
		line     string
		stopping bool
		want     slog.Level
	}{
		{"LOG:  database system is ready to accept connections", false, slog.LevelDebug},
		{"ERROR:  relation \"x\" does not exist", false, slog.LevelDebug},
		{"PANIC:  could not write to file", false, slog.LevelWarn},
		{"FATAL:  password authentication failed for user \"x\"", false, slog.LevelWarn},
		{"FATAL:  the database system is starting up", false, slog.LevelDebug},
		{"FATAL:  the database system is in recovery mode", false, slog.LevelDebug},
		{"FATAL:  the database system is shutting down", false, slog.LevelDebug},
		{"FATAL:  terminating connection due to unexpected postmaster exit", false, slog.LevelDebug},
		{"FATAL:  terminating connection due to administrator command", false, slog.LevelWarn},
		{"FATAL:  terminating connection due to administrator command", true, slog.LevelDebug},
		{"FATAL:  connection to client lost", false, slog.LevelWarn},
		{"FATAL:  connection to client lost", true, slog.LevelDebug},
	} {
		logs := &levels{}
		w := newLogWriter(slog.New(logs))
		w.stopping = &stopping
		stopping.Store(c.stopping)
		if _, err := w.Write([]byte(c.line + "\n")); err != nil {
			t.Fatal(err)
		}
		want := c.want.String() + " postgres " + c.line
		if len(logs.records) != 1 || logs.records[0] != want {
			t.Errorf("%q (stopping %v): %q, want %q", c.line, c.stopping, logs.records, want)
		}
	}
}
