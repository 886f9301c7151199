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

// TestLogLevelsWhileDraining: once the daemon has begun to stop
// (Draining), before Stop runs, a session it ends abruptly is no warning
// (a review saw "connection to client lost" after a SIGTERM that came
// soon after the start, background work cancelled mid-statement); other
// FATAL lines still are.
func TestLogLevelsWhileDraining(t *testing.T) {
	var stopping, draining atomic.Bool
	draining.Store(true)
	for _, c := range []struct {
		line string
		want slog.Level
	}{
		{"FATAL:  connection to client lost", slog.LevelDebug},
		{"FATAL:  terminating connection due to administrator command", slog.LevelDebug},
		{"FATAL:  password authentication failed for user \"x\"", slog.LevelWarn},
	} {
		logs := &levels{}
		w := newLogWriter(slog.New(logs))
		w.stopping, w.draining = &stopping, &draining
		if _, err := w.Write([]byte(c.line + "\n")); err != nil {
			t.Fatal(err)
		}
		if want := c.want.String() + " postgres " + c.line; len(logs.records) != 1 || logs.records[0] != want {
			t.Errorf("%q while draining: %q, want %q", c.line, logs.records, want)
		}
	}
}
