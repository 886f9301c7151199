package config

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/streamparam"
)

// option describes one key: its names, its default and how its value is
// parsed and checked. Env and flag names derive from the key.
type option struct {
	key   string
	kind  kind
	def   string // written as a user would write it in the environment
	usage string // flag help and the "meaning" column of docs/configuration.md
	// decode parses v, which is a string from a flag, the environment or a
	// default, a fileNumber (a number in a config file, as written), or
	// whatever other type the config file decoder produced, and stores
	// it in c. Its error is the reason only; Load adds key, value and source.
	decode func(c *Config, v any) error
	// secret says how much of a value Load's error may show (see shown).
	secret secrecy
}

// secrecy is how much of an option's value may be shown: the errors of
// Load go to the terminal, the log and whatever collects it.
type secrecy int

const (
	public   secrecy = iota
	whole            // a password or a token: its length only
	password         // a URL or connection string: all but its password
)

// secretOption is o, whose value is a secret (whole) or holds one
// (password).
func secretOption(s secrecy, o option) option {
	o.secret = s
	return o
}

// shown returns how Load's error quotes v, a value of o: a secret as its
// length, a connection string without its password, a value of the
// wrong type of either not at all.
func (o option) shown(v any) string {
	str, isString := v.(string)
	switch {
	case o.secret == public:
		return show(v)
	case !isString:
		return "[redacted]"
	case o.secret == whole:
		return fmt.Sprintf("[redacted, %d bytes]", len(str))
	}
	r := redactURL(str)
	if r != "[redacted]" {
		return strconv.Quote(r)
	}
	return r
}

type kind int

const (
	kindString kind = iota
	kindDuration
	kindInt64
	// kindBool is a true/false key: its flag alone means true
	// (--jwt-jwks-http-loopback), as a string flag took the next
	// argument for its value.
	kindBool
)

func (o option) env() string  { return "SLUICE_" + strings.ToUpper(o.key) }
func (o option) flag() string { return strings.ReplaceAll(o.key, "_", "-") }

// maxStatementTimeout is the longest duration a Postgres setting in
// milliseconds (statement_timeout) takes: its int maximum, 2147483647 ms.
const maxStatementTimeout = math.MaxInt32 * time.Millisecond

// options lists every key in the order docs/configuration.md shows them. It is a
// function, not a variable, so that no package state can be changed.
func options() []option {
	return []option{
		stringOption("listen", ":6363",
			"address the HTTP API listens on, as host:port (port 0 picks a free port)",
			func(c *Config, s string) error {
				if err := checkHostPort(s); err != nil {
					return err
				}
				c.Listen = s
				return nil
			}),
		stringOption("data_dir", "./data",
			"directory for Sluice's files; the embedded Postgres lives in its pg subdirectory",
			func(c *Config, s string) error {
				if s == "" {
					return errors.New("must not be empty")
				}
				c.DataDir = s
				return nil
			}),
		secretOption(password, stringOption("database_url", "",
			"Postgres connection string (URL or key=value); empty starts an embedded Postgres in data_dir/pg. An attempt to connect to a host fails after 10s unless it sets connect_timeout",
			func(c *Config, s string) error { c.DatabaseURL = s; return nil })),
		secretOption(whole, stringOption("admin_password", "",
			"admin user's password; when empty on the first start, a random one is generated and printed once",
			func(c *Config, s string) error { c.AdminPassword = s; return nil })),
		stringOption("pg_bin_dir", "",
			"directory holding initdb and postgres for the embedded server; empty searches PATH, then /usr/lib/postgresql/*/bin",
			func(c *Config, s string) error { c.PGBinDir = s; return nil }),
		stringOption("log_level", "info",
			"least severe level that is logged: debug, info, warn or error",
			func(c *Config, s string) error {
				l, ok := levels[s]
				if !ok {
					return errors.New("want one of debug, info, warn, error")
				}
				c.LogLevel = l
				return nil
			}),
		stringOption("log_format", "text",
			"log output format: text or json",
			func(c *Config, s string) error {
				switch f := LogFormat(s); f {
				case LogFormatText, LogFormatJSON:
					c.LogFormat = f
					return nil
				}
				return errors.New("want one of text, json")
			}),
		durationOption("log_retention", "168h",
			"how long the commit log is kept: 0 keeps it forever, else at least 1m; pruning never removes what a connected subscriber still needs",
			func(c *Config, d time.Duration) error {
				// Under a minute, a client cut off by a network blip or a
				// replica's restart would find the commits it missed
				// pruned before it could resume: a typo ("1ns", "60")
				// more likely than a wish.
				if d != 0 && d < time.Minute {
					return errors.New("want 0 (keep every commit) or at least 1m")
				}
				c.LogRetention = d
				return nil
			}),
		durationOption("idempotency_retention", "24h",
			"how long a write's Idempotency-Key answers a retry (the same key, user and request) with the first answer, on any replica, instead of writing again; older keys are pruned (1m to 720h)",
			func(c *Config, d time.Duration) error {
				if d < time.Minute || d > 720*time.Hour {
					return errors.New("want 1m to 720h")
				}
				c.IdempotencyRetention = d
				return nil
			}),
		countOption("idempotency_max_keys", "10000",
			"most Idempotency-Keys one user keeps within idempotency_retention; past it a write with a new key is answered 429 (writes without one are not affected); above 64 a user's keys are counted once every sixty-fourth of it new keys (refused in between once a count found the bound reached), so a user may pass it by a sixty-fourth per replica",
			func(c *Config, n int) { c.IdempotencyMaxKeys = n }),
		durationOption("shutdown_timeout", "10s",
			"on SIGTERM or SIGINT, how long to wait for requests and streams to finish before closing them (0 closes them at once; so does a second SIGTERM or SIGINT during the wait); the embedded Postgres then gets what is left of it, at least 3s, to stop cleanly",
			func(c *Config, d time.Duration) error { c.ShutdownTimeout = d; return nil }),
		durationOption("heartbeat", "12s",
			"keep-alive interval of streams that do not pass ?heartbeat= (1s to 1h, the bounds of ?heartbeat= too)",
			func(c *Config, d time.Duration) error {
				if err := streamparam.CheckHeartbeat(d); err != nil {
					return errors.New("want 1s to 1h")
				}
				c.Heartbeat = d
				return nil
			}),
		int64Option("max_body_bytes", "67108864",
			"largest JSON request body in bytes (64 MiB); for NDJSON streams (any length), the largest single document",
			func(c *Config, n int64) error { c.MaxBodyBytes = n; return nil }),
		int64Option("max_schema_bytes", "1048576",
			"largest schema (GraphQL SDL) in bytes (1 MiB), checked before it is parsed: a database keeps every version of its schema, and reads of its history and its past parse them",
			func(c *Config, n int64) error { c.MaxSchemaBytes = n; return nil }),
		durationOption("body_idle_timeout", "30s",
			"longest a request body may send nothing before the request fails, and the grace before body_min_rate applies (0: no limit, and then no body_min_rate either: a body is not timed at all)",
			func(c *Config, d time.Duration) error { c.BodyIdleTimeout = d; return nil }),
		durationOption("write_timeout", "1m",
			"longest a client may take to read what a write sends it (at most 64 KiB, of an answer or of a stream's frames); a response or stream whose client stops reading for this long is cut, and what its request holds (a listing's Postgres connection) is given back (1s to 1h)",
			func(c *Config, d time.Duration) error {
				if d < time.Second || d > time.Hour {
					return errors.New("want 1s to 1h")
				}
				c.WriteTimeout = d
				return nil
			}),
		capOption("body_min_rate", "8192",
			"least average rate, in bytes per second, at which a request body must arrive once body_idle_timeout has passed since it started; a slower body fails (0: no minimum; none either when body_idle_timeout is 0). Both count only the time spent waiting for the client, not time Sluice spent not reading",
			func(c *Config, n int64) error { c.BodyMinRate = n; return nil }),
		capOption("max_request_bodies", "1024",
			"most request bodies this process reads at once, a body counted from its first read (a request waiting for its credentials to be checked holds none); past it a request that starts reading its body is answered 503 with Retry-After (0: no cap)",
			func(c *Config, n int64) error { c.MaxRequestBodies = n; return nil }),
		capOption("write_spool_bytes", "1073741824",
			"most bytes of write request bodies this process reads ahead of their transactions at once, memory and temporary files together (each body's first 256 KiB in memory, the rest in a file), 1 GiB; one user holds at most a quarter. A write of more than 100 documents reads the rest of its body before its transaction begins, up to max_body_bytes, so a slow client holds no transaction; past what is left it reads the rest as it arrives. 0: every body is read as it arrives; else at least 4 MiB (a quarter must hold a first 256 KiB and more)",
			func(c *Config, n int64) error {
				if n != 0 && n < 4<<20 {
					return errors.New("want 0 (bodies read as they arrive) or at least 4194304 (4 MiB)")
				}
				c.WriteSpoolBytes = n
				return nil
			}),
		capOption("write_bytes_per_user", "16777216",
			"most bytes of JSON the documents of one user's writes in progress may hold on this process (16 MiB): a REST write's each charged its size from when it is read from its body until it is written, a PATCH its body before it is decoded, a PATCH, a DELETE and a PUT of at most 100 documents and 1 MiB the stored documents they rewrite or delete (their size as stored) before they are read, until they are written, a GraphQL mutation all its documents and patches (their size as JSON) before they are validated, and the stored documents its updates, replaces and deletes read before they are read, until its commit is done (a charge larger than this is this much); a document held costs up to about ten times its JSON in memory while it is written. A write past it waits for documents to be written, at most 10 s, then is answered 429 with Retry-After (a GraphQL mutation: the error TOO_MANY_REQUESTS, with extensions.retryAfter and the Retry-After header). The super user is held to write_bytes only; 0: no bound",
			func(c *Config, n int64) error { c.WriteBytesPerUser = n; return nil }),
		capOption("write_bytes", "67108864",
			"most bytes of JSON the documents of every write in progress (REST or GraphQL) may hold on this process (64 MiB), charged as write_bytes_per_user; past it a write waits, at most 10 s, then is answered 503 with Retry-After (a GraphQL mutation: the error UNAVAILABLE, with extensions.retryAfter and the Retry-After header); 0: no bound",
			func(c *Config, n int64) error { c.WriteBytes = n; return nil }),
		stringOption("write_spool_dir", "",
			"directory of the temporary files of write_spool_bytes (unlinked as soon as made); the start fails if it cannot be written. Empty: data_dir/spool with the embedded Postgres, else the system's temporary directory ($TMPDIR, else /tmp); if that cannot be written, bodies are read as they arrive, with a warning",
			func(c *Config, s string) error { c.WriteSpoolDir = s; return nil }),
		int64Option("max_header_bytes", "16384",
			"largest request header block in bytes (16 KiB), and largest graphql-ws message before connection_ack: what a client may send before it is authenticated (at most 1073741824, 1 GiB)",
			func(c *Config, n int64) error {
				// net/http reads up to it plus 4096 bytes as an int: near
				// the int64 maximum the sum overflowed and every request
				// was answered 431. 1 GiB also fits a 32-bit int.
				if n > 1<<30 {
					return errors.New("want at most 1073741824 (1 GiB)")
				}
				c.MaxHeaderBytes = n
				return nil
			}),
		int64Option("graphql_max_body_bytes", "8388608",
			"largest GraphQL request body over HTTP in bytes (8 MiB): its variables are decoded whole, at most 100,000 JSON values (counted before they are decoded; decoded, small values cost up to about twenty times their size); send large writes to REST as NDJSON",
			func(c *Config, n int64) error { c.GraphQLMaxBodyBytes = n; return nil }),
		capOption("graphql_request_bytes", "536870912",
			"most bytes the parameters of the GraphQL queries and mutations running at once may hold (512 MiB): plain HTTP requests, those sent over an event stream (SSE, NDJSON, multipart) or a single connection mode reservation, and those of graphql-ws sockets, each charged its text and 80 bytes a JSON value (what its decoded variables hold) from when its body is read until it is answered (a subscription, until it is registered); one user holds at most a quarter. Past it a request is answered 503 (the process's) or 429 (the user's) with Retry-After, having run nothing. 0: no bound; else at least 67108864 (64 MiB). Streams keep theirs under stream_variables_bytes",
			func(c *Config, n int64) error {
				if n != 0 && n < 64<<20 {
					return errors.New("want 0 (no bound) or at least 67108864 (64 MiB)")
				}
				c.GraphQLRequestBytes = n
				return nil
			}),
		countOption("max_write_documents", "1000000",
			"most documents one write request may hold, an NDJSON stream's included (the answer lists every id written, and the request keeps them meanwhile: about 100 bytes each)",
			func(c *Config, n int) { c.MaxWriteDocuments = int64(n) }),
		int64Option("graphql_ws_max_message_bytes", "1048576",
			"largest graphql-ws message in bytes (1 MiB) once a socket is acknowledged; send larger writes over HTTP",
			func(c *Config, n int64) error { c.GraphQLWSMaxMessageBytes = n; return nil }),
		countOption("graphql_ws_max_operations", "100",
			"most operations (queries, mutations, subscriptions, those waiting their turn among them) one graphql-ws socket or one graphql-sse single connection mode reservation runs at once; past it a subscribe is answered with an error message naming this key, and the socket stays open, and a single connection mode POST with 429, its body unread",
			func(c *Config, n int) { c.GraphQLWSMaxOperations = n }),
		capOption("max_unauthenticated_sockets", "1000",
			"most graphql-ws sockets whose upgrade carried no valid credentials this process holds before their connection_ack (they have 10s to send connection_init), one client address (an IPv6 /64) at most a tenth of them; past either an upgrade is answered 503 with Retry-After (0: no cap)",
			func(c *Config, n int64) error { c.MaxUnauthenticatedSockets = n; return nil }),
		countOption("auth_max_failures", "10",
			"failed password checks of one user name from one client address (ten times as many of any names, forty times from the addresses of one IPv6 /56 and 160 times from one /48; behind trusted_proxies, the address they forward) within auth_failure_window, past which that address's password sign-ins are answered 429 with Retry-After until the window ends (failed bearer tokens, JWTs and stream tickets are counted apart and block only those: see the security documentation)",
			func(c *Config, n int) { c.AuthMaxFailures = n }),
		durationOption("auth_failure_window", "5m",
			"the window in which failed password checks are counted (see auth_max_failures)",
			func(c *Config, d time.Duration) error {
				if d <= 0 {
					return errors.New("must be greater than zero")
				}
				c.AuthFailureWindow = d
				return nil
			}),
		capOption("max_streams", "0",
			"most open streams (every kind) this process serves; 0 picks nine tenths of its open-file limit less 100; past it a new stream is answered 503 with Retry-After",
			func(c *Config, n int64) error { c.MaxStreams = n; return nil }),
		capOption("max_requests_per_user", "1000",
			"most requests (every kind but streams, counted by max_streams_per_user) one user may have in flight on this process, from its authentication until its answer is sent (the super user is exempt; 0: no cap); past it a request is answered 429 with Retry-After",
			func(c *Config, n int64) error { c.MaxRequestsPerUser = n; return nil }),
		capOption("max_requests_in_flight", "10000",
			"most requests (every kind but streams) every user together may have in flight on this process, counted as max_requests_per_user (the super user is exempt; 0: no cap); past it a request is answered 503 with Retry-After, and past a tenth as many such answers unsent (at least 16) a request is aborted",
			func(c *Config, n int64) error { c.MaxRequestsInFlight = n; return nil }),
		capOption("max_streams_per_user", "1000",
			"most open streams one user may hold on this process (the super user is exempt; 0: no cap); past it a new stream is answered 429 with Retry-After",
			func(c *Config, n int64) error { c.MaxStreamsPerUser = n; return nil }),
		capOption("stream_variables_bytes_per_user", "67108864",
			"most bytes the variables of one user's subscriptions and live queries may hold on this process (64 MiB; each is charged their JSON and 80 bytes a value, 256 more an object with members and 32 a member; the super user is exempt; 0: no bound); past it a new one is answered 429 with Retry-After",
			func(c *Config, n int64) error { c.StreamVariablesBytesPerUser = n; return nil }),
		capOption("stream_variables_bytes", "1073741824",
			"most bytes the variables of every subscription and live query of this process may hold (1 GiB; charged as stream_variables_bytes_per_user; 0: no bound); past it a new one is answered 503 with Retry-After",
			func(c *Config, n int64) error { c.StreamVariablesBytes = n; return nil }),
		capOption("stream_output_bytes_per_user", "67108864",
			"most bytes of output one user's streams may hold formed and not yet written to their clients on this process (64 MiB), counted for each event or batch of events of 64 KiB or more from when it is formed (a REST change stream's event, a GraphQL subscription's result) or taken from its share until its client's connection took it: a stream whose next such piece finds the bound reached waits, forming nothing and losing nothing, until the user's other streams have written theirs (a piece larger than this is charged this much). The super user is held to stream_output_bytes only; 0: no bound",
			func(c *Config, n int64) error { c.StreamOutputBytesPerUser = n; return nil }),
		capOption("stream_output_bytes", "1073741824",
			"most bytes of output every stream of this process may hold formed and not yet written to its client (1 GiB; charged as stream_output_bytes_per_user; 0: no bound); past it a stream's next piece of 64 KiB or more waits for others to be written",
			func(c *Config, n int64) error { c.StreamOutputBytes = n; return nil }),
		capOption("live_queries_per_user", "100",
			"most live queries one user may hold on this process (the super user is exempt; 0: no cap); past it a new one is refused with an error naming this key",
			func(c *Config, n int64) error { c.LiveQueriesPerUser = n; return nil }),
		capOption("live_queries", "20000",
			"most live queries this process holds (0: no cap); past it a new one is refused with an error naming this key",
			func(c *Config, n int64) error { c.LiveQueries = n; return nil }),
		capOption("live_rows_per_user", "100000",
			"most documents the results of one user's live queries may hold on this process (the super user is exempt; 0: no cap): a new live query is refused once they hold it, and a result that would pass it ends its live query",
			func(c *Config, n int64) error { c.LiveRowsPerUser = n; return nil }),
		capOption("live_bytes_per_user", "67108864",
			"most bytes of JSON the results of one user's live queries may hold on this process, with the sort keys (at most 4 KiB) each full ordered result keeps of its last row (64 MiB; the super user is exempt; 0: no cap), as live_rows_per_user",
			func(c *Config, n int64) error { c.LiveBytesPerUser = n; return nil }),
		capOption("live_rows", "2000000",
			"most documents the results of every live query of this process may hold (0: no cap), as live_rows_per_user",
			func(c *Config, n int64) error { c.LiveRows = n; return nil }),
		capOption("live_bytes", "536870912",
			"most bytes of JSON the results of every live query of this process may hold, with their sort keys as live_bytes_per_user (512 MiB; 0: no cap), as live_rows_per_user",
			func(c *Config, n int64) error { c.LiveBytes = n; return nil }),
		listOption("cors_origins", "",
			"origins (scheme://host[:port], comma-separated) whose pages may call the API with credentials; * lets any origin call without credentials; empty: same origin only",
			func(c *Config, origins []string) error {
				for _, o := range origins {
					if err := checkOrigin(o); err != nil {
						return err
					}
				}
				c.CORSOrigins = origins
				return nil
			}),
		durationOption("stream_ticket_ttl", "60s",
			"how long a stream ticket (POST /api/stream-tickets, for a browser's EventSource) may be used, once, after it is made (1s to 10m)",
			func(c *Config, d time.Duration) error {
				if d < time.Second || d > 10*time.Minute {
					return errors.New("want 1s to 10m")
				}
				c.StreamTicketTTL = d
				return nil
			}),
		secretOption(whole, stringOption("jwt_hs256_secret", "",
			"secret (at least 32 bytes, checked at start) that verifies bearer JWTs signed with HS256; empty: HS256 JWTs are refused",
			// Its length is checked at start (auth.NewJWT).
			func(c *Config, s string) error { c.JWTHS256Secret = s; return nil })),
		stringOption("jwt_hs256_secret_file", "",
			"file holding the HS256 secret instead of jwt_hs256_secret (a final newline is not part of it)",
			func(c *Config, s string) error { c.JWTHS256SecretFile = s; return nil }),
		stringOption("jwt_jwks_file", "",
			"JSON Web Key Set file of the public keys (RSA, EC P-256/384/521, Ed25519) that verify bearer JWTs signed with RS256, PS256, ES256, EdDSA…, each key pinned to its algorithm; read at start and again on SIGHUP",
			func(c *Config, s string) error { c.JWTJWKSFile = s; return nil }),
		stringOption("jwt_issuer", "",
			"when set, a JWT's iss must equal it; needs a JWT key (jwt_hs256_secret, jwt_hs256_secret_file, jwt_jwks_file or jwt_jwks_url)",
			func(c *Config, s string) error { c.JWTIssuer = s; return nil }),
		stringOption("jwt_audience", "",
			"when set, a JWT's aud must contain it; needs a JWT key, as jwt_issuer",
			func(c *Config, s string) error { c.JWTAudience = s; return nil }),
		stringOption("jwt_user_claim", "sub",
			"the JWT claim that names the Sluice user (who must exist; its roles apply)",
			func(c *Config, s string) error {
				if s == "" {
					return errors.New("must not be empty")
				}
				c.JWTUserClaim = s
				return nil
			}),
		durationOption("jwt_leeway", "30s",
			"clock skew allowed when checking a JWT's exp, nbf and iat (at most 5m); a stream opened with a JWT ends at its exp plus this",
			func(c *Config, d time.Duration) error {
				if d > 5*time.Minute {
					return errors.New("want at most 5m")
				}
				c.JWTLeeway = d
				return nil
			}),
		secretOption(whole, stringOption("metrics_token", "",
			"bearer secret that authorizes GET /metrics (at least 16 bytes); the super user's credentials always do; empty: only the super user's. A start refuses it beside metrics_listen, where it would authorize nothing",
			func(c *Config, s string) error {
				if s != "" && len(s) < 16 {
					return errors.New("want at least 16 bytes")
				}
				c.MetricsToken = s
				return nil
			})),
		stringOption("metrics_listen", "",
			"when set, address (host:port) of a second listener serving GET /metrics without credentials, for a scraper on a private network; /metrics then leaves the API's listener",
			func(c *Config, s string) error {
				if s != "" {
					if err := checkHostPort(s); err != nil {
						return err
					}
				}
				c.MetricsListen = s
				return nil
			}),
		listOption("metrics_allow_hosts", "",
			"host names (comma-separated, without a port) that the metrics listener (metrics_listen) answers in a request's Host header, besides IP addresses and localhost; other names are refused 403, so that a web page cannot read the metrics through its visitor's browser (DNS rebinding). A start refuses it without metrics_listen",
			func(c *Config, items []string) error {
				var out []string
				for _, it := range items {
					name, err := checkHostName(it)
					if err != nil {
						return err
					}
					out = append(out, name)
				}
				c.MetricsAllowHosts = out
				return nil
			}),
		listOption("trusted_proxies", "",
			"reverse proxies (comma-separated networks in CIDR, such as 10.0.0.0/8, or single addresses, such as 127.0.0.1) whose X-Forwarded-For is believed: a request from one is taken to come from the rightmost X-Forwarded-For address that is not a trusted proxy, and the throttle of failed sign-ins and the other per-address limits count that client; empty: X-Forwarded-For is ignored, and every client behind a proxy shares the proxy's address",
			func(c *Config, items []string) error {
				var out []netip.Prefix
				for _, it := range items {
					p, err := parseProxy(it)
					if err != nil {
						return err
					}
					out = append(out, p)
				}
				c.TrustedProxies = out
				return nil
			}),
		countOption("graphql_max_query_bytes", "65536",
			"largest GraphQL query text in bytes (64 KiB); pass large values as variables",
			func(c *Config, n int) { c.GraphQLMaxQueryBytes = n }),
		countOption("graphql_max_tokens", "15000",
			"most lexical tokens in a GraphQL query (names, values, punctuation; comments do not count)",
			func(c *Config, n int) { c.GraphQLMaxTokens = n }),
		countOption("graphql_max_depth", "20",
			"deepest nesting of selections in a GraphQL query, through fragments ({ a } is 1)",
			func(c *Config, n int) { c.GraphQLMaxDepth = n }),
		countOption("graphql_max_aliases", "100",
			"most aliased fields in a GraphQL query, counted with its fragments expanded",
			func(c *Config, n int) { c.GraphQLMaxAliases = n }),
		countOption("graphql_max_fields", "1000",
			"most fields a GraphQL query selects, counted with its fragments expanded",
			func(c *Config, n int) { c.GraphQLMaxFields = n }),
		countOption("graphql_max_fragments", "100",
			"most fragment definitions in a GraphQL query",
			func(c *Config, n int) { c.GraphQLMaxFragments = n }),
		countOption("graphql_max_statements", "25",
			"most SQL statements one GraphQL query or subscription may run, counted before it runs: one for each class query, aggregate and backlink field, and one for each level of references; each may run up to statement_timeout whatever it answers",
			func(c *Config, n int) { c.GraphQLMaxStatements = n }),
		countOption("graphql_max_result_rows", "10000",
			"most documents one GraphQL request reads, over all its fields, aliases and references; page with limit and offset",
			func(c *Config, n int) { c.GraphQLMaxResultRows = n }),
		countOption("graphql_max_response_bytes", "16777216",
			"largest GraphQL response, its data and errors together, in bytes (16 MiB); a request's reads of documents from Postgres may hold four times as much",
			func(c *Config, n int) { c.GraphQLMaxResponseBytes = n }),
		durationOption("graphql_request_timeout", "1m",
			"longest the fields of one GraphQL query, one read of a live query's result, or the reads of one commit's subscription events (references, backlinks), may run, over all their SQL statements, before the request or stream ends with an error naming this limit (0: no limit; each statement is also bounded by statement_timeout)",
			func(c *Config, d time.Duration) error { c.GraphQLRequestTimeout = d; return nil }),
		durationOption("statement_timeout", "30s",
			"longest a single Postgres statement may run before Postgres cancels it and the request fails with 503 (0: no limit; at most 596h31m23.647s, 2147483647 ms, the most Postgres takes); a large write is many statements, each bounded; migrations and history pruning are exempt",
			func(c *Config, d time.Duration) error {
				// Every connection sends it as a setting in milliseconds:
				// past Postgres' int maximum, each would fail to connect.
				if d > maxStatementTimeout {
					return fmt.Errorf("want at most %s (%d ms, the most Postgres takes)", maxStatementTimeout, maxStatementTimeout.Milliseconds())
				}
				c.StatementTimeout = d
				return nil
			}),
		int64Option("history_page_bytes", "4194304",
			"largest page of /api/changes, /api/log, /api/history and /api/diff in bytes of change images and commit text, and of /api/diff's patches (4 MiB); a larger commit spans pages, a single larger change is sent alone",
			func(c *Config, n int64) error { c.HistoryPageBytes = n; return nil }),
		countOption("max_past_changes", "100000",
			"most changes a read of the past reads from the log, counted from its commits before it reads them, and about as many commits, for those written without changes: a read as of a position (as_of, asOf) reads every change from it to the head of the log, and every page of /api/diff every change between its two positions (whatever type= and id= keep); past it the read is answered 400 naming this key and the oldest position a read as of reaches, or the position up to which a diff from its from fits; what a subscription's events read as of their own commits (references, backlinks, filters through references) is bounded too: the events of a commit further back from the head are errors naming this key, in their places, and the stream goes on",
			func(c *Config, n int) { c.MaxPastChanges = n }),
		countOption("max_webhooks_per_database", "20",
			"most webhooks one database may have",
			func(c *Config, n int) { c.MaxWebhooksPerDatabase = n }),
		capOption("max_databases_per_user", "100",
			"most databases one user may have made (each is a Postgres schema with a table per class; the super user is exempt; 0: no cap)",
			func(c *Config, n int64) error { c.MaxDatabasesPerUser = n; return nil }),
		capOption("access_changes_per_user", "10",
			"most access changes (tokens revoked, passwords and roles changed, databases made or deleted) one user makes a second on this process, after a burst of ten times as many: each makes every replica read the access log, and the credentials it concerns, again; past it, 429 with Retry-After (the super user is exempt; 0: no bound)",
			func(c *Config, n int64) error { c.AccessChangesPerUser = n; return nil }),
		capOption("max_webhooks_per_user", "50",
			"most webhooks that deliver as one user (made, or taken over by a change of where, what or from where they deliver), over every database (the super user is exempt; 0: no cap)",
			func(c *Config, n int64) error { c.MaxWebhooksPerUser = n; return nil }),
		durationOption("webhook_timeout", "15s",
			"longest a webhook request may take to be answered (its response headers) before the attempt counts as failed and is retried (1s to 5m)",
			func(c *Config, d time.Duration) error {
				if d < time.Second || d > 5*time.Minute {
					return errors.New("want 1s to 5m")
				}
				c.WebhookTimeout = d
				return nil
			}),
		listOption("webhook_retry_schedule", "5s,30s,2m,10m,30m,1h,2h,4h,8h,8h",
			"waits before the retries of a failed webhook request, each with up to 20% jitter (the default retries for about a day); after the last, the webhook is paused as failing",
			func(c *Config, items []string) error {
				if len(items) == 0 {
					return errors.New("want at least one duration, such as 5s,1m,1h")
				}
				var out []time.Duration
				for _, it := range items {
					d, err := time.ParseDuration(it)
					if err != nil || d <= 0 || d > 7*24*time.Hour {
						return fmt.Errorf("retry wait %q: want a duration from 1ns to 168h, such as 30s", it)
					}
					out = append(out, d)
				}
				c.WebhookRetrySchedule = out
				return nil
			}),
		listOption("webhook_allow_networks", "",
			"networks (CIDR, comma-separated, such as 10.0.0.0/8 or 127.0.0.1/32) that webhooks may reach although they are loopback, link-local, private or not public, which are refused by default; checked on the address dialled",
			func(c *Config, items []string) error {
				var out []netip.Prefix
				for _, it := range items {
					p, err := netip.ParsePrefix(it)
					if err != nil {
						return fmt.Errorf("network %q: want an address and a prefix length, such as 10.0.0.0/8 or fd00::/8", it)
					}
					out = append(out, p.Masked())
				}
				c.WebhookAllowNetworks = out
				return nil
			}),
		durationOption("webhook_lease_ttl", "10s",
			"term of the lease that makes one replica deliver every webhook; it is renewed every third of it, and another replica takes over within about this much after the deliverer dies (1s to 5m)",
			func(c *Config, d time.Duration) error {
				if d < time.Second || d > 5*time.Minute {
					return errors.New("want 1s to 5m")
				}
				c.WebhookLeaseTTL = d
				return nil
			}),
		stringOption("webhook_secret_key_file", "",
			"file holding the key (32 bytes in base64) that seals webhook signing secrets in Postgres, the same on every replica; empty: a key kept in Postgres (see the webhooks documentation)",
			func(c *Config, s string) error { c.WebhookSecretKeyFile = s; return nil }),
		int64Option("webhook_body_budget", "268435456",
			"most bytes of the pages of the log webhooks read and of the request bodies made from them that all webhooks hold at once (256 MiB: 256 pages or commit batches of 1 MiB, or 16 of the largest rows SQL writes, 16 MiB, at once; a page's room is taken before it is read, and the bodies made from it count in it; the events a request is made from come on top, about as much again); a page or a request waits for room holding nothing, one larger than the budget until it is alone. At least 1048576 (1 MiB, a page of the log)",
			func(c *Config, n int64) error {
				if n < 1<<20 {
					return errors.New("want at least 1048576 (1 MiB)")
				}
				c.WebhookBodyBudget = n
				return nil
			}),
		capOption("webhook_body_budget_per_user", "67108864",
			"most of webhook_body_budget that the webhooks delivering as one user (the super user too) hold at once, so that one user's webhooks (slow receivers, large documents) leave room for other users' (64 MiB, a quarter of the default budget; a page or a request of one user's webhooks past it waits for room, holding nothing, one larger than it until that user's others hold none); 0, or more than webhook_body_budget: the whole budget. 0 or at least 1048576 (1 MiB, a page of the log)",
			func(c *Config, n int64) error {
				if n != 0 && n < 1<<20 {
					return errors.New("want 0 (the whole budget) or at least 1048576 (1 MiB)")
				}
				c.WebhookBodyBudgetPerUser = n
				return nil
			}),
		secretOption(password, stringOption("jwt_jwks_url", "",
			"https URL of an identity provider's JSON Web Key Set, instead of jwt_jwks_file: fetched at start (redirects are not followed), refreshed as its Cache-Control says and when a JWT names an unknown kid, kept up to a day while the URL fails",
			func(c *Config, s string) error {
				if s != "" {
					u, err := url.Parse(s)
					if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
						return errors.New("want an https URL")
					}
				}
				c.JWTJWKSURL = s
				return nil
			})),
		boolOption("jwt_jwks_http_loopback", "false",
			"true lets jwt_jwks_url be http:// when its host is 127.0.0.1, ::1 or localhost (an identity provider on the same machine, tests); otherwise it must be https",
			func(c *Config, b bool) error { c.JWTJWKSHTTPLoopback = b; return nil }),
		stringOption("tls_cert_file", "",
			"PEM certificate (chain) file: with tls_key_file, the API is served over TLS and HTTP/2; both are read again on SIGHUP; empty: plain HTTP",
			func(c *Config, s string) error { c.TLSCertFile = s; return nil }),
		stringOption("tls_key_file", "",
			"PEM private key file of tls_cert_file",
			func(c *Config, s string) error { c.TLSKeyFile = s; return nil }),
	}
}

// listOption accepts a comma-separated string (flags, the environment) or
// a list of strings (a config file). Empty items are refused.
func listOption(key, def, usage string, set func(*Config, []string) error) option {
	const want = "want a list of strings (comma-separated in a flag or variable)"
	return option{key: key, kind: kindString, def: def, usage: usage,
		decode: func(c *Config, v any) error {
			var items []string
			switch v := v.(type) {
			case string:
				if strings.TrimSpace(v) != "" {
					for _, it := range strings.Split(v, ",") {
						items = append(items, strings.TrimSpace(it))
					}
				}
			case []any:
				for _, it := range v {
					s, ok := it.(string)
					if !ok {
						return errors.New(want)
					}
					items = append(items, strings.TrimSpace(s))
				}
			case []string:
				items = v
			default:
				return errors.New(want)
			}
			for _, it := range items {
				if it == "" {
					return errors.New("empty item in the list")
				}
			}
			return set(c, items)
		}}
}

// checkOrigin accepts "*" or an origin as browsers send it: scheme and
// host, an optional port, nothing else.
func checkOrigin(o string) error {
	if o == "*" {
		return nil
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("origin %q: want scheme://host[:port], such as https://app.example.com, or *", o)
	}
	return nil
}

var levels = map[string]slog.Level{
	"debug": slog.LevelDebug,
	"info":  slog.LevelInfo,
	"warn":  slog.LevelWarn,
	"error": slog.LevelError,
}

func levelName(l slog.Level) string {
	for name, v := range levels {
		if v == l {
			return name
		}
	}
	return l.String()
}

func stringOption(key, def, usage string, set func(*Config, string) error) option {
	return option{key: key, kind: kindString, def: def, usage: usage,
		decode: func(c *Config, v any) error {
			s, ok := v.(string)
			if !ok {
				return errors.New("want a string (quote it in the config file)")
			}
			return set(c, s)
		}}
}

// boolOption is true or false (a string in the environment and flags, a
// boolean or a string in a config file).
func boolOption(key, def, usage string, set func(*Config, bool) error) option {
	return option{key: key, kind: kindBool, def: def, usage: usage,
		decode: func(c *Config, v any) error {
			switch x := v.(type) {
			case bool:
				return set(c, x)
			case string:
				switch x {
				case "true":
					return set(c, true)
				case "false":
					return set(c, false)
				}
			}
			return errors.New("want true or false")
		}}
}

// durationOption accepts Go duration syntax ("90s", "1h30m"). Durations are
// never negative. A bare number is ambiguous, so only 0 may omit the unit.
func durationOption(key, def, usage string, set func(*Config, time.Duration) error) option {
	const want = `want a duration such as "30s", "5m" or "168h"`
	return option{key: key, kind: kindDuration, def: def, usage: usage,
		decode: func(c *Config, v any) error {
			var d time.Duration
			switch x := v.(type) {
			case string:
				var err error
				if d, err = time.ParseDuration(x); err != nil {
					if err := sluice.DurationTooLong(x); err != nil {
						return err
					}
					return errors.New(want)
				}
			case fileNumber:
				if x != "0" { // not 0x0, 0.0 or 1e0: only 0 omits the unit
					return errors.New(want)
				}
			default:
				if n, ok := wholeNumber(v); !ok || n != 0 {
					return errors.New(want)
				}
			}
			if d < 0 {
				return errors.New("must not be negative")
			}
			return set(c, d)
		}}
}

func int64Option(key, def, usage string, set func(*Config, int64) error) option {
	const want = "want a whole number of bytes greater than zero"
	return option{key: key, kind: kindInt64, def: def, usage: usage,
		decode: func(c *Config, v any) error {
			n, ok := number(v)
			if !ok || n <= 0 {
				return errors.New(want)
			}
			return set(c, n)
		}}
}

// countOption is a whole number greater than zero that fits an int: a
// count or a size of things held in memory.
func countOption(key, def, usage string, set func(*Config, int)) option {
	const want = "want a whole number from 1 to 2147483647"
	return option{key: key, kind: kindInt64, def: def, usage: usage,
		decode: func(c *Config, v any) error {
			n, ok := number(v)
			if !ok || n <= 0 || n > math.MaxInt32 {
				return errors.New(want)
			}
			set(c, int(n))
			return nil
		}}
}

// capOption is a whole number, zero allowed (for "none" or "pick one").
func capOption(key, def, usage string, set func(*Config, int64) error) option {
	const want = "want a whole number, 0 or more"
	return option{key: key, kind: kindInt64, def: def, usage: usage,
		decode: func(c *Config, v any) error {
			n, ok := number(v)
			if !ok || n < 0 {
				return errors.New(want)
			}
			return set(c, n)
		}}
}

// number returns v as a whole number: v written in decimal digits (a
// string from a flag or the environment, or a fileNumber), or a number
// type of a config file's decoder that has no fileNumber (see
// wholeNumber).
func number(v any) (int64, bool) {
	switch x := v.(type) {
	case string:
		return parseDecimal(x)
	case fileNumber:
		return parseDecimal(string(x))
	}
	return wholeNumber(v)
}

// parseDecimal parses s, a size or a count as docs/configuration.md
// documents them: decimal digits only, without a sign or a leading zero
// (0 itself aside), within int64. strconv.ParseInt alone takes "+16",
// and a config file's decoder took 0x10, 010 (octal 8 in YAML), 1_000
// and 1e3 as numbers; none of them are what the environment takes, and
// 010 meant 8 in a file and 10 in a variable.
func parseDecimal(s string) (int64, bool) {
	if s == "" || len(s) > 1 && s[0] == '0' {
		return 0, false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// wholeNumber converts the number types the YAML (int, uint64), TOML (int64)
// and JSON (float64) decoders produce. Fractions and values out of int64
// range are refused, not rounded.
func wholeNumber(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int64:
		return n, true
	case uint64:
		return int64(n), n <= math.MaxInt64
	case float64:
		if n != math.Trunc(n) || n < math.MinInt64 || n >= math.MaxInt64 {
			return 0, false
		}
		return int64(n), true
	}
	return 0, false
}

// checkHostName returns s, a DNS name as a Host header names it (letters,
// digits, hyphens, underscores and dots; no port, no scheme), in lower case
// and without a final dot, the form the metrics listener compares.
func checkHostName(s string) (string, error) {
	name := strings.TrimSuffix(strings.ToLower(s), ".")
	ok := name != "" && len(name) <= 253
	for _, label := range strings.Split(name, ".") {
		ok = ok && label != "" && len(label) <= 63
		for _, r := range label {
			ok = ok && (r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
		}
	}
	if !ok {
		return "", fmt.Errorf("host %q: want a host name without a port, such as sluice.internal", s)
	}
	return name, nil
}

func checkHostPort(s string) error {
	const want = `want host:port, such as ":6363" or "127.0.0.1:6363"`
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return errors.New(want)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	return nil
}

// parseProxy parses an item of trusted_proxies: a network in CIDR
// notation or a single address (a prefix of its full length).
func parseProxy(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("proxy %q: want a network in CIDR notation, such as 10.0.0.0/8 or fd00::/8, or an address, such as 127.0.0.1", s)
		}
		// An IPv4 client of an IPv6 listener is seen as ::ffff:a.b.c.d,
		// which ClientAddr unmaps: so is the network, to match it.
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		return p.Masked(), nil
	}
	ip, err := netip.ParseAddr(s)
	if err != nil || ip.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("proxy %q: want an address, such as 127.0.0.1 or ::1, or a network in CIDR notation, such as 10.0.0.0/8", s)
	}
	ip = ip.Unmap()
	return netip.PrefixFrom(ip, ip.BitLen()), nil
}
