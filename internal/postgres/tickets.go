package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
)

// CreateStreamTicket stores a stream ticket whose secret hashes to hash,
// carrying credential c (its user, token, password hash, expiry and JWT
// key), for
// the database dbPath ("org/name"; empty: any), valid for ttl by
// Postgres' clock (every replica judges expiry by the same clock). It
// first deletes every expired ticket, so the table holds only live ones.
// It returns when the ticket expires, or a TooMany error when c's user
// already holds maxPerUser live tickets.
func (db *DB) CreateStreamTicket(ctx context.Context, hash []byte, c *sluice.Credential, dbPath string, ttl time.Duration, maxPerUser int) (time.Time, error) {
	if err := checkText("database", dbPath); err != nil {
		return time.Time{}, err
	}
	var credExp *time.Time
	if !c.ExpiresAt.IsZero() {
		credExp = &c.ExpiresAt
	}
	var expires time.Time
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		// One user's creations take turns on the user's row, so that
		// concurrent ones cannot all pass the count (lockUser).
		if err := lockUser(ctx, tx, c.User.ID); err != nil {
			return err
		}
		// Any user's expired tickets go, but for those another
		// transaction holds (a redemption, or a user's deletion, which
		// deletes them anyway): waiting for them here, holding this
		// user's row, deadlocked with a deletion of several users (an
		// organization's) that held another user's expired ticket and
		// came to this user next. So the count leaves them out.
		if _, err := tx.Exec(ctx, `DELETE FROM sluice.stream_tickets WHERE hash IN (
			SELECT hash FROM sluice.stream_tickets WHERE expires_at <= now() FOR UPDATE SKIP LOCKED)`); err != nil {
			return err
		}
		var live int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM sluice.stream_tickets WHERE user_id = $1 AND expires_at > now()", c.User.ID).Scan(&live); err != nil {
			return err
		}
		if live >= maxPerUser {
			return sluice.Errorf(sluice.CodeTooMany, "user %s holds %d unused stream tickets, the most allowed; use or let them expire (they last %v)", c.User.Name, live, ttl)
		}
		// The ticket never outlives the credential that made it.
		return tx.QueryRow(ctx, `INSERT INTO sluice.stream_tickets
			(hash, user_id, token_id, password_sum, db_path, credential_expires_at, expires_at, jwt_key)
			VALUES ($1, $2, NULLIF($3, 0), CASE WHEN $4 = '' THEN NULL ELSE sha256(convert_to($4, 'UTF8')) END,
				NULLIF($5, ''), $6, least(now() + make_interval(secs => $7), $6), NULLIF($8, ''))
			RETURNING expires_at`,
			hash, c.User.ID, c.TokenID, c.PasswordHash, dbPath, credExp, ttl.Seconds(), c.JWTKey).Scan(&expires)
	})
	return expires, mapError(err)
}

// RedeemStreamTicket deletes the ticket whose secret hashes to hash and
// returns the credential it carries, as it is now (the user read again,
// with the access log's version from the same snapshot), and the database
// path it is for ("" for any). The DELETE makes a ticket single use on
// every replica: of concurrent redemptions, one gets the row and the
// others find it gone. An unknown, used or expired ticket, or one whose
// credential no longer holds (token revoked, password changed, user
// deleted, credential expired), is an Unauthenticated error; the ticket is
// spent either way.
func (db *DB) RedeemStreamTicket(ctx context.Context, hash []byte) (*sluice.Credential, string, error) {
	var u sluice.User
	c := &sluice.Credential{User: &u}
	var (
		tokenID                   *int64
		passwordHash              string
		dbPath                    *string
		credExp                   *time.Time
		jwtKey                    *string
		byPassword                bool
		live, tokenOK, passwordOK bool
	)
	// One statement, so the ticket, the user, the token and the access
	// version come from one snapshot.
	err := db.pool.QueryRow(ctx, `WITH t AS (DELETE FROM sluice.stream_tickets WHERE hash = $1 RETURNING *)
		SELECT u.id, u.org, u.name, u.superuser, u.password_hash, t.token_id, t.db_path, t.credential_expires_at, t.jwt_key,
			t.expires_at > now() AND (t.credential_expires_at IS NULL OR t.credential_expires_at > now()),
			t.token_id IS NULL OR tok.revoked_at IS NULL AND tok.id IS NOT NULL,
			t.password_sum IS NOT NULL,
			t.password_sum IS NULL OR t.password_sum = sha256(convert_to(u.password_hash, 'UTF8')),
			`+accessVersionSQL+`
		FROM t JOIN sluice.users u ON u.id = t.user_id
		LEFT JOIN sluice.tokens tok ON tok.id = t.token_id`, hash).
		Scan(&u.ID, &u.Org, &u.Name, &u.Superuser, &passwordHash, &tokenID, &dbPath, &credExp, &jwtKey, &live, &tokenOK, &byPassword, &passwordOK, &c.AccessVersion)
	if errors.Is(mapError(err), errNotFound) {
		return nil, "", sluice.Errorf(sluice.CodeUnauthenticated, "invalid stream ticket: unknown, already used or expired; get a new one with POST /api/stream-tickets")
	}
	if err != nil {
		return nil, "", mapError(err)
	}
	switch {
	case !live:
		return nil, "", sluice.Errorf(sluice.CodeUnauthenticated, "the stream ticket expired; get a new one with POST /api/stream-tickets")
	case !tokenOK:
		return nil, "", sluice.Errorf(sluice.CodeUnauthenticated, "the token this stream ticket was made with was revoked")
	case !passwordOK:
		return nil, "", sluice.Errorf(sluice.CodeUnauthenticated, "the password of %s changed since this stream ticket was made; authenticate again", u.Name)
	}
	if tokenID != nil {
		c.TokenID = *tokenID
	} else if byPassword {
		// The grant of a stream opened with a ticket made with a password
		// or a JWT holds the hash, so a password change ends it
		// (engine.CheckGrant).
		c.PasswordHash = passwordHash
	}
	if credExp != nil {
		c.ExpiresAt = *credExp
	}
	if jwtKey != nil {
		// The stream it opens is refused, or ended, once the key is no
		// longer in this replica's set (changefeed.Guard).
		c.JWTKey = *jwtKey
	}
	path := ""
	if dbPath != nil {
		path = *dbPath
	}
	return c, path, nil
}
