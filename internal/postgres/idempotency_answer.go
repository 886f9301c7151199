package postgres

import (
	"context"
	"time"

	"github.com/sluice-dev/sluice"
)

// RecordedAnswer returns the commit and the answer recorded for the
// Idempotency-Key key of user userID by a write to database d whose
// request hashed to request, if it is not older than retention; a nil
// commit when there is none; or errKeyInFlight (Conflict) when there is
// none and another request holds the key's claim (it is still running),
// as a write with the key would be refused. It reads the key in one
// statement, without taking it: a key is recorded in the transaction of
// the write it answers, so one found is of a write that committed, and a
// key that is not found is looked up again, taken, by the write that runs
// (claim). The running state is answered here too because the caller
// looks the key up before it validates the request: a retry that a
// schema change since makes invalid answered the validation error while
// its first request ran, one that may yet commit. A held claim is told,
// as claim tells it, by failing to lock it (SKIP LOCKED): a lock this
// statement takes lasts the statement, and only a request with the same
// key can meet it, which is then refused as still running. A claim this
// statement locks (nobody held it) of a key not recorded is deleted, as
// claim deletes it (idempotency.go): the write that made it, waiting to
// lock it, would commit behind the answer that nothing ran.
func (db *DB) RecordedAnswer(ctx context.Context, d *sluice.Database, userID int64, key string, request []byte, retention time.Duration) (*sluice.Commit, []byte, error) {
	c := &sluice.Commit{DatabaseID: d.ID, Epoch: d.Epoch}
	var seq, uid *int64
	var at *time.Time
	var answer []byte
	var held bool
	err := db.pool.QueryRow(ctx, `WITH claim AS (SELECT 1 FROM sluice.idempotency_claims WHERE user_id = $1 AND key = $2 FOR UPDATE SKIP LOCKED),
			unheld AS (DELETE FROM sluice.idempotency_claims WHERE user_id = $1 AND key = $2 AND EXISTS (SELECT 1 FROM claim)
				AND NOT EXISTS (SELECT 1 FROM sluice.idempotency_keys WHERE user_id = $1 AND key = $2 AND created_at > now() - make_interval(secs => $5)))
		SELECT k.seq, k.uid, k.answer,
			(SELECT c.committed_at FROM sluice.commits c WHERE c.db_id = $3 AND c.seq = k.seq AND c.uid = k.uid),
			EXISTS (SELECT 1 FROM sluice.idempotency_claims WHERE user_id = $1 AND key = $2) AND NOT EXISTS (SELECT 1 FROM claim)
		FROM (VALUES (1)) one LEFT JOIN sluice.idempotency_keys k ON k.user_id = $1 AND k.key = $2 AND k.db_id = $3
			AND k.request = $4 AND k.created_at > now() - make_interval(secs => $5)`,
		userID, key, d.ID, request, retention.Seconds()).Scan(&seq, &uid, &answer, &at, &held)
	if err != nil {
		return nil, nil, mapError(err)
	}
	switch {
	case seq != nil:
		c.Seq, c.UID = *seq, *uid
		if at != nil { // the commit's time, for its stamp's tag in the answer's position
			c.Time = *at
		}
		return c, answer, nil
	case held:
		return nil, nil, errKeyInFlight
	}
	return nil, nil, nil
}
