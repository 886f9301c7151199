// Package changefeed delivers committed changes to stream subscribers,
// losslessly and in commit order, whatever the number of daemons sharing
// the Postgres server, in pieces of bounded size, and only while the
// subscriber's access holds.
//
// # Pieces
//
// A Tailer (one per process) follows every database's commit log. It is
// woken three ways: in-process by Tailer.Wake (the store's commit hook),
// by Postgres NOTIFY (commits made by other daemons, access changes), and
// by a periodic poll of the counter rows, so a lost notification only
// delays. Whatever woke it, it reads the log by position (Store.ReadLog):
// whole small commits, or a run of a large commit's changes, about
// PieceBytes of change images at a time (sluice.Commit.Partial marks a
// piece more of its commit follows). It hands each piece to the Hub in
// order, exactly once. Readers track how far they got as a sluice.Cursor
// (the one log cursor of every reader): a whole commit, and some changes
// of the next.
//
// # Subscriptions
//
// The unit of delivery is a Subscription: a consumer that receives the
// pieces of one database after a starting position, in order, once.
// Hub.Subscribe registers one; nil starts at "now" (the newest commit at
// the time of the call), a position resumes after it. Pieces are shared
// between subscribers and must be treated as read-only.
//
// A subscription is either live (the tailer pushes into its bounded queue
// without ever blocking) or catching up (a goroutine owned by the hub
// reads the log from the subscription's cursor and blocks on the queue as
// the consumer allows). A new subscription behind the head, a resume, and
// a live subscription whose queue would overflow all catch up; a
// catching-up subscription joins the live set, under the database's lock,
// as soon as its cursor reaches the head. Live delivery skips what a
// subscription already has, so the handoff has no gap and no duplicate.
// Memory per subscription is bounded by its queue: QueueSize pieces, and
// for a catch-up, whose pieces are its own, about QueueBytes of them, or
// one piece (one row of the log) when that is larger.
//
// Sequences are gapless, so a read that does not start where it should
// means the history was pruned: the subscription ends with a CodeGone
// error. A log that ends before what was read (its newest commits lost in
// a failover or a restore), or holds another commit of the number of the
// last one read (new commits took the lost ones' numbers: sluice.Stamp),
// ends every subscription that may have received a lost commit, or part
// of one, with a CodeGone error (rewind.go).
// Subscribe itself refuses a position from another epoch or older
// than retained history (CodeGone) and one ahead of the log (CodeInvalid).
// Hub.Floors gives Prune what local subscriptions still need.
//
// A consumer selects on Commits() and Done(). When Done is closed, Err says
// why (ErrShutdown, ErrClosed, a Revoked access, sluice.ErrStorageUnavailable,
// a CodeGone or CodeNotFound *sluice.Error); pieces already queued may be
// drained first, except after a revocation. Close ends a subscription; it
// is idempotent and leaves no goroutine.
//
// Subscriptions are consumed by the stream server (internal/stream),
// which shares one among identical subscribers and serves streams from
// them; no transport uses this package directly.
//
// # Access
//
// Every stream registers a Guard with its grant before its subscription
// (access.go). The access log's version is read in the same snapshot as
// the commits; before anything read at version v is handed on, the access
// changes up to v end the streams they affect. A commit made after an
// access change answered can therefore never reach a stream it ends, on
// any replica. Guards also enforce the stream caps and credential expiry.
package changefeed
