// Package daemon assembles a running Sluice: Postgres (embedded or given),
// migrations, the engine, the change feed and the HTTP server. cmd/sluice
// only parses configuration and calls Run; end-to-end tests start a Daemon
// in-process on port :0.
package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/graph"
	"github.com/sluice-dev/sluice/internal/auth"
	"github.com/sluice-dev/sluice/internal/changefeed"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/connlimit"
	"github.com/sluice-dev/sluice/internal/console"
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/gqltransport"
	"github.com/sluice-dev/sluice/internal/graphiql"
	"github.com/sluice-dev/sluice/internal/httpstream"
	"github.com/sluice-dev/sluice/internal/inflight"
	"github.com/sluice-dev/sluice/internal/metrics"
	"github.com/sluice-dev/sluice/internal/origin"
	"github.com/sluice-dev/sluice/internal/pgembed"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/rest"
	"github.com/sluice-dev/sluice/internal/stream"
	"github.com/sluice-dev/sluice/internal/webhook"
)

// bulkGCPercent is the garbage collector's target (as GOGC) while a large
// write runs, or a steady load of small requests; see engine.bulkGC and
// engine.loadGC for why (and docs/benchmarks.md for what it was measured
// to give).
const bulkGCPercent = 400

// Options are a Daemon's settings beyond the configuration file.
type Options struct {
	Version string
	// BcryptCost overrides the password hashing cost (tests use the minimum).
	BcryptCost int
	// OnAdminPassword receives a generated admin password, shown once. Nil
	// logs it.
	OnAdminPassword func(string)
	// WebhookResolve and WebhookDial, for tests, replace how webhooks
	// resolve names and dial the addresses their policy allows (see
	// webhook.Options).
	WebhookResolve func(ctx context.Context, host string) ([]netip.Addr, error)
	WebhookDial    func(ctx context.Context, network, address string) (net.Conn, error)
	// WebhookLogRead, for tests, is told of the pages of the log webhooks
	// read (see webhook.Options).
	WebhookLogRead func(bytes int64) (done func())
	// CatchUpRead, for tests, is told of every catch-up read of the log,
	// once it has its turn, with the user of the stream it reads for (nil:
	// none), and may block it; the read ends with a call of what it
	// returns (see changefeed.HubOptions.CatchUpRead).
	CatchUpRead func(u *sluice.User) (done func())
	// OnPasswordCheck, for tests, is called before every bcrypt
	// comparison of a password check; blocking, it holds the request in
	// its authentication.
	OnPasswordCheck func()
	// GraphQLWSInitTimeout, for tests, replaces the 10 s a graphql-ws
	// socket has to send connection_init (0: 10 s).
	GraphQLWSInitTimeout time.Duration
	// FloorsEvery, for tests, replaces how often the process publishes
	// its streams' floors (0: a third of postgres.FloorTTL).
	FloorsEvery time.Duration
	// Now, for tests, is the process's clock (nil: time.Now): a host
	// whose clock is off, as another replica's may be.
	Now func() time.Time
	// Hurry, closed, cuts the drain short: what the shutdown still waits
	// for (streams, requests) is closed at once instead of at the end of
	// shutdown_timeout, and Run returns ErrDrainCut. sluice serve closes
	// it at a second SIGTERM or SIGINT. Nil: the drain takes its course.
	Hurry <-chan struct{}
}

// ErrDrainCut is what Run returns when Options.Hurry was closed during the
// drain: the stop was clean (connections closed, Postgres released) but
// what still ran was cut off, which an operator asked for and a
// supervisor should be able to tell from an ordinary stop.
var ErrDrainCut = errors.New("stop hurried: the drain was cut short; the streams and requests still running were closed")

// Daemon is one Sluice process.
type Daemon struct {
	cfg    config.Config
	opts   Options
	logger *slog.Logger

	started     chan struct{}
	hurryLogged sync.Once // see drainContext
	addr        string
	metricsAddr string
	ready       atomic.Bool
	// stopBy is when the shutdown's drain ends (shutdown_timeout after
	// it began), set by serve and read by Run after it, on Run's
	// goroutine; zero when serve returned before its shutdown.
	stopBy time.Time

	// What Reload reads again (reload.go), set by Run.
	reloadMu sync.Mutex
	reload   reloadable
}

// New returns a Daemon that Run starts.
func New(cfg config.Config, logger *slog.Logger, opts Options) *Daemon {
	return &Daemon{cfg: cfg, opts: opts, logger: logger, started: make(chan struct{})}
}

// now returns the time by the process's clock (Options.Now).
func (d *Daemon) now() time.Time {
	if d.opts.Now != nil {
		return d.opts.Now()
	}
	return time.Now()
}

// Started is closed once the daemon serves HTTP.
func (d *Daemon) Started() <-chan struct{} { return d.started }

// Addr returns the address the HTTP server listens on; valid after Started.
func (d *Daemon) Addr() string { return d.addr }

// MetricsAddr returns the address of the metrics listener (config
// metrics_listen), "" without one; valid after Started.
func (d *Daemon) MetricsAddr() string { return d.metricsAddr }

// postgresStopFloor is the least time the embedded Postgres gets to stop,
// however little of shutdown_timeout the drain left: enough for the fast
// shutdown's checkpoint (0.3 s measured after a drain under load), so
// that a short shutdown_timeout does not force an immediate shutdown and
// crash recovery on the next start. Kept small so that the whole stop
// still fits a platform's grace kept a few seconds above shutdown_timeout
// (docs/operations.md, Stopping).
const postgresStopFloor = 3 * time.Second

// postgresStopDeadline returns when the embedded Postgres's fast shutdown
// is given up for an immediate one: at deadline (the end of the
// shutdown_timeout the drain began), or postgresStopFloor after now if
// that is later.
func postgresStopDeadline(deadline, now time.Time) time.Time {
	return later(deadline, now.Add(postgresStopFloor))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// openStore starts the embedded Postgres when no database URL is
// configured, connects and migrates. onCommit (nil: none) is the store's
// commit hook (postgres.OnCommit). The returned stop function closes the
// pool and stops the embedded server, whose fast shutdown it gives until
// the deadline it is passed (see postgresStopDeadline; the zero time:
// shutdown_timeout from the call); the *pgembed.Postgres is that server
// (nil with a database URL), supervised (pgembed restarts it).
func openStore(ctx context.Context, cfg config.Config, logger *slog.Logger, onCommit func(*sluice.Commit)) (*postgres.DB, *pgembed.Postgres, func(deadline time.Time), error) {
	url := cfg.DatabaseURL
	var pg *pgembed.Postgres
	stop := func(deadline time.Time) {
		if pg != nil {
			now := time.Now()
			if deadline.IsZero() {
				deadline = now.Add(cfg.ShutdownTimeout)
			}
			sctx, cancel := context.WithDeadline(context.Background(), postgresStopDeadline(deadline, now))
			defer cancel()
			if err := pg.Stop(sctx); err != nil {
				logger.Error("stop embedded postgres", "err", err)
			}
		}
	}
	if url == "" {
		dir, err := filepath.Abs(filepath.Join(cfg.DataDir, "pg"))
		if err != nil {
			return nil, nil, nil, err
		}
		pg, err = pgembed.Start(ctx, pgembed.Options{DataDir: dir, BinDir: cfg.PGBinDir, Logger: logger.With("component", "postgres")})
		if err != nil {
			return nil, nil, nil, fmt.Errorf("embedded postgres: %w", err)
		}
		if err := ensureDatabase(ctx, pg.URL("postgres"), "sluice", logger); err != nil {
			stop(time.Time{})
			return nil, nil, nil, err
		}
		url = pg.URL("sluice")
	}
	opts := []postgres.Option{postgres.StatementTimeout(cfg.StatementTimeout), postgres.IdleInTransactionTimeout(cfg.IdleInTransactionTimeout()),
		postgres.OnCommit(onCommit), postgres.Owners(requestOwner)}
	if pg != nil {
		opts = append(opts, postgres.Up(pg.Up))
	}
	store, err := postgres.Open(ctx, url, logger, opts...)
	if err != nil {
		stop(time.Time{})
		return nil, nil, nil, err
	}
	if _, err := store.Migrate(ctx); err != nil {
		store.Close()
		stop(time.Time{})
		return nil, nil, nil, err
	}
	removeForeign(ctx, store, logger)
	warnOtherReach(ctx, store, logger)
	warnSubscriptions(ctx, store, logger)
	return store, pg, func(deadline time.Time) { store.Close(); stop(deadline) }, nil
}

func ensureDatabase(ctx context.Context, adminURL, name string, logger *slog.Logger) error {
	db, err := postgres.Open(ctx, adminURL, logger)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.CreateDatabaseIfMissing(ctx, name)
}

// Migrate applies Sluice's migrations and returns (sluice migrate).
func Migrate(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	_, _, stop, err := openStore(ctx, cfg, logger, nil)
	if err != nil {
		return err
	}
	stop(time.Time{})
	return nil
}

// Run starts every component, serves until ctx is cancelled, then shuts down
// gracefully: open streams are completed, HTTP requests finish within the
// shutdown timeout, and the embedded Postgres stops cleanly. Stopped
// while it starts (ctx cancelled before it serves), it returns nil: what
// failed then (a migration or a statement cancelled) is the stop asked
// for, and a supervisor stopping a starting replica took the exit status
// 1 for a failure.
func (d *Daemon) Run(ctx context.Context) (err error) {
	defer func() {
		select {
		case <-d.started:
			return
		default:
		}
		if err != nil && ctx.Err() != nil {
			d.logger.Info("stopped while starting", "err", err)
			err = nil
		}
	}()
	// Read before Postgres starts: a wrong key file stops the daemon at once.
	jwt, err := auth.LoadJWT(ctx, auth.JWTConfig{HS256Secret: d.cfg.JWTHS256Secret, HS256SecretFile: d.cfg.JWTHS256SecretFile,
		JWKSFile: d.cfg.JWTJWKSFile, JWKSURL: d.cfg.JWTJWKSURL, JWKSHTTPLoopback: d.cfg.JWTJWKSHTTPLoopback, Issuer: d.cfg.JWTIssuer, Audience: d.cfg.JWTAudience,
		UserClaim: d.cfg.JWTUserClaim, Leeway: d.cfg.JWTLeeway}, auth.JWTDeps{Logger: d.logger})
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	cert, err := loadCertificate(d.cfg.TLSCertFile, d.cfg.TLSKeyFile)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	// So are the webhook key file and a write_spool_dir given: found
	// wrong after Postgres started, they stopped a first start that had
	// run initdb and every migration, and printed the admin password it
	// made, which the next start does not print again.
	if err := webhook.CheckKeyFile(d.cfg.WebhookSecretKeyFile); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := checkMetricsSettings(d.cfg); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if d.cfg.WriteSpoolDir != "" && d.cfg.WriteSpoolBytes != 0 {
		if err := checkSpoolDir(d.cfg.WriteSpoolDir); err != nil {
			return fmt.Errorf("config: write_spool_dir %s cannot hold temporary files: %w", d.cfg.WriteSpoolDir, err)
		}
	}
	d.setReloadable(reloadable{jwt: jwt, cert: cert})
	// The listeners are bound before the embedded Postgres starts and
	// before the admin user is made: a start that cannot serve (its port
	// taken) fails at once with the bind error, not after initdb and the
	// migrations, and not after it showed the generated admin password,
	// which is shown on the first start only. Until serve accepts on them,
	// connections wait in the kernel's backlog (the port is open, nothing
	// answers): /readyz, once answered, says whether the daemon is ready.
	ln, metricsLn, err := d.listen()
	if err != nil {
		return err
	}
	// Serving closes them; this closes them when Run returns before.
	defer func() {
		_ = ln.Close()
		if metricsLn != nil {
			_ = metricsLn.Close()
		}
	}()
	m := metrics.New()
	// Every commit, whatever made it, is counted and wakes what follows the
	// log; build registers those with wake as it builds them.
	wake := &wakeups{}
	store, pg, stopStore, err := openStore(ctx, d.cfg, d.logger, func(c *sluice.Commit) {
		label := strconv.FormatInt(c.DatabaseID, 10)
		m.Commits.WithLabelValues(label).Inc()
		m.Changes.WithLabelValues(label).Add(float64(c.NumChanges))
		wake.committed(c.DatabaseID)
	})
	if err != nil {
		return err
	}
	// The embedded Postgres gets what the drain left of shutdown_timeout
	// (serve sets stopBy as it begins), at least postgresStopFloor.
	defer func() { stopStore(d.stopBy) }()
	// Not ready while a supervised restart of the embedded Postgres is
	// under way: from the moment its postmaster exits, not from the
	// change feed's next failed read.
	pgUp := func() bool { return true }
	if pg != nil {
		pgUp = pg.Up
	}
	p, err := d.build(ctx, store, wake, m, jwt, pgUp)
	if err != nil {
		return err
	}
	if os.Getenv("GOGC") == "" { // an operator's GOGC is left alone
		// A steady load of small requests raises the collector's
		// target too (see engine.loadGC).
		defer engine.RaiseGCUnderLoad(bulkGCPercent)()
	}
	return d.serve(ctx, p, pg, cert, ln, metricsLn)
}

// listen binds the API's listener (config listen) and, when configured,
// the metrics listener (metrics_listen; nil without one).
func (d *Daemon) listen() (apiLn, metricsLn net.Listener, err error) {
	apiLn, err = net.Listen("tcp", d.cfg.Listen)
	if err != nil {
		return nil, nil, fmt.Errorf("listen on %s: %w", d.cfg.Listen, err)
	}
	if d.cfg.MetricsListen == "" {
		return apiLn, nil, nil
	}
	metricsLn, err = net.Listen("tcp", d.cfg.MetricsListen)
	if err != nil {
		_ = apiLn.Close()
		return nil, nil, fmt.Errorf("listen on %s (metrics_listen): %w", d.cfg.MetricsListen, err)
	}
	return apiLn, metricsLn, nil
}

// serveURL returns the URL of the API listening on addr (a bound
// listener's address), for people to open: a listener on every address
// is reached as localhost.
func serveURL(addr string, tls bool) string {
	scheme := "http"
	if tls {
		scheme = "https"
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return scheme + "://" + addr + "/"
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return scheme + "://" + net.JoinHostPort(host, port) + "/"
}

// parts are what build assembles and serve runs.
type parts struct {
	store    *postgres.DB
	metrics  *metrics.Metrics
	jwt      *auth.JWT
	notifier *postgres.Notifier
	hub      *changefeed.Hub
	tailer   *changefeed.Tailer
	hooks    *webhook.Deliverer
	streams  *stream.Server
	gql      *gqltransport.Server
	handler  http.Handler
}

// build constructs every component on store in dependency order: each is
// built from what is built before it, and no function it hands on refers
// to one built later. What a commit or an access change wakes (the
// notifier, the tailer, the webhook deliverer) is registered with wake as
// it is built, before Bootstrap makes the first commit. Nothing runs yet:
// serve starts the goroutines and the listener.
func (d *Daemon) build(ctx context.Context, store *postgres.DB, wake *wakeups, m *metrics.Metrics, jwt *auth.JWT, pgUp func() bool) (*parts, error) {
	notifier := postgres.NewNotifier(store)
	wake.onCommit(notifier.Wake)

	sm := metrics.NewStream(m.Registry)
	// The hub re-checks a stale grant against Postgres directly, not through
	// the engine, so it comes first: the engine's credential cache asks it
	// which access version this process has seen.
	hub := changefeed.NewHub(store, changefeed.HubOptions{Logger: d.logger, Metrics: sm, Now: d.now,
		Check:        func(ctx context.Context, g *sluice.Grant) error { return engine.CheckGrant(ctx, store, g) },
		CheckTimeout: d.cfg.StatementTimeout,
		// Catch-ups read the log as their stream's user, within its
		// share of the pool (a quarter), and at most half of that share
		// at once, so that the user's own requests keep the rest; all
		// users' catch-ups together read at most one share's worth.
		ReadAs:                      func(ctx context.Context, u *sluice.User) context.Context { return postgres.CountFor(ctx, u.ID) },
		CatchUpReads:                store.UserShare(),
		CatchUpReadsPerUser:         max(1, store.UserShare()/2),
		CatchUpRead:                 d.opts.CatchUpRead,
		JWTKeyRemoved:               jwt.KeyRemoved,
		MaxStreams:                  maxStreams(d.cfg.MaxStreams, openFileLimit()),
		MaxStreamsPerUser:           int(d.cfg.MaxStreamsPerUser),
		StreamVariablesBytes:        d.cfg.StreamVariablesBytes,
		StreamVariablesBytesPerUser: d.cfg.StreamVariablesBytesPerUser})
	onHash := m.PasswordChecks.Inc
	if hook := d.opts.OnPasswordCheck; hook != nil {
		onHash = func() { m.PasswordChecks.Inc(); hook() }
	}
	authn := auth.New(store, d.opts.BcryptCost, onHash,
		auth.WithJWT(jwt), auth.WithTicketTTL(d.cfg.StreamTicketTTL), auth.WithCache(hub.AccessSeen),
		auth.WithTrustedProxies(d.cfg.TrustedProxies),
		auth.WithThrottle(auth.NewThrottle(d.cfg.AuthMaxFailures, d.cfg.AuthFailureWindow, d.now)))
	eng := engine.New(store, authn, d.logger, engine.Hooks{OnAccess: wake.accessChanged})
	eng.KeepIdempotencyKeys(d.cfg.IdempotencyRetention, d.cfg.IdempotencyMaxKeys)
	eng.UseLogRetention(d.cfg.LogRetention)
	eng.LimitSchemas(d.cfg.MaxSchemaBytes)
	eng.LimitWrites(d.cfg.MaxWriteDocuments)
	eng.LimitPast(int64(d.cfg.MaxPastChanges))
	eng.LimitWriteBytes(d.cfg.WriteBytes, d.cfg.WriteBytesPerUser)
	m.ObserveWriteBudget(eng.WriteBudget)
	eng.LimitDatabases(int(d.cfg.MaxDatabasesPerUser))
	eng.LimitAccessChanges(int(d.cfg.AccessChangesPerUser))
	if os.Getenv("GOGC") == "" { // an operator's GOGC is left alone
		eng.RaiseGCDuringBulkWrites(bulkGCPercent)
	}

	// The stream server serves every stream, whatever its transport.
	streams := stream.New(hub, stream.Options{Logger: d.logger, Metrics: sm, Now: d.now,
		OutputBytes: d.cfg.StreamOutputBytes, OutputBytesPerUser: d.cfg.StreamOutputBytesPerUser})
	// One origin policy for CORS, the cross-site check and WebSocket
	// upgrades.
	origins := origin.New(d.cfg.CORSOrigins)
	gqlStreams := gqltransport.NewServer(gqltransport.Options{Streams: streams, Logger: d.logger, Metrics: sm, Heartbeat: d.cfg.Heartbeat, WriteTimeout: d.cfg.WriteTimeout, MaxBodyBytes: d.cfg.GraphQLMaxBodyBytes,
		MaxInitBytes: d.cfg.MaxHeaderBytes, MaxMessageBytes: d.cfg.GraphQLWSMaxMessageBytes, MaxOperations: d.cfg.GraphQLWSMaxOperations, MaxPendingSockets: d.cfg.MaxUnauthenticatedSockets, ClientAddr: authn.ClientAddr,
		MaxChangeSetBytes: int64(d.cfg.GraphQLMaxResponseBytes),
		Origins:           origins,
		InitTimeout:       d.opts.GraphQLWSInitTimeout,
		Live: gqltransport.LiveBudget{QueriesPerUser: d.cfg.LiveQueriesPerUser, Queries: d.cfg.LiveQueries,
			RowsPerUser: d.cfg.LiveRowsPerUser, BytesPerUser: d.cfg.LiveBytesPerUser, Rows: d.cfg.LiveRows, Bytes: d.cfg.LiveBytes}})
	gql := graph.NewHandler(eng, graph.Options{Logger: d.logger, MaxBodyBytes: d.cfg.GraphQLMaxBodyBytes, RequestBytes: d.cfg.GraphQLRequestBytes, Transports: []func(*graph.ExecutableSchema) graphql.Transport{gqlStreams.Transport},
		Limits: graph.Limits{MaxQueryBytes: d.cfg.GraphQLMaxQueryBytes, MaxTokens: d.cfg.GraphQLMaxTokens, MaxDepth: d.cfg.GraphQLMaxDepth,
			MaxAliases: d.cfg.GraphQLMaxAliases, MaxFields: d.cfg.GraphQLMaxFields, MaxFragments: d.cfg.GraphQLMaxFragments,
			MaxStatements: d.cfg.GraphQLMaxStatements,
			MaxResultRows: d.cfg.GraphQLMaxResultRows, MaxResponseBytes: d.cfg.GraphQLMaxResponseBytes,
			RequestTimeout: d.cfg.GraphQLRequestTimeout}})
	gqlStreams.Judge(gql, authn.Authenticate)

	// The tailer comes after the engine and the GraphQL handler: when it
	// finds a database deleted, they release what they keep for it.
	tailer := changefeed.NewTailer(feedStore{store}, hub, changefeed.TailerOptions{Logger: d.logger, Metrics: sm, Now: d.now,
		OnDrop: func(id int64) { gql.Forget(id); eng.Forget(id) }})
	wake.onCommit(tailer.Wake)
	// An access change is announced to other processes by its own NOTIFY;
	// this one's tailer applies it at once.
	wake.onAccess(func() { tailer.Wake(0) })

	keys, err := webhook.LoadKeys(ctx, store, d.cfg.WebhookSecretKeyFile)
	if err != nil {
		return nil, err
	}
	policy := webhook.Policy{Allow: d.cfg.WebhookAllowNetworks}
	hooks := webhook.New(store, eng, keys, webhook.Options{Logger: d.logger, Metrics: metrics.NewWebhook(m.Registry),
		LeaseTTL: d.cfg.WebhookLeaseTTL, Timeout: d.cfg.WebhookTimeout, Schedule: d.cfg.WebhookRetrySchedule, Policy: policy,
		BodyBudget: d.cfg.WebhookBodyBudget, BodyBudgetPerUser: d.cfg.WebhookBodyBudgetPerUser,
		UserAgent: "Sluice-Webhooks/" + d.opts.Version, Now: d.now, Resolve: d.opts.WebhookResolve, Dial: d.opts.WebhookDial,
		LogRead: d.opts.WebhookLogRead, JWTKeys: jwt.KeyChanges})
	wake.onCommit(hooks.Wake)
	// A reload or fetch that removes a key from the JWT key set ends, at
	// once, the streams of this process opened with JWTs it verified (a
	// stream's guard is registered only while its key is not removed; a
	// key this process never had is not removed), and pauses, on every
	// replica, the webhooks made with such JWTs (through Postgres).
	jwt.OnKeysChanged(func() {
		hub.JWTKeysChanged()
		hooks.JWTKeysChanged()
	})

	// The first commit: everything a commit wakes is registered above.
	if err := d.bootstrap(ctx, eng); err != nil {
		return nil, err
	}

	spoolDir, spoolBytes, err := writeSpool(d.cfg, d.logger)
	if err != nil {
		return nil, err
	}
	giql := graphiql.New(pagesOptions(eng, d.opts.Version))
	requests := inflight.New(inflight.Bounds{PerUser: int(d.cfg.MaxRequestsPerUser), Refusals: userRefusals,
		Total: int(d.cfg.MaxRequestsInFlight), TotalRefusals: processRefusals(d.cfg.MaxRequestsInFlight)})
	m.ObserveUserRequests(func() metrics.UserRequests {
		s := requests.Stats()
		return metrics.UserRequests{Admitted: s.Admitted, Refused: s.Refused, Aborted: s.Aborted}
	})
	handler := rest.Routes(rest.Deps{
		Engine:           eng,
		Metrics:          m,
		Logger:           d.logger,
		Ready:            func() bool { return d.ready.Load() && pgUp() && tailer.Running() },
		Version:          d.opts.Version,
		MaxBodyBytes:     d.cfg.MaxBodyBytes,
		BodyIdleTimeout:  d.cfg.BodyIdleTimeout,
		WriteTimeout:     d.cfg.WriteTimeout,
		BodyMinRate:      d.cfg.BodyMinRate,
		MaxRequestBodies: d.cfg.MaxRequestBodies,
		WriteSpoolBytes:  spoolBytes,
		WriteSpoolDir:    spoolDir,
		MetricsToken:     d.cfg.MetricsToken,
		MetricsElsewhere: d.cfg.MetricsListen != "",
		PageBytes:        d.cfg.HistoryPageBytes,
		Requests:         requests,
		Stream:           rest.StreamDeps{Streams: streams, Heartbeat: d.cfg.Heartbeat, WriteTimeout: d.cfg.WriteTimeout},
		GraphQL:          gql,
		GraphQLSocket:    gqlStreams.Socket(gql, authn.Authenticate),
		CORS:             rest.NewCORS(origins),
		GraphiQL:         giql,
		GraphiQLAssets:   giql.Assets(),
		Console:          console.New(),
		Landing:          giql.Landing(),
		Webhooks:         webhook.NewService(eng, store, keys, policy, d.cfg.MaxWebhooksPerDatabase, int(d.cfg.MaxWebhooksPerUser)),
	})
	return &parts{store: store, metrics: m, jwt: jwt, notifier: notifier, hub: hub, tailer: tailer, hooks: hooks,
		streams: streams, gql: gqlStreams, handler: handler}, nil
}

// pagesOptions returns what the browser pages show, read through eng
// for the request's (authenticated) user.
func pagesOptions(eng *engine.Engine, version string) graphiql.Options {
	return graphiql.Options{
		Version: version,
		User: func(r *http.Request) (string, string) {
			u := auth.UserFrom(r.Context())
			return u.Name, u.Org
		},
		Databases: func(r *http.Request) ([]string, bool, error) {
			u := auth.UserFrom(r.Context())
			dbs, err := eng.Databases(r.Context(), u)
			if err != nil {
				return nil, false, err
			}
			paths := make([]string, len(dbs))
			for i, d := range dbs {
				paths[i] = d.Path()
			}
			return paths, u.Superuser, nil
		},
		Sample: func(r *http.Request, org, name string) string {
			_, s, role, err := eng.GraphQLDatabase(r.Context(), auth.UserFrom(r.Context()), org, name)
			if err != nil {
				return "" // the page's requests answer why
			}
			db := org + "/" + name
			if org == sluice.SystemOrg {
				db = sluice.SystemDB
			}
			return graphiql.SampleQuery(db, s, role)
		},
	}
}

// writeSpool returns the directory where large write bodies are read
// ahead of their transactions (rest's spool) and the budget they may
// hold: write_spool_dir; else, with the embedded Postgres, data_dir/spool
// (data_dir holds Sluice's files, and stays writable on a read-only root
// file system); else the system's temporary directory. A directory set
// that cannot be written fails the start; one chosen that cannot turns
// reading ahead off (bodies are read as they arrive), with a warning.
func writeSpool(cfg config.Config, logger *slog.Logger) (string, int64, error) {
	if cfg.WriteSpoolBytes == 0 {
		return "", 0, nil
	}
	dir := cfg.WriteSpoolDir
	if dir != "" {
		if err := checkSpoolDir(dir); err != nil {
			return "", 0, fmt.Errorf("write_spool_dir %s cannot hold temporary files: %w", dir, err)
		}
		return dir, cfg.WriteSpoolBytes, nil
	}
	dir = os.TempDir()
	if cfg.DatabaseURL == "" {
		dir = filepath.Join(cfg.DataDir, "spool")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			dir = os.TempDir()
		}
	}
	if err := checkSpoolDir(dir); err != nil {
		logger.Warn("large writes read their bodies as they arrive, inside their transactions: no directory for their temporary files; set write_spool_dir to a writable one", "dir", dir, "err", err)
		return "", 0, nil
	}
	return dir, cfg.WriteSpoolBytes, nil
}

// checkSpoolDir reports whether dir can hold temporary files, by making
// and removing one.
func checkSpoolDir(dir string) error {
	f, err := os.CreateTemp(dir, "sluice-body-")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

// bootstrap creates the _system database and the admin user unless they
// exist, and shows a generated admin password once.
func (d *Daemon) bootstrap(ctx context.Context, eng *engine.Engine) error {
	generated, err := eng.Bootstrap(ctx, d.cfg.AdminPassword)
	if err != nil {
		return err
	}
	if generated != "" {
		if d.opts.OnAdminPassword != nil {
			d.opts.OnAdminPassword(generated)
		} else {
			d.logger.Warn("generated a password for the admin user; it is shown only this once (set SLUICE_ADMIN_PASSWORD to choose one)", "user", engine.AdminUser, "password", generated)
		}
	}
	return nil
}

// serve runs what build assembled: the background loops, the change feed
// and the HTTP server on ln (and the metrics server on metricsLn, when
// configured), until ctx is cancelled, the HTTP server fails or the
// embedded Postgres pg (nil with a database URL) gives up; then it shuts
// them down in order.
func (d *Daemon) serve(ctx context.Context, p *parts, pg *pgembed.Postgres, cert *certificate, ln, metricsLn net.Listener) error {
	stopBackground, stopHooks := d.startBackground(ctx, p)
	defer stopBackground()
	// The change feed stops before the HTTP server so that every open
	// stream gets its final frame and returns before Shutdown waits for it.
	stopFeed := startFeed(ctx, p)
	defer func() { // when serve returns before its shutdown
		sctx, cancel := d.drainContext()
		defer cancel()
		stopFeed(sctx)
	}()
	// /readyz answers 200 only while the change feed follows the log, so
	// serving waits for its first read: a probe that waited in the listen
	// queue through the start was otherwise answered 503 as serving began.
	// A first read that failed (Postgres gone meanwhile) does not hold the
	// start: /readyz then says so until the feed reads again. A stop
	// meanwhile is one while starting (see Run).
	select {
	case <-p.tailer.Synced():
	case <-ctx.Done():
		return fmt.Errorf("wait for the change feed's first read of the log: %w", context.Cause(ctx))
	}

	srv := d.httpServer(connlimit.Handler(p.handler))
	d.addr = ln.Addr().String()
	// Connections are bounded at accept (see connLimits), before TLS.
	cl := connlimit.New(ln, connLimits(openFileLimit(), maxStreams(d.cfg.MaxStreams, openFileLimit()), p.store.Connections(), d.cfg.TrustedProxies), d.logger)
	srv.ConnState, srv.ConnContext = cl.ConnState, cl.ConnContext
	p.metrics.ObserveConnections(func() metrics.Connections {
		s := cl.Stats()
		return metrics.Connections{Open: s.Connections, Waiting: s.Waiting, Evicted: s.Evicted, Refused: s.Refused, Expired: s.Expired, Aborted: s.Aborted}
	})
	serveErr := make(chan error, 1)
	go func() { serveErr <- serve(srv, cl, cert) }()
	if metricsLn != nil {
		stopMetrics := serveMetrics(metricsLn, checkMetricsHost(d.cfg.MetricsAllowHosts, p.metrics.Handler()), d.logger)
		defer stopMetrics()
		d.metricsAddr = metricsLn.Addr().String()
	}
	d.ready.Store(true)
	close(d.started)
	// addr comes first: tests find the address in this line by it
	// (daemontest.StartProc); url is one a person can open.
	d.logger.Info("sluice is serving", "addr", d.addr, "url", serveURL(d.addr, cert != nil), "version", d.opts.Version)

	// A nil channel never fires: an external Postgres is not ours to
	// supervise.
	var pgFailed <-chan struct{}
	if pg != nil {
		pgFailed = pg.Failed()
	}
	var runErr error
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		d.ready.Store(false)
		return fmt.Errorf("http server: %w", err)
	case <-pgFailed:
		// pgembed restarts a server that died, with backoff; when it
		// gives up, Sluice exits non-zero so that whatever supervises it
		// (a container's restart policy, systemd) starts it afresh.
		runErr = fmt.Errorf("embedded postgres: %w", pg.Err())
		d.logger.Error("embedded postgres does not come back; shutting down", "err", pg.Err())
	}
	d.ready.Store(false)
	d.logger.Info("shutting down")
	d.stopBy = time.Now().Add(d.cfg.ShutdownTimeout)
	if pg != nil {
		pg.Draining()
	}
	// Webhook attempts in flight are abandoned, not waited for: their
	// requests are sent again (docs/webhooks.md, at least once).
	stopHooks()
	// One deadline for the whole drain: the streams, then the requests.
	// Past it, or once the stop is hurried, what still runs is cut off.
	sctx, cancel := d.drainContext()
	defer cancel()
	stopFeed(sctx)
	if err := srv.Shutdown(sctx); err != nil {
		d.logger.Warn("http shutdown timed out; closing connections", "err", err)
		_ = srv.Close()
	}
	// Read before the deferred cancel, which is no hurry.
	hurried := errors.Is(context.Cause(sctx), ErrDrainCut)
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	if runErr == nil && hurried {
		runErr = ErrDrainCut
	}
	return runErr
}

// drainContext returns the context of a drain: it ends shutdown_timeout
// from now, or as soon as Options.Hurry is closed (at once if it already
// is: two signals in a row), with ErrDrainCut as its cause.
func (d *Daemon) drainContext() (context.Context, context.CancelFunc) {
	hurry, cut := context.WithCancelCause(context.Background())
	sctx, cancel := context.WithTimeout(hurry, d.cfg.ShutdownTimeout)
	go func() {
		select {
		case <-d.opts.Hurry: // a nil channel never fires
			// Once: serve's deferred drain (for a return before its
			// shutdown) runs after a hurried one too.
			d.hurryLogged.Do(func() {
				d.logger.Warn("stop hurried: closing the streams and requests left without waiting for them")
			})
			cut(ErrDrainCut)
		case <-sctx.Done():
		}
	}()
	return sctx, func() { cancel(); cut(context.Canceled) }
}

// startBackground starts the loops that run beside the requests: the
// notifier, the webhook deliverer, the JWT key set's refresh, the one
// pass that builds the backlink indexes older tables lack, the repair of
// capture triggers older replicas made (capture.go) and, with a
// log retention, pruning and the publication of this process's floors. The
// returned stop stops them and waits for them; stopHooks stops the
// webhook deliverer alone, without waiting, as shutdown begins.
func (d *Daemon) startBackground(ctx context.Context, p *parts) (stop, stopHooks func()) {
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { p.notifier.Run(bg) })
	// Webhooks are delivered until the daemon begins to stop; the lease
	// is then released, so another replica takes over at once.
	hooks, stopHooks := context.WithCancel(bg)
	wg.Go(func() { p.hooks.Run(hooks) })
	wg.Go(func() { p.jwt.Run(bg) })
	wg.Go(func() { buildReferenceIndexes(bg, p.store, d.logger) })
	wg.Go(func() { repairCapture(bg, p.store, d.logger) })
	if d.cfg.LogRetention > 0 {
		wg.Go(func() { prune(bg, p.store, d.cfg.LogRetention, p.hub.Floors, d.logger) })
	}
	// Published whatever this process's own log_retention: the other
	// replicas prune the log it reads, with theirs. A replica keeping
	// the whole log published none, and the others pruned what its
	// streams still had to read (TestReplicaKeepingTheLogPublishesFloors).
	floorsEvery := cmp.Or(d.opts.FloorsEvery, postgres.FloorTTL/3)
	wg.Go(func() { publishFloors(bg, p.store, p.hub.Floors, p.hub.Resumed(), floorsEvery, d.logger) })
	wg.Go(func() { pruneIdempotencyKeys(bg, p.store, d.cfg.IdempotencyRetention, d.logger) })
	return func() { stopBG(); wg.Wait() }, stopHooks
}

// pruneIdempotencyKeys deletes the Idempotency-Keys older than retention,
// every retention/24 (at least every minute, at most hourly). Expired keys
// no longer answer even before they are pruned.
func pruneIdempotencyKeys(ctx context.Context, store *postgres.DB, retention time.Duration, logger *slog.Logger) {
	every := min(max(retention/24, time.Minute), time.Hour)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		n, err := store.PruneIdempotencyKeys(ctx, retention)
		if err != nil && ctx.Err() == nil {
			logger.Warn("prune idempotency keys", "err", err)
		} else if n > 0 {
			logger.Info("pruned idempotency keys", "keys", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// startFeed runs the tailer. The returned function, which only its first
// call runs, stops the tailer and then closes the hub: that ends every
// subscription, and the connections that carry many (graphql-ws, single
// connection mode) then send their last messages and close; so do the
// parked streams. It waits for them until its ctx ends, then cuts those
// left (see gqltransport.Server.Close and stream.Server.Close).
func startFeed(ctx context.Context, p *parts) func(context.Context) {
	feedCtx, stopFeedCtx := context.WithCancel(context.WithoutCancel(ctx))
	feedDone := make(chan struct{})
	go func() { defer close(feedDone); p.tailer.Run(feedCtx) }()
	var once sync.Once
	return func(sctx context.Context) {
		once.Do(func() {
			stopFeedCtx()
			<-feedDone
			p.hub.Close()
			p.gql.Close(sctx)
			p.streams.Close(sctx)
		})
	}
}

// httpServer returns the API's server of handler.
// h2StreamWindow and h2ConnWindow are the most an HTTP/2 client may send
// of request bodies before the server reads them, on one stream and on
// one connection (see httpServer).
const (
	h2StreamWindow = 64 << 10
	h2ConnWindow   = 256 << 10
)

// h2Streams is the most requests an HTTP/2 connection carries at once
// (see httpServer).
const h2Streams = 250

func (d *Daemon) httpServer(handler http.Handler) *http.Server {
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		// What a client sends before it is authenticated is bounded
		// (net/http allows 4 KiB more than this).
		MaxHeaderBytes: int(d.cfg.MaxHeaderBytes),
		IdleTimeout:    2 * time.Minute,
		// No WriteTimeout: streams are long-lived. Each write gets a
		// deadline of write_timeout instead, set by the API's middleware
		// (rest.statusWriter) and by the streams, with
		// http.ResponseController.
		//
		// Over HTTP/2 a passed deadline resets its stream, but the reset
		// waits behind the data the connection could not send: a client
		// that stops reading its connection altogether kept every
		// handler of it blocked. A connection whose write (a frame, or a
		// few KiB of them) waits write_timeout is closed. (Over TLS a
		// write that times out leaves the connection broken, so progress
		// within one write does not extend it.)
		//
		// What an HTTP/2 client may send ahead of a handler reading its
		// body is bounded as over HTTP/1 the kernel's buffers bound it:
		// Go's defaults let each stream buffer 1 MiB in the server before
		// anything reads it, so unauthenticated requests answered 401
		// without reading their bodies held a MiB each (60 of them, 70
		// MiB of heap). 64 KiB a stream is HTTP/2's own initial window
		// and what nginx reads ahead of a request body by default;
		// 256 KiB a connection leaves four streams of one connection
		// their whole windows. It costs a large upload on a long round
		// trip its speed: at most 64 KiB moves per round trip (6.4 MB/s
		// at 10 ms, 640 KB/s at 100 ms).
		//
		// An HTTP/2 connection carries at most 250 requests at once, Go's
		// default, said here because the documentation promises it: a
		// browser carries every stream to one origin on one connection.
		// Each answer a client keeps unsent, by granting no window, holds
		// its handler (about 18 KB) until write_timeout, 4.4 MB a
		// connection; one that never carried an authenticated request
		// has 16 in flight (anonymousRequests), and a user at most
		// max_requests_per_user on the process (rest's beginRequest).
		// Fewer streams for a client with credentials would scale its
		// cost, not bound it (its connections are many), and would
		// queue a browser's streams past them behind the others.
		HTTP2: &http.HTTP2Config{WriteByteTimeout: d.cfg.WriteTimeout, MaxConcurrentStreams: h2Streams,
			MaxReceiveBufferPerStream: h2StreamWindow, MaxReceiveBufferPerConnection: h2ConnWindow},
		ErrorLog: log.New(serverErrors{d.logger}, "", 0),
		// Every request's context starts with the logger (see
		// rest.WithLogger) and, without TLS, the listener that takes back
		// the connections of parked streams once they end
		// (httpstream.Listener).
		BaseContext: func(l net.Listener) context.Context {
			ctx := rest.WithLogger(context.Background(), d.logger)
			if hl, ok := l.(*httpstream.Listener); ok {
				ctx = httpstream.WithListener(ctx, hl)
			}
			return ctx
		},
	}
}

// publishFloors tells the other daemons, through Postgres, which commits
// this one's subscribers still need, once each period every (well within
// postgres.FloorTTL), and withdraws them on shutdown. A stream that
// resumes from a position in the log (resumed receives) needs commits
// older than the floors published before: they are published again at
// once, at most once a resumeFloorsGap, since until then another
// replica's prune could remove what the stream is about to read (the
// stream ended with Gone, though the history it resumed from was there).
func publishFloors(ctx context.Context, store *postgres.DB, floors func() map[int64]int64, resumed <-chan struct{}, every time.Duration, logger *slog.Logger) {
	replica := "r-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.Itoa(os.Getpid())
	t := time.NewTicker(every)
	defer t.Stop()
	var last time.Time
	for {
		last = time.Now()
		if err := store.PublishFloors(ctx, replica, floors()); err != nil && ctx.Err() == nil {
			logger.Warn("publish stream floors", "err", err)
		}
		select {
		case <-ctx.Done():
			wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := store.PublishFloors(wctx, replica, nil); err != nil {
				logger.Warn("withdraw stream floors", "err", err)
			}
			return
		case <-t.C:
		case <-resumed:
			if gap := time.Until(last.Add(resumeFloorsGap)); gap > 0 {
				wait := time.NewTimer(gap)
				select {
				case <-ctx.Done():
				case <-wait.C:
				}
				wait.Stop()
			}
		}
	}
}

// resumeFloorsGap is the least time between two publications of the
// floors that resumed streams start (a burst of resumes, as after a
// replica restarts, publishes them once).
const resumeFloorsGap = time.Second

// buildReferenceIndexes builds the backlink indexes that tables made
// before Sluice made them lack (postgres.DB.BuildReferenceIndexes), once.
func buildReferenceIndexes(ctx context.Context, store *postgres.DB, logger *slog.Logger) {
	n, err := store.BuildReferenceIndexes(ctx)
	if err != nil && ctx.Err() == nil {
		logger.Warn("build backlink indexes (backlinks of the tables that lack one read the whole table; the next start tries again)", "err", err)
	} else if n > 0 {
		logger.Info("built backlink indexes", "indexes", n)
	}
}

// prune removes commit history older than retention, every retention/24
// (at most hourly, at least every minute). Ages are measured on Postgres'
// clock, which stamped the commits: measured on this process's, a replica
// whose clock ran ahead pruned, for every replica, history they all still
// had to keep (TestRetentionByPostgresClock).
func prune(ctx context.Context, store *postgres.DB, retention time.Duration, floors func() map[int64]int64, logger *slog.Logger) {
	every := min(max(retention/24, time.Minute), time.Hour)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		// A database that failed does not stop the others: err names
		// each one that did, and n counts what the others pruned.
		var n int64
		now, err := store.Clock(ctx)
		if err == nil {
			n, err = store.Prune(ctx, now, retention, floors())
		}
		if err != nil && ctx.Err() == nil {
			logger.Warn("prune commit history", "err", err)
		}
		if n > 0 {
			logger.Info("pruned commit history", "commits", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// maxStreams returns the process's stream cap: the configured one, or
// with 0 nine tenths of the open-file limit less 100 (the pool, the
// listener, logs and plain requests need descriptors too), so the process
// refuses streams with a clear answer rather than failing at its file
// limit. An unknown limit gives 10,000, an unlimited one 100,000.
func maxStreams(configured int64, fileLimit uint64) int {
	if configured > 0 {
		return int(configured)
	}
	switch {
	case fileLimit == 0:
		return 10000
	case fileLimit > 1<<30: // unlimited
		return 100000
	}
	return max(int(fileLimit/10*9)-100, 16)
}

// connReserve is how many file descriptors connLimits leaves beyond the
// API's connections and Postgres's: the listeners, the log, standard
// input and output, the poller, the temporary files of large write
// bodies, webhook deliveries and key set fetches.
const connReserve = 64

// anonymousIdleTimeout is how long an idle connection that never carried
// an authenticated request is kept (the others: the server's IdleTimeout,
// two minutes). Long enough for a browser that loaded a public page to
// reuse it for its next request, short enough that anonymous clients give
// their descriptors back soon without being pushed out.
const anonymousIdleTimeout = 15 * time.Second

// anonymousRequests is the most requests an HTTP/2 connection that never
// carried an authenticated request has in flight at once; those past it
// are reset unanswered (connlimit.Handler). Each such request is
// answered at once, but a client granting no flow-control window keeps
// the answer unsent, and its handler's goroutine and buffers (about 18
// KB), until write_timeout: 16 of them hold about 300 KB a connection,
// where HTTP/2's streams held 4.4 MB. A browser loading the console
// without credentials asks for at most a dozen of its files at once (the
// modules app.js imports).
const anonymousRequests = 16

// userRefusals is how many refusals past max_requests_per_user one
// user has in flight at once; those past it are aborted unanswered (see
// inflight). A refusal is answered at once, and sent as soon as its
// client reads: only a client that leaves its answers unsent holds
// this many, as many as a connection that never carried an authenticated
// request does (anonymousRequests).
const userRefusals = anonymousRequests

// processRefusals is how many refusals past max_requests_in_flight, or
// past their users' bounds, every user together has in flight at once
// (0: no bound, with no bound of requests): a tenth of the requests, at
// least one user's refusals (userRefusals). Those past it are aborted
// unanswered, as a user's past its own (see inflight): each user's 16
// refusals bounded what one user held, not what many did.
func processRefusals(maxRequests int64) int {
	if maxRequests <= 0 {
		return 0
	}
	return max(int(maxRequests/10), userRefusals)
}

// connLimits returns the bounds of the API's connections (connlimit) for
// a process of fileLimit open files (0: unknown), streams streams at most
// (maxStreams) and pg connections to Postgres. Every connection, however
// busy, is a descriptor: at most fileLimit less pg and connReserve are
// held, so that Postgres's connections and the files a request opens are
// never starved by clients. Of those, the ones waiting (new, or idle
// between requests) are at most what is left once max_streams are set
// aside: a stream always finds a descriptor, whoever holds idle
// connections. One client address holds a tenth of the waiting ones,
// unless it is a trusted proxy's (every client behind it comes from it).
// Past a bound the oldest waiting connection is closed, so a new one is
// refused only when every connection is busy. A connection that never
// carried an authenticated request is kept idle anonymousIdleTimeout,
// and has at most anonymousRequests requests in flight.
// An unknown or unlimited
// fileLimit bounds only the waiting connections, to 10,000.
func connLimits(fileLimit uint64, streams, pg int, trustedProxies []netip.Prefix) connlimit.Limits {
	if fileLimit == 0 || fileLimit > 1<<30 {
		return connlimit.Limits{Waiting: 10000, PerAddress: 1000, Exempt: trustedProxies, AnonymousIdle: anonymousIdleTimeout, AnonymousRequests: anonymousRequests}
	}
	total := max(int(fileLimit)-pg-connReserve, 32)
	waiting := min(max(total-streams, 16), total)
	return connlimit.Limits{Total: total, Waiting: waiting, PerAddress: max(waiting/10, 4), Exempt: trustedProxies, AnonymousIdle: anonymousIdleTimeout, AnonymousRequests: anonymousRequests}
}

// serveMetrics serves GET /metrics, without credentials, on a listener of
// its own, ln (config metrics_listen): for a scraper on a network the
// API's clients cannot reach. It returns a function that stops it.
func serveMetrics(ln net.Listener, metrics http.Handler, logger *slog.Logger) func() {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	// A scrape is one small GET: its whole request, body included (none
	// is read, but net/http reads one left unread before it answers), and
	// its answer are bounded, and so is an idle connection.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 4 << 10,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics listener", "err", err)
		}
	}()
	logger.Info("serving metrics", "addr", ln.Addr().String())
	return func() { _ = srv.Close(); <-done }
}

// requestOwner says whose request ctx is, for the connections a user's
// requests may hold at once (postgres.Owners): its credential's user; the
// super user's, and Sluice's own work, are not counted.
func requestOwner(ctx context.Context) (int64, bool) {
	c := auth.CredentialFrom(ctx)
	if c == nil || c.User == nil || c.User.Superuser {
		return 0, false
	}
	return c.User.ID, true
}

// serverErrors is net/http's error log, written to the daemon's at Warn,
// except a failed TLS handshake, at Debug: any client (a port scanner, a
// load balancer's TCP check, a plain HTTP request to the TLS port) makes
// one by connecting, so at Warn anyone could fill the log for nothing (500
// connections wrote 500 lines in a quarter of a second).
type serverErrors struct{ logger *slog.Logger }

func (s serverErrors) Write(p []byte) (int, error) {
	msg := strings.TrimSuffix(string(p), "\n")
	level := slog.LevelWarn
	if strings.HasPrefix(msg, "http: TLS handshake error") {
		level = slog.LevelDebug
	}
	s.logger.Log(context.Background(), level, msg)
	return len(p), nil
}
