package config

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
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
