package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluice-dev/sluice"
)

// CommitMeta is what a commit records about who made it and why.
type CommitMeta struct {
	Author  string
	Message string
	User    string
}

// Check returns a CodeInvalid error naming the field when m holds text
// Postgres cannot store (see checkText). DB.Write checks it before a
// commit joins a group-commit batch: the batch writes every commit row in
// one statement, which one bad value would fail for all.
func (m CommitMeta) Check() error {
	if err := checkText("author", m.Author); err != nil {
		return err
	}
	return checkText("message", m.Message)
}

// WriteSpec is one write for DB.Write: changes made through a Tx, the
// documents of one database, or both, committed together.
type WriteSpec struct {
	// Before, when not nil, runs first in the write's transaction: the
	// changes besides documents (organizations, users, tokens, roles,
	// databases, schemas) that must commit, or roll back, with them. The
	// Tx methods that change access record it in the access log
	// themselves, in this same transaction.
	Before func(ctx context.Context, tx *Tx) error

	// Database is the database whose documents Documents writes, validated
	// against Schema at Database.SchemaVersion.
	Database *sluice.Database
	Schema   *sluice.Schema
	Meta     CommitMeta
	// Documents writes the commit's documents through w. Nil: the write
	// has no documents (only Before) and makes no commit.
	Documents func(ctx context.Context, w *Writer) error

	// Group lets the commit share one transaction with concurrent commits
	// of its database (group commit; see group.go). Documents may then
	// run more than once, each run but the last rolled back, so it must
	// write the same documents each time: set Group only when they are in
	// memory. A write with Before never shares.
	Group bool

	// Idempotency, when set, makes the write idempotent under its key
	// (see idempotency.go); it needs Documents.
	Idempotency *IdempotencyKey

	// Keep, when set, is called by a replace for each document it
	// replaces, under the document's row lock, with the replacement's
	// JSON and the stored document's (both in API form): it returns the
	// document to write instead, or nil to write the replacement as it
	// is. The engine uses it to keep the stored values of the fields the
	// writer's role cannot read.
	Keep func(replacement, stored []byte) (*sluice.Document, error)

	// Stored, when set, is charged by a patch, a replace and a delete
	// (Writer.Patch, ReplaceRows, Delete) for the stored documents they
	// read, before they read them (nil: not charged).
	Stored StoredCharge
}

// StoredCharge is what a write charges for the stored documents it reads:
// a patch merges into, validates and writes again each whole, and a
// replace or a delete holds each as its change's before image until the
// change is sent: a tiny patch, replacement or delete of a large document
// holds the whole document while it is written. Its methods are called
// on the write's goroutine or on the group commit's, one at a time.
type StoredCharge interface {
	// Room returns how many bytes of stored documents the write may
	// read now without waiting for them (what it holds and what it
	// can take at once).
	Room() int64
	// Hold makes the charge at least n bytes of stored documents at
	// once, without waiting: its error, when it cannot, fails the
	// write, which its caller runs again once it has the charge.
	Hold(n int64) error
}

// OnCommit makes DB.Write call fn with every commit, once it is durable
// and before Write returns, outside any transaction: the daemon wakes its
// change feed and the notifier with it. fn must not block; in group
// commit, the other commits of a transaction are answered after it.
func OnCommit(fn func(*sluice.Commit)) Option {
	return func(o *options) { o.onCommit = fn }
}

// Write runs one write: every document write, whatever the entry point
// (REST, GraphQL, Sluice's own _system documents), and every change to
// organizations, users, tokens, roles, databases and schemas goes through
// it. In one transaction it runs spec.Before, then records the access
// changes Before made (the last of its locks, lockorder.go), then
// spec.Write, and, as the last statement, increments the database's
// counter row and inserts the commit row, with COMMIT sent in the same
// round trip: the counter row's
// lock, held from that statement to COMMIT, is what makes each database's
// sequence gapless and equal to commit order, and no round trip to Sluice
// falls inside it.
//
// It returns the commit once durable (nil when spec has no Documents),
// after the OnCommit function has seen it, or the error of Before or
// Documents, or
// of a statement they queued (a duplicate id is a Conflict matching
// ErrExists). A write whose documents' preconditions did not hold fails
// with a *sluice.StaleError naming all of them. A commit whose database's
// schema changed since its documents
// were validated, or whose database was deleted, fails with a Conflict and
// leaves nothing. A failed write leaves nothing either, and, in group
// commit, fails alone. When the connection is lost after COMMIT was sent
// and before Postgres answered it, the error is sluice.ErrOutcomeUnknown:
// the write may or may not be committed.
//
// With spec.Idempotency, a key recorded by an earlier write makes Write
// return that write's commit (its Seq and UID) with
// spec.Idempotency.Replayed set, and write nothing.
func (db *DB) Write(ctx context.Context, spec WriteSpec) (*sluice.Commit, error) {
	if spec.Documents != nil && (spec.Database == nil || spec.Schema == nil) {
		return nil, errors.New("commit: documents without their database and schema")
	}
	if spec.Idempotency != nil && spec.Documents == nil {
		return nil, errors.New("commit: an idempotency key without documents")
	}
	if err := spec.Meta.Check(); err != nil {
		return nil, err
	}
	if k := spec.Idempotency; k != nil {
		if grouped(spec) {
			// The request's hash is taken here, by the request's own
			// goroutine: in a batch, the goroutine that leads would take
			// it (claim, finish), and a REST body still to be read to
			// its end (a DELETE ?id= reads none of it) would hold every
			// write of the database queued behind the batch for as long
			// as its client sends it slowly. It is taken before the
			// key's claim is made: nothing locks the claim until the
			// batch does, and a body sent slowly enough for the claim to
			// pass claimTTL would have it pruned, and the write refused
			// as if another request held its key.
			if err := k.settle(); err != nil {
				return nil, err
			}
		}
		if err := db.prepareKey(ctx, k); err != nil {
			return nil, err
		}
		c, err := db.write(ctx, spec)
		if err != nil || k.Replayed != nil {
			db.releaseKey(ctx, k) // its commit, had it made one, deleted it
		}
		return c, err
	}
	return db.write(ctx, spec)
}

// write is Write once the write's key, if any, has its claim (and, for a
// grouped write, its request's hash).
func (db *DB) write(ctx context.Context, spec WriteSpec) (*sluice.Commit, error) {
	if grouped(spec) {
		j := newJob(spec)
		db.groups.commit(ctx, j, db.commitBatch)
		return j.commit, db.schemaMoved(ctx, spec.Database, j.err)
	}
	var c *sluice.Commit
	replayed := false
	err := db.transact(ctx, func(tx *Tx) error {
		if k := spec.Idempotency; k != nil {
			first, refused, err := tx.claim(ctx, spec.Database, k, true)
			if err != nil {
				return err
			}
			if refused != nil {
				return refused
			}
			if first != nil {
				c, replayed = first, true
				return errReplayed // nothing to commit
			}
		}
		if spec.Before != nil {
			if err := spec.Before(ctx, tx); err != nil {
				return err
			}
			// The access log's counter row after every lock Before
			// took (lockorder.go).
			if err := tx.recordAccess(ctx); err != nil {
				return err
			}
		}
		if spec.Documents == nil {
			return nil
		}
		if spec.Before == nil {
			// A large write reads its body as it writes: one whose
			// schema is out of date stops before it reads more, while
			// the engine can still run it again from the documents it
			// read before it began.
			if err := tx.checkSchema(ctx, spec.Database); err != nil {
				return err
			}
		}
		ws, err := tx.newWriters(ctx, []*WriteSpec{&spec}, &pipeline{})
		if err != nil {
			return err
		}
		if err := ws[0].write(ctx, spec.Documents); err != nil {
			return err
		}
		if k := spec.Idempotency; k != nil {
			ws[0].key = k
		}
		cs, err := tx.finish(ctx, ws, nil)
		if err != nil {
			return err
		}
		c = cs[0]
		return nil
	})
	if replayed {
		return c, nil
	}
	if err != nil {
		if spec.Before != nil {
			return nil, err // its own errors say what moved
		}
		return nil, db.schemaMoved(ctx, spec.Database, err)
	}
	if c != nil {
		db.committed(c)
	}
	return c, nil
}

// grouped reports whether spec's commit joins a group-commit batch.
func grouped(spec WriteSpec) bool {
	return spec.Group && spec.Before == nil && spec.Documents != nil
}

// checkSchema returns ErrSchemaChanged when database d's schema version
// is not d.SchemaVersion any more.
func (t *Tx) checkSchema(ctx context.Context, d *sluice.Database) error {
	var v int
	err := t.tx.QueryRow(ctx, "SELECT schema_version FROM sluice.commit_counters WHERE db_id = $1", d.ID).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return sluice.ErrNoDatabase(d.Org, d.Name)
	}
	if err != nil {
		return mapError(err)
	}
	if v != d.SchemaVersion {
		return schemaChanged(d)
	}
	return nil
}

// committed calls the OnCommit function, if any, with c.
func (db *DB) committed(c *sluice.Commit) {
	if db.opts.onCommit != nil {
		db.opts.onCommit(c)
	}
}

// finish ends the transaction of the Writers ws (one Writer, or one
// group-commit batch: commits of one database sharing their pending
// statements): in one round trip it sends their last statements, one
// statement that allocates their sequence numbers, consecutive in the
// order of ws, from one update of the counter row and writes their commit
// rows, the statements that record their idempotency keys, and COMMIT.
// locked, when not nil, is called once every statement before COMMIT has
// answered (the counter row's lock is then held), before COMMIT's answer
// is read: from then on the only error left is COMMIT's own, wrapped in
// errCommitFailed, so a group-commit batch that hands the lead on there
// never needs to run again beside the next one (see group.go). Postgres
// sends the answers of the round trip together, after COMMIT's.
func (t *Tx) finish(ctx context.Context, ws []*Writer, locked func()) ([]*sluice.Commit, error) {
	if err := t.checkAccessRecorded(); err != nil {
		return nil, err
	}
	d := ws[0].d
	n := len(ws)
	uids := make([]int64, n)
	authors := make([]string, n)
	messages := make([]string, n)
	users := make([]string, n)
	counts := make([]int32, n)
	pending := ws[0].pending
	keys := 0
	for i, w := range ws {
		if w.d.ID != d.ID || w.d.SchemaVersion != d.SchemaVersion || w.pending != pending {
			return nil, fmt.Errorf("finish: writers of different databases or batches")
		}
		w.queueDeferred()
		uids[i], authors[i], messages[i], users[i], counts[i] = w.uid, w.meta.Author, w.meta.Message, w.meta.User, int32(w.next)
		if w.key != nil {
			keys++
		}
	}
	b := pending.batch()
	if t.batch {
		// The counter row is held by other processes' batches until
		// their COMMIT, and by schema changes: waited for without the
		// bound the batch's documents have (lockorder.go), as a write
		// alone waits for it.
		b.Queue(resetBatchLockWait)
	}
	queued := b.Len()
	// When the counter row does not match (the schema changed, or the
	// database was deleted), the LEFT JOIN makes seq NULL and the insert
	// fails: an error, not an empty result, so that the COMMIT behind it
	// never runs. The counter row keeps the stamp of the newest commit,
	// the batch's last ($9), which tags the position a read reflects
	// (Snapshot.Position): its time is taken once, in the update, and is
	// every commit row's of the batch.
	b.Queue(`WITH s AS (
			UPDATE sluice.commit_counters SET last_seq = last_seq + $3, last_uid = $9,
				last_committed_at = clock_timestamp(), stamped_seq = last_seq + $3
			WHERE db_id = $1 AND schema_version = $2 RETURNING last_seq, last_committed_at)
		INSERT INTO sluice.commits (db_id, seq, uid, author, message, user_name, n_changes, committed_at)
		SELECT $1, s.last_seq - $3 + o.ord, o.uid, o.author, o.message, o.user_name, o.n, s.last_committed_at
		FROM unnest($4::bigint[], $5::text[], $6::text[], $7::text[], $8::int[])
			WITH ORDINALITY AS o(uid, author, message, user_name, n, ord)
			LEFT JOIN s ON true
		RETURNING uid, seq, committed_at`,
		d.ID, d.SchemaVersion, n, uids, authors, messages, users, counts, uids[n-1])
	for _, w := range ws {
		if w.key != nil {
			if err := recordKey(b, w, w.key); err != nil {
				return nil, err
			}
		}
	}
	b.Queue("COMMIT")
	br := t.tx.SendBatch(ctx, b)
	defer br.Close()
	// From here on, COMMIT has been sent. Postgres answers in order, so
	// an error it answers to a statement before COMMIT means COMMIT did
	// not run; but a connection lost before COMMIT's answer leaves
	// unknown whether it ran.
	for range queued {
		if _, err := br.Exec(); err != nil {
			return nil, sentCommit(insertError, err)
		}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, sentCommit(func(err error) error { return finishError(err, d) }, err)
	}
	byUID := make(map[int64]int, n)
	for i, uid := range uids {
		byUID[uid] = i
	}
	out := make([]*sluice.Commit, n)
	got := 0
	for rows.Next() {
		var uid int64
		c := &sluice.Commit{DatabaseID: d.ID, Epoch: d.Epoch}
		if err := rows.Scan(&uid, &c.Seq, &c.Time); err != nil {
			rows.Close()
			return nil, sentCommit(mapError, err)
		}
		w := ws[byUID[uid]]
		c.UID = uid
		c.Author, c.Message, c.User, c.NumChanges = w.meta.Author, w.meta.Message, w.meta.User, w.next
		out[byUID[uid]] = c
		got++
	}
	if err := rows.Err(); err != nil {
		return nil, sentCommit(func(err error) error { return finishError(err, d) }, err)
	}
	rows.Close()
	if got != n {
		return nil, fmt.Errorf("finish: %d commit rows for %d commits", got, n)
	}
	// A key fails to be recorded when its user was deleted meanwhile (its
	// foreign key), or when a binary of migration 13 recorded it too:
	// before locked, so that the batch may still run again.
	for range keys {
		if _, err := br.Exec(); err != nil {
			return nil, sentCommit(mapError, err)
		}
	}
	if locked != nil {
		locked()
	}
	if err := commitResult(br.Exec()); err != nil {
		return nil, fmt.Errorf("%w: %w", errCommitFailed, err)
	}
	// COMMIT answered: the commits are durable, whatever reading the rest
	// of the pipeline reports (a connection lost now is closed when
	// released). An error here would have the caller treat committed
	// writes as failed, and group commit run them again.
	t.committed = true
	return out, nil
}

// schemaMoved returns err, the error of a read or a write prepared for
// database d at d.SchemaVersion, as ErrSchemaChanged when the schema moved
// meanwhile: whatever failed (a value of a column that has another type
// now, a statement Postgres prepared for the old tables, a class that is
// gone), the request was prepared for tables that are not there any
// more, and it may succeed when prepared again. (A read that waited for
// a schema change's locks took its snapshot, and so its version check,
// before the change committed.)
func (db *DB) schemaMoved(ctx context.Context, d *sluice.Database, err error) error {
	if err == nil || d == nil || d.SchemaVersion == 0 || errors.Is(err, ErrSchemaChanged) {
		return err
	}
	v, verr := db.CurrentSchemaVersion(context.WithoutCancel(ctx), d)
	if verr == nil && v != d.SchemaVersion {
		return schemaChanged(d)
	}
	return err
}

// finishError maps the error of the commit row's insert: a NULL seq means
// the counter row did not match.
func finishError(err error, d *sluice.Database) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23502" && pe.TableName == "commits" && pe.ColumnName == "seq" {
		return sluice.Errorf(sluice.CodeConflict, "the schema of %s changed while the request ran (or the database was deleted); retry", d.Path())
	}
	return mapError(err)
}
