// Package auth authenticates requests: Basic auth against bcrypt password
// hashes, bearer API tokens, whose secrets are stored only as SHA-256
// hashes, bearer JWTs (jwt.go) and single-use stream tickets for browsers'
// EventSource (ticket.go). Authorization (which role a user has on a
// database) is the engine's job.
//
// A credential is read from Postgres (one indexed row, with the access
// log's version from the same snapshot) the first time it is seen, and
// remembered only while no access change has been seen since (cache.go):
// a revoked token, a changed password or a deleted user is refused at once
// by the replica that made the change and by the others as soon as their
// change feed reads it. A JWT is checked without Postgres, but the user it
// names is read the same way. Which passwords were already checked against
// which hash is remembered too: a client that keeps presenting the same
// valid password pays one bcrypt, not one per request, and concurrent
// checks of one credential from one address share one bcrypt. Password
// checks are throttled (throttle.go).
package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"net/http"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/sync/singleflight"

	"github.com/sluice-dev/sluice"
)

// TokenPrefix starts every API token, so leaked tokens are easy to grep for.
const TokenPrefix = "sluice_"

// Store is what authentication reads.
type Store interface {
	// PasswordCredential returns user name's credential with its password
	// hash, or a NotFound error.
	PasswordCredential(ctx context.Context, name string) (*sluice.Credential, error)
	// TokenCredential returns the credential of the unrevoked token whose
	// secret hashes to hash, or an Unauthenticated error.
	TokenCredential(ctx context.Context, hash []byte) (*sluice.Credential, error)
	// CreateStreamTicket stores a stream ticket whose secret hashes to
	// hash, carrying credential c, for database dbPath ("" for any),
	// valid for ttl; it returns when the ticket expires, or TooMany when
	// c's user holds maxPerUser live tickets.
	CreateStreamTicket(ctx context.Context, hash []byte, c *sluice.Credential, dbPath string, ttl time.Duration, maxPerUser int) (time.Time, error)
	// RedeemStreamTicket spends the ticket whose secret hashes to hash,
	// on every replica at once, and returns the credential it carries as
	// it is now and its database path ("" for any), or an
	// Unauthenticated error.
	RedeemStreamTicket(ctx context.Context, hash []byte) (*sluice.Credential, string, error)
	// AccessChanges returns the access changes with versions in (after,
	// upTo], oldest first (fewer when some were pruned).
	AccessChanges(ctx context.Context, after, upTo int64) ([]sluice.AccessChange, error)
}

// checkingSlots is how many password checks of clients may run their
// bcrypt at once per core (more wait for the CPU): at the default cost,
// about 50 ms each, a second's work for the cores.
const checkingSlots = 16

// verifiedEntries bounds the memory of the verified-password cache: past
// it, the least recently used entry goes (its client pays one more bcrypt).
const verifiedEntries = 10000

// Authenticator checks credentials. It is safe for concurrent use.
type Authenticator struct {
	store Store
	cost  int
	// key is a random per-process HMAC key: the verified cache is keyed by
	// an HMAC of name and password, so its keys are worthless outside the
	// process (a plain hash would be a fast-to-crack password hash).
	key []byte
	// verified maps HMAC(name, password) to the bcrypt hash the password
	// was found to match. An entry counts only while the user's stored
	// hash is still that one, so a password change needs no invalidation.
	verified *lru.Cache[[sha256.Size]byte, string]
	// flight makes concurrent checks of one credential run one bcrypt.
	flight singleflight.Group
	// checks makes concurrent checks of one Authorization header (a
	// password, an API token, a JWT) from one address run one lookup
	// (shared).
	checks singleflight.Group
	// onHash, when set, is called for every bcrypt comparison (a metric).
	onHash func()
	// jwt verifies bearer JWTs; nil when none are accepted.
	jwt *JWT
	// ticketTTL is how long a stream ticket may be redeemed.
	ticketTTL time.Duration
	// cache remembers credentials that checked out (cache.go); nil: none.
	cache *credentialCache
	// macs holds *macState keyed with key: every request computes an
	// HMAC (the cache's key), and a new one costs half a kilobyte.
	macs sync.Pool
	// throttle counts failed password checks; nil: none are throttled.
	throttle *Throttle
	// trustedProxies are the peers whose X-Forwarded-For names the
	// client (config trusted_proxies; ClientAddr); nil: none.
	trustedProxies []netip.Prefix
	// hashing holds a place for each password check running its bcrypt
	// for a client (checkingSlots): past them a check waits for one, as
	// long as its request lasts. Refused at once instead, checks from
	// many addresses kept every place taken and a user on another
	// address was answered 429 (refusals counted as no failure, so the
	// attack cost nothing); waiting, that user's check runs in turn, as
	// it would get a share of the cores without the places. What each
	// address may have waiting is bounded by the throttle (Begin).
	hashing chan struct{}
	// decoy is a bcrypt hash of a random password at cost, which the
	// password of a user who does not exist is checked against, so that
	// the answer takes as long as for one who does (made on first use).
	decoy func() string
}

// macState is an HMAC and a buffer for its input.
type macState struct {
	h   hash.Hash
	buf []byte
}

// Option configures an Authenticator.
type Option func(*Authenticator)

// WithJWT makes the Authenticator accept bearer JWTs that j verifies; a
// nil j accepts none.
func WithJWT(j *JWT) Option { return func(a *Authenticator) { a.jwt = j } }

// WithTicketTTL sets how long a stream ticket may be redeemed after it is
// made (DefaultTicketTTL when d is 0).
func WithTicketTTL(d time.Duration) Option {
	return func(a *Authenticator) {
		if d > 0 {
			a.ticketTTL = d
		}
	}
}

// New returns an Authenticator reading credentials from store. cost is the
// bcrypt cost for new hashes (bcrypt.DefaultCost when 0; tests use
// bcrypt.MinCost). onHash, which may be nil, is called for every password
// hash comparison run.
func New(store Store, cost int, onHash func(), opts ...Option) *Authenticator {
	if cost == 0 {
		cost = bcrypt.DefaultCost
	}
	if onHash == nil {
		onHash = func() {}
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	verified, err := lru.New[[sha256.Size]byte, string](verifiedEntries)
	if err != nil {
		panic(err) // only for a size <= 0
	}
	a := &Authenticator{store: store, cost: cost, key: key, verified: verified, onHash: onHash, ticketTTL: DefaultTicketTTL,
		hashing: make(chan struct{}, checkingSlots*runtime.GOMAXPROCS(0))}
	a.macs.New = func() any { return &macState{h: hmac.New(sha256.New, key)} }
	a.decoy = sync.OnceValue(func() string {
		h, err := bcrypt.GenerateFromPassword([]byte(RandomPassword()), a.cost)
		if err != nil {
			panic(err) // only for an invalid cost, refused by New's callers' config
		}
		return string(h)
	})
	for _, o := range opts {
		o(a)
	}
	return a
}

// HashPassword returns the bcrypt hash of password.
func (a *Authenticator) HashPassword(password string) (string, error) {
	if len(password) > 72 {
		return "", sluice.Errorf(sluice.CodeInvalid, "password is longer than 72 bytes")
	}
	h, err := bcrypt.GenerateFromPassword([]byte(password), a.cost)
	return string(h), err
}

// CheckPassword reports whether password matches hash.
func CheckPassword(hash, password string) bool {
	return bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)) == nil
}

// NewToken returns a new random token secret and the hash to store.
func NewToken() (secret string, hash []byte) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	secret = TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	return secret, HashToken(secret)
}

// HashToken returns the stored form of a token secret.
func HashToken(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// RandomPassword returns a random password for the first start.
func RandomPassword() string {
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// ErrNoCredentials is returned by Authenticate for a request that carries
// none; the HTTP layer answers 401 with WWW-Authenticate.
var ErrNoCredentials = sluice.Errorf(sluice.CodeUnauthenticated, "authentication required: use Basic auth or a bearer token")

// Authenticate returns the credential the request's Authorization header
// presents. It returns ErrNoCredentials when there is none, an
// Unauthenticated error for wrong credentials, Invalid for a request with
// more than one Authorization header (which one counts would be a guess),
// TooMany while the client's password guesses are throttled (throttle.go),
// and Unavailable when Postgres cannot be reached. A stream ticket in the
// URL is not read here: it is spent by RedeemTicket, only for a stream
// request (see the REST stream middleware), while Authenticate may run
// many times for one connection (graphql-ws checks its credentials for
// every operation).
func (a *Authenticator) Authenticate(r *http.Request) (*sluice.Credential, error) {
	hs := r.Header.Values("Authorization")
	switch len(hs) {
	case 0:
		return nil, ErrNoCredentials
	case 1:
	default:
		return nil, sluice.Errorf(sluice.CodeInvalid, "the request has %d Authorization headers: send one", len(hs))
	}
	h := hs[0]
	if h == "" {
		return nil, ErrNoCredentials
	}
	// A throttled client is refused before anything is checked, the
	// remembered credentials included, and before any Postgres round
	// trip. Failed passwords are counted per address and user name;
	// failed bearer tokens (API tokens, JWTs), which name no user, per
	// address, apart from its passwords (each kind blocks only itself,
	// see throttle.go): anonymous guesses cost a round trip each, and are
	// throttled like passwords.
	name, _, basic := r.BasicAuth()
	client := a.ClientAddr(r)
	if a.throttle != nil {
		check := a.throttle.CheckAddress(client)
		if basic {
			check = a.throttle.Check(client, name)
		}
		if check != nil {
			return nil, check
		}
	}
	if c, ok := a.cached(r.Context(), h); ok {
		return c, nil
	}
	if !basic {
		return a.bearer(r, h)
	}
	// Concurrent checks of one header from one address share one check,
	// the read of its user included, as bearer credentials do (shared):
	// they shared the bcrypt alone (password), and each read the user
	// first, so that one wrong password sent many times at once cost a
	// round trip a request and counted one failure.
	return a.shared(r.Context(), h, client, func() (*sluice.Credential, error) {
		// The key set's generation (and the count of Forget calls)
		// before verifying: a credential verified with keys a reload
		// replaced meanwhile, or read before its cache was forgotten,
		// is not remembered as current.
		start := a.lookupStart()
		// Failed passwords are counted as they are checked (password).
		c, err := a.authenticate(r, h)
		if err != nil {
			return nil, err
		}
		if a.throttle != nil {
			a.throttle.Succeed(client, name)
		}
		a.remember(h, c, start)
		return c, nil
	})
}

// checkResult is what a check shares with the checks that
// joined it.
type checkResult struct {
	c   *sluice.Credential
	err error
	// ended is set when the request that ran the check ended before it
	// did: its error is not the credential's.
	ended bool
}

// bearer checks bearer credential h (an API token or a JWT) that is not
// remembered. It is admitted before it is checked, as a password is
// before its bcrypt (password): its address's failures and checks running
// at once stay below its limit, so guesses sent together cost at most
// that many Postgres round trips (Throttle.BeginAddress, where a check
// finding no place waits for one). Concurrent checks of one header from
// one address share one admission and one lookup (shared): one client sending many
// requests at once with one credential just forgotten (after any access
// change, or credentialTTL) costs one place and one round trip, where
// admitted one by one it took every place and was answered 429 for the
// rest. A JWT is admitted before its signature is verified, like a
// token: verifying costs no round trip, but a JWT that fails it counts
// as a failure toward the address's block, as a wrong token does, and a
// verified one shares its lookup the same way.
func (a *Authenticator) bearer(r *http.Request, h string) (*sluice.Credential, error) {
	ctx := r.Context()
	client := a.ClientAddr(r)
	return a.shared(ctx, h, client, func() (*sluice.Credential, error) {
		settle, err := a.admitAddress(ctx, client)
		if err != nil {
			return nil, err
		}
		failed := false
		// Deferred, so that a panic below cannot keep the place for good.
		defer func() { settle(failed) }()
		// The key set's generation (and the count of Forget calls)
		// before verifying: a credential verified with keys a reload
		// replaced meanwhile, or read before its cache was forgotten,
		// is not remembered as current.
		start := a.lookupStart()
		c, err := a.authenticate(r, h)
		failed = sluice.ErrorCode(err) == sluice.CodeUnauthenticated
		if err != nil {
			return nil, err
		}
		a.remember(h, c, start)
		return c, nil
	})
}

// shared runs check, the check of Authorization header h (not
// remembered) of a request from client whose context is ctx, once for
// the concurrent requests with h from client (checks, keyed like the
// remembered credentials, and by address, so that one address's checks
// are never answered by another's admission), and returns its outcome to
// each.
func (a *Authenticator) shared(ctx context.Context, h, client string, check func() (*sluice.Credential, error)) (*sluice.Credential, error) {
	key := a.cacheKey(h)
	flight := string(key[:]) + "\x00" + addressKey(client)
	// The access changes seen before this request: a check it joins that
	// read the credential before one of them (a revocation that has
	// answered) does not answer it, as a remembered credential would not
	// (cached). Joined, a request sent after a token's revocation answered
	// was accepted with what a lookup begun before it read.
	seen := a.accessSeen()
	for {
		v, _, _ := a.checks.Do(flight, func() (any, error) {
			// A check that ended just before this one started may have
			// remembered it already.
			if c, ok := a.cached(ctx, h); ok {
				return checkResult{c: c}, nil
			}
			c, err := check()
			return checkResult{c: c, err: err, ended: err != nil && ctx.Err() != nil}, nil
		})
		res := v.(checkResult)
		// The request that ran the check ended first: unless this one
		// did too, check again, as the one running it or joining another.
		if res.ended && ctx.Err() == nil {
			continue
		}
		// Read before an access change this request came after: check
		// again. A check begun since reads at seen or later, so this
		// happens once at most.
		if res.c != nil && res.c.AccessVersion < seen {
			continue
		}
		return res.c, res.err
	}
}

// admitAddress admits the check of a credential that names no user (a
// bearer token, a JWT, a stream ticket) from remoteAddr before its
// Postgres round trip (Throttle.BeginAddress, waiting for a place while
// ctx lasts and at most addressWait), and returns the function
// that settles it once checked: failed counts it toward the address.
func (a *Authenticator) admitAddress(ctx context.Context, remoteAddr string) (settle func(failed bool), err error) {
	if a.throttle == nil {
		return func(bool) {}, nil
	}
	at, err := a.throttle.BeginAddress(ctx, remoteAddr)
	if err != nil {
		return nil, err
	}
	return func(failed bool) {
		if failed {
			at.Fail()
		} else {
			at.Release()
		}
	}, nil
}

// authenticate checks the credential of Authorization header h.
func (a *Authenticator) authenticate(r *http.Request, h string) (*sluice.Credential, error) {
	scheme, cred, _ := strings.Cut(h, " ")
	switch strings.ToLower(scheme) {
	case "basic":
		name, password, ok := r.BasicAuth()
		if !ok {
			return nil, sluice.Errorf(sluice.CodeUnauthenticated, "malformed Basic authorization header")
		}
		return a.password(r.Context(), a.ClientAddr(r), name, password)
	case "bearer", "token":
		cred = strings.TrimSpace(cred)
		if cred == "" {
			return nil, sluice.Errorf(sluice.CodeUnauthenticated, "empty bearer token")
		}
		if strings.HasPrefix(cred, TicketPrefix) {
			return nil, sluice.Errorf(sluice.CodeUnauthenticated, "a stream ticket is not a bearer token: pass it as ?ticket= on a stream URL")
		}
		// API tokens are base64url after their prefix: never a dot.
		if strings.Count(cred, ".") == 2 {
			return a.jwtCredential(r.Context(), cred)
		}
		return a.store.TokenCredential(r.Context(), HashToken(cred))
	default:
		return nil, sluice.Errorf(sluice.CodeUnauthenticated, "unsupported authorization scheme %s: use Basic or Bearer", sluice.Echo(scheme))
	}
}

var errWrongPassword = sluice.Errorf(sluice.CodeUnauthenticated, "wrong user name or password")

// Password checks user name's password. The stored hash is read on every
// call; bcrypt runs only the first time this password is seen against
// that hash, and once for any number of concurrent calls. A user who does
// not exist costs a bcrypt too, so that the time of the answer does not
// tell which user names exist.
func (a *Authenticator) Password(ctx context.Context, name, password string) (*sluice.Credential, error) {
	return a.password(ctx, "", name, password)
}

// password is Password for a client at remoteAddr ("" for none: a caller
// inside the process). With a throttle, every bcrypt it runs is admitted
// first (check), and a wrong password is counted as it is found, and
// concurrent checks of one credential share one bcrypt only when they come
// from one address, so that one address's checks are never answered by
// another's admission.
//
// A name no user has is checked the same way, against the decoy hash: its
// concurrent checks share one bcrypt and count one failure, as an
// existing user's do. Checked one by one instead (found by review), 30
// requests at once of one wrong password were 30 × 401 for a user and
// 10 × 401 and 20 × 429 for a name nobody has, which told them apart.
func (a *Authenticator) password(ctx context.Context, remoteAddr, name, password string) (*sluice.Credential, error) {
	// A check the throttle would not admit now is refused before the
	// user is read: guesses sent while the admitted ones run their
	// bcrypt cost no round trip (Throttle.Admissible). A password already
	// verified, which would need no bcrypt, is refused too then; its
	// client's address is the one checking that many at once.
	if remoteAddr != "" && a.throttle != nil {
		if err := a.throttle.Admissible(remoteAddr, name); err != nil {
			return nil, err
		}
	}
	c, err := a.store.PasswordCredential(ctx, name)
	var hash string
	switch {
	case sluice.ErrorCode(err) == sluice.CodeNotFound:
		c, hash = nil, a.decoy()
	case err != nil:
		return nil, err
	default:
		hash = c.PasswordHash
	}
	key := a.keyOf(name, password)
	if h, ok := a.verified.Get(key); ok && c != nil && hmac.Equal([]byte(h), []byte(hash)) {
		return c, nil
	}
	// The flight is keyed by the stored hash too: a check that started
	// against an old hash must not answer for the new one.
	v, err, _ := a.flight.Do(string(key[:])+hash+"\x00"+addressKey(remoteAddr), func() (any, error) {
		// A flight that ended just before this one started may have
		// verified it already.
		if h, ok := a.verified.Get(key); ok && c != nil && hmac.Equal([]byte(h), []byte(hash)) {
			return true, nil
		}
		done, err := a.check(ctx, remoteAddr, name)
		if err != nil {
			return false, err
		}
		ok := false
		// Deferred, so that a panic below cannot keep the place and the
		// throttle's count of checks running for good.
		defer func() { done(ok) }()
		a.onHash()
		// The decoy's password is random and never told: it matches
		// nothing, and a name without a user never signs in.
		ok = CheckPassword(hash, password) && c != nil
		if ok {
			a.verified.Add(key, hash)
		}
		return ok, nil
	})
	if err != nil {
		return nil, err
	}
	if !v.(bool) {
		return nil, errWrongPassword
	}
	return c, nil
}

// check admits a bcrypt of user's password for a client at remoteAddr: the
// throttle's admission (Throttle.Begin), then a place among the checks
// running (hashing), waited for while ctx lasts. It returns a TooMany
// error when the throttle refuses, ctx's error when it ends first, and
// otherwise done, to call with the check's outcome.
func (a *Authenticator) check(ctx context.Context, remoteAddr, user string) (done func(ok bool), err error) {
	if remoteAddr == "" {
		return func(bool) {}, nil
	}
	var at *Attempt
	if a.throttle != nil {
		if at, err = a.throttle.Begin(remoteAddr, user); err != nil {
			return nil, err
		}
	}
	select {
	case a.hashing <- struct{}{}:
	case <-ctx.Done():
		if at != nil {
			at.Release()
		}
		return nil, ctx.Err()
	}
	return func(ok bool) {
		<-a.hashing
		switch {
		case at == nil:
		case ok:
			at.Release()
		default:
			at.Fail()
		}
	}, nil
}

func (a *Authenticator) keyOf(name, password string) [sha256.Size]byte {
	return a.mac(name, "\x00", password)
}

// mac returns the HMAC with the process's key of the concatenated parts.
func (a *Authenticator) mac(parts ...string) [sha256.Size]byte {
	m := a.macs.Get().(*macState)
	m.h.Reset()
	m.buf = m.buf[:0]
	for _, p := range parts {
		m.buf = append(m.buf, p...)
	}
	m.h.Write(m.buf)
	var k [sha256.Size]byte
	m.h.Sum(k[:0])
	clear(m.buf) // it held a password or a token
	// A huge header's buffer is not kept.
	if cap(m.buf) <= 4<<10 {
		a.macs.Put(m)
	}
	return k
}

type credentialKey struct{}

// WithCredential returns ctx carrying the credential c of the request.
func WithCredential(ctx context.Context, c *sluice.Credential) context.Context {
	return context.WithValue(ctx, credentialKey{}, c)
}

// CredentialFrom returns the credential carried by ctx, or nil.
func CredentialFrom(ctx context.Context) *sluice.Credential {
	c, _ := ctx.Value(credentialKey{}).(*sluice.Credential)
	return c
}

// WithUser returns ctx carrying a credential for user u alone (for calls
// made on a user's behalf without a request, such as tests and the
// daemon's own operations).
func WithUser(ctx context.Context, u *sluice.User) context.Context {
	return WithCredential(ctx, &sluice.Credential{User: u})
}

// UserFrom returns the authenticated user carried by ctx, or nil.
func UserFrom(ctx context.Context) *sluice.User {
	if c := CredentialFrom(ctx); c != nil {
		return c.User
	}
	return nil
}
