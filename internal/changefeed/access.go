package changefeed

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-dev/sluice"
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
//     every access change up to that version (syncAccess): each guard a
//     change affects ends its stream with an explicit error.
//
// A commit that starts after an access change answered is read in a
// snapshot that shows the change, so the change is applied, and the
// affected streams ended, before that commit can reach them. The tailer
// also reads the version on every poll and wake-up (Tailer.Run), so a
// stream ends within a poll interval even when nothing is committed.

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

// Guard is a stream's registration with the access check: Release it when
// the stream ends.
type Guard struct {
	h     *Hub
	grant *sluice.Grant
	end   func(error)
	ended bool // guarded by h.accessMu
	// expiry ends the stream when its credential expires; nil without.
	expiry *time.Timer
}

// Release removes the guard; end is not called after it returns.
func (g *Guard) Release() {
	h := g.h
	h.accessMu.Lock()
	h.dropGuard(g)
	g.ended = true
	h.accessMu.Unlock()
	if g.expiry != nil {
		g.expiry.Stop()
	}
}

// dropGuard removes g from the registry and the stream counts. The caller
// holds h.accessMu.
func (h *Hub) dropGuard(g *Guard) {
	if _, ok := h.guards[g]; !ok {
		return
	}
	delete(h.guards, g)
	id := g.grant.User.ID
	if h.perUser[id]--; h.perUser[id] <= 0 {
		delete(h.perUser, id)
	}
}

// Guard registers grant for an open stream: end is called once, with a
// *Revoked error (or ErrUnavailable when Postgres was lost), when an access
// change takes the grant away. It is called from the goroutine applying
// access changes, before any commit read after the change is handed on,
// so it must not block on the stream: it marks the stream ended and wakes
// it. When an access change was applied after the grant was checked
// (grant.AccessVersion is older), the grant is checked again now; Guard
// then returns the error a request would get.
//
// Register the guard before the stream's subscription, so that nothing is
// delivered to an unguarded stream.
//
// Guard also enforces the stream caps (HubOptions.MaxStreams and
// MaxStreamsPerUser): past them it returns an Unavailable or TooMany
// error, before the stream holds anything.
func (h *Hub) Guard(ctx context.Context, grant *sluice.Grant, end func(error)) (*Guard, error) {
	h.accessMu.Lock()
	defer h.accessMu.Unlock()
	u := grant.User
	if h.maxStreams > 0 && len(h.guards) >= h.maxStreams {
		return nil, sluice.Errorf(sluice.CodeUnavailable, "this server holds its maximum of %d open streams (config max_streams); retry later or on another replica", h.maxStreams)
	}
	if h.maxPerUser > 0 && !u.Superuser && h.perUser[u.ID] >= h.maxPerUser {
		return nil, sluice.Errorf(sluice.CodeTooMany, "user %s holds its maximum of %d open streams on this server (config max_streams_per_user); close one first", u.Name, h.maxPerUser)
	}
	if applied := h.applied.Load(); applied >= 0 && grant.AccessVersion < applied {
		if err := h.check(ctx, grant); err != nil {
			return nil, err
		}
	}
	if exp := grant.ExpiresAt; !exp.IsZero() && !time.Now().Before(exp) {
		return nil, sluice.Errorf(sluice.CodeUnauthenticated, "the credential expired")
	}
	g := &Guard{h: h, grant: grant, end: end}
	h.guards[g] = struct{}{}
	h.perUser[u.ID]++
	if exp := grant.ExpiresAt; !exp.IsZero() {
		g.expiry = time.AfterFunc(time.Until(exp), func() {
			h.accessMu.Lock()
			defer h.accessMu.Unlock()
			h.endGuard(g, revoked(sluice.CodeUnauthenticated, "the credential this stream was opened with expired; authenticate again"))
		})
	}
	return g, nil
}

// check runs HubOptions.Check, when there is one.
func (h *Hub) check(ctx context.Context, grant *sluice.Grant) error {
	if h.checkGrant == nil {
		return nil
	}
	return h.checkGrant(ctx, grant)
}

// AccessSeen returns the newest access log version this process has read,
// -1 before the first. It moves before the streams the changes affect are
// ended (the applied version moves after): what remembers credentials compares
// with it, so a client that saw its stream end is refused at once.
func (h *Hub) AccessSeen() int64 { return h.seen.Load() }

// syncAccess applies every access change up to version v to the guards
// (see the comment at the top of this file). It returns once they are
// applied, or an error when they could not be read; then nothing read at
// v may be handed on.
func (h *Hub) syncAccess(ctx context.Context, v int64) error {
	if h.applied.Load() >= v {
		return nil
	}
	h.accessMu.Lock()
	defer h.accessMu.Unlock()
	applied := h.applied.Load()
	if applied >= v {
		return nil
	}
	if v > h.seen.Load() {
		h.seen.Store(v)
	}
	if applied < 0 {
		// The first version seen: streams registered so far were checked
		// at their own versions, which the guard registration compares.
		for g := range h.guards {
			if g.grant.AccessVersion < v {
				h.recheckGuard(ctx, g)
			}
		}
		h.applied.Store(v)
		return nil
	}
	changes, err := h.log.AccessChanges(ctx, applied, v)
	if err != nil {
		return fmt.Errorf("read access changes %d..%d: %w", applied+1, v, err)
	}
	if len(changes) == 0 || changes[0].Version != applied+1 || changes[len(changes)-1].Version != v {
		// Pruned before this process read them (it was cut off for
		// long): whatever they were, every grant is checked again.
		h.logger.Warn("access changes were pruned before they were applied; re-checking every stream", "after", applied, "upTo", v)
		for g := range h.guards {
			h.recheckGuard(ctx, g)
		}
		h.applied.Store(v)
		return nil
	}
	for _, c := range changes {
		for g := range h.guards {
			// A grant read at or after c already reflects it (a stream
			// opened with a password set by c).
			if c.Version <= g.grant.AccessVersion {
				continue
			}
			if err := affects(c, g.grant); err != nil {
				h.endGuard(g, err)
			}
		}
		h.applied.Store(c.Version)
	}
	return nil
}

// recheckGuard checks g's grant against the current state and ends it when it
// no longer holds. The caller holds h.accessMu.
func (h *Hub) recheckGuard(ctx context.Context, g *Guard) {
	if err := h.check(ctx, g.grant); err != nil {
		var se *sluice.Error
		if !errors.As(err, &se) || se.Code == sluice.CodeInternal || se.Code == sluice.CodeUnavailable {
			h.endGuard(g, err)
			return
		}
		h.endGuard(g, &Revoked{Err: se})
	}
}

// endGuard ends g's stream with err. The caller holds h.accessMu.
func (h *Hub) endGuard(g *Guard, err error) {
	if g.ended {
		return
	}
	g.ended = true
	h.dropGuard(g)
	if h.metrics != nil {
		h.metrics.StreamsEnded.Inc()
	}
	g.end(err)
}

// endAll ends every guarded stream with err (Postgres was lost: access
// changes can no longer be seen, so no stream may go on).
func (h *Hub) endAll(err error) {
	h.accessMu.Lock()
	defer h.accessMu.Unlock()
	for g := range h.guards {
		h.endGuard(g, err)
	}
}

// affects returns the error that ends a stream holding grant after access
// change c, or nil when c leaves the grant intact.
func affects(c sluice.AccessChange, grant *sluice.Grant) error {
	u, d := grant.User, grant.Database
	switch c.Kind {
	case sluice.AccessToken:
		if grant.TokenID != 0 && grant.TokenID == c.TokenID {
			return revoked(sluice.CodeUnauthenticated, "the token this stream was opened with was revoked")
		}
	case sluice.AccessPassword:
		if grant.TokenID == 0 && u.ID == c.UserID {
			return revoked(sluice.CodeUnauthenticated, "the password of %s changed; authenticate again", u.Name)
		}
	case sluice.AccessUser:
		if u.ID == c.UserID {
			return revoked(sluice.CodeUnauthenticated, "user %s was deleted", u.Name)
		}
	case sluice.AccessRole:
		if !u.Superuser && u.ID == c.UserID && d.ID == c.DatabaseID && c.Role < grant.Role {
			if c.Role == sluice.RoleNone {
				return revoked(sluice.CodeForbidden, "the access of %s to %s was revoked", u.Name, d.Path())
			}
			return revoked(sluice.CodeForbidden, "the role of %s on %s was narrowed to %s; subscribe again", u.Name, d.Path(), c.Role)
		}
	case sluice.AccessDatabase:
		if d.ID == c.DatabaseID {
			return revoked(sluice.CodeNotFound, "database %s was deleted", d.Path())
		}
	case sluice.AccessOrganization:
		if d.Org == c.Org || u.Org == c.Org {
			return revoked(sluice.CodeNotFound, "organization %s was deleted", c.Org)
		}
	default:
		// A kind this binary does not know (a newer replica wrote it):
		// end the stream rather than guess; the client resubscribes.
		return revoked(sluice.CodeForbidden, "the access of %s changed; subscribe again", u.Name)
	}
	return nil
}

// Ender is what a guard ends: whatever serves the stream at the time, a
// subscription or a member of a shared one (anything with End). A stream
// registers its guard with Ender.End before it has a subscription, then
// hands each one it serves from to Serve.
type Ender struct {
	mu  sync.Mutex
	err error
	cur interface{ End(error) }
}

// End ends the stream with err: what serves it now, and anything handed to
// Serve later. Only the first error counts.
func (e *Ender) End(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return
	}
	e.err = err
	if e.cur != nil {
		e.cur.End(err)
	}
}

// Serve makes x what serves the stream. When the stream already ended, x
// is ended at once and the error returned.
func (e *Ender) Serve(x interface{ End(error) }) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cur = x
	if e.err != nil {
		x.End(e.err)
	}
	return e.err
}

// Err returns why the stream was ended, nil while it was not.
func (e *Ender) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}
