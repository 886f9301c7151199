package postgres

import (
	"container/list"
	"sync"
)

// keyUses holds, per user, what this process knows of how many
// Idempotency-Keys the user keeps, so that idempotency_max_keys holds
// without counting the user's keys on every claim (counting reads up to
// MaxKeys of them). A user's keys are counted at their first new key in
// the process, then once every keySpan(MaxKeys) new keys; between counts,
// a user the last count found at the bound is refused every new key, and
// one under it is let through. So one process lets a user past the bound
// by at most keySpan-1 keys (the keys let through after a count that
// found them one under it), plus the keys of their writes still running
// when it counted, which a count does not see; N replicas, by N times as
// many. A user back under the bound (their keys expired) may be refused
// up to keySpan-1 new keys more, until the next count.
//
// A user whose count found fewer than keySample keys is forgotten: the
// next count, at their next new key, reads fewer than keySample keys. So
// the map holds only users with keySample keys or more, and of those at
// most maxKeyUsers, the ones whose keys were counted or claimed last: a
// user dropped is counted again at their next new key, as a user not
// seen yet is, so the bound holds all the same. (Users who once reached
// keySample keys stayed for the life of the process, deleted ones
// included.)
type keyUses struct {
	mu     sync.Mutex
	byUser map[int64]*list.Element // of *keyUse, in recent
	// recent orders the users of byUser, the one counted or claimed
	// last first.
	recent list.List
}

// maxKeyUsers bounds the users keyUses holds: about a hundred bytes each.
const maxKeyUsers = 10000

// keyUse is what a process knows of one user's keys.
type keyUse struct {
	user int64
	// since counts the user's new keys claimed since the last count,
	// refused or let through.
	since int
	// full is set when the last count found the user at the bound.
	full bool
}

// keySpan is how many new keys a count of a user's keys answers for:
// MaxKeys/keySample, so that a claim reads keySample keys on average.
func keySpan(maxKeys int) int { return max(maxKeys/keySample, 1) }

// due reports whether user's next new key must count their keys.
func (u *keyUses) due(user int64, maxKeys int) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	e := u.byUser[user]
	return e == nil || e.Value.(*keyUse).since >= keySpan(maxKeys)
}

// counted records a count of user's keys that found kept of them (at
// most maxKeys).
func (u *keyUses) counted(user int64, kept, maxKeys int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	e := u.byUser[user]
	if kept < keySample && kept < maxKeys {
		if e != nil {
			u.recent.Remove(e)
			delete(u.byUser, user)
		}
		return
	}
	use := &keyUse{user: user, full: kept >= maxKeys}
	if e != nil {
		e.Value = use
		u.recent.MoveToFront(e)
		return
	}
	if u.byUser == nil {
		u.byUser = map[int64]*list.Element{}
	}
	u.byUser[user] = u.recent.PushFront(use)
	if u.recent.Len() > maxKeyUsers {
		last := u.recent.Back()
		u.recent.Remove(last)
		delete(u.byUser, last.Value.(*keyUse).user)
	}
}

// claimed records a new key of user's, and reports whether it is refused
// (the last count found the user at the bound). It is called for every
// new key, after counted when its claim counted.
func (u *keyUses) claimed(user int64) (refused bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	e := u.byUser[user]
	if e == nil {
		return false // forgotten: under keySample keys at the last count
	}
	u.recent.MoveToFront(e)
	use := e.Value.(*keyUse)
	use.since++
	return use.full
}
