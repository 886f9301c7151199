package postgres

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluice-dev/sluice"
)

// A request that holds a connection for as long as its client takes (a
// listing streamed to a slow reader, a large write whose body trickles
// in) could, with a few such requests, hold every connection of the pool
// and stall every other user, and Sluice's own work with them. So the
// connections that a read snapshot or a transaction holds are counted by
// user (Owner: whose request it is): one user holds at most a quarter of
// the pool at once, and all users together at most seven eighths, which
// leaves the rest to what is not counted (short statements outside a
// snapshot such as authentication, group commits, one transaction for
// many users' writes, and Sluice's own work: the change feed, webhooks;
// but a stream's catch-up reads the log for its user, counted: CountFor).
// A request past either waits for a connection to be given back, at
// most shareWait, then fails as unavailable. (The slow clients of a few
// users can still hold most of the pool; reading a large write's body
// before its transaction, and not holding a listing's connection while
// its client reads, would end that.)

// Owner returns the user a request's connections count for, and false
// for one not counted (no user, the super user).
type Owner func(ctx context.Context) (userID int64, counted bool)

// Owners counts the connections held by each user's requests (see Owner);
// the daemon passes how to tell whose a request is.
func Owners(owner Owner) Option {
	return func(o *options) { o.owner = owner }
}

// shareWait bounds how long a request waits for one of its user's
// connections to be given back.
const shareWait = 10 * time.Second

// userShares counts the connections each user holds.
type userShares struct {
	max   int // per user; 0: not counted
	total int // all users together
	owner Owner

	mu      sync.Mutex
	held    map[int64]int
	all     int           // held by all users
	waiting chan struct{} // closed when one is given back
}

// noShareKey marks a context whose connections are not counted (group
// commit: its transaction serves many users).
type noShareKey struct{}

// shared returns ctx whose connections are not counted for its user.
func shared(ctx context.Context) context.Context { return context.WithValue(ctx, noShareKey{}, true) }

// countForKey carries the user a context's reads of the log count for
// (CountFor).
type countForKey struct{}

// CountFor returns ctx whose reads of the log (ReadLog) take their
// connection counted for user id, as a read snapshot of that user's
// requests does, whatever request ctx belongs to: a stream's catch-up
// reads the log on a goroutine of the change feed's, holding no other
// connection, for as long as its user's stream needs. Other reads of the
// log (the change feed's own, webhooks', a request's inside its snapshot)
// are not counted.
func CountFor(ctx context.Context, id int64) context.Context {
	return context.WithValue(ctx, countForKey{}, id)
}

// countedFor returns the user CountFor set on ctx, if any.
func countedFor(ctx context.Context) (int64, bool) {
	id, ok := ctx.Value(countForKey{}).(int64)
	return id, ok
}

// UserShare returns how many connections one user's requests hold at
// most at once: a quarter of the pool.
func (db *DB) UserShare() int { return db.shares.max }

// take counts a connection for ctx's user, waiting while the user holds
// its share; it returns the function that gives it back.
func (u *userShares) take(ctx context.Context) (func(), error) {
	if u.max <= 0 || ctx.Value(noShareKey{}) != nil {
		return func() {}, nil
	}
	id, counted := countedFor(ctx)
	if !counted && u.owner != nil {
		id, counted = u.owner(ctx)
	}
	if !counted {
		return func() {}, nil
	}
	timer := time.NewTimer(shareWait)
	defer timer.Stop()
	for {
		u.mu.Lock()
		if u.held[id] < u.max && u.all < u.total {
			u.held[id]++
			u.all++
			u.mu.Unlock()
			var once sync.Once
			return func() { once.Do(func() { u.give(id) }) }, nil
		}
		if u.waiting == nil {
			u.waiting = make(chan struct{})
		}
		ch := u.waiting
		u.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, mapError(ctx.Err())
		case <-timer.C:
			return nil, &sluice.Error{Code: sluice.CodeUnavailable, Retry: time.Second,
				Message: "this user's requests, or all users' together, hold their share of the server's database connections, and none was given back in time; retry shortly"}
		}
	}
}

// give gives back a connection of user id, and wakes the requests
// waiting (each tries again).
func (u *userShares) give(id int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.held[id]--; u.held[id] <= 0 {
		delete(u.held, id)
	}
	u.all--
	if u.waiting != nil {
		close(u.waiting)
		u.waiting = nil
	}
}

// acquire takes a connection from the pool for a snapshot or a
// transaction of ctx's request, counted for its user; release gives back
// the count (the caller releases the connection itself).
func (db *DB) acquire(ctx context.Context) (conn *pgxpool.Conn, release func(), err error) {
	release, err = db.shares.take(ctx)
	if err != nil {
		return nil, nil, err
	}
	conn, err = db.pool.Acquire(ctx)
	if err != nil {
		release()
		return nil, nil, mapError(err)
	}
	return conn, release, nil
}

// sharedRows are rows read on a connection of acquire: when they end
// (Close, or Next finding no more), the connection and its count go back.
type sharedRows struct {
	pgx.Rows
	conn    *pgxpool.Conn
	release func()
	once    sync.Once
}

func (r *sharedRows) done() {
	r.once.Do(func() {
		r.Rows.Close()
		r.conn.Release()
		r.release()
	})
}

func (r *sharedRows) Close() { r.done() }

func (r *sharedRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.done()
	return false
}
