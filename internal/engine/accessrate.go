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
// them a second on a process, after a burst of accessChangesBurst; past
// that, 429 with Retry-After. Per process, like the other per-user
// budgets: a user spread over n replicas makes n times as many.
const (
	accessChangesPerSecond = 10
	accessChangesBurst     = 100
	// accessRateUsers bounds the users whose rates are kept; the least
	// recently active go (and start again with a full burst).
	accessRateUsers = 10000
)

// accessRate keeps each user's rate of access changes.
type accessRate struct {
	users *lru.Cache[int64, *rate.Limiter]
}

func newAccessRate() *accessRate {
	users, err := lru.New[int64, *rate.Limiter](accessRateUsers)
	if err != nil {
		panic(err) // only for a size <= 0
	}
	return &accessRate{users: users}
}

// allowAccessChange returns a CodeTooMany error when user u may not make
// an access change now (see accessRate); the super user always may.
func (e *Engine) allowAccessChange(u *sluice.User) error {
	if u == nil || u.Superuser {
		return nil
	}
	l, ok := e.accessRate.users.Get(u.ID)
	if !ok {
		l = rate.NewLimiter(accessChangesPerSecond, accessChangesBurst)
		if prev, found, _ := e.accessRate.users.PeekOrAdd(u.ID, l); found {
			l = prev
		}
	}
	if !l.Allow() {
		return sluice.Errorf(sluice.CodeTooMany, "%s made more than %d changes of access (tokens revoked, passwords, roles, databases made or deleted) in a burst, past %d a second: each makes every replica read its clients' credentials again; retry shortly", u.Name, accessChangesBurst, accessChangesPerSecond)
	}
	return nil
}
