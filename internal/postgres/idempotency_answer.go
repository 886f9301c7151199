package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
)

// RecordedAnswer returns the commit and the answer recorded for the
// Idempotency-Key key of user userID by a write to database d whose
// request hashed to request, if it is not older than retention; a nil
// commit when there is none. It reads the key in one statement, without
// taking it: a key is recorded in the transaction of the write it
// answers, so one found is of a write that committed, and a key that is
// not found is looked up again, taken, by the write that runs (claim).
func (db *DB) RecordedAnswer(ctx context.Context, d *sluice.Database, userID int64, key string, request []byte, retention time.Duration) (*sluice.Commit, []byte, error) {
	c := &sluice.Commit{DatabaseID: d.ID, Epoch: d.Epoch}
	var answer []byte
	err := db.pool.QueryRow(ctx, `SELECT seq, uid, answer FROM sluice.idempotency_keys
		WHERE user_id = $1 AND key = $2 AND db_id = $3 AND request = $4 AND created_at > now() - make_interval(secs => $5)`,
		userID, key, d.ID, request, retention.Seconds()).Scan(&c.Seq, &c.UID, &answer)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, mapError(err)
	}
	return c, answer, nil
}
