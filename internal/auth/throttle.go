package auth

import (
	"context"
	"crypto/sha256"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/sluice-dev/sluice"
)

// Password guessing is throttled: every failed password check is counted
// for the client's address with the user name it tried, and for the
// address alone. Past max failures of one user name from one address
// within the window, or ten times that from one address whatever the
// names, that address's password attempts are answered 429 with Retry-After until
// the window that counted them ends, before any password is checked (so a
// throttled guess costs no bcrypt), the right password included (else the
// throttle would only slow the guessing down). Other addresses are not
// affected (an IPv6 network's new clients aside: see below): an attacker
// cannot lock a user out, only themselves.
//
// Failed credentials that name no user (bearer tokens, JWTs, stream
// tickets) are counted per address too, apart from the passwords
// (anonKey): past the address's limit they block its credentials of that
// kind, not its passwords, and failed passwords do not block them. They
// are throttled to bound what guessing costs Postgres (a token or ticket
// is too long to guess); counted with the passwords, a client with a
// stale token looping, or 101 bogus tokens costing no bcrypt, locked every
// user of its address out of signing in with a password, though none of
// those failures was a password guessed.
//
// A password check is admitted before its bcrypt runs (Begin), not only
// counted after it: guesses sent at once would all pass a check of the
// failures counted so far. An admitted check is pending until its outcome
// is known, and a check is admitted only while the failures and the
// pending checks of its user name and address, and of its address, are
// below their limits; past them it is answered 429 at once. So at most max
// guesses of one user name from one address are ever checked per window,
// however many are sent together.
//
// IPv6 addresses are counted by their /64 prefix, the block one host or
// customer usually holds, so that hopping between its addresses does not
// reset the count. Many hold more (a /56 or a /48: 256 or 65,536 /64s),
// and counted by /64 alone such a client had a /64's failures from each
// (a /56: 256 × 100 bcrypts a window at the default max); so every /56
// and /48 is counted too, its limit a few /64s' worth (networks): hopping
// between /64s buys little, and a network's own users are held back only
// once they fail that often. A network past its limit is refused for its
// addresses, except for a user name that signed in from that very /64
// within knownFor (known): the client failing in the network, without
// that user's password, cannot lock out the ones who already signed in
// there (a carrier's /48 holds thousands of customers). Such a check is
// not counted toward the networks either; its /64's and its user name's
// limits hold as ever. A user name is remembered from at most
// knownPerName /64s, so that one account cannot push the others out. The counts below the limits live in a bounded LRU table
// (throttleEntries); what falls out of it is forgotten. The keys past
// their limit are kept apart, until their window ends, in a table of
// their own, so that failures elsewhere, however many, cannot push a
// blocked address out and unblock it. That table is bounded too
// (throttleEntries): when it is full, a key newly past its limit takes the
// place of the block that ends soonest. Filling it takes throttleEntries
// times max failures within one window (200,000 bcrypts at the default
// max; ten times that from distinct addresses for address blocks), and
// what is forgotten then is the oldest block, not a chosen one.

// throttleEntries bounds the throttle's memory: one entry per address and
// per address and user name that failed within the window, and as many
// blocked ones.
const throttleEntries = 20000

// throttleKey identifies what a count is for: a SHA-256 of the address
// (addrKey) or of the address and the user name tried (userKey). A digest,
// so that an entry's size does not depend on what the client sent: a user
// name may be kilobytes long (a header holds 16 KiB), and 20,000 entries
// keyed by such names held about 234 MiB.
type throttleKey [sha256.Size]byte

func addrKey(addr string) throttleKey { return sha256.Sum256([]byte("a\x00" + addr)) }

// anonKey identifies the count of an address's failed credentials that
// name no user, kept apart from its passwords' (addrKey).
func anonKey(addr string) throttleKey { return sha256.Sum256([]byte("b\x00" + addr)) }

func userKey(addr, user string) throttleKey {
	return sha256.Sum256([]byte("u\x00" + addr + "\x00" + user))
}

// knownFor is how long a user name's sign-in from an IPv6 /64 spares its
// checks from there the limits of the networks around it.
const knownFor = 7 * 24 * time.Hour

// knownPerName bounds the /64s one user name is remembered to have signed
// in from (known), its least recent sign-in forgotten first: what one
// account's sign-ins can take of the table. Unbounded, one account signing
// in from throttleEntries /64s (a client holding a /48 has 65,536) pushed
// out every other name's, whose clients its failures across their network
// then locked out again.
const knownPerName = 16

// knownSignIn is when a user name last signed in from a /64, and the
// name's key (nameKey), under which knownOf lists it.
type knownSignIn struct {
	at   time.Time
	name throttleKey
}

func nameKey(user string) throttleKey { return sha256.Sum256([]byte("k\x00" + user)) }

// addressFactor multiplies the per-user limit into the per-address one.
const addressFactor = 10

// networks are the IPv6 networks a password check is counted for beyond
// its /64 (see above), each with its limit as a multiple of an address's.
var networks = []struct{ bits, factor int }{{56, 4}, {48, 16}}

// network is the count of one network an address is in: its key, its
// limit, and its prefix (for the error).
type network struct {
	key    throttleKey
	limit  int
	prefix string
}

// networksOf returns the counts of the networks of remoteAddr beyond its
// own address key that a check of the user name and address of uk counts
// toward: none for IPv4, and none for a user name that signed in from
// that /64 within knownFor. The caller holds t.mu.
func (t *Throttle) networksOf(now time.Time, remoteAddr string, uk throttleKey) []network {
	ip, ok := clientIP(remoteAddr)
	if !ok || !ip.Is6() {
		return nil
	}
	if k, ok := t.known.Peek(uk); ok && now.Sub(k.at) < knownFor {
		return nil
	}
	out := make([]network, len(networks))
	for i, n := range networks {
		p, _ := ip.Prefix(n.bits)
		out[i] = network{key: sha256.Sum256([]byte("n\x00" + p.String())), limit: n.factor * addressFactor * t.max, prefix: p.String()}
	}
	return out
}

// Throttle counts failed password checks. It is safe for concurrent use.
type Throttle struct {
	max    int
	window time.Duration
	now    func() time.Time

	mu sync.Mutex
	// entries counts the failures of keys below their limit.
	entries *lru.Cache[throttleKey, failures]
	// known holds, by userKey, when a user name last signed in from an
	// IPv6 /64: its checks from there skip the networks' limits. Bounded
	// like entries; a right password adds to it, so what falls out is
	// forgotten only by sign-ins that succeeded, and at most knownPerName
	// of one user name's (knownOf).
	known *lru.Cache[throttleKey, knownSignIn]
	// knownOf lists, by nameKey, the keys of known of each user name,
	// least recently signed in first (at most knownPerName).
	knownOf map[throttleKey][]throttleKey
	// blocks holds the keys past their limit, with when their window ends.
	blocks map[throttleKey]time.Time
	// pending counts the admitted checks whose outcome is not known yet,
	// by the same keys as entries. It is not in the LRU table, so that
	// nothing a client does can make it forget checks in flight; it holds
	// at most one key pair per request being checked.
	pending map[throttleKey]int
	// freed holds, for an address whose checks wait for a place
	// (BeginAddress), a channel closed when one of its checks settles.
	// A key is here only while it has pending checks, whose settling
	// removes it.
	freed map[throttleKey]chan struct{}
}

// failures are the failed checks counted in the window started at start.
type failures struct {
	start time.Time
	n     int
}

// NewThrottle returns a throttle allowing max failures of one user name
// from one address (and addressFactor times max from one address) per
// window; now is the clock.
func NewThrottle(max int, window time.Duration, now func() time.Time) *Throttle {
	entries, err := lru.New[throttleKey, failures](throttleEntries)
	if err != nil {
		panic(err) // only for a size <= 0
	}
	t := &Throttle{max: max, window: window, now: now, entries: entries, knownOf: map[throttleKey][]throttleKey{},
		blocks: map[throttleKey]time.Time{}, pending: map[throttleKey]int{}, freed: map[throttleKey]chan struct{}{}}
	// Called, under t.mu, for every entry that leaves known.
	t.known, err = lru.NewWithEvict(throttleEntries, func(k throttleKey, s knownSignIn) {
		keys := slices.DeleteFunc(t.knownOf[s.name], func(o throttleKey) bool { return o == k })
		if len(keys) == 0 {
			delete(t.knownOf, s.name)
		} else {
			t.knownOf[s.name] = keys
		}
	})
	if err != nil {
		panic(err)
	}
	return t
}

// Throttle returns the Authenticator's throttle, nil when it has none.
func (a *Authenticator) Throttle() *Throttle { return a.throttle }

// WithThrottle makes the Authenticator throttle failed password checks
// with t; nil throttles nothing.
func WithThrottle(t *Throttle) Option { return func(a *Authenticator) { a.throttle = t } }

// Check returns a TooMany error, with the time left in the window as its
// Retry, when attempts of user from remoteAddr (an http.Request's
// RemoteAddr) are throttled, and nil otherwise.
func (t *Throttle) Check(remoteAddr, user string) error {
	addr := addressKey(remoteAddr)
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if left := t.blocked(now, addrKey(addr)); left > 0 {
		return throttled(left, "too many failed sign-ins from this address")
	}
	uk := userKey(addr, user)
	if left := t.blocked(now, uk); left > 0 {
		return throttled(left, "too many failed sign-ins as user %s from this address", user)
	}
	for _, n := range t.networksOf(now, remoteAddr, uk) {
		if left := t.blocked(now, n.key); left > 0 {
			return throttled(left, "too many failed sign-ins from this address's network %s", n.prefix)
		}
	}
	return nil
}

// Attempt is a check admitted by Begin or BeginAddress. Exactly one of
// Fail and Release settles it.
type Attempt struct {
	t *Throttle
	// addrKey is the address's count: anonKey's for BeginAddress,
	// addrKey's for Begin.
	addrKey, userKey throttleKey
	// addressOnly marks an attempt of BeginAddress: it counts toward its
	// address alone, and userKey is unset.
	addressOnly bool
	// nets are the networks of Begin's address it counts toward too.
	nets []network
}

// Begin admits a check of user's password from remoteAddr: it returns
// Check's error when the address or the user name from it is throttled,
// and a TooMany error too when the failures and the pending checks (those
// admitted and not yet settled) of either reach its limit, so that the
// checks run at once cannot add up to more failures than the limit.
func (t *Throttle) Begin(remoteAddr, user string) (*Attempt, error) {
	addr := addressKey(remoteAddr)
	ak, uk := addrKey(addr), userKey(addr, user)
	t.mu.Lock()
	defer t.mu.Unlock()
	nets := t.networksOf(t.now(), remoteAddr, uk)
	if err := t.admissible(ak, uk, user, nets); err != nil {
		return nil, err
	}
	t.pending[ak]++
	t.pending[uk]++
	for _, n := range nets {
		t.pending[n.key]++
	}
	return &Attempt{t: t, addrKey: ak, userKey: uk, nets: nets}, nil
}

// Admissible returns the error Begin would return now for a check of
// user's password from remoteAddr, without admitting it: a password
// check asks it before it reads the user (a Postgres round trip), so
// that guesses sent while the admitted ones run their bcrypt are refused
// having read nothing. Asked only by Begin, after that read, each cost a
// round trip, however many were sent.
func (t *Throttle) Admissible(remoteAddr, user string) error {
	addr := addressKey(remoteAddr)
	t.mu.Lock()
	defer t.mu.Unlock()
	uk := userKey(addr, user)
	return t.admissible(addrKey(addr), uk, user, t.networksOf(t.now(), remoteAddr, uk))
}

// admissible is Admissible for the address's key ak, the user name's
// from it uk, and the address's networks nets. The caller holds t.mu.
func (t *Throttle) admissible(ak, uk throttleKey, user string, nets []network) error {
	now := t.now()
	if left := t.blocked(now, ak); left > 0 {
		return throttled(left, "too many failed sign-ins from this address")
	}
	if left := t.blocked(now, uk); left > 0 {
		return throttled(left, "too many failed sign-ins as user %s from this address", user)
	}
	for _, n := range nets {
		if left := t.blocked(now, n.key); left > 0 {
			return throttled(left, "too many failed sign-ins from this address's network %s", n.prefix)
		}
	}
	// The pending checks end within a bcrypt's time: a second is enough
	// to wait before trying again.
	if t.failed(now, ak)+t.pending[ak] >= addressFactor*t.max {
		return throttled(time.Second, "too many sign-ins from this address are being checked at once")
	}
	if t.failed(now, uk)+t.pending[uk] >= t.max {
		return throttled(time.Second, "too many sign-ins as user %s from this address are being checked at once", user)
	}
	for _, n := range nets {
		if t.failed(now, n.key)+t.pending[n.key] >= n.limit {
			return throttled(time.Second, "too many sign-ins from this address's network %s are being checked at once", n.prefix)
		}
	}
	return nil
}

// Fail settles the attempt as a failed check, counted toward the limits
// of its address and of its user name from that address.
func (at *Attempt) Fail() {
	t := at.t
	t.mu.Lock()
	defer t.mu.Unlock()
	t.settle(at)
	now := t.now()
	t.count(now, at.addrKey, addressFactor*t.max)
	if !at.addressOnly {
		t.count(now, at.userKey, t.max)
	}
	for _, n := range at.nets {
		t.count(now, n.key, n.limit)
	}
}

// Release settles the attempt without counting it: the password was
// right, or was not checked.
func (at *Attempt) Release() {
	at.t.mu.Lock()
	defer at.t.mu.Unlock()
	at.t.settle(at)
}

// settle removes the attempt from the pending checks. The caller holds
// t.mu.
func (t *Throttle) settle(at *Attempt) {
	keys := []throttleKey{at.addrKey, at.userKey}
	if at.addressOnly {
		keys = keys[:1]
	}
	for _, n := range at.nets {
		keys = append(keys, n.key)
	}
	for _, k := range keys {
		if t.pending[k] <= 1 {
			delete(t.pending, k)
		} else {
			t.pending[k]--
		}
	}
	if ch, ok := t.freed[at.addrKey]; ok {
		close(ch)
		delete(t.freed, at.addrKey)
	}
}

// failed returns the failures counted for key in its current window.
// The caller holds t.mu.
func (t *Throttle) failed(now time.Time, key throttleKey) int {
	f, ok := t.entries.Peek(key)
	if !ok || now.Sub(f.start) >= t.window {
		return 0
	}
	return f.n
}

// CheckAddress is Check for a credential that names no user (a bearer
// token, a stream ticket): only the address's own limit for such
// credentials applies, and its failures (the attempts of BeginAddress
// that fail) count toward it alone, so that one client failing with a
// stale token does not lock out the other clients of its address until
// they too fail that often, nor their passwords (anonKey).
func (t *Throttle) CheckAddress(remoteAddr string) error {
	addr := addressKey(remoteAddr)
	t.mu.Lock()
	defer t.mu.Unlock()
	if left := t.blocked(t.now(), anonKey(addr)); left > 0 {
		return throttled(left, "too many failed sign-ins from this address")
	}
	return nil
}

// addressWait is the longest a check of BeginAddress waits for a place.
const addressWait = time.Second

// BeginAddress is Begin for a credential that names no user (a bearer
// token, a JWT, a stream ticket), whose check costs a Postgres round trip
// rather than a bcrypt: it returns CheckAddress's error when the address
// is throttled, and admits the check only while the address's failures
// and pending checks are below its limit. Fail counts the attempt toward
// the address alone (see CheckAddress). Checked only for a block, guesses
// sent at once all went to Postgres before the first failed: 300 of them
// made 72 lookups where the limit was 30.
//
// A check that finds no place while the address is not blocked waits for
// one, while ctx lasts and for at most addressWait, instead of being
// refused at once: the places are taken by checks that end within a round
// trip, and a client sending more distinct valid credentials at once than
// the limit (a reverse proxy for many users, right after an access change
// dropped the remembered credentials) was answered 429 for the excess.
// Waiting costs no lookup: a check runs only in a place, and failures keep
// their places until the window ends, so guesses still cost at most the
// limit's lookups; once they reach it the address is blocked, and the
// waiting checks are answered 429 with the block's Retry-After. A check
// still without a place after the wait is answered 429 too.
func (t *Throttle) BeginAddress(ctx context.Context, remoteAddr string) (*Attempt, error) {
	ak := anonKey(addressKey(remoteAddr))
	var timeout <-chan time.Time
	for {
		t.mu.Lock()
		now := t.now()
		if left := t.blocked(now, ak); left > 0 {
			t.mu.Unlock()
			return nil, throttled(left, "too many failed sign-ins from this address")
		}
		if t.failed(now, ak)+t.pending[ak] < addressFactor*t.max {
			t.pending[ak]++
			t.mu.Unlock()
			return &Attempt{t: t, addrKey: ak, addressOnly: true}, nil
		}
		if timeout == nil {
			timer := time.NewTimer(addressWait)
			defer timer.Stop()
			timeout = timer.C
		}
		// Not blocked, so some of the places are pending checks, whose
		// settling closes freed.
		freed, ok := t.freed[ak]
		if !ok {
			freed = make(chan struct{})
			t.freed[ak] = freed
		}
		t.mu.Unlock()
		select {
		case <-freed:
		case <-timeout:
			// The pending checks end within a round trip: a second is
			// enough to wait before trying again.
			return nil, throttled(time.Second, "too many credentials from this address are being checked at once")
		case <-ctx.Done():
			return nil, throttled(time.Second, "too many credentials from this address are being checked at once")
		}
	}
}

// blocked returns how long key stays blocked, 0 when it is not. The
// caller holds t.mu.
func (t *Throttle) blocked(now time.Time, key throttleKey) time.Duration {
	end, ok := t.blocks[key]
	if !ok {
		return 0
	}
	left := end.Sub(now)
	if left <= 0 {
		delete(t.blocks, key)
		return 0
	}
	return left
}

func throttled(left time.Duration, format string, args ...any) error {
	e := sluice.Errorf(sluice.CodeTooMany, format, args...)
	e.Message += "; retry after the Retry-After seconds (config auth_max_failures, auth_failure_window)"
	e.Retry = left
	return e
}

// count adds a failure to key's window, starting a new one when it ended;
// at limit the key is blocked until the window ends. The caller holds
// t.mu.
func (t *Throttle) count(now time.Time, key throttleKey, limit int) {
	f, ok := t.entries.Get(key)
	if !ok || now.Sub(f.start) >= t.window {
		f = failures{start: now}
	}
	f.n++
	if f.n < limit {
		t.entries.Add(key, f)
		return
	}
	t.entries.Remove(key)
	if len(t.blocks) >= throttleEntries {
		t.makeRoom(now)
	}
	t.blocks[key] = f.start.Add(t.window)
}

// makeRoom removes the blocks that ended from the full blocks table, or,
// when none did, the one that ends soonest. The caller holds t.mu.
func (t *Throttle) makeRoom(now time.Time) {
	var soonest throttleKey
	var end time.Time
	for k, e := range t.blocks {
		if !e.After(now) {
			delete(t.blocks, k)
		} else if end.IsZero() || e.Before(end) {
			soonest, end = k, e
		}
	}
	if len(t.blocks) >= throttleEntries {
		delete(t.blocks, soonest)
	}
}

// Succeed forgets the failures of user from remoteAddr: someone who
// mistyped a few times and then signed in starts afresh. The address's
// own count stays.
func (t *Throttle) Succeed(remoteAddr, user string) {
	key := userKey(addressKey(remoteAddr), user)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.entries.Remove(key)
	if ip, ok := clientIP(remoteAddr); !ok || !ip.Is6() {
		return
	}
	nk := nameKey(user)
	if !t.known.Remove(key) && len(t.knownOf[nk]) >= knownPerName {
		t.known.Remove(t.knownOf[nk][0])
	}
	t.known.Add(key, knownSignIn{at: t.now(), name: nk})
	t.knownOf[nk] = append(t.knownOf[nk], key)
}

// AddressKey returns the key under which what one client address holds
// is counted, the throttle's own (see addressKey): other budgets per
// address use it so that an IPv6 client's /64 is one address to all of
// them.
func AddressKey(remoteAddr string) string { return addressKey(remoteAddr) }

// addressKey returns the key of a client address: the IP without its
// port, an IPv6 address as its /64 prefix.
func addressKey(remoteAddr string) string {
	ip, ok := clientIP(remoteAddr)
	if !ok {
		host, _, err := net.SplitHostPort(remoteAddr)
		if err != nil {
			return remoteAddr
		}
		return host
	}
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// clientIP returns the IP of remoteAddr (with or without a port), an
// IPv4-mapped IPv6 address as IPv4; false when it is none.
func clientIP(remoteAddr string) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return ip.Unmap(), true
}
