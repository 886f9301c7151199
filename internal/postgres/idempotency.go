package postgres

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/sluice-dev/sluice"
)

// Idempotent writes. A write with an IdempotencyKey first makes sure its
// key has a claim, a row of sluice.idempotency_claims, in a statement of
// its own that commits at once (prepareKey). Then, in its transaction (its
// own, or a group-commit batch's), it locks that row without waiting (FOR
// UPDATE SKIP LOCKED): a request that finds it locked answers that the
// first is still running. Holding it, the write looks the key up: a key
// recorded by an earlier write answers that write's answer again, and
// nothing is written; otherwise the write runs, and the key, the request's
// hash and the answer are inserted, and the claim deleted, in the same
// round trip as the commit row, before COMMIT. So a key is recorded if and
// only if its write committed, whichever replica runs the retry, even when
// the first answer was lost with its connection. The lock is released at
// the end of the transaction, commit or rollback, and by Postgres when a
// process dies; a write that did not record its key deletes its claim
// after (releaseKey), and claims left by a process that died are pruned.
//
// A claim is committed before it can be locked, so there is a moment,
// as long as a write waits for a connection or its group-commit batch,
// when its claim exists and nobody holds it: as a claim left by a process
// that died looks, for good (Postgres released its lock). So a claim
// nobody holds is nobody's: a write takes it (its maker, finding it held,
// or gone, is refused as still running), and a look-up that answers that
// the key is not recorded deletes it (claim, RecordedAnswer), so that its
// maker is refused too, and the answer stays true: the retry goes on to
// run, or to answer its own error (one that a schema change since makes
// invalid), and the write queued before it never commits behind it
// (TestLookUpOfAQueuedKeyStaysTrue). Answering "still running" instead
// would have answered every retry of a write whose process died 409
// until its claim was pruned.
//
// Each claim has a token, made with it (migration 33), and a write
// remembers the token of the claim it made or found (prepareKey): it
// locks that claim only, and deletes that claim only when it records
// nothing (releaseKey). A key's claim, once deleted, may be made again
// by a newer request with the key, while the write that relied on the
// first is still to lock it, or to release it: by the key alone, that
// write locked the newer claim, and committed behind the look-up that
// deleted its own (TestQueuedWriteTakesNoNewerClaim); or deleted it, and
// the newer request, waiting for its batch, was refused as if another
// request with the key still ran (TestReleaseKeepsANewerClaim).
//
// Only Sluice's role may lock a claim (migration 14). The lock was an
// advisory lock named by the user and the key before: any role that may
// connect can take any advisory lock, and pg_locks shows the keys held,
// so another role could make a key answer "still running" for good.

// IdempotencyKey makes a write idempotent under Key for the user UserID.
type IdempotencyKey struct {
	UserID int64
	Key    string
	// Request returns the SHA-256 of what the request asks, called once
	// the write is done with the request (a REST body is then read to its
	// end), or when a recorded key is found. A grouped write
	// (WriteSpec.Group) calls it before it joins a batch, whose other
	// writes must not wait for what its client has still to send, and
	// before it makes the key's claim, which nothing locks until the
	// batch does (see claimTTL).
	Request func() ([]byte, error)
	// Answer returns what the write answers besides its commit (the ids
	// it wrote, as JSON), called before the commit row is written.
	Answer func() ([]byte, error)
	// Retention is how long a key is kept (idempotency_retention); an
	// older one no longer answers. MaxKeys bounds the keys one user keeps
	// (0: no bound): past it, a new key is refused with TooManyRequests.
	// Above keySample keys, a user's keys are counted once every
	// sixty-fourth of it new keys, so a user may pass it by that much on
	// each replica (idempotency_bound.go).
	Retention time.Duration
	MaxKeys   int

	// Replayed is set by DB.Write when the key was recorded by an
	// earlier write: the answer it recorded, which Write returns the
	// commit of instead of writing.
	Replayed []byte

	// token names the claim the write relies on, set by prepareKey:
	// the claim it made, or the one it found.
	token pgtype.UUID
}

// settle calls k.Request now and makes it return what it returned: the
// request's hash is then known, and a later call reads nothing of the
// request.
func (k *IdempotencyKey) settle() error {
	request, err := k.Request()
	if err != nil {
		return err
	}
	k.Request = func() ([]byte, error) { return request, nil }
	return nil
}

// idempotencyName names a key: its user and the key.
type idempotencyName struct {
	user int64
	key  string
}

// keySample is how many of a user's keys a claim reads on average to
// check the user's bound (see claim).
const keySample = 64

// prepareKey makes sure k has a claim to lock (see claim), in a statement
// of its own, and sets k.token to the claim's: the one it made, or the
// one it found (a request with the key that runs, or waits, or a process
// that died).
func (db *DB) prepareKey(ctx context.Context, k *IdempotencyKey) error {
	// A claim made by another request that commits after this
	// statement's snapshot is neither made nor found: the statement runs
	// again, and finds it. Missing it three times, the key is another
	// request's that is running.
	for range 3 {
		var made, found pgtype.UUID
		err := db.pool.QueryRow(ctx, `WITH made AS (INSERT INTO sluice.idempotency_claims (user_id, key) VALUES ($1, $2)
				ON CONFLICT DO NOTHING RETURNING token)
			SELECT (SELECT token FROM made), (SELECT token FROM sluice.idempotency_claims WHERE user_id = $1 AND key = $2)`,
			k.UserID, k.Key).Scan(&made, &found)
		if err != nil {
			return mapError(err)
		}
		// Both are set when the claim the snapshot saw was deleted as
		// this one was made: the one made is the key's now.
		if made.Valid {
			k.token = made
			return nil
		}
		if found.Valid {
			k.token = found
			return nil
		}
	}
	return errKeyInFlight
}

// releaseKey deletes the claim k relies on (k.token) unless another
// request holds it: the claim of a write that did not record k (it
// failed, or was answered by k). A claim of k made since, by a newer
// request that waits to lock it, is that request's, and stays. Whatever
// fails here, the claim is pruned later.
func (db *DB) releaseKey(ctx context.Context, k *IdempotencyKey) {
	_, _ = db.pool.Exec(context.WithoutCancel(ctx), `DELETE FROM sluice.idempotency_claims WHERE (user_id, key) IN
		(SELECT user_id, key FROM sluice.idempotency_claims WHERE user_id = $1 AND key = $2 AND token = $3 FOR UPDATE SKIP LOCKED)`,
		k.UserID, k.Key, k.token)
}

// claim locks k's claim in t's transaction and looks k up, in one round
// trip. It returns the commit of the write that recorded k (setting
// k.Replayed), nil when k is new, or refused, an error that refuses this
// write alone (the transaction goes on): Conflict while another request
// holds the key, Unprocessable when k was recorded for another request,
// TooManyRequests when the user keeps k.MaxKeys keys. err is an error of
// the transaction. prepared says the caller made k's claim, or found it
// (prepareKey, k.token), and locks only that one: not finding it then
// means that another request deleted it (and may have made another since),
// and the write is refused as if that one were still running (a retry
// finds what it did); a look-up alone (Recorded) makes none, and a key
// without one is held by no one. A look-up that finds k's claim held by
// no one and k not recorded deletes the claim in t (see the top of this
// file).
func (t *Tx) claim(ctx context.Context, d *sluice.Database, k *IdempotencyKey, prepared bool) (first *sluice.Commit, refused, err error) {
	k.Replayed = nil
	b := &pgx.Batch{}
	// The expired key is deleted only by the holder of its claim: without
	// it, the DELETE would wait for the row of the key that the holder is
	// changing. The look-up after is a statement of its own, so its
	// snapshot is taken once the claim is held: it sees the key of a write
	// that committed just before. A look-up deletes the claim it could
	// lock when the key is not recorded: a write whose key is recorded
	// committed, and so holds no claim; a key recorded after this
	// statement's snapshot was by a write that held the claim, which this
	// statement then could not lock.
	var token pgtype.UUID // a look-up's: any claim of k
	if prepared {
		token = k.token
	}
	b.Queue(`WITH claim AS (SELECT 1 FROM sluice.idempotency_claims WHERE user_id = $1 AND key = $2 AND ($5::uuid IS NULL OR token = $5)
				FOR UPDATE SKIP LOCKED),
			expired AS (DELETE FROM sluice.idempotency_keys WHERE user_id = $1 AND key = $2
				AND created_at <= now() - make_interval(secs => $3) AND EXISTS (SELECT 1 FROM claim)),
			unheld AS (DELETE FROM sluice.idempotency_claims WHERE $4 AND user_id = $1 AND key = $2 AND EXISTS (SELECT 1 FROM claim)
				AND NOT EXISTS (SELECT 1 FROM sluice.idempotency_keys WHERE user_id = $1 AND key = $2 AND created_at > now() - make_interval(secs => $3)))
		SELECT EXISTS (SELECT 1 FROM claim), EXISTS (SELECT 1 FROM sluice.idempotency_claims WHERE user_id = $1 AND key = $2)`,
		k.UserID, k.Key, k.Retention.Seconds(), !prepared, token)
	// A key past its retention never answers, held or not: expired
	// deletes it only with its claim held, and pruning may not have run
	// yet. The commit's time is its stamp's, tagging the answer's position.
	b.Queue(`SELECT db_id, request, seq, uid, answer,
			(SELECT c.committed_at FROM sluice.commits c WHERE c.db_id = k.db_id AND c.seq = k.seq AND c.uid = k.uid)
		FROM sluice.idempotency_keys k WHERE user_id = $1 AND key = $2
		AND created_at > now() - make_interval(secs => $3)`, k.UserID, k.Key, k.Retention.Seconds())
	// Counting a user's keys reads up to MaxKeys of them: a write counts
	// them only when its process's count is due (idempotency_bound.go).
	// Keys past their retention, not pruned yet, do not count. A look-up
	// alone (Recorded) refuses nothing for the bound, and counts nothing.
	bounded := k.MaxKeys > 0 && prepared
	count := bounded && t.db.keyUses.due(k.UserID, k.MaxKeys)
	if count {
		b.Queue(`SELECT count(*) FROM (SELECT 1 FROM sluice.idempotency_keys
			WHERE user_id = $1 AND created_at > now() - make_interval(secs => $3) LIMIT $2) k`, k.UserID, k.MaxKeys, k.Retention.Seconds())
	}
	br := t.tx.SendBatch(ctx, b)
	defer br.Close()
	var locked, exists bool
	if err := br.QueryRow().Scan(&locked, &exists); err != nil {
		return nil, nil, mapError(err)
	}
	var dbID int64
	var request, answer []byte
	c := &sluice.Commit{DatabaseID: d.ID, Epoch: d.Epoch}
	var at *time.Time
	err = br.QueryRow().Scan(&dbID, &request, &c.Seq, &c.UID, &answer, &at)
	found := err == nil
	if at != nil {
		c.Time = *at
	}
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, mapError(err)
	}
	kept := 0
	if count {
		if err := br.QueryRow().Scan(&kept); err != nil {
			return nil, nil, mapError(err)
		}
	}
	if err := br.Close(); err != nil {
		return nil, nil, mapError(err)
	}
	if !locked && (exists || prepared) {
		return nil, errKeyInFlight, nil
	}
	if !found {
		if count {
			t.db.keyUses.counted(k.UserID, kept, k.MaxKeys)
		}
		if bounded && t.db.keyUses.claimed(k.UserID) {
			return nil, errTooManyKeys, nil
		}
		return nil, nil, nil
	}
	got, err := k.Request()
	if err != nil {
		return nil, err, nil // the request's own error (its body)
	}
	if dbID != d.ID || !bytes.Equal(got, request) {
		return nil, sluice.Errorf(sluice.CodeUnprocessable, "this Idempotency-Key was used for another request: a retry must send the same request (over REST: its method, path, query, media type (Content-Type), conditional headers and body; over GraphQL: its query, operation name and variables); use a new key for a new request"), nil
	}
	k.Replayed = answer
	return c, nil, nil
}

// errTooManyKeys refuses a new key of a user at idempotency_max_keys.
var errTooManyKeys = &sluice.Error{Code: sluice.CodeTooMany, Retry: time.Minute,
	Message: "this user keeps as many Idempotency-Keys as idempotency_max_keys allows; retry once older ones expire (idempotency_retention), or send the write without one"}

// errKeyInFlight refuses a write whose Idempotency-Key another request
// holds.
var errKeyInFlight = &sluice.Error{Code: sluice.CodeConflict, Retry: time.Second,
	Message: "a request with this Idempotency-Key is still running: retry once it has answered, which then answers the same"}

// Recorded answers for a write that failed before it could look its key
// up (its request is invalid): the commit of the write that recorded k
// (setting k.Replayed), so that a retry of a write that succeeded answers
// its first answer even if the request would not be valid now; or nil
// when k is not recorded, or only past k.Retention; or the error refusing it (Conflict,
// Unprocessable, as Write would). With nil, a claim of k that nobody held
// is deleted, so that the write that made it, if it still waits to lock
// it, is refused, and never commits behind the error this answers.
func (db *DB) Recorded(ctx context.Context, d *sluice.Database, k *IdempotencyKey) (*sluice.Commit, error) {
	var first *sluice.Commit
	err := db.transact(ctx, func(tx *Tx) error {
		c, refused, err := tx.claim(ctx, d, k, false)
		if err != nil {
			return err
		}
		if refused != nil && sluice.ErrorCode(refused) != sluice.CodeTooMany {
			return refused
		}
		first = c
		// Committed: the claim it deleted (and a key past its
		// retention, which answers nothing any more).
		return nil
	})
	return first, err
}

// recordKey queues, in b, the statement that records k for the write w,
// behind its commit row, and deletes k's claim.
func recordKey(b *pgx.Batch, w *Writer, k *IdempotencyKey) error {
	request, err := k.Request()
	if err != nil {
		return err
	}
	answer, err := k.Answer()
	if err != nil {
		return err
	}
	// Kept from now, the end of the write, not from the start of its
	// transaction (now()): a write that ran longer than the retention
	// recorded its key expired, and the retry of its lost answer wrote
	// it again.
	b.Queue(`WITH claim AS (DELETE FROM sluice.idempotency_claims WHERE user_id = $1 AND key = $2)
		INSERT INTO sluice.idempotency_keys (user_id, key, db_id, request, seq, uid, answer, created_at)
		SELECT $1, $2, db_id, $3, seq, uid, $4, clock_timestamp() FROM sluice.commits WHERE uid = $5`,
		k.UserID, k.Key, request, answer, w.uid)
	return nil
}

// PruneIdempotencyKeys deletes the idempotency keys older than retention,
// in statements of at most pruneBatch keys, and returns how many it
// deleted. It also deletes the claims older than claimTTL that no request
// holds: those of processes that died while writing.
func (db *DB) PruneIdempotencyKeys(ctx context.Context, retention time.Duration) (int64, error) {
	if _, err := db.pool.Exec(ctx, `DELETE FROM sluice.idempotency_claims WHERE (user_id, key) IN (SELECT user_id, key
			FROM sluice.idempotency_claims WHERE created_at <= now() - make_interval(secs => $1) LIMIT $2 FOR UPDATE SKIP LOCKED)`,
		claimTTL.Seconds(), pruneBatch); err != nil {
		return 0, mapError(err)
	}
	var total int64
	for {
		tag, err := db.pool.Exec(ctx, `DELETE FROM sluice.idempotency_keys WHERE ctid = ANY(ARRAY(
			SELECT ctid FROM sluice.idempotency_keys WHERE created_at <= now() - make_interval(secs => $1) LIMIT $2))`,
			retention.Seconds(), pruneBatch)
		if err != nil {
			return total, mapError(err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < pruneBatch {
			return total, nil
		}
	}
}

// claimTTL is the age from which a claim no request holds is pruned.
// Requests delete their own claims; a claim a request is about to lock
// and that pruning deletes first makes it answer "still running", so the
// age is well past how long that takes: a statement or a group-commit
// batch's queue, never a client (a grouped write reads its request's
// body to its end before it makes its claim).
const claimTTL = time.Hour

// pruneBatch bounds the keys one statement of PruneIdempotencyKeys
// deletes, so that each stays well within statement_timeout.
const pruneBatch = 10000
