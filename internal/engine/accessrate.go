package engine

import (
	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/time/rate"

	"github.com/sluice-dev/sluice"
)

// Every access change (a token revoked, a password or role changed, a
// database made or deleted) makes every replica forget the credentials it
// remembered (internal/auth's cache counts an entry only while no access
// change has been seen since it was read), so every request after it
// reads its credential from Postgres again: a third of the throughput of
// concurrent writes. One user making and revoking tokens in a loop did
// that about 300 times a second, for every user of every replica. So a
// user (the super user aside) makes at most accessChangesPerSecond of
// them a second on a process (access_changes_per_user, LimitAccessChanges),
// after a burst of ten times as many; past that, 429 with Retry-After.
// Per process, like the other per-user budgets: a user spread over n
// replicas makes n times as many.

// accessRateUsers bounds the users whose rates are kept; the least
// recently active go (and start again with a full burst).
const accessRateUsers = 10000

// accessRate keeps each user's rate of access changes.
type accessRate struct {
	perSecond int
	users     *lru.Cache[int64, *rate.Limiter]
}

// LimitAccessChanges sets how many access changes a user makes a second
// (after a burst of ten times as many; 0: no bound); call it before the
// Engine is used. New sets 10.
func (e *Engine) LimitAccessChanges(perSecond int) {
	if perSecond <= 0 {
		e.accessRate = nil
		return
	}
	users, err := lru.New[int64, *rate.Limiter](accessRateUsers)
	if err != nil {
		panic(err) // only for a size <= 0
	}
	e.accessRate = &accessRate{perSecond: perSecond, users: users}
}

// allowAccessChange returns a CodeTooMany error when user u may not make
// an access change now (see accessRate); the super user always may.
func (e *Engine) allowAccessChange(u *sluice.User) error {
	ar := e.accessRate
	if ar == nil || u == nil || u.Superuser {
		return nil
	}
	l, ok := ar.users.Get(u.ID)
	if !ok {
		l = rate.NewLimiter(rate.Limit(ar.perSecond), 10*ar.perSecond)
		if prev, found, _ := ar.users.PeekOrAdd(u.ID, l); found {
			l = prev
		}
	}
	if !l.Allow() {
		return sluice.Errorf(sluice.CodeTooMany, "%s made more than %d changes of access (tokens revoked, passwords, roles, databases made or deleted) in a burst, past %d a second (access_changes_per_user): each makes every replica read its clients' credentials again; retry shortly", u.Name, 10*ar.perSecond, ar.perSecond)
	}
	return nil
}
