package auth

import (
	"crypto/sha256"
	"math"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/sluice-dev/sluice"
)

// Credentials that checked out are remembered, so that a request with one
// pays no round trip to Postgres (one indexed read per request cost
// concurrent writers a large part of their throughput: docs/benchmarks.md,
// "Writes"). An entry counts only
// while no access change has been seen since it was read:
//
//   - every change to credentials or access bumps the access log's
//     version, and an entry is kept with the version it was read at;
//   - the change feed applies every access change to the open streams as
//     soon as it reads it (a notification: milliseconds; at most its 500 ms
//     poll) and the cache then refuses entries read before (WithCache);
//   - the process that made a change raises the floor at once, before the
//     change's request answers (Invalidate).
//
// So a revoked token, a changed password or a deleted user is refused at
// once by the replica that made the change, and by the others within the
// time their change feed takes to read it. (Open streams hold a stricter
// guarantee: see internal/changefeed's access guard.) Entries also expire
// after credentialTTL, a backstop, and with the credential (a JWT's exp).
// Stream tickets are single use and never remembered.

// credentialEntries bounds the cache; past it the least recently used
// entry goes (its client pays one more read).
const credentialEntries = 10000

// credentialTTL is the longest an entry counts.
const credentialTTL = 10 * time.Second

type cachedCredential struct {
	c  *sluice.Credential
	at time.Time
	// keys is the JWT key set's generation when c was verified: a
	// credential remembered before the set changed counts no more.
	keys uint64
}

type credentialCache struct {
	entries *lru.Cache[[sha256.Size]byte, cachedCredential]
	// applied returns the access version the change feed has applied.
	applied func() int64
	// floor is raised by Invalidate: entries read at an older version no
	// longer count.
	floor atomic.Int64
	now   func() time.Time
}

// WithCache makes the Authenticator remember credentials that checked
// out, for as long as applied (the newest access version the change feed has
// seen: changefeed.Hub.AccessSeen) has not moved past the version
// they were read at. Without it every request reads its credential.
func WithCache(applied func() int64) Option {
	return func(a *Authenticator) {
		entries, err := lru.New[[sha256.Size]byte, cachedCredential](credentialEntries)
		if err != nil {
			panic(err) // only for a size <= 0
		}
		a.cache = &credentialCache{entries: entries, applied: applied, now: time.Now}
	}
}

// Invalidate makes every remembered credential read before access log
// version v count no more: call it once an access change of this process
// committed (v is then the version it made, or a later one).
func (a *Authenticator) Invalidate(v int64) {
	if a.cache == nil {
		return
	}
	for {
		cur := a.cache.floor.Load()
		if v <= cur || a.cache.floor.CompareAndSwap(cur, v) {
			return
		}
	}
}

// Forget drops every remembered credential (when the version of an access
// change is not known).
func (a *Authenticator) Forget() {
	if a.cache != nil {
		a.cache.entries.Purge()
	}
}

// cacheKey returns the key of an Authorization header: an HMAC with the
// process's key, so that the keys are worthless outside it.
func (a *Authenticator) cacheKey(header string) [sha256.Size]byte {
	return a.mac("authorization\x00", header)
}

// accessSeen returns the newest access version whose changes this process
// has seen (the change feed's, or its own: Invalidate): a credential read
// at an older one may have been revoked since. Without a cache, the lowest
// version.
func (a *Authenticator) accessSeen() int64 {
	k := a.cache
	if k == nil {
		return math.MinInt64
	}
	return max(k.floor.Load(), k.applied())
}

// cached returns the remembered credential of header, if it still counts.
func (a *Authenticator) cached(header string) (*sluice.Credential, bool) {
	k := a.cache
	if k == nil {
		return nil, false
	}
	e, ok := k.entries.Get(a.cacheKey(header))
	if !ok {
		return nil, false
	}
	now := k.now()
	v := e.c.AccessVersion
	if v < k.floor.Load() || v < k.applied() || now.Sub(e.at) > credentialTTL || e.keys != a.jwt.generation() ||
		!e.c.ExpiresAt.IsZero() && !now.Before(e.c.ExpiresAt) {
		return nil, false
	}
	return e.c, true
}

// remember keeps credential c of header, verified with the JWT key set
// of generation keys.
func (a *Authenticator) remember(header string, c *sluice.Credential, keys uint64) {
	if k := a.cache; k != nil {
		k.entries.Add(a.cacheKey(header), cachedCredential{c: c, at: k.now(), keys: keys})
	}
}
