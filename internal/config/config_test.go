package config

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestLogValueHidesSecrets(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		databaseURL string
		want        string // the database_url attribute as the text handler writes it
	}{
		{"embedded", "", `database_url=""`},
		{"URL without password", "postgres://sluice@db/sluice", "database_url=postgres://sluice@db/sluice"},
		{"URL with password", "postgres://sluice:s3cret@db/sluice", "database_url=postgres://sluice:xxxxx@db/sluice"},
		{"password in query", "postgresql://db/sluice?user=sluice&password=s3cret", "database_url=[redacted]"},
		{"key=value", "host=db user=sluice password=s3cret", "database_url=[redacted]"},
		{"key=value without password", "host=db user=sluice", `database_url="host=db user=sluice"`},
		{"sslpassword in query", "postgresql://sluice@db/sluice?sslpassword=s3cret", "database_url=[redacted]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := Default()
			c.DatabaseURL = tt.databaseURL
			c.AdminPassword = "hunter2"
			c.JWTHS256Secret = "jwt-secret-jwt-secret-jwt-secret-0"
			var buf bytes.Buffer
			slog.New(slog.NewTextHandler(&buf, nil)).Info("starting", "config", c)
			out := buf.String()
			if !strings.Contains(out, "config."+tt.want+" ") {
				t.Errorf("log line %q lacks config.%s", out, tt.want)
			}
			if !strings.Contains(out, "config.admin_password=[redacted] ") {
				t.Errorf("log line %q lacks config.admin_password=[redacted]", out)
			}
			if !strings.Contains(out, "config.jwt_hs256_secret=[redacted] ") {
				t.Errorf("log line %q lacks config.jwt_hs256_secret=[redacted]", out)
			}
			if strings.Contains(out, "s3cret") || strings.Contains(out, "hunter2") || strings.Contains(out, "jwt-secret") {
				t.Errorf("log line %q shows a secret", out)
			}
			if !strings.Contains(out, "config.log_level=info ") || !strings.Contains(out, "config.heartbeat=12s ") {
				t.Errorf("log line %q lacks log_level or heartbeat", out)
			}
		})
	}
}

// TestIdleInTransactionTimeout: the idle-in-transaction timeout stays
// above every wait of a transaction in Go that the settings bound, and is
// off when a write's body may pause for ever.
func TestIdleInTransactionTimeout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		adjust func(*Config)
		want   time.Duration
	}{
		{"defaults: twice write_timeout and graphql_request_timeout", func(*Config) {}, 2 * time.Minute},
		{"a long body_idle_timeout", func(c *Config) { c.BodyIdleTimeout = 5 * time.Minute }, 10 * time.Minute},
		{"a long write_timeout", func(c *Config) { c.WriteTimeout = time.Hour }, 2 * time.Hour},
		{"a long statement_timeout", func(c *Config) { c.StatementTimeout = 3 * time.Minute }, 6 * time.Minute},
		{"short settings keep the one minute floor", func(c *Config) {
			c.BodyIdleTimeout, c.WriteTimeout, c.GraphQLRequestTimeout, c.StatementTimeout = time.Second, time.Second, time.Second, time.Second
		}, 2 * time.Minute},
		{"no graphql_request_timeout", func(c *Config) { c.GraphQLRequestTimeout = 0 }, 2 * time.Minute},
		{"bodies not timed: off", func(c *Config) { c.BodyIdleTimeout = 0 }, 0},
		{"at most what Postgres takes", func(c *Config) { c.StatementTimeout = maxStatementTimeout }, maxStatementTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := Default()
			tt.adjust(&c)
			if got := c.IdleInTransactionTimeout(); got != tt.want {
				t.Errorf("IdleInTransactionTimeout() = %s, want %s", got, tt.want)
			}
		})
	}
}
