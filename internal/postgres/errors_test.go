package postgres

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluice-dev/sluice"
)

func TestMapErrorCodes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		sqlstate string
		want     sluice.Code
	}{
		{"22021", sluice.CodeInvalid}, // NUL or invalid UTF-8 in text
		{"22P05", sluice.CodeInvalid}, // \u0000 in jsonb
		{"2201B", sluice.CodeInvalid},
		{"54001", sluice.CodeInvalid},
		{"57014", sluice.CodeUnavailable}, // statement_timeout
		{"25006", sluice.CodeUnavailable}, // read_only_sql_transaction
		{"53100", sluice.CodeUnavailable}, // disk_full
		{"53200", sluice.CodeUnavailable}, // out_of_memory
		{"53300", sluice.CodeUnavailable}, // too_many_connections
		{"53400", sluice.CodeUnavailable}, // configuration_limit_exceeded
		{"40P01", sluice.CodeConflict},    // deadlock_detected
		{"40001", sluice.CodeConflict},    // serialization_failure
		{"55P03", sluice.CodeConflict},    // lock_not_available (NOWAIT)
		{"XX000", sluice.CodeInternal},
		{"23505", sluice.CodeInternal}, // callers that expect it map it with its context
	}
	for _, c := range cases {
		err := mapError(fmt.Errorf("query: %w", &pgconn.PgError{Code: c.sqlstate, Message: "SELECT secret FROM internals"}))
		if got := sluice.ErrorCode(err); got != c.want {
			t.Errorf("SQLSTATE %s: code %s, want %s (%v)", c.sqlstate, got, c.want, err)
		}
		if concurrent := c.sqlstate[:2] == "40" || c.sqlstate == "55P03"; errors.Is(err, errConcurrent) != concurrent {
			t.Errorf("SQLSTATE %s: errors.Is(err, errConcurrent) = %t, want %t", c.sqlstate, !concurrent, concurrent)
		}
		if c.want != sluice.CodeInternal && sluice.ErrorMessage(err) == "SELECT secret FROM internals" {
			t.Errorf("SQLSTATE %s: the client sees Postgres' message", c.sqlstate)
		}
	}
	if err := mapError(errors.New("x")); sluice.ErrorCode(err) != sluice.CodeInternal {
		t.Errorf("plain error: %v", err)
	}
}

func TestCheckText(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "Person/alice", "日本", "\U0010ffff"} {
		if err := checkText("id", s); err != nil {
			t.Errorf("checkText(%q): %v", s, err)
		}
	}
	for _, s := range []string{"\x00", "a\x00b", "\xff", "Person/\xc3\x28", "\xed\xa0\x80"} {
		if err := checkText("id", s); sluice.ErrorCode(err) != sluice.CodeInvalid {
			t.Errorf("checkText(%q): %v, want an Invalid error", s, err)
		}
	}
}
