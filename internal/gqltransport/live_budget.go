package gqltransport

import (
	"fmt"
	"math"
	"sync"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/graph"
)

// LiveBudget bounds what live queries cost a process: how many there
// are, and the documents and bytes of JSON their results hold, per user
// and in all. A new live query is admitted only while its user and the
// process are within every bound, before anything is read for it; each
// read of a result is bounded by what its share's user and the process
// may still hold (an error naming the key past it ends the live query).
// The super user is exempt from the per-user bounds. Zero: no bound.
type LiveBudget struct {
	QueriesPerUser int64 // live_queries_per_user
	Queries        int64 // live_queries
	RowsPerUser    int64 // live_rows_per_user
	BytesPerUser   int64 // live_bytes_per_user
	Rows           int64 // live_rows
	Bytes          int64 // live_bytes
}

// The configuration keys of LiveBudget, which its errors name.
const (
	keyLiveQueriesPerUser = "live_queries_per_user"
	keyLiveQueries        = "live_queries"
	keyLiveRowsPerUser    = "live_rows_per_user"
	keyLiveBytesPerUser   = "live_bytes_per_user"
	keyLiveRows           = "live_rows"
	keyLiveBytes          = "live_bytes"
)

// liveBudget accounts live queries against a LiveBudget. A share's result
// is held once, however many live queries share it: it is charged to the
// process, and to one of the users whose live queries share it (its
// owner): the one whose live query started the share, and, when the
// owner's last live query of the share ends while others go on, one of
// theirs whose budget it fits (when it fits none, the share ends:
// liveHold.left). So a user who left a share holds nothing of it, and
// one who stays is charged once nobody else is, never past its budget.
type liveBudget struct {
	limits LiveBudget
	mu     sync.Mutex
	users  map[int64]*liveUse
	total  liveUse
}

// liveUse is what a user's (or every) live query holds.
type liveUse struct {
	queries     int64
	rows, bytes int64
}

func newLiveBudget(l LiveBudget) *liveBudget {
	return &liveBudget{limits: l, users: map[int64]*liveUse{}}
}

// use returns u's use; the caller holds b.mu.
func (b *liveBudget) use(u *sluice.User) *liveUse {
	lu := b.users[u.ID]
	if lu == nil {
		lu = &liveUse{}
		b.users[u.ID] = lu
	}
	return lu
}

// forget drops u's use when nothing of it is left; the caller holds b.mu.
func (b *liveBudget) forget(u *sluice.User) {
	if lu := b.users[u.ID]; lu != nil && *lu == (liveUse{}) {
		delete(b.users, u.ID)
	}
}

// admit counts a new live query of user u, or returns a TooMany error
// naming the bound it would pass: u or the process has as many live
// queries as allowed, or their results hold as many documents or bytes.
// The release function it returns, called once, uncounts it.
func (b *liveBudget) admit(u *sluice.User) (func(), error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	perUser := !u.Superuser
	lu := b.use(u)
	refuse := func(what string, has int64, key string, limit int64, then string) (func(), error) {
		b.forget(u)
		return nil, sluice.LimitErrorf(sluice.CodeTooMany, key, "live query refused: %s %d, and %s is %d; %s", what, has, key, limit, then)
	}
	user := fmt.Sprintf("user %s's live queries", u.Name)
	switch l := b.limits; {
	case perUser && l.QueriesPerUser > 0 && lu.queries >= l.QueriesPerUser:
		return refuse("user "+u.Name+" holds live queries on this server:", lu.queries, keyLiveQueriesPerUser, l.QueriesPerUser, "close one first")
	case l.Queries > 0 && b.total.queries >= l.Queries:
		return refuse("this server holds live queries:", b.total.queries, keyLiveQueries, l.Queries, "retry later")
	case perUser && l.RowsPerUser > 0 && lu.rows >= l.RowsPerUser:
		return refuse("the results of "+user+" hold documents:", lu.rows, keyLiveRowsPerUser, l.RowsPerUser, "close a live query first")
	case perUser && l.BytesPerUser > 0 && lu.bytes >= l.BytesPerUser:
		return refuse("the results of "+user+" hold bytes:", lu.bytes, keyLiveBytesPerUser, l.BytesPerUser, "close a live query first")
	case l.Rows > 0 && b.total.rows >= l.Rows:
		return refuse("the results of this server's live queries hold documents:", b.total.rows, keyLiveRows, l.Rows, "retry later")
	case l.Bytes > 0 && b.total.bytes >= l.Bytes:
		return refuse("the results of this server's live queries hold bytes:", b.total.bytes, keyLiveBytes, l.Bytes, "retry later")
	}
	lu.queries++
	b.total.queries++
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.use(u).queries--
			b.total.queries--
			b.forget(u)
		})
	}, nil
}

// liveHold is what one live share's result holds, charged to its owner.
type liveHold struct {
	b           *liveBudget
	owner       *sluice.User
	rows, bytes int64
	closed      bool
	// members counts the share's live queries by user; users holds those
	// users. Guarded by b.mu.
	members map[int64]int
	users   map[int64]*sluice.User
}

func (b *liveBudget) hold(owner *sluice.User) *liveHold {
	return &liveHold{b: b, owner: owner, members: map[int64]int{}, users: map[int64]*sluice.User{}}
}

// joined counts a live query of u that joined h's share.
func (h *liveHold) joined(u *sluice.User) {
	h.b.mu.Lock()
	defer h.b.mu.Unlock()
	h.members[u.ID]++
	h.users[u.ID] = u
}

// left counts out a live query of u that left h's share, which goes on:
// when it was the owner's last, the charge moves to another user of the
// share, one whose live queries may still hold the result (documents
// and bytes, live_rows_per_user and live_bytes_per_user): the one with
// the most room, so that the share's next result, bounded by its
// owner's budget, is the least likely to end it for everyone. When the
// result fits none of them, nobody may hold it: it returns the error a
// read past the bound gives, which ends the share (each member is told
// in terms of its own user, ownError), and h holds nothing from then on.
// A user who stays is charged only within its budget, as a read is.
func (h *liveHold) left(u *sluice.User) error {
	b := h.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if h.members[u.ID]--; h.members[u.ID] > 0 {
		return nil
	}
	delete(h.members, u.ID)
	delete(h.users, u.ID)
	if h.closed || u.ID != h.owner.ID || len(h.users) == 0 {
		return nil
	}
	var next *sluice.User
	var nextRows, nextBytes int64
	roomForRows := false // some user may hold the result's documents
	for _, m := range h.users {
		rows, bytes := h.room(m, keyLiveRowsPerUser), h.room(m, keyLiveBytesPerUser)
		roomForRows = roomForRows || rows >= h.rows
		if rows < h.rows || bytes < h.bytes {
			continue
		}
		if next == nil || rows > nextRows || rows == nextRows && bytes > nextBytes {
			next, nextRows, nextBytes = m, rows, bytes
		}
	}
	if next == nil {
		key, what := keyLiveRowsPerUser, "documents"
		if roomForRows {
			key, what = keyLiveBytesPerUser, "bytes of JSON"
		}
		b.charge(h, -h.rows, -h.bytes)
		h.rows, h.bytes, h.closed = 0, 0, true
		// Named in terms of each member's user by ownError (the owner
		// has no member left).
		return graph.BudgetError(key, fmt.Sprintf("the live query's result holds more %s than the live queries of the users sharing it may still hold", what))
	}
	b.charge(h, -h.rows, -h.bytes)
	h.owner = next
	b.charge(h, h.rows, h.bytes)
	return nil
}

// room returns what user u's live queries may still hold under the
// per-user bound key (keyLiveRowsPerUser or keyLiveBytesPerUser), not
// counting h's result when it is charged to u (what its next result
// replaces); the caller holds b.mu.
func (h *liveHold) room(u *sluice.User, key string) int64 {
	b := h.b
	limit, mine := b.limits.RowsPerUser, h.rows
	if key == keyLiveBytesPerUser {
		limit, mine = b.limits.BytesPerUser, h.bytes
	}
	if u.Superuser || limit <= 0 {
		return math.MaxInt64
	}
	used := int64(0)
	if lu := b.users[u.ID]; lu != nil {
		used = lu.rows
		if key == keyLiveBytesPerUser {
			used = lu.bytes
		}
	}
	if u.ID == h.owner.ID {
		used -= mine
	}
	return limit - used
}

// handOver moves h's charge to the user of its share with the most room
// left under the per-user bound key (keyLiveRowsPerUser or
// keyLiveBytesPerUser), when that is more than its owner has, and
// reports whether it moved: a read of the share's result went past what
// its owner may still hold, and the result is read again within that
// user's. So one user's other live queries end no other user's share;
// the share ends only when none of its users may hold its result.
func (h *liveHold) handOver(key string) bool {
	b := h.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if h.closed {
		return false
	}
	best, most := h.owner, h.room(h.owner, key)
	for _, u := range h.users {
		if r := h.room(u, key); r > most {
			best, most = u, r
		}
	}
	if best.ID == h.owner.ID {
		return false
	}
	b.charge(h, -h.rows, -h.bytes)
	h.owner = best
	b.charge(h, h.rows, h.bytes)
	return true
}

// ownError returns err, which ended h's share, as a member of user u is
// told it: a per-user bound names u, whose own live queries' room the
// result passes (handOver gave it to the user with the most), not the
// user the result was charged to (whose members get err as it is).
func (h *liveHold) ownError(u *sluice.User, err error) error {
	if u.ID == h.user().ID {
		return err
	}
	for _, c := range []struct{ key, what string }{
		{keyLiveRowsPerUser, "documents"},
		{keyLiveBytesPerUser, "bytes of JSON"},
	} {
		if graph.IsBoundError(err, c.key) {
			return graph.BudgetError(c.key, fmt.Sprintf("the live query's result holds more %s than user %s's live queries may still hold", c.what, u.Name))
		}
	}
	return err
}

// user returns the user h is charged to now.
func (h *liveHold) user() *sluice.User {
	h.b.mu.Lock()
	defer h.b.mu.Unlock()
	return h.owner
}

// bounds returns the bounds of a read of h's next result: what its owner
// and the process may hold, counting what h holds now (which the result
// replaces), within the schema's limits (rows, bytes).
func (h *liveHold) bounds(rows, bytes int) graph.Bounds {
	b := h.b
	b.mu.Lock()
	defer b.mu.Unlock()
	var out graph.Bounds
	tighten := func(bound *int, key, why *string, limit, used, mine int64, k, w string) {
		if limit <= 0 {
			return
		}
		left := max(limit-used+mine, 0)
		if *bound <= 0 || left < int64(*bound) {
			*bound, *key, *why = int(left), k, w
		}
	}
	out.Rows, out.Bytes = rows, bytes
	perUser := !h.owner.Superuser
	if perUser {
		lu := b.use(h.owner)
		// The error names the key once, after the why (graph's
		// resultLimitError).
		who := "that user " + h.owner.Name + "'s live queries may still hold"
		tighten(&out.Rows, &out.RowsKey, &out.RowsWhy, b.limits.RowsPerUser, lu.rows, h.rows, keyLiveRowsPerUser, who)
		tighten(&out.Bytes, &out.BytesKey, &out.BytesWhy, b.limits.BytesPerUser, lu.bytes, h.bytes, keyLiveBytesPerUser, who)
	}
	tighten(&out.Rows, &out.RowsKey, &out.RowsWhy, b.limits.Rows, b.total.rows, h.rows, keyLiveRows,
		"that this server's live queries may still hold")
	tighten(&out.Bytes, &out.BytesKey, &out.BytesWhy, b.limits.Bytes, b.total.bytes, h.bytes, keyLiveBytes,
		"that this server's live queries may still hold")
	if perUser {
		b.forget(h.owner)
	}
	if out.RowsKey == "" && out.BytesKey == "" {
		return graph.Bounds{} // the schema's limits
	}
	if out.Rows == 0 {
		out.Rows = -1 // nothing left: not "the schema's limit"
	}
	if out.Bytes == 0 {
		out.Bytes = -1
	}
	return out
}

// set makes h hold a result of rows documents and bytes of JSON, unless
// the share ended meanwhile. It returns an error naming the bound the
// result would pass (another read took what was left since bounds), and
// h then holds what it held.
func (h *liveHold) set(rows, bytes int64) error {
	b := h.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if h.closed {
		return nil
	}
	dr, db := rows-h.rows, bytes-h.bytes
	lu := b.use(h.owner)
	defer b.forget(h.owner)
	for _, c := range []struct {
		key                string
		perUser            bool
		limit, used, delta int64
	}{
		{keyLiveRowsPerUser, true, b.limits.RowsPerUser, lu.rows, dr},
		{keyLiveBytesPerUser, true, b.limits.BytesPerUser, lu.bytes, db},
		{keyLiveRows, false, b.limits.Rows, b.total.rows, dr},
		{keyLiveBytes, false, b.limits.Bytes, b.total.bytes, db},
	} {
		if c.perUser && h.owner.Superuser {
			continue
		}
		if c.limit > 0 && c.delta > 0 && c.used+c.delta > c.limit {
			return sluice.LimitErrorf(sluice.CodeTooMany, c.key, "the live query's new result would take what live queries hold to %d, past %s (%d)", c.used+c.delta, c.key, c.limit)
		}
	}
	b.charge(h, dr, db)
	h.rows, h.bytes = rows, bytes
	return nil
}

// held returns what h holds.
func (h *liveHold) held() (rows, bytes int64) {
	h.b.mu.Lock()
	defer h.b.mu.Unlock()
	return h.rows, h.bytes
}

// Close releases what h holds, for good (its share ended).
func (h *liveHold) Close() {
	b := h.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if h.closed {
		return
	}
	b.charge(h, -h.rows, -h.bytes)
	h.rows, h.bytes, h.closed = 0, 0, true
}

// charge adds rows and bytes to what h's owner and the process hold; the
// caller holds b.mu.
func (b *liveBudget) charge(h *liveHold, rows, bytes int64) {
	lu := b.use(h.owner)
	lu.rows += rows
	lu.bytes += bytes
	b.total.rows += rows
	b.total.bytes += bytes
	b.forget(h.owner)
}
