// Package inflight bounds the requests one user, and every user
// together, have in flight on a process at once.
//
// A request holds its handler's goroutine and buffers (about 18 KB) until
// its answer is sent, and the client decides when that is: over HTTP/2
// by granting no flow-control window, over HTTP/1 by not reading. Such an
// answer waits write_timeout; HTTP/2 carries 250 of them a connection,
// and a user's busy connections are never closed to make room, so one
// user's stalled requests were bounded only by the connections it opened.
// Users together are bounded too: every signed-in user (and a sign-up,
// or a JWT issuer, makes as many as it wants) held its own bound, so
// the process's requests in flight were bounded only by its
// connections, 250 each.
// A refusal is an answer too, which a client can leave unsent as well:
// the refusals in flight of a user, and of every user together, are
// bounded in turn, and past them a request is aborted (its HTTP/2
// stream reset, its HTTP/1 connection closed), which holds nothing once
// its handler returns.
//
// A stream is not counted here once it is one (Handover): streams have
// their own caps (max_streams_per_user, max_streams).
package inflight

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sluice-dev/sluice"
)

// ErrAbort is Begin's error for a request to abort unanswered: its user,
// or the process, has its bound of requests and of refusals in flight.
var ErrAbort = errors.New("inflight: too many refusals in flight")

// Limiter counts the requests in flight of each user, and of all.
type Limiter struct {
	b Bounds

	mu    sync.Mutex
	users map[int64]*counts
	// stats counts every user's requests (Stats).
	stats Stats
}

// Stats are the requests a Limiter counts in flight now, of every user,
// and those it aborted since it was made.
type Stats struct {
	Admitted, Refused int
	Aborted           uint64
}

// Stats returns what l counts.
func (l *Limiter) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats
}

// counts are one user's requests in flight: admitted and refused ones.
type counts struct{ admitted, refused int }

// Bounds are what a Limiter admits in flight: PerUser requests of each
// user and Total of every user together (0: no bound), and past them
// Refusals refusals of each user and TotalRefusals of every user
// together (0: no bound).
type Bounds struct {
	PerUser, Refusals    int
	Total, TotalRefusals int
}

// New returns a Limiter of bounds b.
func New(b Bounds) *Limiter {
	return &Limiter{b: b, users: map[int64]*counts{}}
}

// Request is a request counted in flight, admitted or refused. Its End
// is safe to call more than once, and on nil.
type Request struct {
	l       *Limiter
	user    int64
	refused bool
	once    sync.Once
}

// Begin counts a request of u in flight and returns it, with nil when it
// is admitted. Past its user's bound it is counted as a refusal and
// returned with a TooMany error to answer, past the process's with an
// Unavailable one; past the refusals too (its user's or the process's),
// Begin returns nil and ErrAbort. Call End on the Request once its
// answer is sent.
//
// The super user is not counted (nil, nil): the operator's account must
// reach the server while others are at their bounds, and can make any
// user it wants to anyway.
func (l *Limiter) Begin(u *sluice.User) (*Request, error) {
	if l == nil || l.b.PerUser <= 0 && l.b.Total <= 0 || u == nil || u.Superuser {
		return nil, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.users[u.ID]
	if c == nil {
		c = &counts{}
		l.users[u.ID] = c
	}
	userFull := l.b.PerUser > 0 && c.admitted >= l.b.PerUser
	full := l.b.Total > 0 && l.stats.Admitted >= l.b.Total
	if !userFull && !full {
		c.admitted++
		l.stats.Admitted++
		return &Request{l: l, user: u.ID}, nil
	}
	if c.refused >= l.b.Refusals || l.b.TotalRefusals > 0 && l.stats.Refused >= l.b.TotalRefusals {
		if c.admitted == 0 && c.refused == 0 {
			delete(l.users, u.ID)
		}
		l.stats.Aborted++
		return nil, ErrAbort
	}
	c.refused++
	l.stats.Refused++
	var err *sluice.Error
	if userFull {
		err = sluice.Errorf(sluice.CodeTooMany, "user %s has its maximum of %d requests in flight on this server (config max_requests_per_user); wait for answers, and read them, before sending more", u.Name, l.b.PerUser)
	} else {
		err = sluice.Errorf(sluice.CodeUnavailable, "this server has its maximum of %d requests in flight (config max_requests_in_flight); retry later or on another replica", l.b.Total)
	}
	err.Retry = time.Second
	return &Request{l: l, user: u.ID, refused: true}, err
}

// End counts r out; only its first call does.
func (r *Request) End() {
	if r == nil {
		return
	}
	r.once.Do(func() {
		l := r.l
		l.mu.Lock()
		defer l.mu.Unlock()
		c := l.users[r.user]
		if r.refused {
			c.refused--
			l.stats.Refused--
		} else {
			c.admitted--
			l.stats.Admitted--
		}
		if c.admitted == 0 && c.refused == 0 {
			delete(l.users, r.user)
		}
	})
}

type requestKey struct{}

// With returns ctx carrying r, for Handover.
func With(ctx context.Context, r *Request) context.Context {
	if r == nil {
		return ctx
	}
	return context.WithValue(ctx, requestKey{}, r)
}

// Handover counts out the request of ctx (With), if any, once it became
// a stream counted among its user's streams (max_streams_per_user): a
// stream lives for hours, and is counted there, not twice.
func Handover(ctx context.Context) {
	if r, ok := ctx.Value(requestKey{}).(*Request); ok {
		r.End()
	}
}
