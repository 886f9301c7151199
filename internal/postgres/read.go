package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
)

// Document returns the API-form JSON of document id ("Class/key") in
// database d, with its "@version", and that version; or a NotFound error.
// A document read as of a past position has no version: the version it
// had then is not one to write against (written back, as an undo does, it
// must overwrite what is there now).
func (db *DB) Document(ctx context.Context, d *sluice.Database, s *sluice.Schema, id string) ([]byte, string, error) {
	b, version, err := db.document(ctx, d, s, id)
	return b, version, db.schemaMoved(ctx, d, err)
}

func (db *DB) document(ctx context.Context, d *sluice.Database, s *sluice.Schema, id string) ([]byte, string, error) {
	if err := checkText("document id", id); err != nil {
		return nil, "", err
	}
	class, _, _ := strings.Cut(id, "/")
	c := s.Class(class)
	if c == nil || c.Kind != sluice.KindDocument {
		return nil, "", sluice.Errorf(sluice.CodeNotFound, "document %s does not exist", id)
	}
	var raw []byte
	past := db.asOf(ctx, d.ID)
	b := &sqlBuilder{db: d, schema: s, past: past}
	sql := fmt.Sprintf("SELECT to_jsonb(t.*) FROM %s t WHERE %s = %s", b.source(class), colID, b.arg(id))
	err := db.classReader(ctx, d).QueryRow(ctx, b.pastStatement(sql), b.args...).Scan(&raw)
	if errors.Is(mapError(err), errNotFound) {
		return nil, "", sluice.Errorf(sluice.CodeNotFound, "document %s does not exist", id)
	}
	if err != nil {
		return nil, "", mapError(err)
	}
	return db.rowJSON(d, c, raw, past == nil)
}

// rowJSON returns the API-form JSON of a table row of database d read as
// to_jsonb, with its "@version" when versioned is set, and that version.
func (db *DB) rowJSON(d *sluice.Database, c *sluice.Class, raw []byte, versioned bool) ([]byte, string, error) {
	doc, err := transcodeRow(c, raw, versioned)
	if err != nil {
		return nil, "", err
	}
	db.unreadable(d, doc.ID, doc.Unreadable)
	return doc.JSON, doc.Version, nil
}

// Documents calls fn with the API-form JSON of each document of the given
// classes (every document class when classes is empty), ordered by id,
// skipping skip and stopping after count (count < 0: no limit). Documents
// read as of a past position have no "@version" (see Document).
func (db *DB) Documents(ctx context.Context, d *sluice.Database, s *sluice.Schema, classes []string, skip, count int64, fn func([]byte) error) error {
	return db.schemaMoved(ctx, d, db.documents(ctx, d, s, classes, skip, count, fn))
}

func (db *DB) documents(ctx context.Context, d *sluice.Database, s *sluice.Schema, classes []string, skip, count int64, fn func([]byte) error) error {
	if len(classes) == 0 {
		for _, name := range s.Order {
			if s.Classes[name].Kind == sluice.KindDocument {
				classes = append(classes, name)
			}
		}
	}
	if len(classes) == 0 {
		return nil
	}
	past := db.asOf(ctx, d.ID)
	q, args := documentsSQL(&sqlBuilder{db: d, schema: s, past: past}, classes, skip, count)
	rows, err := db.classReader(ctx, d).Query(ctx, q, args...)
	if err != nil {
		return mapError(err)
	}
	defer rows.Close()
	for rows.Next() {
		var ci int
		var id string
		var raw []byte
		if err := rows.Scan(&ci, &id, &raw); err != nil {
			return mapError(err)
		}
		b, _, err := db.rowJSON(d, s.Classes[classes[ci]], raw, past == nil)
		if err != nil {
			return err
		}
		if err := fn(b); err != nil {
			return err
		}
	}
	return mapError(rows.Err())
}

// documentsSQL returns the statement of Documents, built by b: rows
// (class index, id, row JSON) of the given classes in byte order of id,
// which each table's primary key serves (declared COLLATE "C"), so a page
// costs what it skips and holds, merged from the tables in order.
func documentsSQL(b *sqlBuilder, classes []string, skip, count int64) (string, []any) {
	var parts []string
	for i, name := range classes {
		parts = append(parts, fmt.Sprintf("SELECT %d AS c, %s AS id, to_jsonb(t.*) AS j FROM %s t", i, colID, b.source(name)))
	}
	q := "SELECT * FROM (" + strings.Join(parts, " UNION ALL ") + `) u ORDER BY id COLLATE "C" OFFSET ` + b.arg(skip)
	if count >= 0 {
		q += limitSQL(count)
	}
	return b.pastStatement(q), b.args
}

const commitColumns = "db_id, seq, uid, author, message, user_name, committed_at, n_changes"

func scanCommit(row pgx.Row, c *sluice.Commit, uid *int64) error {
	return row.Scan(&c.DatabaseID, &c.Seq, uid, &c.Author, &c.Message, &c.User, &c.Time, &c.NumChanges)
}

// History returns the bounds of database d's retained log.
func (db *DB) History(ctx context.Context, dbID int64) (sluice.History, error) {
	var h sluice.History
	err := db.reader(ctx, dbID).QueryRow(ctx, "SELECT last_seq, pruned_seq FROM sluice.commit_counters WHERE db_id = $1", dbID).Scan(&h.LastSeq, &h.PrunedSeq)
	if errors.Is(mapError(err), errNotFound) {
		return h, sluice.Errorf(sluice.CodeNotFound, "database %d does not exist", dbID)
	}
	return h, mapError(err)
}

// ChangeCount returns the number of changes of commit seq of database
// dbID, false when the log does not hold that commit (pruned, or none).
// A commit's count is checked against the change rows it stores when it
// is written (SQL commits included), so it names exactly the positions of
// its changes: 0 to the count less one.
func (db *DB) ChangeCount(ctx context.Context, dbID, seq int64) (int, bool, error) {
	c, err := db.PositionCommit(ctx, dbID, sluice.Position{Seq: seq})
	return c.Changes, c.Found, err
}

// PositionCommit is the commit of the log a client's position names, as
// the checks of the position read it: its count of changes (ChangeCount,
// for sluice.CheckIndex) and its stamp (for sluice.CheckTag). Found is
// false when the log does not hold the commit (pruned, or past its end),
// or when the checks of the position need nothing of it (NamesCommit).
type PositionCommit struct {
	Found   bool
	Changes int
	Stamp   sluice.Stamp
}

// NamesCommit reports whether the checks of client position p read the
// commit it names: p is inside it (sluice.CheckIndex) or carries its tag
// (sluice.CheckTag). The end of a commit without a tag needs nothing.
func NamesCommit(p sluice.Position) bool {
	return p.Index != sluice.WholeCommit || p.Tag != ""
}

// PositionCommit returns commit p.Seq of database dbID as the checks of
// client position p read it.
func (db *DB) PositionCommit(ctx context.Context, dbID int64, p sluice.Position) (PositionCommit, error) {
	var c PositionCommit
	err := db.reader(ctx, dbID).QueryRow(ctx, "SELECT n_changes, uid, committed_at FROM sluice.commits WHERE db_id = $1 AND seq = $2", dbID, p.Seq).
		Scan(&c.Changes, &c.Stamp.UID, &c.Stamp.Time)
	if errors.Is(mapError(err), errNotFound) {
		return PositionCommit{}, nil
	}
	if err != nil {
		return PositionCommit{}, mapError(err)
	}
	c.Found = true
	return c, nil
}

// PositionHistory returns the history of database dbID (History) and, when
// the checks of client position p need it (NamesCommit), the commit p
// names, as PositionCommit does, in one statement: so a reader from a
// client's position checks it in the statement that reads its history.
func (db *DB) PositionHistory(ctx context.Context, dbID int64, p sluice.Position) (sluice.History, PositionCommit, error) {
	var h sluice.History
	var n *int
	var uid *int64
	var at *time.Time
	err := db.reader(ctx, dbID).QueryRow(ctx, `SELECT h.last_seq, h.pruned_seq, c.n_changes, c.uid, c.committed_at
		FROM sluice.commit_counters h LEFT JOIN sluice.commits c ON $3 AND c.db_id = h.db_id AND c.seq = $2
		WHERE h.db_id = $1`, dbID, p.Seq, NamesCommit(p)).Scan(&h.LastSeq, &h.PrunedSeq, &n, &uid, &at)
	if errors.Is(mapError(err), errNotFound) {
		return h, PositionCommit{}, sluice.Errorf(sluice.CodeNotFound, "database %d does not exist", dbID)
	} else if err != nil {
		return h, PositionCommit{}, mapError(err)
	}
	return h, positionCommit(n, uid, at), nil
}

// positionCommit returns the PositionCommit of the columns a LEFT JOIN
// read (null: none).
func positionCommit(n *int, uid *int64, at *time.Time) PositionCommit {
	if n == nil || uid == nil || at == nil {
		return PositionCommit{}
	}
	return PositionCommit{Found: true, Changes: *n, Stamp: sluice.Stamp{UID: *uid, Time: *at}}
}

// CommitsAfter returns up to limit commits of database d with sequence
// greater than after, oldest first, with their changes in order. The caller
// checks History first: commits before PrunedSeq are gone.
func (db *DB) CommitsAfter(ctx context.Context, d *sluice.Database, after int64, limit int) ([]*sluice.Commit, error) {
	return db.commits(ctx, d, "seq > $2 ORDER BY seq LIMIT $3", d.ID, after, limit)
}

// Commit returns commit seq of database d with its changes, or NotFound. It reads the commit in pieces, as the change feed
// does, and stops once it holds more than maxChanges changes or more than
// maxBytes bytes of change images (< 0: no bound): the commit returned is
// then Partial, holding the changes read so far. So what it holds is
// bounded by its caller, whatever the size of the commit or the count it
// records.
func (db *DB) Commit(ctx context.Context, d *sluice.Database, seq int64, maxChanges int, maxBytes int64) (*sluice.Commit, error) {
	var c *sluice.Commit
	var size int64
	after := sluice.Position{Seq: seq - 1, Index: sluice.WholeCommit}
	for {
		cs, _, err := db.ReadLog(ctx, d, after, sluice.Stamp{}, 1, commitPieceBytes)
		if err != nil {
			return nil, err
		}
		if len(cs) == 0 || cs[0].Seq != seq {
			if c == nil {
				return nil, sluice.Errorf(sluice.CodeNotFound, "commit %d of %s does not exist or was pruned", seq, d.Path())
			}
			return nil, goneWhileReading(d, after)
		}
		p := cs[0]
		for _, ch := range p.Changes {
			size += int64(len(ch.Before) + len(ch.After))
		}
		if c == nil {
			c = p
		} else {
			c.Changes = append(c.Changes, p.Changes...)
			c.NumChanges, c.Partial = p.NumChanges, p.Partial
		}
		if !c.Partial || len(c.Changes) == 0 {
			c.Partial = false
			return c, nil
		}
		if maxChanges >= 0 && len(c.Changes) > maxChanges || maxBytes >= 0 && size > maxBytes {
			return c, nil
		}
		after = c.Position(c.Changes[len(c.Changes)-1].Index)
	}
}

// commitPieceBytes is about how many bytes of change images Commit reads
// at a time.
const commitPieceBytes = 64 << 10

func (db *DB) commits(ctx context.Context, d *sluice.Database, where string, args ...any) ([]*sluice.Commit, error) {
	// One statement, so one snapshot and one round trip: the commits and
	// their change batches in order.
	// The access log's version comes from the same snapshot (see
	// accessVersionSQL and sluice.Commit.AccessVersion).
	rows, err := db.reader(ctx, d.ID).Query(ctx, `SELECT c.db_id, c.seq, c.uid, c.author, c.message, c.user_name, c.committed_at, c.n_changes, c.row_images,
			ch.idx, ch.doc_ids, ch.ops, ch.befores, ch.afters, ch.unknown, `+accessVersionSQL+`
		FROM (SELECT `+commitColumns+`, row_images FROM sluice.commits WHERE db_id = $1 AND `+where+`) c
		LEFT JOIN sluice.changes ch ON ch.commit_uid = c.uid
		ORDER BY c.seq, ch.idx`, args...)
	if err != nil {
		return nil, mapError(err)
	}
	defer rows.Close()
	var out []*sluice.Commit
	var c *sluice.Commit
	for rows.Next() {
		var cur sluice.Commit
		var idx *int
		var ids []string
		var ops []int16
		var befores, afters, unknown []byte
		if err := rows.Scan(&cur.DatabaseID, &cur.Seq, &cur.UID, &cur.Author, &cur.Message, &cur.User, &cur.Time, &cur.NumChanges, &cur.RowImages,
			&idx, &ids, &ops, &befores, &afters, &unknown, &cur.AccessVersion); err != nil {
			return nil, mapError(err)
		}
		if c == nil || c.Seq != cur.Seq {
			c = &cur
			c.Epoch = d.Epoch
			out = append(out, c)
		}
		if idx == nil {
			continue // a commit without changes
		}
		from := len(c.Changes)
		if c.Changes, err = appendChanges(c.Changes, *idx, ids, ops, befores, afters); err != nil {
			return nil, fmt.Errorf("commit %d: %w: %w", c.Seq, sluice.ErrUnreadableCommit, err)
		}
		if err := setUnknown(c.Changes[from:], unknown); err != nil {
			return nil, fmt.Errorf("commit %d: %w: %w", c.Seq, sluice.ErrUnreadableCommit, err)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, mapError(err)
	}
	rows.Close()
	for _, c := range out {
		db.checkCount(d, c)
		markSuperseded(c.Changes) // each commit is read whole
	}
	return out, db.documentImages(ctx, d, out)
}

// checkCount checks the count of changes commit c records against the
// changes read, all of its stored ones: what is stored wins, and a
// difference is logged. Sluice's commits count what they write, and SQL
// commits what they stored (migration 11); a difference means the log
// was written by someone else.
func (db *DB) checkCount(d *sluice.Database, c *sluice.Commit) {
	n := 0
	if k := len(c.Changes); k > 0 {
		n = c.Changes[k-1].Index + 1
	}
	if n != c.NumChanges {
		db.logger.Error("a commit records another number of changes than it holds; its stored changes are read",
			"database_id", d.ID, "commit", c.Seq, "recorded", c.NumChanges, "stored", n)
		c.NumChanges = n
	}
}

// appendChanges appends the changes of one row of sluice.changes (see
// migrations 3 and 4) to cs.
func appendChanges(cs []sluice.Change, idx int, ids []string, ops []int16, befores, afters []byte) ([]sluice.Change, error) {
	if ids == nil {
		return appendInsertions(cs, idx, afters)
	}
	bs, err := splitJSONArray(befores, len(ids))
	if err != nil {
		return nil, fmt.Errorf("befores of change %d: %w", idx, err)
	}
	as, err := splitJSONArray(afters, len(ids))
	if err != nil {
		return nil, fmt.Errorf("afters of change %d: %w", idx, err)
	}
	if len(ops) != len(ids) {
		return nil, fmt.Errorf("change %d: %d ids but %d ops", idx, len(ids), len(ops))
	}
	for i, id := range ids {
		class, _, _ := strings.Cut(id, "/")
		cs = append(cs, sluice.Change{Index: idx + i, Class: class, DocID: id, Op: sluice.Op(ops[i]), Before: bs[i], After: as[i]})
	}
	return cs, nil
}

// setUnknown sets the BeforeUnknown of the changes of one row of
// sluice.changes from its unknown column (migration 30; NULL, as almost
// always, sets nothing).
func setUnknown(cs []sluice.Change, unknown []byte) error {
	if unknown == nil {
		return nil
	}
	var names [][]string
	if err := json.Unmarshal(unknown, &names); err != nil {
		return fmt.Errorf("unknown fields of change %d: %w", cs[0].Index, err)
	}
	if len(names) != len(cs) {
		return fmt.Errorf("change %d: %d changes but %d lists of unknown fields", cs[0].Index, len(cs), len(names))
	}
	for i := range cs {
		cs[i].BeforeUnknown = names[i]
	}
	return nil
}

// appendInsertions appends the changes of a row of insertions, without
// ids and ops (migration 4): each after image names its document.
func appendInsertions(cs []sluice.Change, idx int, afters []byte) ([]sluice.Change, error) {
	var as []json.RawMessage
	if err := json.Unmarshal(afters, &as); err != nil {
		return nil, fmt.Errorf("afters of change %d: %w", idx, err)
	}
	for i, a := range as {
		id, err := imageID(a)
		if err != nil {
			return nil, fmt.Errorf("after image of change %d: %w", idx+i, err)
		}
		class, _, _ := strings.Cut(id, "/")
		cs = append(cs, sluice.Change{Index: idx + i, Class: class, DocID: id, Op: sluice.OpAdded, After: a})
	}
	return cs, nil
}

// imageID returns the "@id" of a document image. DocumentJSON writes it
// first, so it is read from there when it has no escapes; anything else
// is decoded.
func imageID(image []byte) (string, error) {
	const prefix = `{"@id":"`
	if rest, ok := bytes.CutPrefix(image, []byte(prefix)); ok {
		if end := bytes.IndexAny(rest, `"\`); end > 0 && rest[end] == '"' {
			return string(rest[:end]), nil
		}
	}
	var doc struct {
		ID *string `json:"@id"`
	}
	if err := json.Unmarshal(image, &doc); err != nil {
		return "", err
	}
	if doc.ID == nil || *doc.ID == "" {
		return "", fmt.Errorf("no @id in %.80s", image)
	}
	return *doc.ID, nil
}

// splitJSONArray returns the n elements of a JSON array, nil for null ones;
// a nil array means n nils.
func splitJSONArray(b []byte, n int) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, n)
	if b == nil {
		return out, nil
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(b, &elems); err != nil {
		return nil, err
	}
	if len(elems) != n {
		return nil, fmt.Errorf("%d images for %d changes", len(elems), n)
	}
	for i, e := range elems {
		if string(e) != "null" {
			out[i] = e
		}
	}
	return out, nil
}

// FloorTTL is how long a published floor counts: a daemon that stopped
// publishing (it died) no longer holds history back after it.
const FloorTTL = 2 * time.Minute

// PublishFloors replaces replica's published floors: per database, the
// newest commit all of its connected subscribers have read. Call it well
// within FloorTTL; an empty map withdraws the replica's floors.
func (db *DB) PublishFloors(ctx context.Context, replica string, floors map[int64]int64) error {
	ids := make([]int64, 0, len(floors))
	seqs := make([]int64, 0, len(floors))
	for id, seq := range floors {
		ids = append(ids, id)
		seqs = append(seqs, seq)
	}
	return db.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "DELETE FROM sluice.stream_floors WHERE replica = $1", replica); err != nil {
			return mapError(err)
		}
		_, err := tx.Exec(ctx, `INSERT INTO sluice.stream_floors (replica, db_id, seq)
			SELECT $1, f.id, f.seq FROM unnest($2::bigint[], $3::bigint[]) AS f(id, seq)`, replica, ids, seqs)
		return mapError(err)
	})
}

// Clock returns the time by the Postgres server's clock, the one every
// commit's time (sluice.Commit.Time) is stamped with.
func (db *DB) Clock(ctx context.Context) (time.Time, error) {
	var now time.Time
	err := db.pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&now)
	return now, mapError(err)
}

// Prune removes the commits of every database older than its retention
// at time now (Clock: commits' times are by Postgres' clock; a replica's
// own may be off by any amount): the longer of retention (the server's log_retention) and
// the database's own (sluice.Database.LogRetention; 0 keeps every
// commit). It keeps each database's newest commit and anything after the
// floors: keep[dbID] (this process's subscribers), the fresh floors other
// daemons published, and the positions of active webhooks. It returns the
// number of commits removed, and every failure (errors.Join), one per
// database that failed: the others are pruned all the same.
func (db *DB) Prune(ctx context.Context, now time.Time, retention time.Duration, keep map[int64]int64) (int64, error) {
	floors := make(map[int64]int64, len(keep))
	for id, seq := range keep {
		floors[id] = seq
	}
	rows, err := db.pool.Query(ctx, "SELECT db_id, min(seq) FROM sluice.stream_floors WHERE updated_at > now() - make_interval(secs => $1) GROUP BY db_id", FloorTTL.Seconds())
	if err != nil {
		return 0, mapError(err)
	}
	for rows.Next() {
		var id, seq int64
		if err := rows.Scan(&id, &seq); err != nil {
			rows.Close()
			return 0, mapError(err)
		}
		if cur, ok := floors[id]; !ok || seq < cur {
			floors[id] = seq
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, mapError(err)
	}
	rows, err = db.pool.Query(ctx, `SELECT d.id, d.org || '/' || d.name, m.seq FROM sluice.databases d
		CROSS JOIN LATERAL (SELECT max(c.seq) AS seq FROM sluice.commits c WHERE c.db_id = d.id
			AND c.committed_at < $1::timestamptz - make_interval(secs => greatest($2::float8, coalesce(d.log_retention_seconds, 0)::float8))) m
		WHERE d.log_retention_seconds IS DISTINCT FROM 0 AND m.seq IS NOT NULL ORDER BY d.id`, now, retention.Seconds())
	if err != nil {
		return 0, mapError(err)
	}
	type bound struct {
		db   int64
		path string
		seq  int64
	}
	var bounds []bound
	for rows.Next() {
		var b bound
		if err := rows.Scan(&b.db, &b.path, &b.seq); err != nil {
			rows.Close()
			return 0, mapError(err)
		}
		bounds = append(bounds, b)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, mapError(err)
	}
	// Each database in a transaction of its own, which holds one
	// database's counter row at a time: a prune that held them all until
	// its end deadlocked with a deletion of a database (which locks the
	// deleted one's counter row, then, at its commit, the system
	// database's), and a failure rolled back every database's pruning.
	// A database that fails does not stop the others: its failure (a
	// lock held too long, a statement cancelled) may last, and would
	// leave every database after it unpruned until it ends. Each failure
	// is returned, naming its database.
	var total int64
	var errs []error
	for _, b := range bounds {
		if ctx.Err() != nil {
			break
		}
		n, err := db.pruneDatabase(ctx, b.db, b.seq, floors)
		total += n // what its batches before a failure pruned stays pruned
		if err != nil {
			errs = append(errs, fmt.Errorf("database %s: %w", b.path, err))
		}
	}
	if ctx.Err() != nil {
		return total, errors.Join(append(errs, ctx.Err())...)
	}
	if err := db.inTx(ctx, func(tx pgx.Tx) error { return pruneAccess(ctx, tx) }); err != nil {
		errs = append(errs, fmt.Errorf("access changes: %w", mapError(err)))
	}
	return total, errors.Join(errs...)
}

// pruneBatchRows bounds what one transaction of a database's prune
// deletes: commits and their changes, counting each commit as one row
// plus its changes (a single commit larger than that is deleted alone).
// Each transaction holds the database's counter row, which every write
// of the database updates: the batch bounds how long writes wait.
const pruneBatchRows = 10000

// pruneDatabase prunes database id's commits up to seq, keeping the
// newest one, what keep (the floors of streams) and its active webhooks
// still need, and returns how many it pruned.
//
// It prunes in transactions of at most db.opts.pruneBatch rows, each
// committed on its own (pruneBatchRows): a backlog pruned in one
// transaction held every write of the database, and every resume,
// replay and webhook creation, for as long as its DELETE ran. Each
// transaction checks what it deletes against the webhooks and the
// counter afresh, so a batch is safe whatever ran between two of them,
// another replica's prune included.
//
// Each of its waits for a lock is bounded by lockTimeout: the counter
// row it locks may be held for long, by a transaction of a role granted
// SQL writes that had its commit written early (SET CONSTRAINTS ALL
// IMMEDIATE) and stays open, and with statement_timeout off its wait
// had no end: the whole run stalled, and the databases after this one
// waited with it. Past lockTimeout the database is skipped for this run,
// with an error naming the sessions it waited for; the next run tries
// it again. What the batches before that pruned stays pruned, and is
// counted.
func (db *DB) pruneDatabase(ctx context.Context, id, seq int64, keep map[int64]int64) (int64, error) {
	var total int64
	for {
		var n int64
		var more bool
		err := db.inTx(ctx, func(tx pgx.Tx) error {
			return db.namingBlockers(ctx, tx.Conn().PgConn().PID(), func() error {
				var err error
				n, more, err = pruneDatabaseTx(ctx, tx, id, seq, keep, db.opts.pruneBatch)
				return err
			})
		})
		if isLockTimeout(err) {
			// Not mapError's Conflict, which would hide whom it waited for.
			return total, fmt.Errorf("skipped for this run: waited longer than %s for a lock: %w", lockTimeout, err)
		}
		if err != nil {
			return total, mapError(err)
		}
		total += n
		if !more {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
}

// pruneDatabaseTx is one transaction tx of pruneDatabase: it deletes the
// oldest commits it may worth at most batch rows (at least one commit),
// and reports how many, and whether more are left to prune.
func pruneDatabaseTx(ctx context.Context, tx pgx.Tx, id, seq int64, keep map[int64]int64, batch int) (int64, bool, error) {
	// A batch holds one commit at least, and a commit of a bulk write
	// may take longer to delete than statement_timeout: it would then
	// fail the same way on every later run. Nobody waits for it, and
	// ctx still cancels it.
	if _, err := tx.Exec(ctx, "SET LOCAL statement_timeout = 0"); err != nil {
		return 0, false, err
	}
	if err := setLockTimeout(ctx, tx); err != nil {
		return 0, false, err
	}
	upTo := seq
	// The counter row is locked before the webhooks' positions are
	// read, until the commit: a resume, a replay or a creation reads
	// the pruned history with the row locked FOR SHARE (history), so
	// it either commits before these positions are read, and is among
	// them, or waits for this prune and then sees what it pruned
	// (Gone). Read without the lock, a webhook resumed meanwhile from
	// a position this prune deletes was left active with a gap it
	// would never deliver.
	var last, pruned int64
	err := tx.QueryRow(ctx, "SELECT last_seq, pruned_seq FROM sluice.commit_counters WHERE db_id = $1 FOR NO KEY UPDATE", id).Scan(&last, &pruned)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil // deleted meanwhile
	}
	if err != nil {
		return 0, false, err
	}
	if upTo >= last {
		upTo = last - 1 // keep the newest commit
	}
	if k, ok := keep[id]; ok && upTo > k {
		upTo = k
	}
	// Active webhooks keep what they have not delivered, for as long
	// as they need it: their positions are durable, so they need no
	// TTL. (A position inside a commit still owes that commit.)
	var hooks *int64
	if err := tx.QueryRow(ctx, `SELECT min(CASE WHEN idx = $2 THEN seq ELSE seq - 1 END)
		FROM sluice.webhooks WHERE db_id = $1 AND state = 'active'`, id, sluice.WholeCommit).Scan(&hooks); err != nil {
		return 0, false, err
	}
	if hooks != nil && upTo > *hooks {
		upTo = *hooks
	}
	if upTo <= pruned {
		return 0, false, nil
	}
	// The batch ends at the last commit within batch rows, or at the
	// first commit when that alone is larger.
	var end int64
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(seq) FILTER (WHERE rows <= $4), min(seq), 0) FROM
		(SELECT seq, sum(n_changes + 1) OVER (ORDER BY seq) AS rows FROM sluice.commits
			WHERE db_id = $1 AND seq > $2 AND seq <= $3 ORDER BY seq LIMIT $4) c`, id, pruned, upTo, batch).Scan(&end); err != nil {
		return 0, false, err
	}
	if end == 0 {
		// Nothing left in the range: pruned_seq says where the log
		// starts, and a commit is only deleted with it.
		end = upTo
	}
	if _, err := tx.Exec(ctx, `DELETE FROM sluice.changes WHERE commit_uid IN
		(SELECT uid FROM sluice.commits WHERE db_id = $1 AND seq > $2 AND seq <= $3)`, id, pruned, end); err != nil {
		return 0, false, err
	}
	tag, err := tx.Exec(ctx, "DELETE FROM sluice.commits WHERE db_id = $1 AND seq > $2 AND seq <= $3", id, pruned, end)
	if err != nil {
		return 0, false, err
	}
	if _, err := tx.Exec(ctx, "UPDATE sluice.commit_counters SET pruned_seq = $2 WHERE db_id = $1", id, end); err != nil {
		return 0, false, err
	}
	return tag.RowsAffected(), end < upTo, nil
}
