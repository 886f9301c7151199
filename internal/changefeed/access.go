package changefeed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/metrics"
)

// Access decisions hold for a stream's whole life, on every replica, by
// construction rather than by timing:
//
//   - Every change to credentials or access is a row of the access log,
//     numbered by a gapless version that follows commit order (see
//     sluice.AccessChange). The change's request answers after it commits.
//   - Every stream registers a guard (Hub.Guard) holding its grant (who,
//     with which credential, on which database, with which role) before
//     anything is delivered to it.
//   - Every commit the hub hands on carries the access version read in the
//     same snapshot (sluice.Commit.AccessVersion). Before any commit
//     reaches a stream, the tailer or the catch-up that read it applies
//     every access change up to that version (guards.sync): each guard a
//     change affects ends its stream with an explicit error.
//
// A commit that starts after an access change answered is read in a
// snapshot that shows the change, so the change is applied, and the
// affected streams ended, before that commit can reach them. The tailer
// also reads the version on every poll and wake-up (Tailer.Run), so a
// stream ends within a poll interval even when nothing is committed.
//
// Two things end streams besides the access log, each on the replica
// that holds them: a credential's expiry (a JWT's exp: a timer per
// guard), and the removal of the key that verified a JWT from this
// replica's key set (JWTKeysChanged, called after every change of the
// set; a guard registered meanwhile checks its key under the same lock,
// so none is missed).

// Revoked is the error that ends a stream whose access was taken away: Err
// is the client-facing *sluice.Error (Unauthenticated, Forbidden or
// NotFound). A stream ended by it is sent nothing more, not even what was
// queued before.
type Revoked struct{ Err *sluice.Error }

func (e *Revoked) Error() string { return e.Err.Message }
func (e *Revoked) Unwrap() error { return e.Err }

// IsRevoked reports whether err ended a stream because of an access change.
func IsRevoked(err error) bool {
	var r *Revoked
	return errors.As(err, &r)
}

func revoked(code sluice.Code, format string, args ...any) error {
	return &Revoked{Err: sluice.Errorf(code, format, args...)}
}

// guards are the hub's open streams, as the access check sees them.
type guards struct {
	log           Log // for the access changes
	logger        *slog.Logger
	metrics       *metrics.Stream
	checkGrant    func(context.Context, *sluice.Grant) error
	checkTimeout  time.Duration        // HubOptions.CheckTimeout
	jwtKeyRemoved func(id string) bool // HubOptions.JWTKeyRemoved; nil: no JWT keys
	maxStreams    int
	maxPerUser    int
	maxVars       int64 // HubOptions.StreamVariablesBytes
	maxVarsOfUser int64 // HubOptions.StreamVariablesBytesPerUser

	// mu guards all, open, perUser, vars and varsOfUser and serializes
	// the application of access changes (applied moves only under it;
	// seen only grows; both are atomic for readers without it). It is never
	// taken while holding the hub's mu or a dbState's mu: ending a
	// stream takes them. A stream's grant is never checked against
	// Postgres under it (add).
	mu      sync.Mutex
	applied atomic.Int64 // the access version applied; -1: none yet
	seen    atomic.Int64 // the newest access version read (AccessSeen)
	// all holds the guards that access changes may still end. open and
	// perUser count the guards not released, ended ones included: a
	// stream its guard ended still writes its end, for up to
	// write_timeout to a client that does not read, and holds its place
	// under the stream caps until it is released.
	all     map[*Guard]struct{}
	open    int
	perUser map[int64]int // open guards by user id
	// vars and varsOfUser sum what the guards not released were charged
	// for their streams' variables (Guard's varBytes), in all and by user
	// id, counted as open and perUser are.
	vars       int64
	varsOfUser map[int64]int64
}

func newGuards(log Log, o HubOptions) *guards {
	gs := &guards{
		log: log, logger: o.Logger, metrics: o.Metrics, checkGrant: o.Check, checkTimeout: o.CheckTimeout, jwtKeyRemoved: o.JWTKeyRemoved,
		maxStreams: o.MaxStreams, maxPerUser: o.MaxStreamsPerUser,
		maxVars: o.StreamVariablesBytes, maxVarsOfUser: o.StreamVariablesBytesPerUser,
		all: map[*Guard]struct{}{}, perUser: map[int64]int{}, varsOfUser: map[int64]int64{},
	}
	gs.applied.Store(-1)
	gs.seen.Store(-1)
	return gs
}

// Guard is a stream's registration with the access check: Release it when
// the stream ends.
type Guard struct {
	gs    *guards
	grant *sluice.Grant
	end   func(error)
	ended bool // guarded by gs.mu
	// released: Release was called, and g's place under the stream caps
	// given back. Guarded by gs.mu.
	released bool
	// varBytes is what g's stream was charged for its variables, given
	// back with its place.
	varBytes int64
	// expiry ends the stream when its credential expires; nil without.
	expiry *time.Timer
}

// Release removes the guard and gives back its place under the stream
// caps: call it once the stream wrote its last byte (its end included).
// end is not called after it returns.
func (g *Guard) Release() {
	gs := g.gs
	gs.mu.Lock()
	delete(gs.all, g)
	g.ended = true
	if !g.released {
		g.released = true
		gs.open--
		id := g.grant.User.ID
		if gs.perUser[id]--; gs.perUser[id] <= 0 {
			delete(gs.perUser, id)
		}
		if g.varBytes > 0 {
			gs.vars -= g.varBytes
			if gs.varsOfUser[id] -= g.varBytes; gs.varsOfUser[id] <= 0 {
				delete(gs.varsOfUser, id)
			}
		}
	}
	gs.mu.Unlock()
	if g.expiry != nil {
		g.expiry.Stop()
	}
}

// Guard registers grant for an open stream: end is called once, with a
// *Revoked error (or ErrUnavailable when Postgres was lost), when an access
// change takes the grant away. It is called from the goroutine applying
// access changes, before any commit read after the change is handed on,
// so it must not block on the stream: it marks the stream ended and wakes
// it. When an access change was applied after the grant was checked
// (grant.AccessVersion is older), the grant is checked again now
// (HubOptions.Check, for at most CheckTimeout, holding no lock that other
// streams or access changes need); Guard then returns the error a request
// would get.
//
// Register the guard before the stream's subscription, so that nothing is
// delivered to an unguarded stream.
//
// Guard also enforces the stream caps (HubOptions.MaxStreams and
// MaxStreamsPerUser) and charges varBytes, what the stream keeps of its
// variables for its life (0: none), to the budgets of the streams'
// variables (HubOptions.StreamVariablesBytes and
// StreamVariablesBytesPerUser) until the guard is released: past any
// of them it returns an Unavailable (the process's) or TooMany (the
// user's) error, before the stream holds anything.
func (h *Hub) Guard(ctx context.Context, grant *sluice.Grant, varBytes int64, end func(error)) (*Guard, error) {
	return h.guards.add(ctx, grant, varBytes, end)
}

func (gs *guards) add(ctx context.Context, grant *sluice.Grant, varBytes int64, end func(error)) (*Guard, error) {
	// A grant read before the last access change applied is checked
	// against Postgres, without gs.mu: every stream opening, every
	// Release and the application of every access change need it, and
	// a check waits for as long as Postgres takes (three or four round
	// trips, and a connection of the pool first). The check holds for
	// the applied version seen before it (every change up to it had
	// committed when it began); the guard is registered only if no
	// change was applied since, else the grant is checked again: a
	// guard registered with a version older than the applied one has
	// missed the changes in between, which sync will not apply again.
	// Changes applied after the registration reach the guard as any
	// other's, since its grant's version is older than theirs.
	checked := int64(-1) // the applied version the grant was checked at
	for checks := 0; ; checks++ {
		gs.mu.Lock()
		if err := gs.admit(grant, varBytes); err != nil {
			gs.mu.Unlock()
			return nil, err
		}
		applied := gs.applied.Load()
		if applied < 0 || grant.AccessVersion >= applied || checked == applied {
			g, err := gs.register(grant, varBytes, end)
			gs.mu.Unlock()
			return g, err
		}
		gs.mu.Unlock()
		if checks == maxGrantChecks {
			return nil, &sluice.Error{Code: sluice.CodeUnavailable, Retry: time.Second,
				Message: "access changes kept arriving while this stream's credential was checked; retry shortly"}
		}
		if err := gs.check(ctx, grant); err != nil {
			return nil, err
		}
		checked = applied
	}
}

// maxGrantChecks bounds how many times Guard checks a stale grant again
// because access changes were applied while it checked (each check takes
// a few round trips; access changes are far rarer).
const maxGrantChecks = 4

// admit checks that a stream of grant charged varBytes fits under the
// stream caps and budgets. The caller holds gs.mu.
func (gs *guards) admit(grant *sluice.Grant, varBytes int64) error {
	u := grant.User
	if gs.maxStreams > 0 && gs.open >= gs.maxStreams {
		return sluice.LimitErrorf(sluice.CodeUnavailable, "max_streams", "this server holds its maximum of %d open streams (config max_streams); retry later or on another replica", gs.maxStreams)
	}
	if gs.maxPerUser > 0 && !u.Superuser && gs.perUser[u.ID] >= gs.maxPerUser {
		return sluice.LimitErrorf(sluice.CodeTooMany, "max_streams_per_user", "user %s holds its maximum of %d open streams on this server (config max_streams_per_user); close one first", u.Name, gs.maxPerUser)
	}
	// A stream that keeps no variables is charged nothing, and so is
	// never refused by their budgets.
	if varBytes > 0 && gs.maxVars > 0 && gs.vars+varBytes > gs.maxVars {
		return sluice.LimitErrorf(sluice.CodeUnavailable, "stream_variables_bytes", "the variables of this server's streams hold %d bytes, and this stream's would hold %d more, past %d (config stream_variables_bytes); retry later or on another replica", gs.vars, varBytes, gs.maxVars)
	}
	if varBytes > 0 && gs.maxVarsOfUser > 0 && !u.Superuser && gs.varsOfUser[u.ID]+varBytes > gs.maxVarsOfUser {
		return sluice.LimitErrorf(sluice.CodeTooMany, "stream_variables_bytes_per_user", "the variables of user %s's streams hold %d bytes on this server, and this stream's would hold %d more, past %d (config stream_variables_bytes_per_user); close one first, or send smaller variables", u.Name, gs.varsOfUser[u.ID], varBytes, gs.maxVarsOfUser)
	}
	return nil
}

// register registers a guard for grant, admitted and checked against
// the access changes applied. The caller holds gs.mu.
func (gs *guards) register(grant *sluice.Grant, varBytes int64, end func(error)) (*Guard, error) {
	if exp := grant.ExpiresAt; !exp.IsZero() && !time.Now().Before(exp) {
		return nil, sluice.Errorf(sluice.CodeUnauthenticated, "the credential expired")
	}
	// Checked under gs.mu, as JWTKeysChanged checks the registered
	// guards: a key removed before this check refuses the stream, one
	// removed after it ends the stream there. A JWT verified before the
	// removal, or a stream ticket made with it, comes this far.
	if gs.jwtKeyGone(grant) {
		return nil, errJWTKeyGone()
	}
	u := grant.User
	g := &Guard{gs: gs, grant: grant, end: end, varBytes: max(varBytes, 0)}
	gs.all[g] = struct{}{}
	gs.open++
	gs.perUser[u.ID]++
	if g.varBytes > 0 {
		gs.vars += g.varBytes
		gs.varsOfUser[u.ID] += g.varBytes
	}
	if exp := grant.ExpiresAt; !exp.IsZero() {
		g.expiry = time.AfterFunc(time.Until(exp), func() {
			gs.mu.Lock()
			defer gs.mu.Unlock()
			gs.end(g, revoked(sluice.CodeUnauthenticated, "the credential this stream was opened with expired; authenticate again"))
		})
	}
	return g, nil
}

// errJWTKeyGone is the error of a stream whose JWT's key left the key set.
func errJWTKeyGone() *sluice.Error {
	return sluice.Errorf(sluice.CodeUnauthenticated, "the key that signed the JWT this stream was opened with was removed (jwt_jwks_file/jwt_jwks_url); authenticate again")
}

// jwtKeyGone reports whether grant's credential is a JWT whose key was
// removed from the key set (HubOptions.JWTKeyRemoved). A key the set
// never held is not: a stream ticket made on a replica that learnt a new
// key first is redeemed here before this replica learns it.
func (gs *guards) jwtKeyGone(grant *sluice.Grant) bool {
	return grant.JWTKey != "" && gs.jwtKeyRemoved != nil && gs.jwtKeyRemoved(grant.JWTKey)
}

// JWTKeysChanged ends, with an Unauthenticated error, every stream of
// this process whose credential is a JWT (or a stream ticket made with
// one) verified by a key that was removed from the key set
// (HubOptions.JWTKeyRemoved): call it after every change of the set. Removing a
// key is how an operator answers its compromise, and whoever holds the
// key chose the JWT's exp, so its streams do not wait for it. It does not
// wait on the streams (see Guard).
func (h *Hub) JWTKeysChanged() {
	gs := h.guards
	gs.mu.Lock()
	defer gs.mu.Unlock()
	ended := 0
	for g := range gs.all {
		if gs.jwtKeyGone(g.grant) {
			gs.end(g, &Revoked{Err: errJWTKeyGone()})
			ended++
		}
	}
	if ended > 0 {
		gs.logger.Info("ended the streams of JWTs whose key left the key set", "streams", ended)
	}
}

// check runs HubOptions.Check, when there is one, for at most
// HubOptions.CheckTimeout: a request's context has no deadline, and
// waiting for a connection of the pool has none either.
func (gs *guards) check(ctx context.Context, grant *sluice.Grant) error {
	if gs.checkGrant == nil {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, gs.checkTimeout)
	defer cancel()
	err := gs.checkGrant(cctx, grant)
	if err != nil && ctx.Err() == nil && cctx.Err() != nil {
		return &sluice.Error{Code: sluice.CodeUnavailable, Retry: time.Second,
			Message: fmt.Sprintf("checking this stream's credential against the database took longer than %s; retry shortly", gs.checkTimeout)}
	}
	return err
}

// AccessSeen returns the newest access log version this process has read,
// -1 before the first. It moves before the streams the changes affect are
// ended (the applied version moves after): what remembers credentials compares
// with it, so a client that saw its stream end is refused at once.
func (h *Hub) AccessSeen() int64 { return h.guards.seen.Load() }

// SyncAccess applies every access change up to version v to the streams
// of this process, as the tailer does before it hands on what it read at
// v: what a stream reads itself in a snapshot that sees access version v
// (a live query's result) may be handed on only once it returned nil.
func (h *Hub) SyncAccess(ctx context.Context, v int64) error { return h.guards.sync(ctx, v) }

// accessPage is how many access changes sync reads and applies at a time:
// what it holds of them (about 100 bytes a change, so about 100 KB), and
// how long it holds gs.mu, which every stream's opening and release take,
// are bounded by it, not by how many changes a process finds when it
// comes back after being cut off from Postgres, or by a burst of them
// (users, tokens and roles made and taken away by the thousands). Under
// gs.mu each change of a page is compared with every guard, a few
// comparisons each: a thousand keeps that short with many streams open,
// and still reads a burst of 100,000 changes in 100 round trips.
const accessPage = 1000

// sync applies every access change up to version v to the guards (see the
// comment at the top of this file). It returns once they are applied, or
// an error when they could not be read; then nothing read at v may be
// handed on.
func (gs *guards) sync(ctx context.Context, v int64) error {
	for {
		applied := gs.applied.Load()
		if applied >= v {
			return nil
		}
		for { // seen only grows, whatever syncs run at once
			seen := gs.seen.Load()
			if v <= seen || gs.seen.CompareAndSwap(seen, v) {
				break
			}
		}
		// The changes are read without gs.mu, which every stream's
		// opening and release take: a slow Postgres holds up only those
		// waiting for these changes. They are read a page at a time
		// (accessPage), each applied before the next is read: versions
		// are unique, so a range of accessPage versions holds at most
		// as many changes. Another sync may apply some of them
		// meanwhile; the rest are applied below.
		upTo := v
		var changes []sluice.AccessChange
		if applied >= 0 {
			upTo = min(v, applied+accessPage)
			var err error
			if changes, err = gs.log.AccessChanges(ctx, applied, upTo); err != nil {
				return fmt.Errorf("read access changes %d..%d: %w", applied+1, upTo, err)
			}
		}
		gs.apply(ctx, applied, upTo, v, changes)
	}
}

// apply applies changes, the access changes in (after, upTo] read without
// the lock, to the guards, under gs.mu; sync calls it again until every
// change up to v is applied. When after is -1 nothing was read: the
// first version seen, v, is applied, unless one was applied meanwhile
// (then sync reads the changes after it).
func (gs *guards) apply(ctx context.Context, after, upTo, v int64, changes []sluice.AccessChange) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	applied := gs.applied.Load()
	if applied >= upTo {
		return // applied by another sync while these were read
	}
	if after < 0 {
		if applied >= 0 {
			return
		}
		// The first version seen: streams registered so far were checked
		// at their own versions, which the guard registration compares.
		for g := range gs.all {
			if g.grant.AccessVersion < v {
				gs.recheck(ctx, g)
			}
		}
		gs.applied.Store(v)
		return
	}
	// Versions are gapless: every version in (applied, upTo] must have
	// been read, in order. One missing (at the page's start, in its
	// middle or at its end) was pruned before this process read it.
	next := applied + 1
	for _, c := range changes {
		if c.Version < next {
			continue // applied by another sync while these were read
		}
		if c.Version != next {
			break
		}
		for g := range gs.all {
			// A grant read at or after c already reflects it (a stream
			// opened with a password set by c).
			if c.Version <= g.grant.AccessVersion {
				continue
			}
			if e := c.Affects(g.grant); e != nil {
				gs.end(g, &Revoked{Err: e})
			}
		}
		gs.applied.Store(c.Version)
		next++
	}
	if next <= upTo {
		// Pruned before this process read them (it was cut off for
		// long): whatever they were, every grant is checked again,
		// against a state that reflects every change up to v.
		gs.logger.Warn("access changes were pruned before they were applied; re-checking every stream", "missing", next, "upTo", v)
		for g := range gs.all {
			gs.recheck(ctx, g)
		}
		gs.applied.Store(v)
	}
}

// recheck checks g's grant against the current state and ends it when it
// no longer holds. The caller holds gs.mu.
func (gs *guards) recheck(ctx context.Context, g *Guard) {
	if err := gs.check(ctx, g.grant); err != nil {
		var se *sluice.Error
		if !errors.As(err, &se) || se.Code == sluice.CodeInternal || se.Code == sluice.CodeUnavailable {
			gs.end(g, err)
			return
		}
		gs.end(g, &Revoked{Err: se})
	}
}

// end ends g's stream with err. The caller holds gs.mu.
func (gs *guards) end(g *Guard, err error) {
	if g.ended {
		return
	}
	g.ended = true
	// No access change concerns it any more; its place under the caps
	// is kept until Release (see guards.open).
	delete(gs.all, g)
	if gs.metrics != nil {
		gs.metrics.StreamsEnded.Inc()
	}
	g.end(err)
}

// endAll ends every guarded stream with err (Postgres was lost: access
// changes can no longer be seen, so no stream may go on).
func (gs *guards) endAll(err error) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	for g := range gs.all {
		gs.end(g, err)
	}
}
