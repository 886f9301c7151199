package config

import (
	"log/slog"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// Config is the daemon's configuration. Load fills it; Default returns it
// with every field at its default. Each field names its config file key,
// environment variable and flag; docs/configuration.md documents the same
// keys for users.
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

	// IdempotencyRetention is how long a write's Idempotency-Key answers
	// a retry with the first answer; older keys are pruned. 1m to 720h.
	// Key idempotency_retention, env SLUICE_IDEMPOTENCY_RETENTION, flag --idempotency-retention, default 24h.
	IdempotencyRetention time.Duration

	// IdempotencyMaxKeys is the most Idempotency-Keys one user keeps: a
	// write with a new key past it is answered 429.
	// Key idempotency_max_keys, env SLUICE_IDEMPOTENCY_MAX_KEYS, flag --idempotency-max-keys, default 10000.
	IdempotencyMaxKeys int

	// ShutdownTimeout is how long a shutdown on SIGTERM or SIGINT waits for
	// requests and streams to finish before closing them; 0 closes them at
	// once, and so does a second SIGTERM or SIGINT during the wait. The
	// embedded Postgres then gets what is left of it, at least 3 s, to
	// stop cleanly.
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

	// MaxSchemaBytes limits the size of a database's schema text, checked
	// before it is parsed: every version of a schema is kept, and reads
	// of history and of the past parse them. Always greater than zero.
	// Key max_schema_bytes, env SLUICE_MAX_SCHEMA_BYTES, flag --max-schema-bytes, default 1048576.
	MaxSchemaBytes int64

	// BodyIdleTimeout is the longest a request body may send nothing
	// before the request fails: a large write reads its body inside its
	// transaction, so a stalled upload would hold a connection and row
	// locks. It is also the grace before BodyMinRate applies. Zero
	// disables it.
	// Key body_idle_timeout, env SLUICE_BODY_IDLE_TIMEOUT, flag --body-idle-timeout, default 30s.
	BodyIdleTimeout time.Duration

	// WriteTimeout is the longest one write to a client (at most 64 KiB
	// of an answer, a stream's frames) may wait for the client to read: a
	// response or stream whose client stops reading for this long is cut, giving back what its request holds (a listing's
	// Postgres connection and snapshot, a built response's memory).
	// 1s to 1h.
	// Key write_timeout, env SLUICE_WRITE_TIMEOUT, flag --write-timeout, default 1m.
	WriteTimeout time.Duration

	// BodyMinRate is the least average rate, in bytes per second, at
	// which a request body must arrive once BodyIdleTimeout has passed
	// since it started: a body trickled a byte at a time is cut, where the
	// idle timeout alone would wait for it forever. Zero: no minimum.
	// Key body_min_rate, env SLUICE_BODY_MIN_RATE, flag --body-min-rate, default 8192.
	BodyMinRate int64

	// MaxRequestBodies caps the request bodies the process reads at once:
	// slow bodies hold connections and, for writes, transactions. Past it
	// a request that starts reading its body (a body counts from its first
	// read, not while its credentials are checked) is answered 503. Zero:
	// no cap.
	// Key max_request_bodies, env SLUICE_MAX_REQUEST_BODIES, flag --max-request-bodies, default 1024.
	MaxRequestBodies int64

	// WriteSpoolBytes bounds the bytes of write bodies read ahead of
	// their transactions, in memory and in temporary files, a quarter of
	// it per user: a write of many documents reads its body whole before
	// its transaction begins. Zero: bodies are read as they arrive.
	// Key write_spool_bytes, env SLUICE_WRITE_SPOOL_BYTES, flag --write-spool-bytes, default 1073741824.
	WriteSpoolBytes int64

	// WriteBytesPerUser bounds the bytes of JSON the documents of one
	// user's writes in progress (REST and GraphQL) hold, from when each is
	// read until it is written; a write past it waits, then is refused.
	// Zero: no bound.
	// Key write_bytes_per_user, env SLUICE_WRITE_BYTES_PER_USER, flag --write-bytes-per-user, default 16777216.
	WriteBytesPerUser int64

	// WriteBytes bounds them for every user together. Zero: no bound.
	// Key write_bytes, env SLUICE_WRITE_BYTES, flag --write-bytes, default 67108864.
	WriteBytes int64

	// WriteSpoolDir is the directory of those files ("": data_dir/spool
	// with the embedded Postgres, else $TMPDIR or /tmp).
	// Key write_spool_dir, env SLUICE_WRITE_SPOOL_DIR, flag --write-spool-dir, default "".
	WriteSpoolDir string

	// MaxHeaderBytes limits a request's header block, and a graphql-ws
	// message before connection_ack: what a client sends before it is
	// authenticated. Always greater than zero.
	// Key max_header_bytes, env SLUICE_MAX_HEADER_BYTES, flag --max-header-bytes, default 16384.
	MaxHeaderBytes int64

	// GraphQLMaxBodyBytes limits a GraphQL request body over HTTP, whose
	// variables are decoded whole. Always greater than zero.
	// Key graphql_max_body_bytes, env SLUICE_GRAPHQL_MAX_BODY_BYTES, flag --graphql-max-body-bytes, default 8388608.
	GraphQLMaxBodyBytes int64

	// GraphQLRequestBytes bounds what the parameters of the GraphQL
	// queries and mutations running at once hold (over plain HTTP, event
	// streams, single connection mode and graphql-ws), in bytes as
	// charged (their text and 80 bytes a JSON value); one user holds a
	// quarter; 0: no bound.
	//
	// Key graphql_request_bytes, env SLUICE_GRAPHQL_REQUEST_BYTES, flag --graphql-request-bytes, default 536870912.
	GraphQLRequestBytes int64

	// MaxWriteDocuments limits the documents of one write request. Always
	// greater than zero.
	// Key max_write_documents, env SLUICE_MAX_WRITE_DOCUMENTS, flag --max-write-documents, default 1000000.
	MaxWriteDocuments int64

	// GraphQLWSMaxMessageBytes limits a graphql-ws message once the
	// socket is acknowledged. Always greater than zero.
	// Key graphql_ws_max_message_bytes, env SLUICE_GRAPHQL_WS_MAX_MESSAGE_BYTES, flag --graphql-ws-max-message-bytes, default 1048576.
	GraphQLWSMaxMessageBytes int64

	// GraphQLWSMaxOperations caps the operations one graphql-ws socket,
	// or one graphql-sse single connection mode reservation, runs at once
	// (those waiting their turn among them). Always greater than zero.
	// Key graphql_ws_max_operations, env SLUICE_GRAPHQL_WS_MAX_OPERATIONS, flag --graphql-ws-max-operations, default 100.
	GraphQLWSMaxOperations int

	// MaxUnauthenticatedSockets caps the graphql-ws sockets without
	// credentials of their upgrade's own the process holds before their
	// connection_ack, one client address a tenth of them. Zero: no cap.
	// Key max_unauthenticated_sockets, env SLUICE_MAX_UNAUTHENTICATED_SOCKETS, flag --max-unauthenticated-sockets, default 1000.
	MaxUnauthenticatedSockets int64

	// AuthMaxFailures is how many failed password checks of one user name
	// from one client address (and ten times as many of any names) are
	// allowed within AuthFailureWindow; past it that address is answered
	// 429 until the window ends.
	// Key auth_max_failures, env SLUICE_AUTH_MAX_FAILURES, flag --auth-max-failures, default 10.
	AuthMaxFailures int

	// AuthFailureWindow is the window in which failed password checks
	// are counted. Always greater than zero.
	// Key auth_failure_window, env SLUICE_AUTH_FAILURE_WINDOW, flag --auth-failure-window, default 5m.
	AuthFailureWindow time.Duration

	// MaxStreams caps the open streams of the process; 0 picks nine
	// tenths of the open-file limit less 100, so the process never fails
	// at its file limit.
	// Key max_streams, env SLUICE_MAX_STREAMS, flag --max-streams, default 0.
	MaxStreams int64

	// MaxRequestsPerUser caps the requests one user has in flight on the
	// process, from its authentication until its answer is sent (a
	// client that reads no answer holds each for up to write_timeout);
	// a request that becomes a stream is counted by MaxStreamsPerUser
	// instead. The super user is exempt; 0: no cap.
	// Key max_requests_per_user, env SLUICE_MAX_REQUESTS_PER_USER, flag --max-requests-per-user, default 1000.
	MaxRequestsPerUser int64

	// MaxRequestsInFlight caps the requests of every user together in
	// flight on the process, counted as MaxRequestsPerUser (the super
	// user is exempt; 0: no cap).
	// Key max_requests_in_flight, env SLUICE_MAX_REQUESTS_IN_FLIGHT, flag --max-requests-in-flight, default 10000.
	MaxRequestsInFlight int64

	// MaxStreamsPerUser caps the open streams of one user on the process;
	// the super user is exempt; 0: no cap.
	// Key max_streams_per_user, env SLUICE_MAX_STREAMS_PER_USER, flag --max-streams-per-user, default 1000.
	MaxStreamsPerUser int64

	// StreamVariablesBytesPerUser bounds what the variables of one user's
	// subscriptions and live queries hold on the process, which keeps
	// them, decoded, for each one's life: each is charged their JSON and
	// an estimate of their decoded form (the super user is exempt; 0: no
	// bound).
	// Key stream_variables_bytes_per_user, env SLUICE_STREAM_VARIABLES_BYTES_PER_USER, flag --stream-variables-bytes-per-user, default 67108864.
	StreamVariablesBytesPerUser int64

	// StreamVariablesBytes bounds what the variables of every
	// subscription and live query of the process hold, charged as
	// StreamVariablesBytesPerUser (0: no bound).
	// Key stream_variables_bytes, env SLUICE_STREAM_VARIABLES_BYTES, flag --stream-variables-bytes, default 1073741824.
	StreamVariablesBytes int64

	// StreamOutputBytesPerUser bounds the bytes of output one user's
	// streams hold formed and not yet written to their clients, counted
	// for pieces of 64 KiB or more: a stream whose next such piece finds
	// the bound reached waits, forming nothing, until the user's others
	// have written theirs (the super user is exempt; 0: no bound).
	// Key stream_output_bytes_per_user, env SLUICE_STREAM_OUTPUT_BYTES_PER_USER, flag --stream-output-bytes-per-user, default 67108864.
	StreamOutputBytesPerUser int64

	// StreamOutputBytes bounds them for every stream of the process,
	// charged as StreamOutputBytesPerUser (0: no bound).
	// Key stream_output_bytes, env SLUICE_STREAM_OUTPUT_BYTES, flag --stream-output-bytes, default 1073741824.
	StreamOutputBytes int64

	// LiveQueriesPerUser caps the live queries of one user on the process
	// (the super user is exempt; 0: no cap).
	// Key live_queries_per_user, env SLUICE_LIVE_QUERIES_PER_USER, flag --live-queries-per-user, default 100.
	LiveQueriesPerUser int64

	// LiveQueries caps the live queries of the process (0: no cap).
	// Key live_queries, env SLUICE_LIVE_QUERIES, flag --live-queries, default 20000.
	LiveQueries int64

	// LiveRowsPerUser and LiveBytesPerUser bound the documents and the
	// bytes of JSON the results of one user's live queries hold on the
	// process (the super user is exempt; 0: no bound): a new live query
	// is refused once they are reached, and a result that would pass
	// them ends its live query.
	// Key live_rows_per_user, env SLUICE_LIVE_ROWS_PER_USER, flag --live-rows-per-user, default 100000.
	LiveRowsPerUser int64

	// LiveBytesPerUser bounds the bytes of JSON, as LiveRowsPerUser the
	// documents.
	// Key live_bytes_per_user, env SLUICE_LIVE_BYTES_PER_USER, flag --live-bytes-per-user, default 67108864.
	LiveBytesPerUser int64

	// LiveRows and LiveBytes bound what the results of every live query
	// of the process hold, as LiveRowsPerUser (0: no bound).
	// Key live_rows, env SLUICE_LIVE_ROWS, flag --live-rows, default 2000000.
	LiveRows int64

	// LiveBytes bounds the bytes of JSON, as LiveRows the documents.
	// Key live_bytes, env SLUICE_LIVE_BYTES, flag --live-bytes, default 536870912.
	LiveBytes int64

	// CORSOrigins are the origins whose pages may call the API with
	// credentials; "*" lets any origin call without credentials. Empty:
	// same origin only (no CORS headers).
	// Key cors_origins, env SLUICE_CORS_ORIGINS, flag --cors-origins, default "".
	CORSOrigins []string

	// StreamTicketTTL is how long a stream ticket may be redeemed, once,
	// after it is made: long enough for a page to open its EventSource,
	// short enough that a URL that leaks is spent or dead. 1s to 10m.
	// Key stream_ticket_ttl, env SLUICE_STREAM_TICKET_TTL, flag --stream-ticket-ttl, default 60s.
	StreamTicketTTL time.Duration

	// JWTHS256Secret is the HMAC secret that verifies bearer JWTs signed
	// with HS256, at least 32 bytes (checked at start, so that no error
	// shows it). Empty: HS256 JWTs are refused. Never logged.
	// Key jwt_hs256_secret, env SLUICE_JWT_HS256_SECRET, flag --jwt-hs256-secret, default "".
	JWTHS256Secret string

	// JWTHS256SecretFile names a file holding the HS256 secret instead
	// (a final newline is not part of it). Setting both is an error at
	// start.
	// Key jwt_hs256_secret_file, env SLUICE_JWT_HS256_SECRET_FILE, flag --jwt-hs256-secret-file, default "".
	JWTHS256SecretFile string

	// JWTJWKSFile names a JSON Web Key Set file of the public keys that
	// verify bearer JWTs signed with RS256, PS256, ES256, EdDSA and their
	// kin; each key is used only with its own algorithm. Read at start.
	// Key jwt_jwks_file, env SLUICE_JWT_JWKS_FILE, flag --jwt-jwks-file, default "".
	JWTJWKSFile string

	// JWTIssuer is, when set, what a JWT's iss claim must equal.
	// Key jwt_issuer, env SLUICE_JWT_ISSUER, flag --jwt-issuer, default "".
	JWTIssuer string

	// JWTAudience is, when set, what a JWT's aud claim must contain.
	// Key jwt_audience, env SLUICE_JWT_AUDIENCE, flag --jwt-audience, default "".
	JWTAudience string

	// JWTUserClaim is the JWT claim that names the Sluice user the JWT
	// authenticates; the user must exist, and its roles apply.
	// Key jwt_user_claim, env SLUICE_JWT_USER_CLAIM, flag --jwt-user-claim, default "sub".
	JWTUserClaim string

	// JWTLeeway is the clock skew allowed when checking a JWT's exp, nbf
	// and iat, at most 5m. A stream opened with a JWT ends at its exp plus
	// the leeway, when a request with it would be refused.
	// Key jwt_leeway, env SLUICE_JWT_LEEWAY, flag --jwt-leeway, default 30s.
	JWTLeeway time.Duration

	// MetricsToken is a bearer secret that authorizes GET /metrics, for a
	// scraper without a user account; the super user's credentials always
	// do. Never logged.
	// Key metrics_token, env SLUICE_METRICS_TOKEN, flag --metrics-token, default "".
	MetricsToken string

	// MetricsListen is, when set, the address of a second listener that
	// serves GET /metrics without credentials (for a scraper on a private
	// network); /metrics then leaves the API's listener.
	// Key metrics_listen, env SLUICE_METRICS_LISTEN, flag --metrics-listen, default "".
	MetricsListen string

	// MetricsAllowHosts are the host names, besides IP addresses and
	// localhost, that the metrics listener answers in a request's Host
	// header (lower case, without a final dot): a page of another site
	// that makes its name resolve to the listener's address (DNS
	// rebinding) sends its own name, and is refused.
	// Key metrics_allow_hosts, env SLUICE_METRICS_ALLOW_HOSTS, flag --metrics-allow-hosts, default "".
	MetricsAllowHosts []string

	// TrustedProxies are the reverse proxies whose X-Forwarded-For is
	// believed: a request whose peer is in one of them is taken to come
	// from the rightmost address of X-Forwarded-For that is not (the
	// throttles and other per-client budgets are keyed on it). Empty:
	// X-Forwarded-For is ignored, every client is its peer's address.
	// Key trusted_proxies, env SLUICE_TRUSTED_PROXIES, flag --trusted-proxies, default "".
	TrustedProxies []netip.Prefix

	// GraphQLMaxQueryBytes limits the size of a GraphQL query text. The
	// document limits (this and the next five) are checked before the
	// query is validated, whose cost grows faster than its size.
	// Key graphql_max_query_bytes, env SLUICE_GRAPHQL_MAX_QUERY_BYTES, flag --graphql-max-query-bytes, default 65536.
	GraphQLMaxQueryBytes int

	// GraphQLMaxTokens limits the lexical tokens of a GraphQL query.
	// Key graphql_max_tokens, env SLUICE_GRAPHQL_MAX_TOKENS, flag --graphql-max-tokens, default 15000.
	GraphQLMaxTokens int

	// GraphQLMaxDepth limits the nesting of a GraphQL query's selections.
	// Key graphql_max_depth, env SLUICE_GRAPHQL_MAX_DEPTH, flag --graphql-max-depth, default 20.
	GraphQLMaxDepth int

	// GraphQLMaxAliases limits the aliased fields of a GraphQL query, with
	// its fragments expanded.
	// Key graphql_max_aliases, env SLUICE_GRAPHQL_MAX_ALIASES, flag --graphql-max-aliases, default 100.
	GraphQLMaxAliases int

	// GraphQLMaxFields limits the fields a GraphQL query selects, with its
	// fragments expanded.
	// Key graphql_max_fields, env SLUICE_GRAPHQL_MAX_FIELDS, flag --graphql-max-fields, default 1000.
	GraphQLMaxFields int

	// GraphQLMaxFragments limits the fragment definitions of a GraphQL
	// query.
	// Key graphql_max_fragments, env SLUICE_GRAPHQL_MAX_FRAGMENTS, flag --graphql-max-fragments, default 100.
	GraphQLMaxFragments int

	// GraphQLMaxStatements limits the SQL statements the fields of one
	// GraphQL query or subscription may run (each class query, aggregate
	// and backlink field, and each level of references), counted before
	// it runs: each may run up to StatementTimeout.
	// Key graphql_max_statements, env SLUICE_GRAPHQL_MAX_STATEMENTS, flag --graphql-max-statements, default 25.
	GraphQLMaxStatements int

	// GraphQLMaxResultRows limits the documents one GraphQL request reads
	// from Postgres, over all its fields, aliases and references; the SQL
	// reads at most one more.
	// Key graphql_max_result_rows, env SLUICE_GRAPHQL_MAX_RESULT_ROWS, flag --graphql-max-result-rows, default 10000.
	GraphQLMaxResultRows int

	// GraphQLMaxResponseBytes limits the JSON data and errors of one GraphQL response,
	// which is built in memory.
	// Key graphql_max_response_bytes, env SLUICE_GRAPHQL_MAX_RESPONSE_BYTES, flag --graphql-max-response-bytes, default 16777216.
	GraphQLMaxResponseBytes int
	// GraphQLRequestTimeout bounds the time the fields of one GraphQL
	// query, one read of a live query's result, or the reads of one
	// commit's subscription events, run over all their SQL statements:
	// with GraphQLMaxStatements alone a query could hold a Postgres
	// backend that many times StatementTimeout. Zero means no limit.
	// Key graphql_request_timeout, env SLUICE_GRAPHQL_REQUEST_TIMEOUT, flag --graphql-request-timeout, default 1m.
	GraphQLRequestTimeout time.Duration

	// StatementTimeout is Postgres' statement_timeout on every connection
	// Sluice opens: a statement running longer is cancelled and its request
	// fails with 503. A large write is many statements, each bounded, not
	// one; migrations and history pruning are exempt. Zero means no limit.
	// Key statement_timeout, env SLUICE_STATEMENT_TIMEOUT, flag --statement-timeout, default 30s.
	StatementTimeout time.Duration

	// HistoryPageBytes bounds one page of /api/changes, /api/log,
	// /api/history and /api/diff: the bytes of change images (before and
	// after) and commit text it holds, and /api/diff's patches.
	// A page ends before it would pass this, so a large commit spans
	// pages; a single larger change is sent alone. Always greater than
	// zero.
	// Key history_page_bytes, env SLUICE_HISTORY_PAGE_BYTES, flag --history-page-bytes, default 4194304.
	HistoryPageBytes int64

	// MaxPastChanges bounds the changes a read of the past may read from
	// the log: a read as of a position (REST as_of, GraphQL asOf, what a
	// _ChangeSet reads as of its commit) reads, and Postgres sorts, every
	// change from its position to the head of the log, and every page of a
	// diff every change between its two positions. The range is checked,
	// from the commits' counts of changes, before anything reads it; its
	// commits are bounded as well (one more), for those written without
	// changes. What a subscription's event reads as of its commit is
	// bounded too: past it the event is an error naming the key, and the
	// stream goes on. Always greater than zero.
	// Key max_past_changes, env SLUICE_MAX_PAST_CHANGES, flag --max-past-changes, default 100000.
	MaxPastChanges int

	// MaxWebhooksPerDatabase caps the webhooks one database may have:
	// each holds an outgoing connection and, while active, history from
	// pruning.
	// Key max_webhooks_per_database, env SLUICE_MAX_WEBHOOKS_PER_DATABASE, flag --max-webhooks-per-database, default 20.
	MaxWebhooksPerDatabase int

	// MaxDatabasesPerUser caps the databases one user may have made
	// (the super user is exempt; 0: no cap).
	// Key max_databases_per_user, env SLUICE_MAX_DATABASES_PER_USER, flag --max-databases-per-user, default 100.
	MaxDatabasesPerUser int64

	// AccessChangesPerUser bounds the access changes one user makes a
	// second on this process (after a burst of ten times as many): each
	// makes every replica read the access log, and the credentials it
	// concerns, again (the super user is exempt; 0: no bound).
	// Key access_changes_per_user, env SLUICE_ACCESS_CHANGES_PER_USER, flag --access-changes-per-user, default 10.
	AccessChangesPerUser int64

	// MaxWebhooksPerUser caps the webhooks one user may have made, over
	// every database (the super user is exempt; 0: no cap).
	// Key max_webhooks_per_user, env SLUICE_MAX_WEBHOOKS_PER_USER, flag --max-webhooks-per-user, default 50.
	MaxWebhooksPerUser int64

	// WebhookTimeout bounds one webhook request, from connecting to the
	// end of the response's headers; a request that takes longer is a
	// failed attempt, retried. 1s to 5m.
	// Key webhook_timeout, env SLUICE_WEBHOOK_TIMEOUT, flag --webhook-timeout, default 15s.
	WebhookTimeout time.Duration

	// WebhookRetrySchedule is the wait before each retry of a failed
	// webhook request (each with up to a fifth of jitter either way);
	// when the last retry fails, the webhook is paused as failing.
	// Key webhook_retry_schedule, env SLUICE_WEBHOOK_RETRY_SCHEDULE, flag --webhook-retry-schedule, default "5s,30s,2m,10m,30m,1h,2h,4h,8h,8h".
	WebhookRetrySchedule []time.Duration

	// WebhookAllowNetworks are the networks webhooks may reach although
	// they are loopback, link-local, private or otherwise not public
	// (refused by default, against SSRF), checked on the address dialled.
	// Key webhook_allow_networks, env SLUICE_WEBHOOK_ALLOW_NETWORKS, flag --webhook-allow-networks, default "".
	WebhookAllowNetworks []netip.Prefix

	// WebhookLeaseTTL is the term of the lease that makes one replica the
	// deliverer of every webhook: it renews it every third of the term,
	// and another replica takes over within about the term after it dies.
	// 1s to 5m.
	// Key webhook_lease_ttl, env SLUICE_WEBHOOK_LEASE_TTL, flag --webhook-lease-ttl, default 10s.
	WebhookLeaseTTL time.Duration

	// WebhookSecretKeyFile names a file holding the key (32 bytes, in
	// base64) that seals webhook signing secrets in Postgres; empty: a key
	// Sluice makes and keeps in Postgres, next to the secrets. Every
	// replica must have the same file.
	// Key webhook_secret_key_file, env SLUICE_WEBHOOK_SECRET_KEY_FILE, flag --webhook-secret-key-file, default "".
	WebhookSecretKeyFile string

	// WebhookBodyBudget bounds the bytes of the pages of the log webhooks
	// read and of the request bodies made from them, all webhooks
	// together: a page or a request waits for room, holding nothing, and
	// one larger than the budget waits until it is alone. At least 1 MiB.
	// Key webhook_body_budget, env SLUICE_WEBHOOK_BODY_BUDGET, flag --webhook-body-budget, default 268435456.
	WebhookBodyBudget int64

	// WebhookBodyBudgetPerUser bounds what of WebhookBodyBudget the
	// webhooks delivering as one user hold at once (the super user's
	// too), so that one user's webhooks leave room for other users'. 0,
	// or more than WebhookBodyBudget: the whole budget; otherwise at
	// least 1 MiB.
	// Key webhook_body_budget_per_user, env SLUICE_WEBHOOK_BODY_BUDGET_PER_USER, flag --webhook-body-budget-per-user, default 67108864.
	WebhookBodyBudgetPerUser int64

	// JWTJWKSURL is the https URL of an identity provider's JSON Web
	// Key Set, instead of JWTJWKSFile: fetched at start (a failure stops
	// Sluice; redirects are not followed), refreshed as the response's
	// Cache-Control says and when a JWT names an unknown kid
	// (rate-limited), and kept for up to a day while the URL fails.
	// Empty: none.
	// Key jwt_jwks_url, env SLUICE_JWT_JWKS_URL, flag --jwt-jwks-url, default "".
	JWTJWKSURL string

	// JWTJWKSHTTPLoopback lets JWTJWKSURL be http:// on a loopback host
	// (127.0.0.1, ::1, localhost); otherwise it must be https.
	// Key jwt_jwks_http_loopback, env SLUICE_JWT_JWKS_HTTP_LOOPBACK, flag --jwt-jwks-http-loopback, default false.
	JWTJWKSHTTPLoopback bool

	// TLSCertFile names a PEM certificate (chain): with TLSKeyFile, the
	// HTTP API is served over TLS (HTTP/2 included), both files read
	// again on SIGHUP. Empty (both): plain HTTP.
	// Key tls_cert_file, env SLUICE_TLS_CERT_FILE, flag --tls-cert-file, default "".
	TLSCertFile string
	// TLSKeyFile names the PEM private key of TLSCertFile.
	// Key tls_key_file, env SLUICE_TLS_KEY_FILE, flag --tls-key-file, default "".
	TLSKeyFile string
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

// IdleInTransactionTimeout returns Postgres'
// idle_in_transaction_session_timeout for Sluice's connections, derived
// from the settings that bound how long a transaction of Sluice may wait
// in Go between two of its statements: twice the longest of
// BodyIdleTimeout (a large write reads its body inside its transaction),
// WriteTimeout (a listing sends its rows while its snapshot is open),
// GraphQLRequestTimeout, StatementTimeout (a group commit's batch waits
// for the batch before it) and one minute (a large write also waits up to
// 10 s for the write budget), at most the most Postgres takes. Twice,
// since those waits can follow one another and a loaded machine wakes
// late. It is 0 (no limit) when BodyIdleTimeout is 0: a write's body then
// may pause for as long as its client likes, and ending its transaction
// would fail the write.
//
// It is derived, not a setting: it only has to stay above those waits, and
// an operator who shortens or lengthens them moves it with them. Its point
// is a replica frozen (SIGSTOP, a paused VM) or cut off in the middle of
// a transaction, whose locks (a schema change's: the database's counter
// row and tables) would otherwise stop other replicas' writes until it
// resumed, which may be never: the kernel of a stopped process still
// answers TCP keepalives.
func (c *Config) IdleInTransactionTimeout() time.Duration {
	if c.BodyIdleTimeout <= 0 {
		return 0
	}
	longest := max(c.BodyIdleTimeout, c.WriteTimeout, c.GraphQLRequestTimeout, c.StatementTimeout, time.Minute)
	return min(2*longest, maxStatementTimeout)
}

// LogValue implements slog.LogValuer so that logging a Config shows every
// setting without the admin password, the database password or the JWT
// secret.
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
		slog.Duration("idempotency_retention", c.IdempotencyRetention),
		slog.Int("idempotency_max_keys", c.IdempotencyMaxKeys),
		slog.Duration("shutdown_timeout", c.ShutdownTimeout),
		slog.Duration("heartbeat", c.Heartbeat),
		slog.Int64("max_body_bytes", c.MaxBodyBytes),
		slog.Int64("max_schema_bytes", c.MaxSchemaBytes),
		slog.Duration("body_idle_timeout", c.BodyIdleTimeout),
		slog.Int64("body_min_rate", c.BodyMinRate),
		slog.Duration("write_timeout", c.WriteTimeout),
		slog.Int64("max_request_bodies", c.MaxRequestBodies),
		slog.Int64("write_spool_bytes", c.WriteSpoolBytes),
		slog.Int64("write_bytes_per_user", c.WriteBytesPerUser),
		slog.Int64("write_bytes", c.WriteBytes),
		slog.String("write_spool_dir", c.WriteSpoolDir),
		slog.Int64("max_header_bytes", c.MaxHeaderBytes),
		slog.Int64("graphql_max_body_bytes", c.GraphQLMaxBodyBytes),
		slog.Int64("graphql_request_bytes", c.GraphQLRequestBytes),
		slog.Int64("max_write_documents", c.MaxWriteDocuments),
		slog.Int64("graphql_ws_max_message_bytes", c.GraphQLWSMaxMessageBytes),
		slog.Int("graphql_ws_max_operations", c.GraphQLWSMaxOperations),
		slog.Int64("max_unauthenticated_sockets", c.MaxUnauthenticatedSockets),
		slog.Int("auth_max_failures", c.AuthMaxFailures),
		slog.Duration("auth_failure_window", c.AuthFailureWindow),
		slog.Int64("max_streams", c.MaxStreams),
		slog.Int64("max_requests_per_user", c.MaxRequestsPerUser),
		slog.Int64("max_requests_in_flight", c.MaxRequestsInFlight),
		slog.Int64("max_streams_per_user", c.MaxStreamsPerUser),
		slog.Int64("stream_variables_bytes_per_user", c.StreamVariablesBytesPerUser),
		slog.Int64("stream_variables_bytes", c.StreamVariablesBytes),
		slog.Int64("stream_output_bytes_per_user", c.StreamOutputBytesPerUser),
		slog.Int64("stream_output_bytes", c.StreamOutputBytes),
		slog.Int64("live_queries_per_user", c.LiveQueriesPerUser),
		slog.Int64("live_queries", c.LiveQueries),
		slog.Int64("live_rows_per_user", c.LiveRowsPerUser),
		slog.Int64("live_bytes_per_user", c.LiveBytesPerUser),
		slog.Int64("live_rows", c.LiveRows),
		slog.Int64("live_bytes", c.LiveBytes),
		slog.Any("cors_origins", c.CORSOrigins),
		slog.Duration("stream_ticket_ttl", c.StreamTicketTTL),
		slog.String("jwt_hs256_secret", redact(c.JWTHS256Secret)),
		slog.String("jwt_hs256_secret_file", c.JWTHS256SecretFile),
		slog.String("jwt_jwks_file", c.JWTJWKSFile),
		slog.String("jwt_issuer", c.JWTIssuer),
		slog.String("jwt_audience", c.JWTAudience),
		slog.String("jwt_user_claim", c.JWTUserClaim),
		slog.Duration("jwt_leeway", c.JWTLeeway),
		slog.String("metrics_token", redact(c.MetricsToken)),
		slog.String("metrics_listen", c.MetricsListen),
		slog.Any("metrics_allow_hosts", c.MetricsAllowHosts),
		slog.Any("trusted_proxies", c.TrustedProxies),
		slog.Int("graphql_max_query_bytes", c.GraphQLMaxQueryBytes),
		slog.Int("graphql_max_tokens", c.GraphQLMaxTokens),
		slog.Int("graphql_max_depth", c.GraphQLMaxDepth),
		slog.Int("graphql_max_aliases", c.GraphQLMaxAliases),
		slog.Int("graphql_max_fields", c.GraphQLMaxFields),
		slog.Int("graphql_max_fragments", c.GraphQLMaxFragments),
		slog.Int("graphql_max_statements", c.GraphQLMaxStatements),
		slog.Int("graphql_max_result_rows", c.GraphQLMaxResultRows),
		slog.Int("graphql_max_response_bytes", c.GraphQLMaxResponseBytes),
		slog.Duration("graphql_request_timeout", c.GraphQLRequestTimeout),
		slog.Duration("statement_timeout", c.StatementTimeout),
		slog.Int64("history_page_bytes", c.HistoryPageBytes),
		slog.Int("max_past_changes", c.MaxPastChanges),
		slog.Int("max_webhooks_per_database", c.MaxWebhooksPerDatabase),
		slog.Int64("max_databases_per_user", c.MaxDatabasesPerUser),
		slog.Int64("access_changes_per_user", c.AccessChangesPerUser),
		slog.Int64("max_webhooks_per_user", c.MaxWebhooksPerUser),
		slog.Duration("webhook_timeout", c.WebhookTimeout),
		slog.Any("webhook_retry_schedule", c.WebhookRetrySchedule),
		slog.Any("webhook_allow_networks", c.WebhookAllowNetworks),
		slog.Duration("webhook_lease_ttl", c.WebhookLeaseTTL),
		slog.String("webhook_secret_key_file", c.WebhookSecretKeyFile),
		slog.Int64("webhook_body_budget", c.WebhookBodyBudget),
		slog.Int64("webhook_body_budget_per_user", c.WebhookBodyBudgetPerUser),
		slog.String("jwt_jwks_url", redactURL(c.JWTJWKSURL)),
		slog.Bool("jwt_jwks_http_loopback", c.JWTJWKSHTTPLoopback),
		slog.String("tls_cert_file", c.TLSCertFile),
		slog.String("tls_key_file", c.TLSKeyFile),
	)
}

func redact(s string) string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// redactURL hides the password of a postgres:// or http(s):// URL. Other
// text that may hold a password (a key=value connection string with
// password=, user:password@, a URL with a password parameter) is hidden
// whole.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql" || u.Scheme == "https" || u.Scheme == "http") {
		if !strings.Contains(strings.ToLower(u.RawQuery), "password") {
			return u.Redacted()
		}
	}
	if !strings.Contains(strings.ToLower(s), "password") && !strings.Contains(s, "@") {
		return s
	}
	return redact(s)
}
