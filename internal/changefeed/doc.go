// Package changefeed delivers committed changes to stream subscribers,
// losslessly and in commit order, whatever the number of daemons sharing
// the Postgres server.
//
// # Pieces
//
// A Tailer (one per process) follows every database's commit log. It is
// woken three ways: in-process by Tailer.Wake (the engine's onCommit), by
// Postgres NOTIFY on postgres.NotifyChannel (commits made by other daemons),
// and by a periodic poll of the counter rows, so a lost notification only
// delays. Whatever woke it, it reads the log by position (postgres
// CommitsAfter), decodes each commit once and hands it to the Hub in
// sequence order, exactly once. Its LISTEN connection reconnects with
// backoff; nothing is lost meanwhile because reading is by position.
//
// The Hub keeps, per database, the sequence of the last commit the tailer
// handed it (the head) and the set of live subscriptions.
//
// # Subscriptions
//
// The unit of delivery is a Subscription: a consumer that receives each
// *sluice.Commit of one database after a starting position, in order, once.
// Hub.Subscribe registers one; nil starts at "now" (the newest commit at the
// time of the call), a position resumes after it. Commits are shared between
// subscribers and must be treated as read-only; the first commit of a resume
// is a trimmed copy holding only the changes after the position.
//
// A subscription is either live (the tailer pushes into its bounded queue
// without ever blocking) or catching up (a goroutine owned by the hub reads
// the log from the subscription's cursor and blocks on the queue as the
// consumer allows). A new subscription whose cursor is behind the head, a
// resume, and a live subscription whose queue would overflow all catch up;
// a catching-up subscription joins the live set, under the database's lock,
// as soon as its cursor reaches the head. Live delivery skips commits at or
// below a subscription's cursor, so the handoff has no gap and no duplicate.
// Memory per subscription is bounded by its queue (HubOptions.QueueSize
// commits), and a slow consumer never blocks the tailer, a commit, or
// another subscriber.
//
// Sequences are gapless, so a catch-up read that does not start right after
// the cursor means the history was pruned: the subscription ends with a
// CodeGone error. Subscribe itself refuses a position from another epoch or
// older than retained history (CodeGone) and one ahead of the log
// (CodeInvalid). Hub.Floors gives Prune what local subscriptions still need.
//
// A consumer selects on Commits() and Done(). When Done is closed, Err says
// why (ErrShutdown, ErrClosed, a CodeGone or CodeNotFound *sluice.Error);
// commits already queued are still valid, in order, and may be drained
// first. Close ends a subscription; it is idempotent and leaves no goroutine.
//
// # Grouped subscribers (GraphQL)
//
// Subscribers with the same query, variables and access share one
// evaluation: a group is one Subscription whose consumer goroutine
// evaluates each commit once and appends the serialized payloads to a
// bounded history its members read at their own pace (package sse). A
// member whose next commit falls out of that history leaves the group and
// continues with a Subscription of its own, started with Subscribe from
// that commit's position, which replays from the log. Options.Classes
// lets the hub skip commits a group cannot match without waking it.
package changefeed
