package pgtest

import (
	"regexp"
	"testing"
)

func TestWithDatabase(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"postgres://u:p@db:5432/app?sslmode=disable", "postgres://u:p@db:5432/test_x?sslmode=disable"},
		{"postgresql:///app?host=/run/pg", "postgresql:///test_x?host=/run/pg"},
		{"host=db user=u dbname=app", "host=db user=u dbname=app dbname=test_x"},
	}
	for _, tt := range tests {
		if got := withDatabase(tt.in, "test_x"); got != tt.want {
			t.Errorf("withDatabase(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestDatabaseName(t *testing.T) {
	t.Parallel()
	valid := regexp.MustCompile(`^test_[a-z0-9_]+_[0-9a-f]{12}$`)
	long := "TestSomething/With Spaces/and-a-very-long-subtest-name-that-goes-on-and-on"
	a, b := databaseName(long), databaseName(long)
	for _, name := range []string{a, b} {
		if !valid.MatchString(name) || len(name) > 63 {
			t.Errorf("databaseName(%q) = %q (%d bytes), want a valid identifier of at most 63 bytes", long, name, len(name))
		}
	}
	if a == b {
		t.Errorf("databaseName gave %q twice", a)
	}
}
