package postgres_test

import (
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/postgres"
)

func TestReadableByHeader(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		sql  string
		want int
		err  string
	}{
		{"ALTER TABLE x ADD COLUMN y int;", 9, ""},
		{"-- An index.\n-- sluice:readable-by 8\nCREATE INDEX ...;", 8, ""},
		{"  -- sluice:readable-by 9  \nCREATE TABLE t ();", 9, ""},
		{"-- sluice:readable-by 6\n", 0, "want a schema version from 7 to 9"},
		{"-- sluice:readable-by 10\n", 0, "want a schema version from 7 to 9"},
		{"-- sluice:readable-by eight\n", 0, "0009_x.sql"},
	} {
		got, err := postgres.ReadableByForTest("0009_x.sql", 9, tt.sql)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: %v, want an error with %q", tt.sql, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%q: %d, %v; want %d", tt.sql, got, err, tt.want)
		}
	}
}
