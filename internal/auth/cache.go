package auth

import (
	"context"
	"crypto/sha256"
	"math"
	"sync"
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
// time their change feed takes to read it.
//
// An access change that does not concern a remembered credential does not
// make its client read it again: the first request that finds its entry
// older than the changes seen reads those changes (catchUp: one read for
// every entry) and vouches for the entries none of them concerns, which
// then count as read at the newest version (see concerns). A request that
// finds a catch-up under way reads its own credential instead of waiting
// for it: a catch-up stuck on its read held up every client whose entry
// was older, past their own contexts. Every client reading its credential again after
// each change (another user revoking tokens in a loop) cost Postgres a
// read per client and change. (Open streams hold a stricter
// guarantee: see internal/changefeed's access guard.) Entries also expire
// after credentialTTL, a backstop, and with the credential (a JWT's exp).
// Stream tickets are single use and never remembered.

// credentialEntries bounds the cache; past it the least recently used
// entry goes (its client pays one more read).
const credentialEntries = 10000

// credentialTTL is the longest an entry counts.
const credentialTTL = 10 * time.Second

type cachedCredential struct {
	// c is the credential as of the newest access version it is known to
	// hold at (its AccessVersion): as read, or a copy made by catchUp
	// once the changes since concern it not.
	c  atomic.Pointer[sluice.Credential]
	at time.Time
	// keys is the JWT key set's generation when c was verified: a
	// credential remembered before the set changed counts no more.
	keys uint64
}

// maxCatchUp is the most access changes a catch-up reads: past it, every
// remembered credential is forgotten instead, so that what a catch-up
// holds is bounded whatever the churn.
const maxCatchUp = 1000

type credentialCache struct {
	entries *lru.Cache[[sha256.Size]byte, *cachedCredential]
	// applied returns the access version the change feed has applied.
	applied func() int64
	// floor is raised by Invalidate: entries read at an older version no
	// longer count.
	floor atomic.Int64
	now   func() time.Time
	// walk is held by the catch-up under way (never waited for: see
	// catchUp); walked is the version the last one reached (entries
	// older than it cannot be vouched for any more).
	walk   sync.Mutex
	walked atomic.Int64
	// forgets counts Forget's calls: a lookup begun before one is not
	// remembered.
	forgets atomic.Uint64
}

// WithCache makes the Authenticator remember credentials that checked
// out, for as long as applied (the newest access version the change feed has
// seen: changefeed.Hub.AccessSeen) has not moved past the version
// they were read at. Without it every request reads its credential.
func WithCache(applied func() int64) Option {
	return func(a *Authenticator) {
		entries, err := lru.New[[sha256.Size]byte, *cachedCredential](credentialEntries)
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
// change is not known), and keeps the lookups under way from remembering
// what they read before it: without the change's version, the floor
// cannot refuse them, and one begun before a revocation would be accepted
// on this replica until its change feed read the change.
func (a *Authenticator) Forget() {
	if a.cache != nil {
		a.cache.forgets.Add(1)
		a.cache.entries.Purge()
	}
}

// lookupStart is what a lookup of a credential notes before it reads it,
// for remember: the JWT key set's generation and the count of Forget
// calls.
type lookupStart struct{ keys, forgets uint64 }

func (a *Authenticator) lookupStart() lookupStart {
	s := lookupStart{keys: a.jwt.generation()}
	if a.cache != nil {
		s.forgets = a.cache.forgets.Load()
	}
	return s
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

// cached returns the remembered credential of header, if it still counts:
// read at the newest access version seen, or vouched for up to it by the
// access changes since (catchUp).
func (a *Authenticator) cached(ctx context.Context, header string) (*sluice.Credential, bool) {
	k := a.cache
	if k == nil {
		return nil, false
	}
	key := a.cacheKey(header)
	e, ok := k.entries.Get(key)
	if !ok {
		return nil, false
	}
	now := k.now()
	c := e.c.Load()
	if now.Sub(e.at) > credentialTTL || e.keys != a.jwt.generation() || !c.ExpiresAt.IsZero() && !now.Before(c.ExpiresAt) {
		return nil, false
	}
	seen := a.accessSeen()
	if c.AccessVersion >= seen {
		return c, true
	}
	if c.AccessVersion < k.walked.Load() || !a.catchUp(ctx) {
		return nil, false // older than what a catch-up can vouch for
	}
	// The catch-up removed the entry, or vouched for it.
	if e2, ok := k.entries.Peek(key); !ok || e2 != e {
		return nil, false
	}
	if c = e.c.Load(); c.AccessVersion < seen {
		return nil, false
	}
	return c, true
}

// catchUp reads the access changes after the last catch-up up to the
// newest version seen, forgets the remembered credentials they concern
// and vouches for the others (see cachedCredential.c). It reports whether
// it reached that version; a read that failed, or changes pruned or more
// than maxCatchUp, forget every credential instead. While another
// catch-up runs it reports false at once, and its caller reads its
// credential as without the cache: waiting, every request whose entry was
// older waited for that catch-up's read, however long it took (a lock on
// the access log, a dead connection) and whether or not its own client
// was still there, where reading its credential it was answered.
func (a *Authenticator) catchUp(ctx context.Context) bool {
	k := a.cache
	if !k.walk.TryLock() {
		return false
	}
	defer k.walk.Unlock()
	from, to := k.walked.Load(), a.accessSeen()
	if from >= to {
		return true
	}
	var changes []sluice.AccessChange
	var err error
	if to-from <= maxCatchUp {
		changes, err = a.store.AccessChanges(ctx, from, to)
	}
	if err != nil && ctx.Err() != nil {
		return false // this request ended: the next one reads them
	}
	if err != nil || int64(len(changes)) != to-from {
		k.entries.Purge()
		k.walked.Store(to)
		return false
	}
	now := k.now()
	for _, key := range k.entries.Keys() {
		e, ok := k.entries.Peek(key)
		if !ok {
			continue
		}
		c := e.c.Load()
		if c.AccessVersion < from || c.AccessVersion >= to {
			continue // remembered before the last catch-up, or since this one's range
		}
		// An entry that counts no more for other reasons is dropped, not
		// copied.
		if concerns(changes, c) || now.Sub(e.at) > credentialTTL || e.keys != a.jwt.generation() {
			k.entries.Remove(key)
			continue
		}
		n := *c
		n.AccessVersion = to
		e.c.CompareAndSwap(c, &n)
	}
	k.walked.Store(to)
	return true
}

// concerns reports whether an access change of changes made after c was
// read may change what c grants: its token revoked, anything of its user
// (its password, its deletion, a role: a credential as of a version
// carries the roles as of that version too, see the engine's role cache),
// and any deletion of a database or an organization or a kind this binary
// does not know, which are rare and judged for every credential alike.
func concerns(changes []sluice.AccessChange, c *sluice.Credential) bool {
	for _, ch := range changes {
		if ch.Version <= c.AccessVersion {
			continue
		}
		switch ch.Kind {
		case sluice.AccessToken:
			if c.TokenID != 0 && c.TokenID == ch.TokenID {
				return true
			}
		case sluice.AccessPassword, sluice.AccessUser, sluice.AccessRole:
			if c.User == nil || c.User.ID == ch.UserID {
				return true
			}
		default:
			return true
		}
	}
	return false
}

// remember keeps credential c of header, read by a lookup begun at
// start (verified with the JWT key set of its generation), unless
// Forget was called since.
func (a *Authenticator) remember(header string, c *sluice.Credential, start lookupStart) {
	if k := a.cache; k != nil && k.forgets.Load() == start.forgets {
		e := &cachedCredential{at: k.now(), keys: start.keys}
		e.c.Store(c)
		k.entries.Add(a.cacheKey(header), e)
	}
}
