package postgres

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
)

// Idempotent writes. A write with an IdempotencyKey runs in a transaction
// of its own (never group commit) that first takes a transaction-scoped
// advisory lock named by the user and the key, without waiting: a request
// that finds it held answers that the first is still running. Holding it,
// the write looks the key up: a key recorded by an earlier write answers
// that write's answer again, and nothing is written; otherwise the write
// runs, and the key, the request's hash and the answer are inserted in the
// same round trip as the commit row, before COMMIT. So a key is recorded
// if and only if its write committed, whichever replica runs the retry,
// even when the first answer was lost with its connection. The lock is
// released at the end of the transaction, commit or rollback, and by
// Postgres when a process dies.

// IdempotencyKey makes a write idempotent under Key for the user UserID.
type IdempotencyKey struct {
	UserID int64
	Key    string
	// Request returns the SHA-256 of what the request asks, called once
	// the write is done with the request (a REST body is then read to its
	// end), or when a recorded key is found.
	Request func() ([]byte, error)
	// Answer returns what the write answers besides its commit (the ids
	// it wrote, as JSON), called before the commit row is written.
	Answer func() ([]byte, error)
	// Retention is how long a key is kept (idempotency_retention); an
	// older one no longer answers. MaxKeys bounds the keys one user keeps
	// (0: no bound): past it, a new key is refused with TooManyRequests.
	Retention time.Duration
	MaxKeys   int

	// Replayed is set by DB.Write when the key was recorded by an
	// earlier write: the answer it recorded, which Write returns the
	// commit of instead of writing.
	Replayed []byte
}

// idempotencyLockClass is the first key of the two-key advisory locks of
// idempotency keys, which keeps them apart from every other advisory lock
// of Sluice (the one-key form, a space of its own).
const idempotencyLockClass = 0x1de4

// claim takes k's lock in t's transaction and looks k up. It returns the
// commit of the write that recorded k (setting k.Replayed), nil when k is
// new, or an error: Conflict while another request holds the key,
// Unprocessable when k was recorded for another request, TooManyRequests
// when the user keeps k.MaxKeys keys.
func (t *Tx) claim(ctx context.Context, d *sluice.Database, k *IdempotencyKey) (*sluice.Commit, error) {
	var locked bool
	// A statement of its own, before the look-up: a statement's snapshot
	// is taken when it starts, so a look-up in the same statement could
	// miss the key of a write that committed while the lock was awaited.
	if err := t.tx.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock($1::int, hashtext($2::bigint::text || '/' || $3::text))",
		idempotencyLockClass, k.UserID, k.Key).Scan(&locked); err != nil {
		return nil, mapError(err)
	}
	if !locked {
		return nil, &sluice.Error{Code: sluice.CodeConflict, Retry: time.Second,
			Message: "a request with this Idempotency-Key is still running: retry once it has answered, which then answers the same"}
	}
	b := &pgx.Batch{}
	b.Queue("DELETE FROM sluice.idempotency_keys WHERE user_id = $1 AND key = $2 AND created_at <= now() - make_interval(secs => $3)",
		k.UserID, k.Key, k.Retention.Seconds())
	b.Queue("SELECT db_id, request, seq, uid, answer FROM sluice.idempotency_keys WHERE user_id = $1 AND key = $2", k.UserID, k.Key)
	// Keys past their retention, not pruned yet, do not count.
	b.Queue(`SELECT count(*) FROM (SELECT 1 FROM sluice.idempotency_keys
		WHERE user_id = $1 AND created_at > now() - make_interval(secs => $3) LIMIT $2) k`, k.UserID, max(k.MaxKeys, 1), k.Retention.Seconds())
	br := t.tx.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return nil, mapError(err)
	}
	var dbID int64
	var request, answer []byte
	c := &sluice.Commit{DatabaseID: d.ID, Epoch: d.Epoch}
	err := br.QueryRow().Scan(&dbID, &request, &c.Seq, &c.UID, &answer)
	found := err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, mapError(err)
	}
	var kept int
	if err := br.QueryRow().Scan(&kept); err != nil {
		return nil, mapError(err)
	}
	if err := br.Close(); err != nil {
		return nil, mapError(err)
	}
	if !found {
		if k.MaxKeys > 0 && kept >= k.MaxKeys {
			return nil, &sluice.Error{Code: sluice.CodeTooMany, Retry: time.Minute,
				Message: "this user keeps as many Idempotency-Keys as idempotency_max_keys allows; retry once older ones expire (idempotency_retention), or send the write without one"}
		}
		return nil, nil
	}
	got, err := k.Request()
	if err != nil {
		return nil, err
	}
	if dbID != d.ID || !bytes.Equal(got, request) {
		return nil, sluice.Errorf(sluice.CodeUnprocessable, "this Idempotency-Key was used for another request: a retry must send the same request (method, path, query, conditional headers and body); use a new key for a new request")
	}
	k.Replayed = answer
	return c, nil
}

// recordKey queues, in b, the statement that records k for the write w,
// behind its commit row.
func recordKey(b *pgx.Batch, w *Writer, k *IdempotencyKey) error {
	request, err := k.Request()
	if err != nil {
		return err
	}
	answer, err := k.Answer()
	if err != nil {
		return err
	}
	b.Queue(`INSERT INTO sluice.idempotency_keys (user_id, key, db_id, request, seq, uid, answer)
		SELECT $1, $2, db_id, $3, seq, uid, $4 FROM sluice.commits WHERE uid = $5`,
		k.UserID, k.Key, request, answer, w.uid)
	return nil
}

// PruneIdempotencyKeys deletes the idempotency keys older than retention,
// in statements of at most pruneBatch keys, and returns how many it
// deleted.
func (db *DB) PruneIdempotencyKeys(ctx context.Context, retention time.Duration) (int64, error) {
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

// pruneBatch bounds the keys one statement of PruneIdempotencyKeys
// deletes, so that each stays well within statement_timeout.
const pruneBatch = 10000
