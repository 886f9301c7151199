package auth

import (
	"net"
	"net/netip"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/sluice-dev/sluice"
)

// Password guessing is throttled: every failed password check is counted
// for the client's address with the user name it tried, and for the
// address alone. Past max failures of one user name from one address
// within the window, or ten times that from one address whatever the
// names, that address's attempts are answered 429 with Retry-After until
// the window that counted them ends, before any password is checked (so a
// throttled guess costs no bcrypt), the right password included (else the
// throttle would only slow the guessing down). Other addresses are never
// affected: an attacker cannot lock a user out, only themselves.
//
// IPv6 addresses are counted by their /64 prefix, the block one host or
// customer usually holds, so that hopping between its addresses does not
// reset the count. The counts live in a bounded LRU table (throttleEntries);
// what falls out of it is forgotten.

// throttleEntries bounds the throttle's memory: one entry per address and
// per address and user name that failed within the window.
const throttleEntries = 20000

// addressFactor multiplies the per-user limit into the per-address one.
const addressFactor = 10

// Throttle counts failed password checks. It is safe for concurrent use.
type Throttle struct {
	max    int
	window time.Duration
	now    func() time.Time

	mu      sync.Mutex
	entries *lru.Cache[string, failures]
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
	entries, err := lru.New[string, failures](throttleEntries)
	if err != nil {
		panic(err) // only for a size <= 0
	}
	return &Throttle{max: max, window: window, now: now, entries: entries}
}

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
	if left := t.blocked(now, "a\x00"+addr, addressFactor*t.max); left > 0 {
		return throttled(left, "too many failed sign-ins from this address")
	}
	if left := t.blocked(now, "u\x00"+addr+"\x00"+user, t.max); left > 0 {
		return throttled(left, "too many failed sign-ins as user %s from this address", user)
	}
	return nil
}

// CheckAddress is Check for a credential that names no user (a bearer
// token, a stream ticket): only the address's own limit applies, and its
// failures (FailAddress) count toward it alone, so that one client
// failing with a stale token does not lock out the other clients of its
// address until they too fail that often.
func (t *Throttle) CheckAddress(remoteAddr string) error {
	addr := addressKey(remoteAddr)
	t.mu.Lock()
	defer t.mu.Unlock()
	if left := t.blocked(t.now(), "a\x00"+addr, addressFactor*t.max); left > 0 {
		return throttled(left, "too many failed sign-ins from this address")
	}
	return nil
}

// FailAddress counts a failed check of a credential that names no user
// from remoteAddr.
func (t *Throttle) FailAddress(remoteAddr string) {
	addr := addressKey(remoteAddr)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.count(t.now(), "a\x00"+addr)
}

// blocked returns how long key stays blocked at limit, 0 when it is not.
// The caller holds t.mu.
func (t *Throttle) blocked(now time.Time, key string, limit int) time.Duration {
	f, ok := t.entries.Peek(key)
	if !ok || f.n < limit {
		return 0
	}
	left := f.start.Add(t.window).Sub(now)
	if left <= 0 {
		t.entries.Remove(key)
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

// Fail counts a failed check of user's password from remoteAddr.
func (t *Throttle) Fail(remoteAddr, user string) {
	addr := addressKey(remoteAddr)
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.count(now, "a\x00"+addr)
	t.count(now, "u\x00"+addr+"\x00"+user)
}

// count adds a failure to key's window, starting a new one when it ended.
// The caller holds t.mu.
func (t *Throttle) count(now time.Time, key string) {
	f, ok := t.entries.Get(key)
	if !ok || now.Sub(f.start) >= t.window {
		f = failures{start: now}
	}
	f.n++
	t.entries.Add(key, f)
}

// Succeed forgets the failures of user from remoteAddr: someone who
// mistyped a few times and then signed in starts afresh. The address's
// own count stays.
func (t *Throttle) Succeed(remoteAddr, user string) {
	key := "u\x00" + addressKey(remoteAddr) + "\x00" + user
	t.mu.Lock()
	defer t.mu.Unlock()
	t.entries.Remove(key)
}

// addressKey returns the key of a client address: the IP without its
// port, an IPv6 address as its /64 prefix.
func addressKey(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}
