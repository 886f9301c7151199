package postgres

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
)

// webhookColumns are the columns scanWebhook reads, w being the webhook,
// d its database, c the database's counter row and pc the commit of the
// webhook's position (none at commit 0, or once pruned), whose stamp
// tags the position as every position a read or an event answers is.
const webhookColumns = `w.id, w.url, w.description, w.classes, w.ops, w.filter, w.batch,
	w.creator_id, w.creator_name, coalesce(w.creator_token_id, 0), coalesce(w.creator_jwt_key, ''), w.state, w.status_message, w.seq, w.idx, pc.uid, pc.committed_at,
	w.attempt, w.next_attempt_at, w.delivered, w.delivered_events, w.failed, w.last_success_at, w.old_secret_until,
	w.version, w.created_at, w.updated_at, ` + databaseColumns

const webhookFrom = ` FROM sluice.webhooks w JOIN sluice.databases d ON d.id = w.db_id JOIN sluice.commit_counters c ON c.db_id = w.db_id
	LEFT JOIN sluice.commits pc ON pc.db_id = w.db_id AND pc.seq = w.seq`

func scanWebhook(row pgx.Row) (*sluice.Webhook, error) {
	var w sluice.Webhook
	var d sluice.Database
	var sdl, batch, state string
	var next, lastOK, oldUntil *time.Time
	var retention, uid *int64
	var at *time.Time
	err := row.Scan(&w.ID, &w.URL, &w.Description, &w.Classes, &w.Ops, &w.Filter, &batch,
		&w.CreatorID, &w.CreatorName, &w.CreatorTokenID, &w.CreatorJWTKey, &state, &w.StatusMessage, &w.Position.Seq, &w.Position.Index, &uid, &at,
		&w.Attempt, &next, &w.Delivered, &w.DeliveredEvents, &w.Failed, &lastOK, &oldUntil,
		&w.Version, &w.CreatedAt, &w.UpdatedAt,
		&d.ID, &d.Org, &d.Name, &d.Label, &d.Comment, &d.Epoch, &d.SchemaVersion, &sdl, &retention)
	if err != nil {
		return nil, mapError(err)
	}
	d.LogRetention = retentionOf(retention)
	w.Batch, w.State = sluice.WebhookBatch(batch), sluice.WebhookState(state)
	w.Position.Epoch = d.Epoch
	w.Position.Tag = stampTag(uid, at)
	w.Database = &d
	for _, t := range []struct {
		src *time.Time
		dst *time.Time
	}{{next, &w.NextAttemptAt}, {lastOK, &w.LastSuccessAt}, {oldUntil, &w.OldSecretUntil}} {
		if t.src != nil {
			*t.dst = *t.src
		}
	}
	return &w, nil
}

// stampTag returns the tag of the commit stamped uid at at, "" when
// either is null (no such commit).
func stampTag(uid *int64, at *time.Time) string {
	if uid == nil || at == nil {
		return ""
	}
	return sluice.Stamp{UID: *uid, Time: *at}.Tag()
}

// errNoWebhook is the NotFound error of webhook id of database d.
func errNoWebhook(d *sluice.Database, id int64) error {
	return sluice.Errorf(sluice.CodeNotFound, "database %s has no webhook %d", d.Path(), id)
}

// changeWebhookTx runs fn, a change of webhook *id, in a transaction,
// and once it committed announces the change to the deliverers, best
// effort: by a NOTIFY after the commit, not in the transaction, since any
// role that may connect can fill Postgres's queue of notifications, after
// which a transaction that notifies fails at COMMIT (an admin could not
// pause, change or delete a webhook). A notification is only a wake-up:
// the deliverers poll too. id is read once fn returned (a creation sets
// it).
func (db *DB) changeWebhookTx(ctx context.Context, id *int64, fn func(tx pgx.Tx) error) error {
	if err := db.inTx(ctx, fn); err != nil {
		return err
	}
	db.announceWebhook(ctx, *id)
	return nil
}

// announceWebhook tells the deliverers that webhook id changed, best
// effort (see changeWebhookTx).
func (db *DB) announceWebhook(ctx context.Context, id int64) {
	nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := db.pool.Exec(nctx, "SELECT pg_notify("+channelSQL("$1")+", $2)", webhooksChannel, strconv.FormatInt(id, 10)); err != nil {
		db.logger.Warn("announce a webhook's change (the deliverers see it at their next poll)", "webhook", id, "err", err)
	}
}

// RemoveJWTKeys records that a reload or fetch of this replica's JWT key
// set took the keys removed out of it, and that it holds the keys held
// (sluice.Credential.JWTKey identities; sluice.removed_jwt_keys: a key
// held is no longer removed), and
// pauses as revoked every active webhook made, or last re-pointed, with
// a JWT of a removed key, its status message msg formatted (Postgres's
// format) with the creator's name as %1$s. It bumps their versions (a
// request in flight is abandoned) and returns their ids, which it
// announces. Applying the same keys again changes nothing more.
//
// The record commits before the webhooks are paused, so that none made
// or resumed with such a JWT escapes both: one committed before the
// UPDATE's snapshot is paused by it, and one committed after starts its
// loop after the record, which its check of the creator reads (a
// deliverer's loop checks it at every start). In one transaction, a
// webhook committed while it ran escaped both.
func (db *DB) RemoveJWTKeys(ctx context.Context, removed, held []string, msg string) ([]int64, error) {
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "DELETE FROM sluice.removed_jwt_keys WHERE key = ANY($1)", nonNil(held)); err != nil {
			return mapError(err)
		}
		_, err := tx.Exec(ctx, "INSERT INTO sluice.removed_jwt_keys (key) SELECT unnest($1::text[]) ON CONFLICT (key) DO NOTHING", nonNil(removed))
		return mapError(err)
	})
	if err != nil || len(removed) == 0 {
		return nil, err
	}
	var ids []int64
	err = db.inTx(ctx, func(tx pgx.Tx) error {
		// The lease before the webhooks' rows, as in every change of a
		// webhook (changeWebhookWith): a takeover waits for this one.
		if _, err := tx.Exec(ctx, "SELECT 1 FROM sluice.webhook_lease FOR SHARE"); err != nil {
			return mapError(err)
		}
		// The rows are locked in the order of their ids, so that two
		// replicas doing this at once do not deadlock.
		rows, err := tx.Query(ctx, `UPDATE sluice.webhooks SET state = $2, status_message = format($3, creator_name),
				attempt = 0, next_attempt_at = NULL, version = version + 1, `+touched+`
			WHERE id IN (SELECT id FROM sluice.webhooks WHERE creator_jwt_key = ANY($1) AND state = 'active' ORDER BY id FOR UPDATE)
				AND creator_jwt_key = ANY($1) AND state = 'active'
			RETURNING id`, removed, string(sluice.WebhookRevoked), msg)
		if err != nil {
			return mapError(err)
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		return mapError(err)
	})
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		db.announceWebhook(ctx, id)
	}
	return ids, nil
}

// JWTKeyRemoved reports whether a replica recorded key (a
// sluice.Credential.JWTKey identity) as removed from its JWT key set
// (RemoveJWTKeys), and no replica brought it back since.
func (db *DB) JWTKeyRemoved(ctx context.Context, key string) (bool, error) {
	var removed bool
	err := db.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM sluice.removed_jwt_keys WHERE key = $1)", key).Scan(&removed)
	return removed, mapError(err)
}

// Seal turns a webhook's signing secret into what is stored: it is given
// the webhook's id, which the sealing binds the secret to.
type Seal func(id int64) ([]byte, error)

// CreateWebhook stores w (its settings, creator and state) on database
// w.Database with a secret sealed by seal, unless the database holds max
// webhooks already (a Conflict error naming the cap). Delivery starts
// after w.Position when it has an epoch (it must be retained history, else
// Gone), else after the newest commit. It sets w's id, position, version
// and times.
func (db *DB) CreateWebhook(ctx context.Context, w *sluice.Webhook, seal Seal, max, maxPerUser int) error {
	d := w.Database
	return db.changeWebhookTx(ctx, &w.ID, func(tx pgx.Tx) error {
		// Creations on one database, and by one user, take turns, so the
		// caps hold. The locks are on Sluice's own rows, which no other
		// role may lock: an advisory lock's key could be taken by any
		// role that may log in, and creations made to wait for good.
		// The history (the database's counter row), then the database's
		// row, then the user's: the order of every transaction that
		// locks them (lockorder.go). With the user's first, a creation
		// waited for the counter row of a database an organization's
		// deletion had deleted, while the deletion, come to its users,
		// waited for the creator's row.
		h, err := history(ctx, tx, d)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "SELECT 1 FROM sluice.databases WHERE id = $1 FOR NO KEY UPDATE", d.ID); err != nil {
			return mapError(err)
		}
		if maxPerUser > 0 {
			n, err := webhooksOf(ctx, tx, w.CreatorID)
			if err != nil {
				return err
			}
			if n >= maxPerUser {
				return sluice.Errorf(sluice.CodeConflict, "user %s made %d webhooks, the most a user may (config max_webhooks_per_user); delete one first", w.CreatorName, n)
			}
		}
		var n int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM sluice.webhooks WHERE db_id = $1", d.ID).Scan(&n); err != nil {
			return mapError(err)
		}
		if n >= max {
			return sluice.Errorf(sluice.CodeConflict, "database %s has %d webhooks, its maximum (config max_webhooks_per_database); delete one first", d.Path(), n)
		}
		if w.Position.Epoch == "" {
			w.Position = sluice.Position{Epoch: d.Epoch, Seq: h.LastSeq, Index: sluice.WholeCommit}
		} else if err := checkWebhookPosition(d, h, w.Position); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, "SELECT nextval('sluice.webhooks_id_seq')").Scan(&w.ID); err != nil {
			return mapError(err)
		}
		secret, err := seal(w.ID)
		if err != nil {
			return err
		}
		var uid *int64
		var at *time.Time
		err = tx.QueryRow(ctx, `INSERT INTO sluice.webhooks (id, db_id, url, description, classes, ops, filter, batch,
				creator_id, creator_name, creator_token_id, creator_jwt_key, secret, state, seq, idx)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, NULLIF($11, 0), NULLIF($12, ''), $13, $14, $15, $16)
			RETURNING version, created_at, updated_at,
				(SELECT uid FROM sluice.commits WHERE db_id = $2 AND seq = $15), (SELECT committed_at FROM sluice.commits WHERE db_id = $2 AND seq = $15)`,
			w.ID, d.ID, w.URL, w.Description, nonNil(w.Classes), w.Ops, nullJSON(w.Filter), string(w.Batch),
			w.CreatorID, w.CreatorName, w.CreatorTokenID, w.CreatorJWTKey, secret, string(sluice.WebhookActive), w.Position.Seq, w.Position.Index).
			Scan(&w.Version, &w.CreatedAt, &w.UpdatedAt, &uid, &at)
		if err != nil {
			return mapError(err)
		}
		// Tagged as the position a read of it answers (scanWebhook).
		w.Position.Tag = stampTag(uid, at)
		w.State = sluice.WebhookActive
		return nil
	})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nullJSON(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// history reads d's retained history in q's transaction, or NotFound when
// d was deleted. It locks the counter row FOR SHARE until the commit: a
// prune running locks it first (Prune), so a webhook placed at a position
// checked against this history is either seen by that prune, or waits for
// it and sees what it pruned. Commits lock the row only to count, as they
// end.
func history(ctx context.Context, q querier, d *sluice.Database) (sluice.History, error) {
	var h sluice.History
	err := q.QueryRow(ctx, "SELECT last_seq, pruned_seq FROM sluice.commit_counters WHERE db_id = $1 FOR SHARE", d.ID).Scan(&h.LastSeq, &h.PrunedSeq)
	if errors.Is(mapError(err), errNotFound) {
		return h, sluice.ErrNoDatabase(d.Org, d.Name)
	}
	return h, mapError(err)
}

// checkWebhookPosition checks that delivery can continue after p: it is of
// d's epoch, not ahead of the log, and nothing after it was pruned. The
// end of the newest pruned commit is fine: everything after it is kept.
func checkWebhookPosition(d *sluice.Database, h sluice.History, p sluice.Position) error {
	if p.Epoch != d.Epoch {
		return sluice.Errorf(sluice.CodeGone, "%s", sluice.NotOf(d, "position", p))
	}
	if p.Seq > h.LastSeq {
		return sluice.Errorf(sluice.CodeInvalid, "position %s is ahead of the newest commit %d of %s", p, h.LastSeq, d.Path())
	}
	if p.Seq < h.PrunedSeq || p.Seq == h.PrunedSeq && p.Index != sluice.WholeCommit && h.PrunedSeq > 0 {
		return sluice.Errorf(sluice.CodeGone, "position %s is older than the retained history of %s: commits up to %d were pruned; the oldest position to continue from is %s",
			p, d.Path(), h.PrunedSeq, sluice.Position{Epoch: d.Epoch, Seq: h.PrunedSeq, Index: sluice.WholeCommit})
	}
	return nil
}

// Webhooks returns the webhooks of database d, by id.
func (db *DB) Webhooks(ctx context.Context, d *sluice.Database) ([]*sluice.Webhook, error) {
	rows, err := db.pool.Query(ctx, "SELECT "+webhookColumns+webhookFrom+" WHERE w.db_id = $1 ORDER BY w.id", d.ID)
	if err != nil {
		return nil, mapError(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*sluice.Webhook, error) { return scanWebhook(row) })
	return out, mapError(err)
}

// Webhook returns webhook id of database d, or NotFound.
func (db *DB) Webhook(ctx context.Context, d *sluice.Database, id int64) (*sluice.Webhook, error) {
	w, err := scanWebhook(db.pool.QueryRow(ctx, "SELECT "+webhookColumns+webhookFrom+" WHERE w.db_id = $1 AND w.id = $2", d.ID, id))
	if errors.Is(err, errNotFound) {
		return nil, errNoWebhook(d, id)
	}
	return w, err
}

// WebhookSecrets are a webhook's sealed signing secrets: Old (nil: none)
// signs too for OldFor after the read, by Postgres' clock (its
// old_secret_until against the time of the read): a deliverer counts it
// on its own clock from the read, never comparing its clock with
// Postgres'. RetryIn, read the same way from next_attempt_at, is how
// long after the read the next attempt of a failed delivery is due
// (zero: now).
type WebhookSecrets struct {
	Current []byte
	Old     []byte
	OldFor  time.Duration
	RetryIn time.Duration
}

// WebhookForDelivery returns webhook id with its sealed secrets, or a
// NotFound error when it no longer exists.
func (db *DB) WebhookForDelivery(ctx context.Context, id int64) (*sluice.Webhook, *WebhookSecrets, error) {
	var s WebhookSecrets
	var oldFor, retryIn *float64
	var row pgx.Row = db.pool.QueryRow(ctx, "SELECT "+webhookColumns+", w.secret, w.old_secret, extract(epoch FROM w.old_secret_until - clock_timestamp())::float8, "+
		"extract(epoch FROM w.next_attempt_at - clock_timestamp())::float8"+webhookFrom+" WHERE w.id = $1", id)
	w, err := scanWebhook(scanTail{row, []any{&s.Current, &s.Old, &oldFor, &retryIn}})
	if errors.Is(err, errNotFound) {
		return nil, nil, sluice.Errorf(sluice.CodeNotFound, "webhook %d does not exist", id)
	}
	if err != nil {
		return nil, nil, err
	}
	if oldFor != nil {
		s.OldFor = time.Duration(max(*oldFor, 0) * float64(time.Second))
	}
	if retryIn != nil {
		s.RetryIn = time.Duration(max(*retryIn, 0) * float64(time.Second))
	}
	return w, &s, nil
}

// scanTail scans extra columns after those of another scanner.
type scanTail struct {
	row  pgx.Row
	tail []any
}

func (s scanTail) Scan(dest ...any) error { return s.row.Scan(append(dest, s.tail...)...) }

// WebhookCreator is whom a webhook delivers as: the user who made it, or
// who last changed where, what or from where it delivers, and the API
// token they did so with (TokenID 0: none), or the identity of the key
// that verified the JWT they did so with (JWTKey, sluice.Credential.JWTKey;
// "": none).
type WebhookCreator struct {
	ID      int64
	Name    string
	TokenID int64
	JWTKey  string
	// Cap is the most webhooks the user may deliver as (config
	// max_webhooks_per_user), checked when a change makes a webhook
	// another user's deliver as this one: one taken over counts as one
	// made. 0: no cap (the super user).
	Cap int
}

// webhooksOf returns how many webhooks deliver as user id, its user row
// locked in tx: creations and takeovers by one user take turns, so that
// max_webhooks_per_user holds. The lock is on Sluice's own row, which no
// other role may lock (an advisory lock's key could be taken by any role
// that may log in, and creations made to wait for good).
func webhooksOf(ctx context.Context, tx pgx.Tx, id int64) (int, error) {
	if _, err := tx.Exec(ctx, "SELECT 1 FROM sluice.users WHERE id = $1 FOR NO KEY UPDATE", id); err != nil {
		return 0, mapError(err)
	}
	var n int
	err := tx.QueryRow(ctx, "SELECT count(*) FROM sluice.webhooks WHERE creator_id = $1", id).Scan(&n)
	return n, mapError(err)
}

// takeOver checks that c may take over a webhook that delivers as user
// current (see WebhookCreator.Cap), in tx, which holds the webhook's
// row.
func takeOver(ctx context.Context, tx pgx.Tx, current int64, c WebhookCreator) error {
	if c.Cap <= 0 || current == c.ID {
		return nil
	}
	n, err := webhooksOf(ctx, tx, c.ID)
	if err != nil {
		return err
	}
	if n >= c.Cap {
		return sluice.Errorf(sluice.CodeConflict, "user %s delivers as %d webhooks, the most a user may (config max_webhooks_per_user), and this change would make this webhook deliver as %s too; delete one first", c.Name, n, c.Name)
	}
	return nil
}

// setCreator is the SET list that makes a webhook deliver as the creator
// given in parameters $n to $n+3 (creatorArgs).
func setCreator(n int) string {
	return "creator_id = $" + strconv.Itoa(n) + ", creator_name = $" + strconv.Itoa(n+1) +
		", creator_token_id = NULLIF($" + strconv.Itoa(n+2) + "::bigint, 0)" +
		", creator_jwt_key = NULLIF($" + strconv.Itoa(n+3) + "::text, '')"
}

// creatorArgs are the parameters of setCreator for c.
func creatorArgs(c WebhookCreator) []any {
	return []any{c.ID, c.Name, c.TokenID, c.JWTKey}
}

// WebhookSettings are the settings of a webhook an admin may change, and
// whom it delivers as with them.
type WebhookSettings struct {
	URL         string
	Description string
	Classes     []string
	Ops         []string
	Filter      []byte
	Batch       sluice.WebhookBatch
	Creator     WebhookCreator
}

// UpdateWebhook changes the settings of webhook id of database d: change
// is given the webhook as it is in the change's transaction, its row
// locked until the commit, and returns the settings to store (its error
// is returned, nothing changed). So concurrent changes apply one after
// the other, each to what the one before it wrote: a change read before
// the transaction, merged and written back whole, would undo a change
// of another field committed meanwhile. A delivery being retried starts
// its schedule again, with the new settings. The version stays (a
// request in flight is let finish, see Delivery) unless a binary before
// migration 25 holds the lease (see changeWebhook).
func (db *DB) UpdateWebhook(ctx context.Context, d *sluice.Database, id int64, change func(w *sluice.Webhook) (WebhookSettings, error)) error {
	return db.changeWebhookWith(ctx, d, id, false, func(tx pgx.Tx) (string, []any, error) {
		w, err := scanWebhook(tx.QueryRow(ctx, "SELECT "+webhookColumns+webhookFrom+" WHERE w.db_id = $1 AND w.id = $2 FOR UPDATE OF w", d.ID, id))
		if errors.Is(err, errNotFound) {
			return "", nil, errNoWebhook(d, id)
		}
		if err != nil {
			return "", nil, err
		}
		s, err := change(w)
		if err != nil {
			return "", nil, err
		}
		if err := takeOver(ctx, tx, w.CreatorID, s.Creator); err != nil {
			return "", nil, err
		}
		return `url = $3, description = $4, classes = $5, ops = $6, filter = $7, batch = $8, ` + setCreator(9) + `, attempt = 0, next_attempt_at = NULL, ` + activeClearsMessage,
			append([]any{s.URL, s.Description, nonNil(s.Classes), s.Ops, nullJSON(s.Filter), string(s.Batch)}, creatorArgs(s.Creator)...), nil
	})
}

// activeClearsMessage is the SET item of a change that starts a
// webhook's retry schedule again (attempt = 0) without changing its
// state: an active webhook then no longer retries, and its status message
// said what failed while it did (the attempts log keeps it). The message
// of a webhook paused, failing or revoked says why it is, and stays. A
// change that left it said "active" with the old URL's error.
const activeClearsMessage = "status_message = CASE WHEN state = 'active' THEN '' ELSE status_message END"

// touched is the SET item that moves updated_at forward: always, even
// within the microsecond of the previous change or with a clock set back,
// since the deliverer tells a change of settings by it (see Delivery).
const touched = "updated_at = greatest(now(), updated_at + interval '1 microsecond')"

// changeWebhook applies set (an UPDATE's SET list, whose parameters start
// at $3) to webhook id of d, moves its updated_at and announces it. It
// moves the version when state is true (set changes the state: a request
// in flight is abandoned).
//
// For a change of settings only, it moves the version only when the
// lease's holder does not tell a change of settings by updated_at. This
// binary's kind does (see AcquireWebhookLease): the version stays, and a
// request in flight is let finish. A holder of a binary before migration
// 25 (beside this one during a rolling upgrade) may notice a change of a
// webhook only by its version, and would then deliver with the old URL,
// secret and filter until its loop started over: under it the version
// moves too, and that holder abandons the request in flight and starts
// over with the new settings, as its own release did for every change.
// The lease row is read FOR SHARE first, so a takeover waits for this
// transaction: the new holder's loops read the webhook after it,
// whichever binary it is.
func (db *DB) changeWebhook(ctx context.Context, d *sluice.Database, id int64, state bool, set string, args ...any) error {
	return db.changeWebhookWith(ctx, d, id, state, func(pgx.Tx) (string, []any, error) { return set, args, nil })
}

// changeWebhookWith is changeWebhook with the SET list and its parameters
// made by prepare in the transaction, after the lease row is read (the
// lease before the webhook's row, as in every change).
func (db *DB) changeWebhookWith(ctx context.Context, d *sluice.Database, id int64, state bool, prepare func(tx pgx.Tx) (string, []any, error)) error {
	return db.changeWebhookTx(ctx, &id, func(tx pgx.Tx) error {
		var knows bool
		if err := tx.QueryRow(ctx, "SELECT settings_generation = generation FROM sluice.webhook_lease FOR SHARE").Scan(&knows); err != nil {
			return mapError(err)
		}
		set, args, err := prepare(tx)
		if err != nil {
			return err
		}
		if state || !knows {
			set += ", version = version + 1"
		}
		tag, err := tx.Exec(ctx, "UPDATE sluice.webhooks SET "+set+", "+touched+" WHERE db_id = $1 AND id = $2",
			append([]any{d.ID, id}, args...)...)
		if err != nil {
			return mapError(err)
		}
		if tag.RowsAffected() == 0 {
			return errNoWebhook(d, id)
		}
		return nil
	})
}

// PauseWebhook pauses webhook id of d (an admin's pause), whatever its
// state. It bumps the version: a request in flight is abandoned.
func (db *DB) PauseWebhook(ctx context.Context, d *sluice.Database, id int64) error {
	return db.changeWebhook(ctx, d, id, true, `state = $3, status_message = 'paused by an admin', attempt = 0, next_attempt_at = NULL`,
		string(sluice.WebhookPaused))
}

// ResumeWebhook makes webhook id of d active again, delivering after its
// position, or after *from when given, as c (who chose that position). It
// returns Gone, naming the gap and the oldest position to continue from,
// when history after that position was pruned while the webhook was not
// active.
func (db *DB) ResumeWebhook(ctx context.Context, d *sluice.Database, id int64, from *sluice.Position, c WebhookCreator) error {
	return db.moveWebhook(ctx, d, id, from, true, c)
}

// ReplayWebhook moves webhook id of d to position p: it next delivers what
// follows p, which must be retained history of d, as c. Its state is left
// alone.
func (db *DB) ReplayWebhook(ctx context.Context, d *sluice.Database, id int64, p sluice.Position, c WebhookCreator) error {
	return db.moveWebhook(ctx, d, id, &p, false, c)
}

// moveWebhook moves webhook id of d to position to (nil: it stays), and
// makes it deliver as c when it moves.
func (db *DB) moveWebhook(ctx context.Context, d *sluice.Database, id int64, to *sluice.Position, resume bool, c WebhookCreator) error {
	return db.changeWebhookTx(ctx, &id, func(tx pgx.Tx) error {
		// The history before the webhook's row: a database's deletion
		// locks the counter row, then (cascading) the webhooks'.
		h, err := history(ctx, tx, d)
		if err != nil {
			return err
		}
		var seq, creator int64
		var idx int
		err = tx.QueryRow(ctx, "SELECT seq, idx, creator_id FROM sluice.webhooks WHERE db_id = $1 AND id = $2 FOR UPDATE", d.ID, id).Scan(&seq, &idx, &creator)
		if errors.Is(mapError(err), errNotFound) {
			return errNoWebhook(d, id)
		}
		if err != nil {
			return mapError(err)
		}
		if to != nil {
			if err := takeOver(ctx, tx, creator, c); err != nil {
				return err
			}
		}
		p := sluice.Position{Epoch: d.Epoch, Seq: seq, Index: idx}
		if to != nil {
			p = *to
		}
		if err := checkWebhookPosition(d, h, p); err != nil {
			if to == nil && sluice.ErrorCode(err) == sluice.CodeGone {
				return sluice.Errorf(sluice.CodeGone, "webhook %d delivered up to %s, but commits up to %d of %s were pruned while it was not active: resume it from a retained position ({\"after\": \"%s\"} continues with the oldest retained commit, accepting the gap)",
					id, p, h.PrunedSeq, d.Path(), sluice.Position{Epoch: d.Epoch, Seq: h.PrunedSeq, Index: sluice.WholeCommit})
			}
			return err
		}
		set := "seq = $3, idx = $4, attempt = 0, next_attempt_at = NULL"
		args := []any{d.ID, id, p.Seq, p.Index}
		if to != nil {
			set += ", " + setCreator(5)
			args = append(args, creatorArgs(c)...)
		}
		if resume {
			set += ", state = 'active', status_message = ''"
		} else {
			set += ", " + activeClearsMessage
		}
		if _, err := tx.Exec(ctx, "UPDATE sluice.webhooks SET "+set+", version = version + 1, "+touched+" WHERE id = $2 AND db_id = $1",
			args...); err != nil {
			return mapError(err)
		}
		return nil
	})
}

// RotateWebhookSecret replaces the signing secret of webhook id of d with
// one sealed by seal, and makes it deliver as c, who holds the secret now;
// the previous one keeps signing (a second signature) for grace. The previous secret is read by the UPDATE itself, not before
// it: of two rotations at once, the second waits for the first's row lock
// and then (READ COMMITTED) keeps the first's secret as the previous one,
// so the first caller's secret signs for the second's grace.
//
// It returns the end of the grace it stored, by Postgres' clock (zero: no
// previous secret kept), for the caller to answer as the status will.
func (db *DB) RotateWebhookSecret(ctx context.Context, d *sluice.Database, id int64, seal Seal, grace time.Duration, c WebhookCreator) (time.Time, error) {
	secret, err := seal(id)
	if err != nil {
		return time.Time{}, err
	}
	var until *time.Time
	err = db.changeWebhookWith(ctx, d, id, false, func(tx pgx.Tx) (string, []any, error) {
		var creator int64
		err := tx.QueryRow(ctx, `SELECT creator_id, CASE WHEN $3 > 0 THEN now() + make_interval(secs => $3) END
			FROM sluice.webhooks WHERE db_id = $1 AND id = $2 FOR UPDATE`, d.ID, id, grace.Seconds()).Scan(&creator, &until)
		if errors.Is(mapError(err), errNotFound) {
			return "", nil, errNoWebhook(d, id)
		}
		if err != nil {
			return "", nil, mapError(err)
		}
		if err := takeOver(ctx, tx, creator, c); err != nil {
			return "", nil, err
		}
		return `old_secret = CASE WHEN $4::timestamptz IS NOT NULL THEN secret END, old_secret_until = $4, secret = $3, ` + setCreator(5),
			append([]any{secret, until}, creatorArgs(c)...), nil
	})
	if err != nil || until == nil {
		return time.Time{}, err
	}
	return *until, nil
}

// ResealWebhookSecrets passes every stored secret sealed with a key other
// than keyID (the first 8 bytes of a sealed secret name its key) through
// reseal and stores the result, and returns how many it resealed.
func (db *DB) ResealWebhookSecrets(ctx context.Context, keyID []byte, reseal func(id int64, sealed []byte) ([]byte, error)) (int, error) {
	n := 0
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT id, secret, old_secret FROM sluice.webhooks
			WHERE substring(secret FROM 1 FOR 8) <> $1 OR substring(old_secret FROM 1 FOR 8) <> $1 FOR UPDATE`, keyID)
		if err != nil {
			return mapError(err)
		}
		type sealed struct {
			id       int64
			cur, old []byte
		}
		all, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (sealed, error) {
			var s sealed
			return s, row.Scan(&s.id, &s.cur, &s.old)
		})
		if err != nil {
			return mapError(err)
		}
		for _, s := range all {
			cur, err := reseal(s.id, s.cur)
			if err != nil {
				return err
			}
			var old []byte
			if s.old != nil {
				if old, err = reseal(s.id, s.old); err != nil {
					return err
				}
			}
			if _, err := tx.Exec(ctx, "UPDATE sluice.webhooks SET secret = $2, old_secret = $3 WHERE id = $1", s.id, cur, old); err != nil {
				return mapError(err)
			}
			n++
		}
		return nil
	})
	return n, err
}

// DeleteWebhook deletes webhook id of d with its attempts.
func (db *DB) DeleteWebhook(ctx context.Context, d *sluice.Database, id int64) error {
	return db.changeWebhookTx(ctx, &id, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "DELETE FROM sluice.webhooks WHERE db_id = $1 AND id = $2", d.ID, id)
		if err != nil {
			return mapError(err)
		}
		if tag.RowsAffected() == 0 {
			return errNoWebhook(d, id)
		}
		return nil
	})
}

// WebhookAttempts returns the last attempts of webhook id, newest first,
// at most limit (the log keeps 100).
func (db *DB) WebhookAttempts(ctx context.Context, id int64, limit int) ([]sluice.WebhookAttempt, error) {
	rows, err := db.pool.Query(ctx, `SELECT n, at, message_id, events, attempt, status, error, duration_ms, response
		FROM sluice.webhook_attempts WHERE webhook_id = $1 ORDER BY n DESC LIMIT $2`, id, limit)
	if err != nil {
		return nil, mapError(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (sluice.WebhookAttempt, error) {
		var a sluice.WebhookAttempt
		var ms float64
		err := row.Scan(&a.N, &a.At, &a.MessageID, &a.Events, &a.Attempt, &a.Status, &a.Error, &ms, &a.Response)
		a.Duration = time.Duration(ms * float64(time.Millisecond))
		return a, err
	})
	return out, mapError(err)
}

// WebhookLag returns how far webhook w is behind its database's log.
func (db *DB) WebhookLag(ctx context.Context, w *sluice.Webhook) (sluice.WebhookLag, error) {
	var lag sluice.WebhookLag
	var age *float64
	// A position inside a commit still owes the rest of that commit.
	from := w.Position.Seq + 1
	if w.Position.Index != sluice.WholeCommit {
		from = w.Position.Seq
	}
	err := db.pool.QueryRow(ctx, `SELECT greatest(c.last_seq - $2 + 1, 0),
			extract(epoch FROM clock_timestamp() - (SELECT committed_at FROM sluice.commits WHERE db_id = $1 AND seq >= $2 ORDER BY seq LIMIT 1))::float8
		FROM sluice.commit_counters c WHERE c.db_id = $1`, w.Database.ID, from).Scan(&lag.Commits, &age)
	if age != nil {
		lag.Age = time.Duration(max(*age, 0) * float64(time.Second))
	}
	return lag, mapError(err)
}

// The deliverer's side.

// AcquireWebhookLease makes holder the deliverer for ttl when the lease is
// free or expired, and returns its new generation; ok is false when
// another holder's lease runs. It records that the holder tells a change
// of settings by updated_at (settings_generation, migration 25: older
// binaries move the generation alone; see changeWebhook).
func (db *DB) AcquireWebhookLease(ctx context.Context, holder string, ttl time.Duration) (gen int64, ok bool, err error) {
	err = db.pool.QueryRow(ctx, `UPDATE sluice.webhook_lease SET holder = $1, generation = generation + 1,
			settings_generation = generation + 1, expires_at = now() + make_interval(secs => $2)
		WHERE expires_at <= now() RETURNING generation`, holder, ttl.Seconds()).Scan(&gen)
	if errors.Is(mapError(err), errNotFound) {
		return 0, false, nil
	}
	return gen, err == nil, mapError(err)
}

// RenewWebhookLease extends holder's lease of generation gen by ttl from
// now; false means it is no longer held (it expired, or another took it).
func (db *DB) RenewWebhookLease(ctx context.Context, holder string, gen int64, ttl time.Duration) (bool, error) {
	tag, err := db.pool.Exec(ctx, `UPDATE sluice.webhook_lease SET expires_at = now() + make_interval(secs => $3)
		WHERE holder = $1 AND generation = $2 AND expires_at > now()`, holder, gen, ttl.Seconds())
	return err == nil && tag.RowsAffected() == 1, mapError(err)
}

// ReleaseWebhookLease ends holder's lease of generation gen at once, so
// that another replica takes over without waiting for it to expire.
func (db *DB) ReleaseWebhookLease(ctx context.Context, holder string, gen int64) error {
	_, err := db.pool.Exec(ctx, `UPDATE sluice.webhook_lease SET expires_at = now() WHERE holder = $1 AND generation = $2`, holder, gen)
	return mapError(err)
}

// WebhookRef names an active webhook, the version of its state and
// position, and when it last changed (its settings included).
type WebhookRef struct {
	ID, DatabaseID, Version int64
	UpdatedAt               time.Time
}

// ActiveWebhooks returns every active webhook.
func (db *DB) ActiveWebhooks(ctx context.Context) ([]WebhookRef, error) {
	rows, err := db.pool.Query(ctx, "SELECT id, db_id, version, updated_at FROM sluice.webhooks WHERE state = 'active' ORDER BY id")
	if err != nil {
		return nil, mapError(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (WebhookRef, error) {
		var r WebhookRef
		return r, row.Scan(&r.ID, &r.DatabaseID, &r.Version, &r.UpdatedAt)
	})
	return out, mapError(err)
}

// Delivery is the outcome of one attempt of a webhook's deliverer, to
// record: a success moves the position, a failure counts toward the retry
// schedule.
type Delivery struct {
	Webhook int64
	// Version is the webhook version the deliverer works under, and
	// Generation the lease it holds: the record is refused under others.
	Version, Generation int64
	// UpdatedAt is that of the settings the request was made with. A
	// failure is refused once they changed (the webhook starts over at
	// once with the new ones, as UpdateWebhook says); a 2xx is recorded
	// all the same: its receiver has the request, and a change of
	// settings (a description, a secret, a URL) does not undo that.
	UpdatedAt time.Time
	// Attempt is recorded but for its At: the attempt is recorded at
	// Postgres' time less its Duration.
	Attempt sluice.WebhookAttempt
	// OK records a 2xx: the position moves to Position.
	OK       bool
	Position sluice.Position
	// Otherwise Failures is the number of failed attempts of this
	// delivery so far, and Wait how long after the record (by Postgres'
	// clock, as next_attempt_at) the next one is due; Fail, when set,
	// pauses the webhook as failing with that message instead.
	Failures int
	Wait     time.Duration
	Fail     string
}

// attemptSlots is how many attempts the log keeps per webhook.
const attemptSlots = 100

// leaseHeld is a statement fragment that holds when the lease of
// generation $2 runs; FOR SHARE makes a takeover wait for the statement.
const leaseHeld = `EXISTS (SELECT 1 FROM sluice.webhook_lease WHERE generation = $2 AND expires_at > now() FOR SHARE)`

// RecordDelivery records attempt r in the webhook's row and attempts log,
// in one statement. It returns false, recording nothing, when the webhook
// changed (another version), was deleted or paused, or the lease is no
// longer held: the deliverer must then stop.
func (db *DB) RecordDelivery(ctx context.Context, r Delivery) (bool, error) {
	a := r.Attempt
	args := []any{r.Webhook, r.Generation, r.Version, a.MessageID, a.Events, a.Attempt, a.Status, a.Error,
		float64(a.Duration) / float64(time.Millisecond), a.Response}
	var set, settled string
	switch {
	case r.OK:
		set = `seq = $11, idx = $12, attempt = 0, next_attempt_at = NULL, status_message = '', delivered = delivered + 1,
			delivered_events = delivered_events + $5, last_success_at = (SELECT at FROM t)`
		args = append(args, r.Position.Seq, r.Position.Index)
	case r.Fail != "":
		set = `state = 'failing', status_message = $11, attempt = $12, next_attempt_at = NULL, failed = failed + 1`
		settled = " AND updated_at = $13"
		args = append(args, r.Fail, r.Failures, r.UpdatedAt)
	default:
		set = `status_message = $11, attempt = $12, next_attempt_at = clock_timestamp() + make_interval(secs => $13), failed = failed + 1`
		settled = " AND updated_at = $14"
		args = append(args, a.Error, r.Failures, r.Wait.Seconds(), r.UpdatedAt)
	}
	// The attempt's time (its request's start) is Postgres' clock less
	// the request's duration, as the webhook's other times are Postgres'
	// clock: the deliverer's clock may be off from it.
	var n int64
	err := db.pool.QueryRow(ctx, `WITH t AS MATERIALIZED (SELECT clock_timestamp() - make_interval(secs => $9::float8 / 1000) AS at),
		w AS (UPDATE sluice.webhooks SET `+set+`, attempts = attempts + 1
			WHERE id = $1 AND version = $3 AND state = 'active' AND `+leaseHeld+settled+` RETURNING attempts)
		INSERT INTO sluice.webhook_attempts AS a (webhook_id, slot, n, at, message_id, events, attempt, status, error, duration_ms, response)
		SELECT $1, w.attempts % `+strconv.Itoa(attemptSlots)+`, w.attempts, t.at, $4, $5, $6, $7, $8, $9, $10 FROM w, t
		ON CONFLICT (webhook_id, slot) DO UPDATE SET n = excluded.n, at = excluded.at, message_id = excluded.message_id,
			events = excluded.events, attempt = excluded.attempt, status = excluded.status, error = excluded.error,
			duration_ms = excluded.duration_ms, response = excluded.response
		RETURNING a.n`, args...).Scan(&n)
	if errors.Is(mapError(err), errNotFound) {
		return false, nil
	}
	return err == nil, mapError(err)
}

// AdvanceWebhook moves webhook id's position to p without a delivery (the
// commits up to p held nothing it selects), under version, the settings
// of updatedAt (the commits were judged by them) and the lease of
// generation gen; false as for RecordDelivery.
func (db *DB) AdvanceWebhook(ctx context.Context, id, version int64, updatedAt time.Time, gen int64, p sluice.Position) (bool, error) {
	tag, err := db.pool.Exec(ctx, `UPDATE sluice.webhooks SET seq = $4, idx = $5
		WHERE id = $1 AND version = $3 AND updated_at = $6 AND state = 'active' AND `+leaseHeld, id, gen, version, p.Seq, p.Index, updatedAt)
	return err == nil && tag.RowsAffected() == 1, mapError(err)
}

// StopWebhook pauses webhook id in state (failing or revoked) with msg,
// under version, the settings of updatedAt (the reason may be theirs) and
// the lease of generation gen; false as for RecordDelivery.
func (db *DB) StopWebhook(ctx context.Context, id, version int64, updatedAt time.Time, gen int64, state sluice.WebhookState, msg string) (bool, error) {
	tag, err := db.pool.Exec(ctx, `UPDATE sluice.webhooks SET state = $4, status_message = $5, next_attempt_at = NULL, `+touched+`
		WHERE id = $1 AND version = $3 AND updated_at = $6 AND state = 'active' AND `+leaseHeld, id, gen, version, string(state), msg, updatedAt)
	return err == nil && tag.RowsAffected() == 1, mapError(err)
}

// Setting returns the value of Sluice's setting key, and whether it is
// set.
func (db *DB) Setting(ctx context.Context, key string) (string, bool, error) {
	var v string
	err := db.pool.QueryRow(ctx, "SELECT value FROM sluice.settings WHERE key = $1", key).Scan(&v)
	if errors.Is(mapError(err), errNotFound) {
		return "", false, nil
	}
	return v, err == nil, mapError(err)
}

// SettingOrSet returns the value of setting key, first storing value when
// it has none (of concurrent callers, the first one's value wins).
func (db *DB) SettingOrSet(ctx context.Context, key, value string) (string, error) {
	if _, err := db.pool.Exec(ctx, "INSERT INTO sluice.settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING", key, value); err != nil {
		return "", mapError(err)
	}
	v, _, err := db.Setting(ctx, key)
	return v, err
}

// DeleteSetting removes setting key.
func (db *DB) DeleteSetting(ctx context.Context, key string) error {
	_, err := db.pool.Exec(ctx, "DELETE FROM sluice.settings WHERE key = $1", key)
	return mapError(err)
}

// UserByID returns the user with id, or NotFound.
func (db *DB) UserByID(ctx context.Context, id int64) (*sluice.User, error) {
	var u sluice.User
	err := db.pool.QueryRow(ctx, "SELECT id, org, name, superuser FROM sluice.users WHERE id = $1", id).Scan(&u.ID, &u.Org, &u.Name, &u.Superuser)
	if errors.Is(mapError(err), errNotFound) {
		return nil, sluice.Errorf(sluice.CodeNotFound, "user %d does not exist", id)
	}
	return &u, mapError(err)
}

// DatabaseByID returns database id, or NotFound.
func (db *DB) DatabaseByID(ctx context.Context, id int64) (*sluice.Database, error) {
	d, _, err := scanDatabase(db.pool.QueryRow(ctx, `SELECT `+databaseColumns+`
		FROM sluice.databases d JOIN sluice.commit_counters c ON c.db_id = d.id WHERE d.id = $1`, id))
	if errors.Is(err, errNotFound) {
		return nil, sluice.Errorf(sluice.CodeNotFound, "database %d does not exist", id)
	}
	return d, err
}

// webhookListenerName is the application_name of the deliverer's
// listening connection.
const webhookListenerName = "sluice webhooks"

// WebhookListener is the deliverer's dedicated connection, listening on
// the commits channel and the webhooks channel (notify.go). Changes to
// webhooks made through the API are announced on the latter (the payload
// is the webhook id), so that the replica delivering them picks them up
// at once; like commit notifications they are only wake-ups: the
// deliverer also re-reads the webhooks every few seconds. One goroutine
// owns it.
type WebhookListener struct {
	conn     *pgx.Conn
	webhooks string // the webhooks channel's name
}

// ListenWebhooks opens a WebhookListener. Close it when done.
func (db *DB) ListenWebhooks(ctx context.Context) (*WebhookListener, error) {
	conn, names, err := db.listenConn(ctx, webhookListenerName, commitsChannel, webhooksChannel)
	if err != nil {
		return nil, err
	}
	return &WebhookListener{conn: conn, webhooks: names[1]}, nil
}

// Wait blocks until a notification arrives: a commit of database id
// (webhook false), or a change to webhook id (webhook true). An id that
// does not parse is 0 (an access change, on the commits channel). It returns an
// error when ctx ends or the connection fails; the listener is then
// unusable.
func (l *WebhookListener) Wait(ctx context.Context) (id int64, webhook bool, err error) {
	n, err := l.conn.WaitForNotification(ctx)
	if err != nil {
		return 0, false, err
	}
	id, _ = strconv.ParseInt(n.Payload, 10, 64)
	return id, n.Channel == l.webhooks, nil
}

// Close closes the connection.
func (l *WebhookListener) Close(ctx context.Context) error { return closeListener(ctx, l.conn) }
