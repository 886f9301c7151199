package config

import (
	"log/slog"
	"net/url"
	"time"
)

// Config is the daemon's configuration. Load fills it; Default returns it
// with every field at its default. Each field names its config file key,
// environment variable and flag; README.fragment.md documents the same keys
// for users.
type Config struct {
	// Listen is the address the HTTP API listens on, as host:port. An empty
	// host listens on every interface; port 0 picks a free port.
	// Key listen, env SLUICE_LISTEN, flag --listen, default ":6363".
	Listen string

	// DataDir is the directory for Sluice's own files, relative to the
	// working directory unless absolute. The embedded Postgres cluster lives
	// in DataDir/pg.
	// Key data_dir, env SLUICE_DATA_DIR, flag --data-dir, default "./data".
	DataDir string

	// DatabaseURL is the Postgres connection string, as a URL or as
	// key=value pairs. Empty means start the embedded Postgres in DataDir/pg.
	// Key database_url, env SLUICE_DATABASE_URL, flag --database-url, default "".
	DatabaseURL string

	// AdminPassword is the admin user's password. When it is empty on the
	// first start, a random one is generated and printed once.
	// Key admin_password, env SLUICE_ADMIN_PASSWORD, flag --admin-password, default "".
	AdminPassword string

	// PGBinDir is the directory holding initdb and postgres for the embedded
	// server. Empty means search PATH, then /usr/lib/postgresql/*/bin.
	// Key pg_bin_dir, env SLUICE_PG_BIN_DIR, flag --pg-bin-dir, default "".
	PGBinDir string

	// LogLevel is the least severe level that is logged: debug, info, warn
	// or error.
	// Key log_level, env SLUICE_LOG_LEVEL, flag --log-level, default "info".
	LogLevel slog.Level

	// LogFormat is how log records are written: LogFormatText or
	// LogFormatJSON.
	// Key log_format, env SLUICE_LOG_FORMAT, flag --log-format, default "text".
	LogFormat LogFormat

	// LogRetention is how long the commit log is kept; 0 keeps it forever.
	// Pruning never removes commits a connected subscriber still needs.
	// Key log_retention, env SLUICE_LOG_RETENTION, flag --log-retention, default 168h.
	LogRetention time.Duration

	// ShutdownTimeout is how long a shutdown on SIGTERM or SIGINT waits for
	// requests and streams to finish before closing them; 0 closes them at
	// once.
	// Key shutdown_timeout, env SLUICE_SHUTDOWN_TIMEOUT, flag --shutdown-timeout, default 10s.
	ShutdownTimeout time.Duration

	// Heartbeat is the keep-alive interval of SSE streams that do not pass
	// ?heartbeat=. Always greater than zero.
	// Key heartbeat, env SLUICE_HEARTBEAT, flag --heartbeat, default 12s.
	Heartbeat time.Duration

	// MaxBodyBytes limits the size of a JSON request body. NDJSON streams
	// may hold any number of documents, but each one is limited to this.
	// Always greater than zero.
	// Key max_body_bytes, env SLUICE_MAX_BODY_BYTES, flag --max-body-bytes, default 67108864.
	MaxBodyBytes int64

	// BodyIdleTimeout is the longest a document write's body may send
	// nothing before the request fails: a large write reads its body inside
	// its transaction, so a stalled upload would hold a connection and row
	// locks. Zero disables it.
	// Key body_idle_timeout, env SLUICE_BODY_IDLE_TIMEOUT, flag --body-idle-timeout, default 30s.
	BodyIdleTimeout time.Duration

	// StatementTimeout is Postgres' statement_timeout on every connection
	// Sluice opens: a statement running longer is cancelled and its request
	// fails with 503. A large write is many statements, each bounded, not
	// one; migrations and history pruning are exempt. Zero means no limit.
	// Key statement_timeout, env SLUICE_STATEMENT_TIMEOUT, flag --statement-timeout, default 30s.
	StatementTimeout time.Duration

	// HistoryPageBytes bounds one page of /api/changes and /api/log: the
	// bytes of change images (before and after) and commit text it holds.
	// A page ends before it would pass this, so a large commit spans
	// pages; a single larger change is sent alone. Always greater than
	// zero.
	// Key history_page_bytes, env SLUICE_HISTORY_PAGE_BYTES, flag --history-page-bytes, default 4194304.
	HistoryPageBytes int64
}

// LogFormat is the encoding of log records.
type LogFormat string

// The log formats Config.LogFormat can hold.
const (
	LogFormatText LogFormat = "text" // slog.TextHandler
	LogFormatJSON LogFormat = "json" // slog.JSONHandler
)

// Default returns the configuration used when nothing is set.
func Default() Config {
	var c Config
	for _, o := range options() {
		if err := o.decode(&c, o.def); err != nil {
			// Defaults are constants checked by TestDefault.
			panic("config: bad default for " + o.key + ": " + err.Error())
		}
	}
	return c
}

// LogValue implements slog.LogValuer so that logging a Config shows every
// setting without the admin password or the database password.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("listen", c.Listen),
		slog.String("data_dir", c.DataDir),
		slog.String("database_url", redactURL(c.DatabaseURL)),
		slog.String("admin_password", redact(c.AdminPassword)),
		slog.String("pg_bin_dir", c.PGBinDir),
		slog.String("log_level", levelName(c.LogLevel)),
		slog.String("log_format", string(c.LogFormat)),
		slog.Duration("log_retention", c.LogRetention),
		slog.Duration("shutdown_timeout", c.ShutdownTimeout),
		slog.Duration("heartbeat", c.Heartbeat),
		slog.Int64("max_body_bytes", c.MaxBodyBytes),
		slog.Duration("body_idle_timeout", c.BodyIdleTimeout),
		slog.Duration("statement_timeout", c.StatementTimeout),
		slog.Int64("history_page_bytes", c.HistoryPageBytes),
	)
}

func redact(s string) string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// redactURL hides the password of a postgres:// URL. A key=value connection
// string is hidden whole, since it may carry password=.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		if _, ok := u.Query()["password"]; !ok {
			return u.Redacted()
		}
	}
	return redact(s)
}
