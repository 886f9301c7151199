package daemon

import (
	"testing"
	"time"
)

// TestPostgresStopDeadline: the embedded Postgres gets what the drain left
// of shutdown_timeout, however long, and at least postgresStopFloor.
func TestPostgresStopDeadline(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name     string
		deadline time.Time
		want     time.Time
	}{
		{"a long shutdown_timeout's remainder", now.Add(55 * time.Second), now.Add(55 * time.Second)},
		{"a remainder under the floor", now.Add(time.Second), now.Add(postgresStopFloor)},
		{"a drain that used it all", now.Add(-time.Second), now.Add(postgresStopFloor)},
	}
	for _, tt := range tests {
		if got := postgresStopDeadline(tt.deadline, now); !got.Equal(tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got.Sub(now), tt.want.Sub(now))
		}
	}
}
