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
		{"ALTER TABLE x ADD COLUMN y int;", 11, ""},
		{"-- An index.\n-- sluice:readable-by 10\nCREATE INDEX ...;", 10, ""},
		{"  -- sluice:readable-by 11  \nCREATE TABLE t ();", 11, ""},
		{"-- sluice:readable-by 9\n", 0, "want a schema version from 10 to 11"},
		{"-- sluice:readable-by 12\n", 0, "want a schema version from 10 to 11"},
		{"-- sluice:readable-by eleven\n", 0, "0011_x.sql"},
	} {
		got, err := postgres.ReadableByForTest("0011_x.sql", 11, tt.sql)
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
