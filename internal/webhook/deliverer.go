package webhook

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/metrics"
	"github.com/sluice-dev/sluice/internal/postgres"
)

// Options configure a Deliverer. Zero values take the defaults.
type Options struct {
	Logger  *slog.Logger
	Metrics *metrics.Webhook
	// LeaseTTL is the deliverer lease's term (default 10s).
	LeaseTTL time.Duration
	// Timeout bounds each request (default 15s).
	Timeout time.Duration
	// Schedule is the retry schedule (default: retries after 5s, 30s, 2m,
	// 10m, 30m, 1h, 2h, 4h, 8h, 8h).
	Schedule []time.Duration
	// Jitter returns a number in [0, 1) (default math/rand).
	Jitter func() float64
	// Policy decides which addresses webhooks may reach.
	Policy Policy
	// BodyBudget bounds the bytes of the pages of the log and the request
	// bodies all webhooks hold at once (default 256 MiB; see budget).
	BodyBudget int64
	// BodyBudgetPerUser bounds what of BodyBudget the webhooks that
	// deliver as one user hold at once (0, or more than BodyBudget: all
	// of it; see budget).
	BodyBudgetPerUser int64
	// UserAgent is the User-Agent of requests.
	UserAgent string
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Resolve and Dial, for tests, replace the system resolver and the
	// dialing of a checked address (see dialer).
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	Dial    func(ctx context.Context, network, address string) (net.Conn, error)
	// JWTKeys returns the JWT keys this replica's key set removed, and
	// those it holds (auth.JWT.KeyChanges); nil: none.
	JWTKeys func() (removed, held []string)
	// LogRead, for tests, is told the bytes of change images of each
	// page of the log a webhook's loop read, and returns what is called
	// once the loop no longer holds that page.
	LogRead func(bytes int64) (done func())
}

// defaultSchedule is the default retry schedule: about a day in all.
var defaultSchedule = []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 4 * time.Hour, 8 * time.Hour, 8 * time.Hour}

// Deliverer delivers every webhook while its replica holds the lease in
// Postgres: one replica at a time, so each webhook's requests leave in
// order from one place. Run it; Wake it on local commits. It is safe for
// concurrent use.
type Deliverer struct {
	store  *postgres.DB
	eng    *engine.Engine
	keys   *Keys
	logger *slog.Logger
	m      *metrics.Webhook
	ttl    time.Duration
	sched  schedule
	send   *sender
	budget *budget
	// logRead is Options.LogRead (nil: none).
	logRead func(bytes int64) (done func())
	now     func() time.Time
	holder  string

	// Local commits announce their database here (Wake); the manager
	// takes them (see manager.run).
	mu      sync.Mutex
	pending map[int64]struct{}
	wake    chan struct{}

	// jwtKeys is Options.JWTKeys; keysChanged is signalled when they
	// change (JWTKeysChanged), and taken by revokeKeys.
	jwtKeys     func() (removed, held []string)
	keysChanged chan struct{}
}

// New returns a Deliverer of store's webhooks.
func New(store *postgres.DB, eng *engine.Engine, keys *Keys, o Options) *Deliverer {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 10 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 15 * time.Second
	}
	if len(o.Schedule) == 0 {
		o.Schedule = defaultSchedule
	}
	if o.Jitter == nil {
		o.Jitter = rand.Float64
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.BodyBudget <= 0 {
		o.BodyBudget = 256 << 20
	}
	if o.UserAgent == "" {
		o.UserAgent = "Sluice-Webhooks"
	}
	dl := newDialer(o.Policy, o.Timeout)
	if o.Resolve != nil {
		dl.resolve = o.Resolve
	}
	if o.Dial != nil {
		dl.dial = o.Dial
	}
	host, _ := os.Hostname()
	return &Deliverer{store: store, eng: eng, keys: keys, logger: o.Logger.With("component", "webhooks"), m: o.Metrics,
		ttl: o.LeaseTTL, sched: schedule{waits: o.Schedule, jitter: o.Jitter}, send: newSender(dl, o.Timeout, o.UserAgent, o.Now), now: o.Now,
		budget: newBudget(o.BodyBudget, o.BodyBudgetPerUser), logRead: o.LogRead,
		holder:  host + "-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36),
		pending: map[int64]struct{}{}, wake: make(chan struct{}, 1),
		jwtKeys: o.JWTKeys, keysChanged: make(chan struct{}, 1)}
}

// JWTKeysChanged tells the deliverer that this replica's JWT key set
// changed (auth.JWT.OnKeysChanged): Run then records the keys removed in
// Postgres and pauses the webhooks made with them (revokeKeys). It never
// blocks.
func (d *Deliverer) JWTKeysChanged() {
	select {
	case d.keysChanged <- struct{}{}:
	default:
	}
}

// keyRemovedMessage is the status message of a webhook paused because
// the key that verified the JWT its creator (%1$s, Postgres's format)
// made it with was removed; checkCreator's error says the same.
const keyRemovedMessage = "paused: its creator %1$s lost the read access it delivers with: the key that signed the JWT %1$s made it with was removed from the key set (jwt_jwks_file/jwt_jwks_url)"

// revokeKeys records in Postgres, each time this replica's key set
// changes, the keys it removed (and that those it holds are not), and
// pauses as revoked the webhooks made, or last re-pointed, with a JWT of
// a removed key, whoever delivers them: removing a key is how an
// operator answers its compromise, its holder could sign as any user,
// and a webhook is a standing resource that would otherwise deliver for
// good. It runs on every replica, leading or not, until ctx ends, and
// tries again (with backoff) while Postgres fails.
func (d *Deliverer) revokeKeys(ctx context.Context) {
	retry := time.NewTimer(0)
	retry.Stop()
	defer retry.Stop()
	wait := time.Second
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.keysChanged:
		case <-retry.C:
		}
		removed, held := d.jwtKeys()
		if len(removed) == 0 && len(held) == 0 {
			continue
		}
		ids, err := d.store.RemoveJWTKeys(ctx, removed, held, keyRemovedMessage)
		if err != nil {
			if ctx.Err() == nil {
				d.logger.Warn("record the JWT keys removed from the key set, and pause the webhooks made with them (trying again)", "err", err)
				retry.Reset(wait)
				wait = min(2*wait, time.Minute)
			}
			continue
		}
		wait = time.Second
		for _, id := range ids {
			d.logger.Warn("webhook paused: the key that signed the JWT its creator made it with was removed", "webhook", id)
		}
	}
}

// Wake tells the deliverer that database dbID committed (in this
// process; other replicas' commits arrive by NOTIFY). It never blocks.
func (d *Deliverer) Wake(dbID int64) {
	d.mu.Lock()
	d.pending[dbID] = struct{}{}
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// takeWoken returns the databases woken since the last call.
func (d *Deliverer) takeWoken() []int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]int64, 0, len(d.pending))
	for id := range d.pending {
		out = append(out, id)
	}
	clear(d.pending)
	return out
}

// Run tries to take the lease every third of its term and, while it holds
// it, delivers; it returns when ctx ends, after releasing the lease so that
// another replica takes over at once.
func (d *Deliverer) Run(ctx context.Context) {
	if d.jwtKeys != nil {
		var wg sync.WaitGroup
		wg.Go(func() { d.revokeKeys(ctx) })
		defer wg.Wait()
	}
	t := time.NewTimer(0)
	defer t.Stop()
	// failing: the last try failed. A failure is warned of once, not at
	// every retry of an outage (which the connections' supervisor reports).
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sent := time.Now()
		gen, ok, err := d.store.AcquireWebhookLease(ctx, d.holder, d.ttl)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			d.logger.Warn("take the webhook deliverer lease", "err", err)
			failing = true
		case err != nil && ctx.Err() == nil:
			d.logger.Debug("take the webhook deliverer lease", "err", err)
		case err == nil:
			failing = false
		}
		if ok {
			d.lead(ctx, gen, sent)
		}
		t.Reset(d.ttl / 3)
	}
}

// lead delivers under the lease of generation gen, taken at sent, until it
// is lost or ctx ends.
func (d *Deliverer) lead(ctx context.Context, gen int64, sent time.Time) {
	d.logger.Info("delivering webhooks", "holder", d.holder, "generation", gen)
	if d.m != nil {
		d.m.Leader.Set(1)
	}
	lctx, cancel := context.WithCancel(ctx)
	mgr := newManager(d, gen)
	// The lease runs at least until sent + ttl as Postgres counts (its
	// expiry was set after sent); stopping a tenth of the term before
	// leaves room for clocks that run apart.
	term := func(from time.Time) time.Time { return from.Add(d.ttl - d.ttl/10) }
	until := term(sent)
	held := until // a copy: the loops read it while until moves
	mgr.until.Store(&held)
	done := make(chan struct{})
	go func() { defer close(done); mgr.run(lctx) }()
	defer func() {
		cancel()
		<-done
		if d.m != nil {
			d.m.Leader.Set(0)
		}
		if ctx.Err() != nil {
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer rcancel()
			if err := d.store.ReleaseWebhookLease(rctx, d.holder, gen); err != nil {
				d.logger.Warn("release the webhook deliverer lease", "err", err)
			}
		}
	}()
	renew := time.NewTimer(d.ttl / 3)
	defer renew.Stop()
	failing := false // as in Run: a failed renewal is warned of once
	for {
		expire := time.NewTimer(time.Until(until))
		select {
		case <-ctx.Done():
			expire.Stop()
			return
		case <-expire.C:
			d.logger.Warn("the webhook deliverer lease ran out before it could be renewed; stopping", "generation", gen)
			return
		case <-renew.C:
		}
		expire.Stop()
		sent := time.Now()
		// The renewal may take until the term ends, no longer: one that
		// has not answered by then (Postgres cut off, a lock) held up the
		// expiry above, and the requests in flight went on for as long
		// as webhook_timeout let them, while another replica could take
		// the lease and send them again, and the next ones.
		rctx, rcancel := context.WithDeadline(ctx, until)
		ok, err := d.store.RenewWebhookLease(rctx, d.holder, gen, d.ttl)
		late := rctx.Err() == context.DeadlineExceeded
		rcancel()
		switch {
		case ok:
			until = term(sent)
			held := until
			mgr.until.Store(&held)
			renew.Reset(d.ttl / 3)
			failing = false
		case err == nil:
			d.logger.Warn("the webhook deliverer lease was lost; stopping", "generation", gen)
			return
		default:
			switch {
			case ctx.Err() != nil, late: // the expiry says it, at once
			case !failing:
				d.logger.Warn("renew the webhook deliverer lease", "err", err)
				failing = true
			default:
				d.logger.Debug("renew the webhook deliverer lease", "err", err)
			}
			renew.Reset(d.ttl / 10) // again soon: the term runs
		}
	}
}
