package config

import (
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// load parses args with the flags RegisterFlags adds and loads the
// configuration with env as the whole environment.
func load(t *testing.T, args []string, env map[string]string) (Config, error) {
	t.Helper()
	fs := pflag.NewFlagSet("sluice", pflag.ContinueOnError)
	RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	return Load(fs, func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	})
}

// writeFile writes content to a new file called name and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDefault(t *testing.T) {
	t.Parallel()
	want := Config{
		Listen:               ":6363",
		DataDir:              "./data",
		DatabaseURL:          "",
		AdminPassword:        "",
		PGBinDir:             "",
		LogLevel:             slog.LevelInfo,
		LogFormat:            LogFormatText,
		LogRetention:         168 * time.Hour,
		IdempotencyRetention: 24 * time.Hour,
		IdempotencyMaxKeys:   10000,
		ShutdownTimeout:      10 * time.Second,
		Heartbeat:            12 * time.Second,
		MaxBodyBytes:         64 << 20,
		MaxSchemaBytes:       1 << 20,
		BodyIdleTimeout:      30 * time.Second,
		WriteTimeout:         time.Minute,
		BodyMinRate:          8192,
		MaxRequestBodies:     1024,
		WriteSpoolBytes:      1 << 30,
		WriteBytesPerUser:    16 << 20,
		WriteBytes:           64 << 20,
		MaxHeaderBytes:       16 << 10,

		GraphQLWSMaxMessageBytes:  1 << 20,
		GraphQLWSMaxOperations:    100,
		GraphQLMaxBodyBytes:       8 << 20,
		GraphQLRequestBytes:       512 << 20,
		MaxWriteDocuments:         1000000,
		MaxUnauthenticatedSockets: 1000,
		AuthMaxFailures:           10,
		AuthFailureWindow:         5 * time.Minute,

		MaxRequestsPerUser:          1000,
		MaxRequestsInFlight:         10000,
		MaxStreamsPerUser:           1000,
		StreamVariablesBytesPerUser: 64 << 20,
		StreamVariablesBytes:        1 << 30,
		StreamOutputBytesPerUser:    64 << 20,
		StreamOutputBytes:           1 << 30,
		LiveQueriesPerUser:          100,
		LiveQueries:                 20000,
		LiveRowsPerUser:             100000,
		LiveBytesPerUser:            64 << 20,
		LiveRows:                    2000000,
		LiveBytes:                   512 << 20,
		StreamTicketTTL:             time.Minute,
		JWTUserClaim:                "sub",
		JWTLeeway:                   30 * time.Second,

		GraphQLMaxQueryBytes:    64 << 10,
		GraphQLMaxTokens:        15000,
		GraphQLMaxDepth:         20,
		GraphQLMaxAliases:       100,
		GraphQLMaxFields:        1000,
		GraphQLMaxFragments:     100,
		GraphQLMaxStatements:    25,
		GraphQLMaxResultRows:    10000,
		GraphQLMaxResponseBytes: 16 << 20,
		GraphQLRequestTimeout:   time.Minute,

		StatementTimeout: 30 * time.Second,
		HistoryPageBytes: 4 << 20,
		MaxPastChanges:   100000,

		MaxWebhooksPerDatabase: 20,
		MaxWebhooksPerUser:     50,
		MaxDatabasesPerUser:    100,
		AccessChangesPerUser:   10,
		WebhookTimeout:         15 * time.Second,
		WebhookRetrySchedule: []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute,
			time.Hour, 2 * time.Hour, 4 * time.Hour, 8 * time.Hour, 8 * time.Hour},
		WebhookLeaseTTL:          10 * time.Second,
		WebhookBodyBudget:        256 << 20,
		WebhookBodyBudgetPerUser: 64 << 20,
	}
	if got := Default(); !reflect.DeepEqual(got, want) {
		t.Errorf("Default() = %+v, want %+v", got, want)
	}
	got, err := load(t, nil, nil)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Load with nothing set = %+v, %v; want %+v", got, err, want)
	}
	got, err = Load(nil, nil)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Load(nil, nil) = %+v, %v; want %+v", got, err, want)
	}
}

// TestFlagDefaults checks that the defaults --help shows are the real ones:
// setting every flag to its shown default yields Default().
func TestFlagDefaults(t *testing.T) {
	t.Parallel()
	fs := pflag.NewFlagSet("sluice", pflag.ContinueOnError)
	RegisterFlags(fs)
	var args []string
	for _, o := range options() {
		f := fs.Lookup(o.flag())
		if f == nil {
			t.Fatalf("no flag --%s for key %s", o.flag(), o.key)
		}
		args = append(args, "--"+f.Name+"="+f.DefValue)
	}
	got, err := load(t, args, nil)
	if err != nil || !reflect.DeepEqual(got, Default()) {
		t.Errorf("Load(%q) = %+v, %v; want %+v", args, got, err, Default())
	}
}

func TestPrecedence(t *testing.T) {
	t.Parallel()
	file := writeFile(t, "sluice.yaml", `
listen: "file:1"
heartbeat: 1s
max_body_bytes: 100
`)
	other := writeFile(t, "other.yaml", `listen: "other:1"`)
	type want struct {
		listen    string
		heartbeat time.Duration
		maxBody   int64
	}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want want
	}{
		{
			name: "defaults",
			want: want{":6363", 12 * time.Second, 64 << 20},
		},
		{
			name: "file over defaults",
			args: []string{"--config", file},
			want: want{"file:1", time.Second, 100},
		},
		{
			name: "SLUICE_CONFIG names the file",
			env:  map[string]string{"SLUICE_CONFIG": file},
			want: want{"file:1", time.Second, 100},
		},
		{
			name: "--config over SLUICE_CONFIG",
			args: []string{"--config", other},
			env:  map[string]string{"SLUICE_CONFIG": file},
			want: want{"other:1", 12 * time.Second, 64 << 20},
		},
		{
			name: "env over file",
			args: []string{"--config", file},
			env: map[string]string{
				"SLUICE_LISTEN":         "env:2",
				"SLUICE_HEARTBEAT":      "2s",
				"SLUICE_MAX_BODY_BYTES": "200",
			},
			want: want{"env:2", 2 * time.Second, 200},
		},
		{
			name: "env over defaults",
			env:  map[string]string{"SLUICE_HEARTBEAT": "2s"},
			want: want{":6363", 2 * time.Second, 64 << 20},
		},
		{
			name: "empty env counts as unset",
			args: []string{"--config", file},
			env:  map[string]string{"SLUICE_LISTEN": "", "SLUICE_HEARTBEAT": ""},
			want: want{"file:1", time.Second, 100},
		},
		{
			name: "flag over env over file",
			args: []string{"--config", file, "--listen", "flag:3", "--heartbeat", "3s", "--max-body-bytes", "300"},
			env: map[string]string{
				"SLUICE_LISTEN":         "env:2",
				"SLUICE_HEARTBEAT":      "2s",
				"SLUICE_MAX_BODY_BYTES": "200",
			},
			want: want{"flag:3", 3 * time.Second, 300},
		},
		{
			name: "flag set to its default still wins",
			args: []string{"--config", file, "--listen=:6363", "--heartbeat=12s"},
			env:  map[string]string{"SLUICE_LISTEN": "env:2", "SLUICE_HEARTBEAT": "2s"},
			want: want{":6363", 12 * time.Second, 100},
		},
		{
			name: "each key from its own layer",
			args: []string{"--config", file, "--listen", "flag:3"},
			env:  map[string]string{"SLUICE_HEARTBEAT": "2s"},
			want: want{"flag:3", 2 * time.Second, 100},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := load(t, tt.args, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			got := want{c.Listen, c.Heartbeat, c.MaxBodyBytes}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// everything is a Config with every field away from its default; the
// files in TestFileFormats spell it out.
var everything = Config{
	Listen:               "127.0.0.1:7000",
	DataDir:              "/var/lib/sluice",
	DatabaseURL:          "postgres://sluice@db/sluice",
	AdminPassword:        "hunter2",
	PGBinDir:             "/opt/pg/bin",
	LogLevel:             slog.LevelDebug,
	LogFormat:            LogFormatJSON,
	LogRetention:         0,
	IdempotencyRetention: 2 * time.Hour,
	IdempotencyMaxKeys:   50,
	ShutdownTimeout:      30 * time.Second,
	Heartbeat:            time.Minute,
	MaxBodyBytes:         1024,
	MaxSchemaBytes:       4096,
	BodyIdleTimeout:      5 * time.Second,
	WriteTimeout:         45 * time.Second,
	BodyMinRate:          100,
	MaxRequestBodies:     7,
	WriteSpoolBytes:      8 << 20,
	WriteBytesPerUser:    3 << 20,
	WriteBytes:           9 << 20,
	WriteSpoolDir:        "/var/tmp/sluice",
	MaxHeaderBytes:       8192,

	GraphQLWSMaxMessageBytes:  2048,
	GraphQLWSMaxOperations:    7,
	GraphQLMaxBodyBytes:       4096,
	GraphQLRequestBytes:       128 << 20,
	MaxWriteDocuments:         77,
	MaxUnauthenticatedSockets: 9,
	AuthMaxFailures:           3,
	AuthFailureWindow:         time.Minute,

	MaxStreams:                  5000,
	MaxRequestsPerUser:          8,
	MaxRequestsInFlight:         88,
	MaxStreamsPerUser:           0,
	StreamVariablesBytesPerUser: 21,
	StreamVariablesBytes:        22,
	StreamOutputBytesPerUser:    23,
	StreamOutputBytes:           24,
	LiveQueriesPerUser:          11,
	LiveQueries:                 12,
	LiveRowsPerUser:             13,
	LiveBytesPerUser:            14,
	LiveRows:                    15,
	LiveBytes:                   16,
	CORSOrigins:                 []string{"https://app.example.com", "http://localhost:3000"},

	StreamTicketTTL:    30 * time.Second,
	JWTHS256Secret:     "0123456789abcdef0123456789abcdef",
	JWTHS256SecretFile: "/run/secrets/jwt",
	JWTJWKSFile:        "/etc/sluice/jwks.json",
	JWTIssuer:          "https://id.example.com/",
	JWTAudience:        "sluice",
	JWTUserClaim:       "preferred_username",
	JWTLeeway:          5 * time.Second,
	MetricsToken:       "0123456789abcdef-metrics",
	MetricsListen:      "127.0.0.1:9363",
	MetricsAllowHosts:  []string{"sluice.internal", "metrics.example"},
	TrustedProxies:     []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.1/32"), netip.MustParsePrefix("fd00::/8")},

	GraphQLMaxQueryBytes:    1001,
	GraphQLMaxTokens:        1002,
	GraphQLMaxDepth:         3,
	GraphQLMaxAliases:       4,
	GraphQLMaxFields:        1005,
	GraphQLMaxFragments:     6,
	GraphQLMaxStatements:    9,
	GraphQLMaxResultRows:    1007,
	GraphQLMaxResponseBytes: 1008,
	GraphQLRequestTimeout:   45 * time.Second,

	StatementTimeout: 2 * time.Minute,
	HistoryPageBytes: 65536,
	MaxPastChanges:   2000,

	MaxWebhooksPerDatabase:   3,
	MaxWebhooksPerUser:       4,
	MaxDatabasesPerUser:      6,
	AccessChangesPerUser:     7,
	WebhookTimeout:           2 * time.Second,
	WebhookRetrySchedule:     []time.Duration{100 * time.Millisecond, time.Second},
	WebhookAllowNetworks:     []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("fd00::/8")},
	WebhookLeaseTTL:          3 * time.Second,
	WebhookSecretKeyFile:     "/run/secrets/webhooks",
	WebhookBodyBudget:        2 << 20,
	WebhookBodyBudgetPerUser: 1 << 20,
	JWTJWKSURL:               "https://id.example.com/.well-known/jwks.json",
	JWTJWKSHTTPLoopback:      true,
	TLSCertFile:              "/etc/sluice/cert.pem",
	TLSKeyFile:               "/etc/sluice/key.pem",
}

// TestEverythingCoversEveryField makes TestFileFormats fail for a Config
// field that is added but not loaded.
func TestEverythingCoversEveryField(t *testing.T) {
	t.Parallel()
	e, d := reflect.ValueOf(everything), reflect.ValueOf(Default())
	for i := range e.NumField() {
		if reflect.DeepEqual(e.Field(i).Interface(), d.Field(i).Interface()) {
			t.Errorf("everything.%s equals the default; give it another value in this test's files", e.Type().Field(i).Name)
		}
	}
}

func TestFileFormats(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, content string }{
		{"sluice.yaml", `
listen: "127.0.0.1:7000"
data_dir: /var/lib/sluice
database_url: postgres://sluice@db/sluice
admin_password: hunter2
pg_bin_dir: /opt/pg/bin
log_level: debug
log_format: json
log_retention: 0
idempotency_retention: 2h
idempotency_max_keys: 50
shutdown_timeout: 30s
heartbeat: 1m
max_body_bytes: 1024
max_schema_bytes: 4096
body_idle_timeout: 5s
write_timeout: 45s
body_min_rate: 100
max_request_bodies: 7
write_spool_bytes: 8388608
write_bytes_per_user: 3145728
write_bytes: 9437184
write_spool_dir: /var/tmp/sluice
max_header_bytes: 8192
graphql_ws_max_message_bytes: 2048
graphql_ws_max_operations: 7
graphql_max_body_bytes: 4096
graphql_request_bytes: 134217728
max_write_documents: 77
max_unauthenticated_sockets: 9
auth_max_failures: 3
auth_failure_window: 1m
max_streams: 5000
max_requests_per_user: 8
max_requests_in_flight: 88
max_streams_per_user: 0
stream_variables_bytes_per_user: 21
stream_variables_bytes: 22
stream_output_bytes_per_user: 23
stream_output_bytes: 24
live_queries_per_user: 11
live_queries: 12
live_rows_per_user: 13
live_bytes_per_user: 14
live_rows: 15
live_bytes: 16
cors_origins: ["https://app.example.com", "http://localhost:3000"]
stream_ticket_ttl: 30s
jwt_hs256_secret: 0123456789abcdef0123456789abcdef
jwt_hs256_secret_file: /run/secrets/jwt
jwt_jwks_file: /etc/sluice/jwks.json
jwt_issuer: https://id.example.com/
jwt_audience: sluice
jwt_user_claim: preferred_username
jwt_leeway: 5s
metrics_token: 0123456789abcdef-metrics
metrics_listen: 127.0.0.1:9363
metrics_allow_hosts: [sluice.internal, Metrics.Example.]
trusted_proxies: [10.1.2.3/8, "::ffff:192.0.2.1", fd00::/8]
graphql_max_query_bytes: 1001
graphql_max_tokens: 1002
graphql_max_depth: 3
graphql_max_aliases: 4
graphql_max_fields: 1005
graphql_max_fragments: 6
graphql_max_statements: 9
graphql_max_result_rows: 1007
graphql_max_response_bytes: 1008
graphql_request_timeout: 45s
statement_timeout: 2m
history_page_bytes: 65536
max_past_changes: 2000
max_webhooks_per_database: 3
max_webhooks_per_user: 4
max_databases_per_user: 6
access_changes_per_user: 7
webhook_timeout: 2s
webhook_retry_schedule: [100ms, 1s]
webhook_allow_networks: ["127.0.0.0/8", "fd00::/8"]
webhook_lease_ttl: 3s
webhook_secret_key_file: /run/secrets/webhooks
webhook_body_budget: 2097152
webhook_body_budget_per_user: 1048576
jwt_jwks_url: https://id.example.com/.well-known/jwks.json
jwt_jwks_http_loopback: true
tls_cert_file: /etc/sluice/cert.pem
tls_key_file: /etc/sluice/key.pem
`},
		{"sluice.YML", `
listen: 127.0.0.1:7000
data_dir: /var/lib/sluice
database_url: postgres://sluice@db/sluice
admin_password: "hunter2"
pg_bin_dir: /opt/pg/bin
log_level: debug
log_format: json
log_retention: "0"
idempotency_retention: "2h"
idempotency_max_keys: "50"
shutdown_timeout: 30s
heartbeat: 60s
max_body_bytes: 1024
max_schema_bytes: 4096
body_idle_timeout: 5s
write_timeout: 45s
body_min_rate: 100
max_request_bodies: 7
write_spool_bytes: 8388608
write_bytes_per_user: 3145728
write_bytes: 9437184
write_spool_dir: /var/tmp/sluice
max_header_bytes: 8192
graphql_ws_max_message_bytes: 2048
graphql_ws_max_operations: 7
graphql_max_body_bytes: 4096
graphql_request_bytes: 134217728
max_write_documents: 77
max_unauthenticated_sockets: 9
auth_max_failures: 3
auth_failure_window: 1m
max_streams: 5000
max_requests_per_user: "8"
max_requests_in_flight: "88"
max_streams_per_user: "0"
stream_variables_bytes_per_user: "21"
stream_variables_bytes: "22"
stream_output_bytes_per_user: "23"
stream_output_bytes: "24"
live_queries_per_user: "11"
live_queries: "12"
live_rows_per_user: "13"
live_bytes_per_user: "14"
live_rows: "15"
live_bytes: "16"
cors_origins:
  - https://app.example.com
  - http://localhost:3000
stream_ticket_ttl: "30s"
jwt_hs256_secret: 0123456789abcdef0123456789abcdef
jwt_hs256_secret_file: /run/secrets/jwt
jwt_jwks_file: /etc/sluice/jwks.json
jwt_issuer: https://id.example.com/
jwt_audience: sluice
jwt_user_claim: preferred_username
jwt_leeway: 5s
metrics_token: 0123456789abcdef-metrics
metrics_listen: 127.0.0.1:9363
metrics_allow_hosts: [sluice.internal, Metrics.Example.]
trusted_proxies: [10.1.2.3/8, "::ffff:192.0.2.1", fd00::/8]
graphql_max_query_bytes: 1001
graphql_max_tokens: 1002
graphql_max_depth: 3
graphql_max_aliases: 4
graphql_max_fields: 1005
graphql_max_fragments: 6
graphql_max_statements: 9
graphql_max_result_rows: 1007
graphql_max_response_bytes: 1008
graphql_request_timeout: 45s
statement_timeout: 2m
history_page_bytes: 65536
max_past_changes: 2000
max_webhooks_per_database: 3
max_webhooks_per_user: 4
max_databases_per_user: 6
access_changes_per_user: 7
webhook_timeout: 2s
webhook_retry_schedule: [100ms, 1s]
webhook_allow_networks: ["127.0.0.0/8", "fd00::/8"]
webhook_lease_ttl: 3s
webhook_secret_key_file: /run/secrets/webhooks
webhook_body_budget: 2097152
webhook_body_budget_per_user: 1048576
jwt_jwks_url: https://id.example.com/.well-known/jwks.json
jwt_jwks_http_loopback: "true"
tls_cert_file: /etc/sluice/cert.pem
tls_key_file: /etc/sluice/key.pem
`},
		{"sluice.toml", `
listen = "127.0.0.1:7000"
data_dir = "/var/lib/sluice"
database_url = "postgres://sluice@db/sluice"
admin_password = "hunter2"
pg_bin_dir = "/opt/pg/bin"
log_level = "debug"
log_format = "json"
log_retention = 0
idempotency_retention = "2h"
idempotency_max_keys = 50
shutdown_timeout = "30s"
heartbeat = "1m"
max_body_bytes = 1024
max_schema_bytes = 4096
body_idle_timeout = "5s"
write_timeout = "45s"
body_min_rate = 100
max_request_bodies = 7
write_spool_bytes = 8388608
write_bytes_per_user = 3145728
write_bytes = 9437184
write_spool_dir = "/var/tmp/sluice"
max_header_bytes = 8192
graphql_ws_max_message_bytes = 2048
graphql_ws_max_operations = 7
graphql_max_body_bytes = 4096
graphql_request_bytes = 134217728
max_write_documents = 77
max_unauthenticated_sockets = 9
auth_max_failures = 3
auth_failure_window = "1m"
max_streams = 5000
max_requests_per_user = 8
max_requests_in_flight = 88
max_streams_per_user = 0
stream_variables_bytes_per_user = 21
stream_variables_bytes = 22
stream_output_bytes_per_user = 23
stream_output_bytes = 24
live_queries_per_user = 11
live_queries = 12
live_rows_per_user = 13
live_bytes_per_user = 14
live_rows = 15
live_bytes = 16
cors_origins = ["https://app.example.com", "http://localhost:3000"]
stream_ticket_ttl = "30s"
jwt_hs256_secret = "0123456789abcdef0123456789abcdef"
jwt_hs256_secret_file = "/run/secrets/jwt"
jwt_jwks_file = "/etc/sluice/jwks.json"
jwt_issuer = "https://id.example.com/"
jwt_audience = "sluice"
jwt_user_claim = "preferred_username"
jwt_leeway = "5s"
metrics_token = "0123456789abcdef-metrics"
metrics_listen = "127.0.0.1:9363"
metrics_allow_hosts = ["sluice.internal", "Metrics.Example."]
trusted_proxies = ["10.1.2.3/8", "::ffff:192.0.2.1", "fd00::/8"]
graphql_max_query_bytes = 1001
graphql_max_tokens = 1002
graphql_max_depth = 3
graphql_max_aliases = 4
graphql_max_fields = 1005
graphql_max_fragments = 6
graphql_max_statements = 9
graphql_max_result_rows = 1007
graphql_max_response_bytes = 1008
graphql_request_timeout = "45s"
statement_timeout = "2m"
history_page_bytes = 65536
max_past_changes = 2000
max_webhooks_per_database = 3
max_webhooks_per_user = 4
max_databases_per_user = 6
access_changes_per_user = 7
webhook_timeout = "2s"
webhook_retry_schedule = ["100ms", "1s"]
webhook_allow_networks = ["127.0.0.0/8", "fd00::/8"]
webhook_lease_ttl = "3s"
webhook_secret_key_file = "/run/secrets/webhooks"
webhook_body_budget = 2097152
webhook_body_budget_per_user = 1048576
jwt_jwks_url = "https://id.example.com/.well-known/jwks.json"
jwt_jwks_http_loopback = true
tls_cert_file = "/etc/sluice/cert.pem"
tls_key_file = "/etc/sluice/key.pem"
`},
		{"sluice.json", `{
  "listen": "127.0.0.1:7000",
  "data_dir": "/var/lib/sluice",
  "database_url": "postgres://sluice@db/sluice",
  "admin_password": "hunter2",
  "pg_bin_dir": "/opt/pg/bin",
  "log_level": "debug",
  "log_format": "json",
  "log_retention": "0s",
  "idempotency_retention": "2h0m0s",
  "idempotency_max_keys": 50,
  "shutdown_timeout": "30s",
  "heartbeat": "1m0s",
  "max_body_bytes": 1024,
  "max_schema_bytes": 4096,
  "body_idle_timeout": "5s",
  "write_timeout": "45s",
  "body_min_rate": 100,
  "max_request_bodies": 7,
  "write_spool_bytes": 8388608,
  "write_bytes_per_user": 3145728,
  "write_bytes": 9437184,
  "write_spool_dir": "/var/tmp/sluice",
  "max_header_bytes": 8192,
  "graphql_ws_max_message_bytes": 2048,
  "graphql_ws_max_operations": 7,
  "graphql_max_body_bytes": 4096,
  "graphql_request_bytes": 134217728,
  "max_write_documents": 77,
  "max_unauthenticated_sockets": 9,
  "auth_max_failures": 3,
  "auth_failure_window": "1m",
  "max_streams": 5000,
  "max_requests_per_user": 8,
  "max_requests_in_flight": 88,
  "max_streams_per_user": 0,
  "stream_variables_bytes_per_user": 21,
  "stream_variables_bytes": 22,
  "stream_output_bytes_per_user": 23,
  "stream_output_bytes": 24,
  "live_queries_per_user": 11,
  "live_queries": 12,
  "live_rows_per_user": 13,
  "live_bytes_per_user": 14,
  "live_rows": 15,
  "live_bytes": 16,
  "cors_origins": ["https://app.example.com", "http://localhost:3000"],
  "stream_ticket_ttl": "30s",
  "jwt_hs256_secret": "0123456789abcdef0123456789abcdef",
  "jwt_hs256_secret_file": "/run/secrets/jwt",
  "jwt_jwks_file": "/etc/sluice/jwks.json",
  "jwt_issuer": "https://id.example.com/",
  "jwt_audience": "sluice",
  "jwt_user_claim": "preferred_username",
  "jwt_leeway": "5s",
  "metrics_token": "0123456789abcdef-metrics",
  "metrics_listen": "127.0.0.1:9363",
  "metrics_allow_hosts": ["sluice.internal", "Metrics.Example."],
  "trusted_proxies": ["10.1.2.3/8", "::ffff:192.0.2.1", "fd00::/8"],
  "graphql_max_query_bytes": 1001,
  "graphql_max_tokens": 1002,
  "graphql_max_depth": 3,
  "graphql_max_aliases": 4,
  "graphql_max_fields": 1005,
  "graphql_max_fragments": 6,
  "graphql_max_statements": 9,
  "graphql_max_result_rows": 1007,
  "graphql_max_response_bytes": 1008,
  "graphql_request_timeout": "45s",
  "statement_timeout": "120s",
  "history_page_bytes": 65536,
  "max_past_changes": 2000,
  "max_webhooks_per_database": 3,
  "max_webhooks_per_user": 4,
  "max_databases_per_user": 6,
  "access_changes_per_user": 7,
  "webhook_timeout": "2s",
  "webhook_retry_schedule": "100ms,1s",
  "webhook_allow_networks": ["127.0.0.0/8", "fd00::/8"],
  "webhook_lease_ttl": "3s",
  "webhook_secret_key_file": "/run/secrets/webhooks",
  "webhook_body_budget": 2097152,
  "webhook_body_budget_per_user": 1048576,
  "jwt_jwks_url": "https://id.example.com/.well-known/jwks.json",
  "jwt_jwks_http_loopback": true,
  "tls_cert_file": "/etc/sluice/cert.pem",
  "tls_key_file": "/etc/sluice/key.pem"
}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := writeFile(t, tt.name, tt.content)
			got, err := load(t, []string{"--config", path}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, everything) {
				t.Errorf("got  %+v\nwant %+v", got, everything)
			}
		})
	}
}

func TestEnvEveryKey(t *testing.T) {
	t.Parallel()
	got, err := load(t, nil, map[string]string{
		"SLUICE_LISTEN":                          "127.0.0.1:7000",
		"SLUICE_DATA_DIR":                        "/var/lib/sluice",
		"SLUICE_DATABASE_URL":                    "postgres://sluice@db/sluice",
		"SLUICE_ADMIN_PASSWORD":                  "hunter2",
		"SLUICE_PG_BIN_DIR":                      "/opt/pg/bin",
		"SLUICE_LOG_LEVEL":                       "debug",
		"SLUICE_LOG_FORMAT":                      "json",
		"SLUICE_LOG_RETENTION":                   "0",
		"SLUICE_IDEMPOTENCY_RETENTION":           "2h",
		"SLUICE_IDEMPOTENCY_MAX_KEYS":            "50",
		"SLUICE_SHUTDOWN_TIMEOUT":                "30s",
		"SLUICE_HEARTBEAT":                       "1m",
		"SLUICE_MAX_BODY_BYTES":                  "1024",
		"SLUICE_MAX_SCHEMA_BYTES":                "4096",
		"SLUICE_BODY_IDLE_TIMEOUT":               "5s",
		"SLUICE_WRITE_TIMEOUT":                   "45s",
		"SLUICE_BODY_MIN_RATE":                   "100",
		"SLUICE_MAX_REQUEST_BODIES":              "7",
		"SLUICE_WRITE_SPOOL_BYTES":               "8388608",
		"SLUICE_WRITE_BYTES_PER_USER":            "3145728",
		"SLUICE_WRITE_BYTES":                     "9437184",
		"SLUICE_WRITE_SPOOL_DIR":                 "/var/tmp/sluice",
		"SLUICE_MAX_HEADER_BYTES":                "8192",
		"SLUICE_GRAPHQL_WS_MAX_MESSAGE_BYTES":    "2048",
		"SLUICE_GRAPHQL_WS_MAX_OPERATIONS":       "7",
		"SLUICE_GRAPHQL_MAX_BODY_BYTES":          "4096",
		"SLUICE_GRAPHQL_REQUEST_BYTES":           "134217728",
		"SLUICE_MAX_WRITE_DOCUMENTS":             "77",
		"SLUICE_MAX_UNAUTHENTICATED_SOCKETS":     "9",
		"SLUICE_AUTH_MAX_FAILURES":               "3",
		"SLUICE_AUTH_FAILURE_WINDOW":             "1m",
		"SLUICE_METRICS_TOKEN":                   "0123456789abcdef-metrics",
		"SLUICE_METRICS_LISTEN":                  "127.0.0.1:9363",
		"SLUICE_METRICS_ALLOW_HOSTS":             "sluice.internal, Metrics.Example.",
		"SLUICE_TRUSTED_PROXIES":                 "10.1.2.3/8, ::ffff:192.0.2.1,fd00::/8",
		"SLUICE_MAX_STREAMS":                     "5000",
		"SLUICE_MAX_REQUESTS_PER_USER":           "8",
		"SLUICE_MAX_REQUESTS_IN_FLIGHT":          "88",
		"SLUICE_MAX_STREAMS_PER_USER":            "0",
		"SLUICE_STREAM_VARIABLES_BYTES_PER_USER": "21",
		"SLUICE_STREAM_VARIABLES_BYTES":          "22",
		"SLUICE_STREAM_OUTPUT_BYTES_PER_USER":    "23",
		"SLUICE_STREAM_OUTPUT_BYTES":             "24",
		"SLUICE_LIVE_QUERIES_PER_USER":           "11",
		"SLUICE_LIVE_QUERIES":                    "12",
		"SLUICE_LIVE_ROWS_PER_USER":              "13",
		"SLUICE_LIVE_BYTES_PER_USER":             "14",
		"SLUICE_LIVE_ROWS":                       "15",
		"SLUICE_LIVE_BYTES":                      "16",
		"SLUICE_CORS_ORIGINS":                    "https://app.example.com, http://localhost:3000",
		"SLUICE_STREAM_TICKET_TTL":               "30s",
		"SLUICE_JWT_HS256_SECRET":                "0123456789abcdef0123456789abcdef",
		"SLUICE_JWT_HS256_SECRET_FILE":           "/run/secrets/jwt",
		"SLUICE_JWT_JWKS_FILE":                   "/etc/sluice/jwks.json",
		"SLUICE_JWT_ISSUER":                      "https://id.example.com/",
		"SLUICE_JWT_AUDIENCE":                    "sluice",
		"SLUICE_JWT_USER_CLAIM":                  "preferred_username",
		"SLUICE_JWT_LEEWAY":                      "5s",
		"SLUICE_GRAPHQL_MAX_QUERY_BYTES":         "1001",
		"SLUICE_GRAPHQL_MAX_TOKENS":              "1002",
		"SLUICE_GRAPHQL_MAX_DEPTH":               "3",
		"SLUICE_GRAPHQL_MAX_ALIASES":             "4",
		"SLUICE_GRAPHQL_MAX_FIELDS":              "1005",
		"SLUICE_GRAPHQL_MAX_FRAGMENTS":           "6",
		"SLUICE_GRAPHQL_MAX_STATEMENTS":          "9",
		"SLUICE_GRAPHQL_MAX_RESULT_ROWS":         "1007",
		"SLUICE_GRAPHQL_MAX_RESPONSE_BYTES":      "1008",
		"SLUICE_GRAPHQL_REQUEST_TIMEOUT":         "45s",
		"SLUICE_STATEMENT_TIMEOUT":               "2m",

		"SLUICE_HISTORY_PAGE_BYTES": "65536",
		"SLUICE_MAX_PAST_CHANGES":   "2000",

		"SLUICE_MAX_WEBHOOKS_PER_DATABASE":    "3",
		"SLUICE_MAX_WEBHOOKS_PER_USER":        "4",
		"SLUICE_MAX_DATABASES_PER_USER":       "6",
		"SLUICE_ACCESS_CHANGES_PER_USER":      "7",
		"SLUICE_WEBHOOK_TIMEOUT":              "2s",
		"SLUICE_WEBHOOK_RETRY_SCHEDULE":       "100ms, 1s",
		"SLUICE_WEBHOOK_ALLOW_NETWORKS":       "127.0.0.0/8,fd00::/8",
		"SLUICE_WEBHOOK_LEASE_TTL":            "3s",
		"SLUICE_WEBHOOK_SECRET_KEY_FILE":      "/run/secrets/webhooks",
		"SLUICE_WEBHOOK_BODY_BUDGET":          "2097152",
		"SLUICE_WEBHOOK_BODY_BUDGET_PER_USER": "1048576",
		"SLUICE_JWT_JWKS_URL":                 "https://id.example.com/.well-known/jwks.json",
		"SLUICE_JWT_JWKS_HTTP_LOOPBACK":       "true",
		"SLUICE_TLS_CERT_FILE":                "/etc/sluice/cert.pem",
		"SLUICE_TLS_KEY_FILE":                 "/etc/sluice/key.pem",
	})
	if err != nil || !reflect.DeepEqual(got, everything) {
		t.Errorf("got %+v, %v\nwant %+v", got, err, everything)
	}
}

func TestFlagsEveryKey(t *testing.T) {
	t.Parallel()
	got, err := load(t, []string{
		"--listen", "127.0.0.1:7000",
		"--data-dir", "/var/lib/sluice",
		"--database-url", "postgres://sluice@db/sluice",
		"--admin-password", "hunter2",
		"--pg-bin-dir", "/opt/pg/bin",
		"--log-level", "debug",
		"--log-format", "json",
		"--log-retention", "0",
		"--idempotency-retention", "2h",
		"--idempotency-max-keys", "50",
		"--shutdown-timeout", "30s",
		"--heartbeat", "1m",
		"--max-body-bytes", "1024",
		"--max-schema-bytes", "4096",
		"--body-idle-timeout", "5s",
		"--write-timeout", "45s",
		"--body-min-rate", "100",
		"--max-request-bodies", "7",
		"--write-spool-bytes", "8388608",
		"--write-bytes-per-user", "3145728",
		"--write-bytes", "9437184",
		"--write-spool-dir", "/var/tmp/sluice",
		"--max-header-bytes", "8192",
		"--graphql-ws-max-message-bytes", "2048",
		"--graphql-ws-max-operations", "7",
		"--graphql-max-body-bytes", "4096",
		"--graphql-request-bytes", "134217728",
		"--max-write-documents", "77",
		"--max-unauthenticated-sockets", "9",
		"--auth-max-failures", "3",
		"--auth-failure-window", "1m",
		"--metrics-token", "0123456789abcdef-metrics",
		"--metrics-listen", "127.0.0.1:9363",
		"--metrics-allow-hosts", "sluice.internal,Metrics.Example.",
		"--trusted-proxies", "10.1.2.3/8,::ffff:192.0.2.1,fd00::/8",
		"--max-streams", "5000",
		"--max-requests-per-user", "8",
		"--max-requests-in-flight", "88",
		"--max-streams-per-user", "0",
		"--stream-variables-bytes-per-user", "21",
		"--stream-variables-bytes", "22",
		"--stream-output-bytes-per-user", "23",
		"--stream-output-bytes", "24",
		"--live-queries-per-user", "11",
		"--live-queries", "12",
		"--live-rows-per-user", "13",
		"--live-bytes-per-user", "14",
		"--live-rows", "15",
		"--live-bytes", "16",
		"--cors-origins", "https://app.example.com,http://localhost:3000",
		"--stream-ticket-ttl", "30s",
		"--jwt-hs256-secret", "0123456789abcdef0123456789abcdef",
		"--jwt-hs256-secret-file", "/run/secrets/jwt",
		"--jwt-jwks-file", "/etc/sluice/jwks.json",
		"--jwt-issuer", "https://id.example.com/",
		"--jwt-audience", "sluice",
		"--jwt-user-claim", "preferred_username",
		"--jwt-leeway", "5s",
		"--graphql-max-query-bytes", "1001",
		"--graphql-max-tokens", "1002",
		"--graphql-max-depth", "3",
		"--graphql-max-aliases", "4",
		"--graphql-max-fields", "1005",
		"--graphql-max-fragments", "6",
		"--graphql-max-statements", "9",
		"--graphql-max-result-rows", "1007",
		"--graphql-max-response-bytes", "1008",
		"--graphql-request-timeout", "45s",
		"--statement-timeout", "2m",
		"--history-page-bytes", "65536",
		"--max-past-changes", "2000",
		"--max-webhooks-per-database", "3",
		"--max-webhooks-per-user", "4",
		"--max-databases-per-user", "6",
		"--access-changes-per-user", "7",
		"--webhook-timeout", "2s",
		"--webhook-retry-schedule", "100ms,1s",
		"--webhook-allow-networks", "127.0.0.1/8,fd00::/8",
		"--webhook-lease-ttl", "3s",
		"--webhook-secret-key-file", "/run/secrets/webhooks",
		"--webhook-body-budget", "2097152",
		"--webhook-body-budget-per-user", "1048576",
		"--jwt-jwks-url", "https://id.example.com/.well-known/jwks.json",
		"--jwt-jwks-http-loopback", "true",
		"--tls-cert-file", "/etc/sluice/cert.pem",
		"--tls-key-file", "/etc/sluice/key.pem",
	}, nil)
	if err != nil || !reflect.DeepEqual(got, everything) {
		t.Errorf("got %+v, %v\nwant %+v", got, err, everything)
	}
}

func TestInvalidValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{
			name: "metrics host with a port",
			env:  map[string]string{"SLUICE_METRICS_ALLOW_HOSTS": "sluice.internal:9363"},
			want: `config: metrics_allow_hosts: invalid value "sluice.internal:9363" (from SLUICE_METRICS_ALLOW_HOSTS): host "sluice.internal:9363": want a host name without a port, such as sluice.internal`,
		},
		{
			name: "listen without port",
			env:  map[string]string{"SLUICE_LISTEN": "6363"},
			want: `config: listen: invalid value "6363" (from SLUICE_LISTEN): want host:port, such as ":6363" or "127.0.0.1:6363"`,
		},
		{
			name: "listen with named port",
			args: []string{"--listen", ":http"},
			want: `config: listen: invalid value ":http" (from --listen): port "http" is not a number from 0 to 65535`,
		},
		{
			name: "listen port out of range",
			env:  map[string]string{"SLUICE_LISTEN": "localhost:65536"},
			want: `config: listen: invalid value "localhost:65536" (from SLUICE_LISTEN): port "65536" is not a number from 0 to 65535`,
		},
		{
			name: "empty data_dir",
			args: []string{"--data-dir="},
			want: `config: data_dir: invalid value "" (from --data-dir): must not be empty`,
		},
		{
			name: "unknown log_level",
			env:  map[string]string{"SLUICE_LOG_LEVEL": "verbose"},
			want: `config: log_level: invalid value "verbose" (from SLUICE_LOG_LEVEL): want one of debug, info, warn, error`,
		},
		{
			name: "log_level is case-sensitive",
			args: []string{"--log-level", "INFO"},
			want: `config: log_level: invalid value "INFO" (from --log-level): want one of debug, info, warn, error`,
		},
		{
			name: "unknown log_format",
			env:  map[string]string{"SLUICE_LOG_FORMAT": "logfmt"},
			want: `config: log_format: invalid value "logfmt" (from SLUICE_LOG_FORMAT): want one of text, json`,
		},
		{
			name: "duration in days",
			env:  map[string]string{"SLUICE_LOG_RETENTION": "7d"},
			want: `config: log_retention: invalid value "7d" (from SLUICE_LOG_RETENTION): want a duration such as "30s", "5m" or "168h"`,
		},
		{
			name: "idempotency_retention out of range",
			env:  map[string]string{"SLUICE_IDEMPOTENCY_RETENTION": "0s"},
			want: `config: idempotency_retention: invalid value "0s" (from SLUICE_IDEMPOTENCY_RETENTION): want 1m to 720h`,
		},
		{
			name: "idempotency_max_keys of 0",
			env:  map[string]string{"SLUICE_IDEMPOTENCY_MAX_KEYS": "0"},
			want: `config: idempotency_max_keys: invalid value "0" (from SLUICE_IDEMPOTENCY_MAX_KEYS): want a whole number from 1 to 2147483647`,
		},
		{
			name: "duration without unit",
			env:  map[string]string{"SLUICE_SHUTDOWN_TIMEOUT": "10"},
			want: `config: shutdown_timeout: invalid value "10" (from SLUICE_SHUTDOWN_TIMEOUT): want a duration such as "30s", "5m" or "168h"`,
		},
		{
			name: "negative log_retention",
			env:  map[string]string{"SLUICE_LOG_RETENTION": "-1h"},
			want: `config: log_retention: invalid value "-1h" (from SLUICE_LOG_RETENTION): must not be negative`,
		},
		{
			name: "log_retention under a minute",
			env:  map[string]string{"SLUICE_LOG_RETENTION": "1ns"},
			want: `config: log_retention: invalid value "1ns" (from SLUICE_LOG_RETENTION): want 0 (keep every commit) or at least 1m`,
		},
		{
			name: "negative shutdown_timeout flag",
			args: []string{"--shutdown-timeout=-1s"},
			want: `config: shutdown_timeout: invalid value "-1s" (from --shutdown-timeout): must not be negative`,
		},
		{
			name: "zero heartbeat",
			env:  map[string]string{"SLUICE_HEARTBEAT": "0"},
			want: `config: heartbeat: invalid value "0" (from SLUICE_HEARTBEAT): want 1s to 1h`,
		},
		{
			name: "zero heartbeat flag",
			args: []string{"--heartbeat", "0s"},
			want: `config: heartbeat: invalid value "0s" (from --heartbeat): want 1s to 1h`,
		},
		{
			name: "negative heartbeat",
			env:  map[string]string{"SLUICE_HEARTBEAT": "-5s"},
			want: `config: heartbeat: invalid value "-5s" (from SLUICE_HEARTBEAT): must not be negative`,
		},
		{
			name: "write_spool_bytes too small to hold a body's head",
			env:  map[string]string{"SLUICE_WRITE_SPOOL_BYTES": "1048576"},
			want: `config: write_spool_bytes: invalid value "1048576" (from SLUICE_WRITE_SPOOL_BYTES): want 0 (bodies read as they arrive) or at least 4194304 (4 MiB)`,
		},
		{
			name: "zero graphql_max_depth",
			env:  map[string]string{"SLUICE_GRAPHQL_MAX_DEPTH": "0"},
			want: `config: graphql_max_depth: invalid value "0" (from SLUICE_GRAPHQL_MAX_DEPTH): want a whole number from 1 to 2147483647`,
		},
		{
			name: "graphql_max_result_rows beyond int32",
			args: []string{"--graphql-max-result-rows=2147483648"},
			want: `config: graphql_max_result_rows: invalid value "2147483648" (from --graphql-max-result-rows): want a whole number from 1 to 2147483647`,
		},
		{
			name: "graphql_max_response_bytes with unit",
			env:  map[string]string{"SLUICE_GRAPHQL_MAX_RESPONSE_BYTES": "16MiB"},
			want: `config: graphql_max_response_bytes: invalid value "16MiB" (from SLUICE_GRAPHQL_MAX_RESPONSE_BYTES): want a whole number from 1 to 2147483647`,
		},
		{
			name: "zero max_body_bytes",
			env:  map[string]string{"SLUICE_MAX_BODY_BYTES": "0"},
			want: `config: max_body_bytes: invalid value "0" (from SLUICE_MAX_BODY_BYTES): want a whole number of bytes greater than zero`,
		},
		// A flag's value is decoded as the environment's is: the error
		// names the flag and says what is wanted, not pflag's
		// `invalid argument "10MB" for "--max-body-bytes" flag:
		// strconv.ParseInt: …`.
		{
			name: "max_body_bytes flag with a unit",
			args: []string{"--max-body-bytes", "10MB"},
			want: `config: max_body_bytes: invalid value "10MB" (from --max-body-bytes): want a whole number of bytes greater than zero`,
		},
		{
			name: "max_body_bytes flag in hexadecimal, as in the environment",
			args: []string{"--max-body-bytes=0x10"},
			want: `config: max_body_bytes: invalid value "0x10" (from --max-body-bytes): want a whole number of bytes greater than zero`,
		},
		{
			name: "max_body_bytes with a sign",
			env:  map[string]string{"SLUICE_MAX_BODY_BYTES": "+16"},
			want: `config: max_body_bytes: invalid value "+16" (from SLUICE_MAX_BODY_BYTES): want a whole number of bytes greater than zero`,
		},
		{
			name: "max_streams flag with a leading zero",
			args: []string{"--max-streams=010"},
			want: `config: max_streams: invalid value "010" (from --max-streams): want a whole number, 0 or more`,
		},
		{
			name: "graphql_max_depth with a sign",
			env:  map[string]string{"SLUICE_GRAPHQL_MAX_DEPTH": "+3"},
			want: `config: graphql_max_depth: invalid value "+3" (from SLUICE_GRAPHQL_MAX_DEPTH): want a whole number from 1 to 2147483647`,
		},
		{
			name: "boolean flag neither true nor false",
			args: []string{"--jwt-jwks-http-loopback=maybe"},
			want: `config: jwt_jwks_http_loopback: invalid value "maybe" (from --jwt-jwks-http-loopback): want true or false`,
		},
		{
			name: "duration flag in days",
			args: []string{"--log-retention=7d"},
			want: `config: log_retention: invalid value "7d" (from --log-retention): want a duration such as "30s", "5m" or "168h"`,
		},
		{
			name: "negative max_body_bytes flag",
			args: []string{"--max-body-bytes=-1"},
			want: `config: max_body_bytes: invalid value "-1" (from --max-body-bytes): want a whole number of bytes greater than zero`,
		},
		{
			name: "max_body_bytes with unit",
			env:  map[string]string{"SLUICE_MAX_BODY_BYTES": "64MiB"},
			want: `config: max_body_bytes: invalid value "64MiB" (from SLUICE_MAX_BODY_BYTES): want a whole number of bytes greater than zero`,
		},
		{
			// Postgres takes at most 2147483647 ms: past it every
			// connection failed, after the start had succeeded.
			name: "statement_timeout beyond what Postgres takes",
			env:  map[string]string{"SLUICE_STATEMENT_TIMEOUT": "720h"},
			want: `config: statement_timeout: invalid value "720h" (from SLUICE_STATEMENT_TIMEOUT): want at most 596h31m23.647s (2147483647 ms, the most Postgres takes)`,
		},
		{
			name: "statement_timeout a millisecond beyond what Postgres takes",
			args: []string{"--statement-timeout", "596h31m23.648s"},
			want: `config: statement_timeout: invalid value "596h31m23.648s" (from --statement-timeout): want at most 596h31m23.647s (2147483647 ms, the most Postgres takes)`,
		},
		{
			// net/http adds 4096 to it: near the int64 maximum the sum
			// overflowed and every request was answered 431.
			name: "max_header_bytes near the int64 maximum",
			args: []string{"--max-header-bytes=9223372036854775807"},
			want: `config: max_header_bytes: invalid value "9223372036854775807" (from --max-header-bytes): want at most 1073741824 (1 GiB)`,
		},
		{
			name: "max_header_bytes past 1 GiB",
			env:  map[string]string{"SLUICE_MAX_HEADER_BYTES": "1073741825"},
			want: `config: max_header_bytes: invalid value "1073741825" (from SLUICE_MAX_HEADER_BYTES): want at most 1073741824 (1 GiB)`,
		},
		{
			name: "log_retention past the largest duration",
			env:  map[string]string{"SLUICE_LOG_RETENTION": "2562048h"},
			want: `config: log_retention: invalid value "2562048h" (from SLUICE_LOG_RETENTION): too long: the largest duration is 2562047h47m16.854775807s (about 292 years)`,
		},
		{
			name: "stream_ticket_ttl too short",
			env:  map[string]string{"SLUICE_STREAM_TICKET_TTL": "500ms"},
			want: `config: stream_ticket_ttl: invalid value "500ms" (from SLUICE_STREAM_TICKET_TTL): want 1s to 10m`,
		},
		{
			name: "stream_ticket_ttl too long",
			args: []string{"--stream-ticket-ttl", "1h"},
			want: `config: stream_ticket_ttl: invalid value "1h" (from --stream-ticket-ttl): want 1s to 10m`,
		},
		{
			name: "empty jwt_user_claim",
			args: []string{"--jwt-user-claim="},
			want: `config: jwt_user_claim: invalid value "" (from --jwt-user-claim): must not be empty`,
		},
		{
			name: "jwt_leeway too long",
			env:  map[string]string{"SLUICE_JWT_LEEWAY": "1h"},
			want: `config: jwt_leeway: invalid value "1h" (from SLUICE_JWT_LEEWAY): want at most 5m`,
		},
		{
			name: "webhook_retry_schedule with a bad wait",
			env:  map[string]string{"SLUICE_WEBHOOK_RETRY_SCHEDULE": "5s,soon"},
			want: `config: webhook_retry_schedule: invalid value "5s,soon" (from SLUICE_WEBHOOK_RETRY_SCHEDULE): retry wait "soon": want a duration from 1ns to 168h, such as 30s`,
		},
		{
			name: "empty webhook_retry_schedule",
			args: []string{"--webhook-retry-schedule="},
			want: `config: webhook_retry_schedule: invalid value "" (from --webhook-retry-schedule): want at least one duration, such as 5s,1m,1h`,
		},
		{
			name: "webhook_allow_networks without a prefix length",
			env:  map[string]string{"SLUICE_WEBHOOK_ALLOW_NETWORKS": "10.0.0.1"},
			want: `config: webhook_allow_networks: invalid value "10.0.0.1" (from SLUICE_WEBHOOK_ALLOW_NETWORKS): network "10.0.0.1": want an address and a prefix length, such as 10.0.0.0/8 or fd00::/8`,
		},
		{
			name: "trusted_proxies with a host name",
			env:  map[string]string{"SLUICE_TRUSTED_PROXIES": "127.0.0.1,proxy.internal"},
			want: `config: trusted_proxies: invalid value "127.0.0.1,proxy.internal" (from SLUICE_TRUSTED_PROXIES): proxy "proxy.internal": want an address, such as 127.0.0.1 or ::1, or a network in CIDR notation, such as 10.0.0.0/8`,
		},
		{
			name: "trusted_proxies with a bad prefix length",
			args: []string{"--trusted-proxies", "10.0.0.0/33"},
			want: `config: trusted_proxies: invalid value "10.0.0.0/33" (from --trusted-proxies): proxy "10.0.0.0/33": want a network in CIDR notation, such as 10.0.0.0/8 or fd00::/8, or an address, such as 127.0.0.1`,
		},
		{
			name: "webhook_lease_ttl too short",
			args: []string{"--webhook-lease-ttl", "100ms"},
			want: `config: webhook_lease_ttl: invalid value "100ms" (from --webhook-lease-ttl): want 1s to 5m`,
		},
		{
			name: "webhook_timeout too long",
			env:  map[string]string{"SLUICE_WEBHOOK_TIMEOUT": "1h"},
			want: `config: webhook_timeout: invalid value "1h" (from SLUICE_WEBHOOK_TIMEOUT): want 1s to 5m`,
		},
		{
			name: "every bad value is reported",
			args: []string{"--listen", "nope"},
			env:  map[string]string{"SLUICE_LOG_LEVEL": "loud", "SLUICE_HEARTBEAT": "0s"},
			want: `config: listen: invalid value "nope" (from --listen): want host:port, such as ":6363" or "127.0.0.1:6363"` + "\n" +
				`config: log_level: invalid value "loud" (from SLUICE_LOG_LEVEL): want one of debug, info, warn, error` + "\n" +
				`config: heartbeat: invalid value "0s" (from SLUICE_HEARTBEAT): want 1s to 1h`,
		},
		{
			name: "jwt_jwks_url not http",
			env:  map[string]string{"SLUICE_JWT_JWKS_URL": "id.example.com/jwks.json"},
			want: `config: jwt_jwks_url: invalid value "id.example.com/jwks.json" (from SLUICE_JWT_JWKS_URL): want an https URL`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := load(t, tt.args, tt.env)
			if err == nil {
				t.Fatalf("got %+v, want error %s", c, tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("error:\n got %s\nwant %s", err, tt.want)
			}
		})
	}
}

// TestJWTClaimsNeedAKey: jwt_issuer or jwt_audience without a JWT key to
// verify JWTs with is refused, naming them and the keys; with any key
// they are taken.
func TestJWTClaimsNeedAKey(t *testing.T) {
	t.Parallel()
	const keys = "set jwt_hs256_secret, jwt_hs256_secret_file, jwt_jwks_file or jwt_jwks_url"
	for _, tt := range []struct {
		name string
		args []string
		env  map[string]string
		want string // "": no error
	}{
		{"jwt_issuer alone", nil, map[string]string{"SLUICE_JWT_ISSUER": "https://id.example.com/"},
			"config: jwt_issuer is set but no JWT key is, so no JWT is accepted: " + keys + ", or unset jwt_issuer"},
		{"jwt_audience alone", []string{"--jwt-audience", "sluice"}, nil,
			"config: jwt_audience is set but no JWT key is, so no JWT is accepted: " + keys + ", or unset jwt_audience"},
		{"both", []string{"--jwt-issuer", "https://id.example.com/"}, map[string]string{"SLUICE_JWT_AUDIENCE": "sluice"},
			"config: jwt_issuer and jwt_audience are set but no JWT key is, so no JWT is accepted: " + keys + ", or unset them"},
		{"with a secret", []string{"--jwt-issuer", "https://id.example.com/"}, map[string]string{"SLUICE_JWT_HS256_SECRET": strings.Repeat("s", 32)}, ""},
		{"with a secret file", nil, map[string]string{"SLUICE_JWT_AUDIENCE": "sluice", "SLUICE_JWT_HS256_SECRET_FILE": "/run/secrets/jwt"}, ""},
		{"with a key set file", []string{"--jwt-audience", "sluice", "--jwt-jwks-file", "/etc/sluice/jwks.json"}, nil, ""},
		{"with a key set URL", nil, map[string]string{"SLUICE_JWT_ISSUER": "https://id.example.com/", "SLUICE_JWT_JWKS_URL": "https://id.example.com/jwks.json"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := load(t, tt.args, tt.env)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tt.want != "" && (err == nil || err.Error() != tt.want):
				t.Errorf("error:\n got %v\nwant %s", err, tt.want)
			}
		})
	}
}

func TestInvalidFileValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, file, content string
		want                string // %[1]q is the file's path
	}{
		{
			name: "number for a string", file: "s.yaml", content: "listen: 6363\n",
			want: `config: listen: invalid value 6363 (from config file %[1]q): want a string (quote it in the config file)`,
		},
		{
			name: "bool for a string", file: "s.toml", content: "admin_password = true\n",
			want: `config: admin_password: invalid value [redacted] (from config file %[1]q): want a string (quote it in the config file)`,
		},
		{
			name: "list for a string", file: "s.json", content: `{"data_dir": ["a", "b"]}`,
			want: `config: data_dir: invalid value [a b] (from config file %[1]q): want a string (quote it in the config file)`,
		},
		{
			name: "number for a duration", file: "s.yaml", content: "heartbeat: 30\n",
			want: `config: heartbeat: invalid value 30 (from config file %[1]q): want a duration such as "30s", "5m" or "168h"`,
		},
		{
			name: "fraction for bytes", file: "s.json", content: `{"max_body_bytes": 1.5}`,
			want: `config: max_body_bytes: invalid value 1.5 (from config file %[1]q): want a whole number of bytes greater than zero`,
		},
		{
			name: "bytes beyond int64", file: "s.yaml", content: "max_body_bytes: 18446744073709551615\n",
			want: `config: max_body_bytes: invalid value 18446744073709551615 (from config file %[1]q): want a whole number of bytes greater than zero`,
		},
		// A size or a count is decimal digits in a file as in a variable
		// (docs/configuration.md): the decoders took these as numbers,
		// 010 as 8 in YAML.
		{
			name: "hexadecimal bytes in YAML", file: "s.yaml", content: "max_body_bytes: 0x10\n",
			want: `config: max_body_bytes: invalid value 0x10 (from config file %[1]q): want a whole number of bytes greater than zero`,
		},
		{
			name: "octal bytes in YAML", file: "s.yaml", content: "max_body_bytes: 010\n",
			want: `config: max_body_bytes: invalid value 010 (from config file %[1]q): want a whole number of bytes greater than zero`,
		},
		{
			name: "YAML 1.2 octal count", file: "s.yml", content: "max_streams: 0o20\n",
			want: `config: max_streams: invalid value 0o20 (from config file %[1]q): want a whole number, 0 or more`,
		},
		{
			name: "digits with underscores in YAML", file: "s.yaml", content: "graphql_max_depth: 1_0\n",
			want: `config: graphql_max_depth: invalid value 1_0 (from config file %[1]q): want a whole number from 1 to 2147483647`,
		},
		{
			name: "bytes with a sign in YAML", file: "s.yaml", content: "max_body_bytes: +16\n",
			want: `config: max_body_bytes: invalid value +16 (from config file %[1]q): want a whole number of bytes greater than zero`,
		},
		{
			name: "bytes with an exponent in YAML", file: "s.yaml", content: "max_body_bytes: 1e3\n",
			want: `config: max_body_bytes: invalid value 1e3 (from config file %[1]q): want a whole number of bytes greater than zero`,
		},
		{
			name: "binary bytes in TOML", file: "s.toml", content: "max_body_bytes = 0b10000\n",
			want: `config: max_body_bytes: invalid value 0b10000 (from config file %[1]q): want a whole number of bytes greater than zero`,
		},
		{
			name: "digits with underscores in TOML", file: "s.toml", content: "max_body_bytes = 1_024\n",
			want: `config: max_body_bytes: invalid value 1_024 (from config file %[1]q): want a whole number of bytes greater than zero`,
		},
		{
			name: "whole float in TOML", file: "s.toml", content: "max_body_bytes = 16.0\n",
			want: `config: max_body_bytes: invalid value 16.0 (from config file %[1]q): want a whole number of bytes greater than zero`,
		},
		{
			name: "exponent in JSON", file: "s.json", content: `{"max_body_bytes": 1e3}`,
			want: `config: max_body_bytes: invalid value 1e3 (from config file %[1]q): want a whole number of bytes greater than zero`,
		},
		{
			name: "hexadecimal zero for a duration in YAML", file: "s.yaml", content: "log_retention: 0x0\n",
			want: `config: log_retention: invalid value 0x0 (from config file %[1]q): want a duration such as "30s", "5m" or "168h"`,
		},
		{
			name: "only values in effect are checked", file: "s.yaml", content: "log_level: loud\nlog_format: xml\n",
			want: `config: log_format: invalid value "xml" (from config file %[1]q): want one of text, json`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := writeFile(t, tt.file, tt.content)
			c, err := load(t, []string{"--config", path}, map[string]string{"SLUICE_LOG_LEVEL": "warn"})
			want := fmt.Sprintf(tt.want, path)
			if err == nil {
				t.Fatalf("got %+v, want error %s", c, want)
			}
			if err.Error() != want {
				t.Errorf("error:\n got %s\nwant %s", err, want)
			}
		})
	}
}

// TestInvalidSecretsAreNotShown: the error of an invalid value of a secret
// (a password, a token, the JWT secret) shows its length at most, and that
// of a connection string or URL all but its password, whatever the value
// came from: errors go to the terminal and the log.
func TestInvalidSecretsAreNotShown(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		args   []string
		env    map[string]string
		file   string // name and content, when not empty
		body   string
		want   string // %[1]q is the file's path
		secret string
	}{
		{
			name: "a short metrics_token", env: map[string]string{"SLUICE_METRICS_TOKEN": "leakyToken12"},
			want:   `config: metrics_token: invalid value [redacted, 12 bytes] (from SLUICE_METRICS_TOKEN): want at least 16 bytes`,
			secret: "leakyToken12",
		},
		{
			name: "a short metrics_token flag", args: []string{"--metrics-token", "leakyToken12"},
			want:   `config: metrics_token: invalid value [redacted, 12 bytes] (from --metrics-token): want at least 16 bytes`,
			secret: "leakyToken12",
		},
		{
			name: "a numeric admin_password", file: "s.yaml", body: "admin_password: 73519024\n",
			want:   `config: admin_password: invalid value [redacted] (from config file %[1]q): want a string (quote it in the config file)`,
			secret: "73519024",
		},
		{
			name: "a numeric jwt_hs256_secret", file: "s.toml", body: "jwt_hs256_secret = 9182736455463728190\n",
			want:   `config: jwt_hs256_secret: invalid value [redacted] (from config file %[1]q): want a string (quote it in the config file)`,
			secret: "9182736455463728190",
		},
		{
			name: "database_url in a list", file: "s.json", body: `{"database_url": ["postgres://sluice:hunter2@db/sluice"]}`,
			want:   `config: database_url: invalid value [redacted] (from config file %[1]q): want a string (quote it in the config file)`,
			secret: "hunter2",
		},
		{
			name: "jwt_jwks_url of another scheme, with a password", env: map[string]string{"SLUICE_JWT_JWKS_URL": "ftp://id:hunter2@idp.example.com/jwks.json"},
			want:   `config: jwt_jwks_url: invalid value [redacted] (from SLUICE_JWT_JWKS_URL): want an https URL`,
			secret: "hunter2",
		},
		{
			name: "jwt_jwks_url without a host, with a password", env: map[string]string{"SLUICE_JWT_JWKS_URL": "https://id:hunter2@/jwks.json"},
			want:   `config: jwt_jwks_url: invalid value "https://id:xxxxx@/jwks.json" (from SLUICE_JWT_JWKS_URL): want an https URL`,
			secret: "hunter2",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args, path := tt.args, ""
			if tt.file != "" {
				path = writeFile(t, tt.file, tt.body)
				args = append(args, "--config", path)
			}
			want := tt.want
			if path != "" {
				want = fmt.Sprintf(tt.want, path)
			}
			c, err := load(t, args, tt.env)
			if err == nil {
				t.Fatalf("got %+v, want error %s", c, want)
			}
			if err.Error() != want {
				t.Errorf("error:\n got %s\nwant %s", err, want)
			}
			if strings.Contains(err.Error(), tt.secret) {
				t.Errorf("the error shows the secret %q: %s", tt.secret, err)
			}
		})
	}
}

func TestFileErrors(t *testing.T) {
	t.Parallel()
	// Every key, in the order of options(), so that adding one needs no
	// edit here.
	var keys []string
	for _, o := range options() {
		keys = append(keys, o.key)
	}
	known := strings.Join(keys, ", ")
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	tests := []struct {
		name, file, content string
		path                string // instead of file and content
		want                string // %[1]q is the file's path, %[2]s the known keys
		prefix              bool   // want is a prefix: the rest is the decoder's
	}{
		{
			name: "unknown key", file: "s.yaml", content: "listen: ':1'\ndatabse_url: postgres://x\n",
			want: `config: config file %[1]q: unknown key "databse_url"; known keys are %[2]s`,
		},
		{
			name: "unknown keys, nested", file: "s.toml", content: "zeta = 1\n[postgres]\nurl = \"x\"\n",
			want: `config: config file %[1]q: unknown keys "postgres.url", "zeta"; known keys are %[2]s`,
		},
		{
			name: "key nested under a known key", file: "s.json", content: `{"listen": {"port": 1}}`,
			want: `config: config file %[1]q: unknown key "listen.port"; known keys are %[2]s`,
		},
		{
			name: "config is not a file key", file: "s.yaml", content: "config: other.yaml\n",
			want: `config: config file %[1]q: unknown key "config"; known keys are %[2]s`,
		},
		{
			name: "key without value", file: "s.yaml", content: "listen:\n",
			want: `config: config file %[1]q: listen has no value; remove it to use the default`,
		},
		{
			name: "unsupported extension", file: "sluice.ini", content: "listen = :1\n",
			want: `config: config file %[1]q: unsupported extension ".ini" (want .yaml, .yml, .toml or .json)`,
		},
		{
			name: "no extension", file: "sluice", content: "listen: ':1'\n",
			want: `config: config file %[1]q: unsupported extension "" (want .yaml, .yml, .toml or .json)`,
		},
		{
			name: "missing file", path: missing,
			want: `config: read config file %[1]q: open %[1]s: no such file or directory`,
		},
		{
			name: "bad yaml", file: "s.yaml", content: "listen: [\n",
			want: `config: read config file %[1]q: `, prefix: true,
		},
		{
			name: "bad json", file: "s.json", content: `{"listen": }`,
			want: `config: read config file %[1]q: `, prefix: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := tt.path
			if path == "" {
				path = writeFile(t, tt.file, tt.content)
			}
			c, err := load(t, []string{"--config", path}, nil)
			want := fmt.Sprintf(tt.want, path, known)
			if err == nil {
				t.Fatalf("got %+v, want error %s", c, want)
			}
			if tt.prefix && !strings.HasPrefix(err.Error(), want) || !tt.prefix && err.Error() != want {
				t.Errorf("error:\n got %s\nwant %s", err, want)
			}
		})
	}
}

// TestStatementTimeoutMaximum: the largest statement_timeout Postgres
// takes, 2147483647 ms, is accepted (see TestInvalidValues for the next
// millisecond).
func TestStatementTimeoutMaximum(t *testing.T) {
	t.Parallel()
	c, err := load(t, nil, map[string]string{"SLUICE_STATEMENT_TIMEOUT": "596h31m23.647s"})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.StatementTimeout.Milliseconds(); got != 2147483647 {
		t.Errorf("statement_timeout = %d ms, want 2147483647", got)
	}
}

// TestMaxHeaderBytesMaximum: 1 GiB, the largest max_header_bytes, is
// accepted (see TestInvalidValues for more).
func TestMaxHeaderBytesMaximum(t *testing.T) {
	t.Parallel()
	c, err := load(t, []string{"--max-header-bytes=1073741824"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxHeaderBytes != 1<<30 {
		t.Errorf("max_header_bytes = %d, want 1073741824", c.MaxHeaderBytes)
	}
}

// TestBoolFlagAlone: a true/false key's flag alone means true, and takes
// =false; as a string flag it took the next argument for its value
// (--jwt-jwks-http-loopback --listen :1 read ":1" as its value).
func TestBoolFlagAlone(t *testing.T) {
	c, err := load(t, []string{"--jwt-jwks-http-loopback", "--listen", "127.0.0.1:1"}, nil)
	if err != nil || !c.JWTJWKSHTTPLoopback || c.Listen != "127.0.0.1:1" {
		t.Fatalf("the flag alone: loopback %v, listen %q, %v", c.JWTJWKSHTTPLoopback, c.Listen, err)
	}
	c, err = load(t, []string{"--jwt-jwks-http-loopback=false"}, map[string]string{"SLUICE_JWT_JWKS_HTTP_LOOPBACK": "true"})
	if err != nil || c.JWTJWKSHTTPLoopback {
		t.Fatalf("=false over the environment's true: %v, %v", c.JWTJWKSHTTPLoopback, err)
	}
}
