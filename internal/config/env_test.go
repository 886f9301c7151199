package config

import (
	"slices"
	"testing"
)

func TestUnknownEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		environ []string
		want    []string
	}{
		{"none", nil, nil},
		{
			name: "known and unrelated names",
			environ: []string{
				"HOME=/root", "SLUICE_LISTEN=:1", "SLUICE_DATABASE_URL=", "SLUICE_CONFIG=/etc/sluice.yaml",
				"SLUICE=1", "MY_SLUICE_X=1", "sluice_listen=:2",
			},
		},
		{
			name:    "misspelt and unknown",
			environ: []string{"SLUICE_DATABSE_URL=postgres://x", "SLUICE_LISTEN=:1", "SLUICE_DEBUG=1", "SLUICE_DEBUG=2"},
			want:    []string{"SLUICE_DATABSE_URL", "SLUICE_DEBUG"},
		},
		{
			name:    "test harness",
			environ: []string{"SLUICE_TEST_DATABASE_URL=postgres://x", "SLUICE_TEST_KEEP=1"},
		},
		{
			name: "Kubernetes service links",
			environ: []string{
				"SLUICE_SERVICE_HOST=10.0.0.7", "SLUICE_SERVICE_PORT=6363", "SLUICE_SERVICE_PORT_HTTP=6363",
				"SLUICE_PORT=tcp://10.0.0.7:6363", "SLUICE_PORT_6363_TCP=tcp://10.0.0.7:6363",
				"SLUICE_PORT_6363_TCP_ADDR=10.0.0.7",
			},
		},
		{
			name:    "SLUICE_PORT set by hand",
			environ: []string{"SLUICE_PORT=8080"},
			want:    []string{"SLUICE_PORT"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := UnknownEnv(tt.environ); !slices.Equal(got, tt.want) {
				t.Errorf("UnknownEnv(%q) = %q, want %q", tt.environ, got, tt.want)
			}
		})
	}
}
