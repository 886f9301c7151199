package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluice-dev/sluice"
)

const databaseColumns = `d.id, d.org, d.name, d.label, d.comment, d.epoch, c.schema_version, d.schema_sdl, d.log_retention_seconds`

func scanDatabase(row pgx.Row) (*sluice.Database, string, error) {
	var d sluice.Database
	var sdl string
	var retention *int64
	err := row.Scan(&d.ID, &d.Org, &d.Name, &d.Label, &d.Comment, &d.Epoch, &d.SchemaVersion, &sdl, &retention)
	if err != nil {
		return nil, "", mapError(err)
	}
	d.LogRetention = retentionOf(retention)
	return &d, sdl, nil
}

// retentionOf returns a database's log retention from its stored seconds.
func retentionOf(seconds *int64) *time.Duration {
	if seconds == nil {
		return nil
	}
	r := time.Duration(*seconds) * time.Second
	return &r
}

// SetLogRetention sets how long database d keeps its commits: r (0: for
// ever), or the server's log_retention when r is nil. Pruning keeps them
// for the longer of r and log_retention (Prune).
func (db *DB) SetLogRetention(ctx context.Context, d *sluice.Database, r *time.Duration) error {
	var seconds *int64
	if r != nil {
		s := int64(*r / time.Second)
		seconds = &s
	}
	tag, err := db.pool.Exec(ctx, "UPDATE sluice.databases SET log_retention_seconds = $2 WHERE id = $1", d.ID, seconds)
	if err != nil {
		return mapError(err)
	}
	if tag.RowsAffected() == 0 {
		return sluice.ErrNoDatabase(d.Org, d.Name)
	}
	d.LogRetention = r
	return nil
}

// Database returns the database org/name and its schema SDL, or a NotFound
// error.
func (db *DB) Database(ctx context.Context, org, name string) (*sluice.Database, string, error) {
	return database(ctx, db.pool, org, name)
}

// Database is DB.Database inside the transaction.
func (t *Tx) Database(ctx context.Context, org, name string) (*sluice.Database, string, error) {
	return database(ctx, t.tx, org, name)
}

func database(ctx context.Context, q querier, org, name string) (*sluice.Database, string, error) {
	if err := checkText("organization", org); err != nil {
		return nil, "", err
	}
	if err := checkText("database name", name); err != nil {
		return nil, "", err
	}
	d, sdl, err := scanDatabase(q.QueryRow(ctx, `SELECT `+databaseColumns+`
		FROM sluice.databases d JOIN sluice.commit_counters c ON c.db_id = d.id
		WHERE d.org = $1 AND d.name = $2`, org, name))
	if errors.Is(err, errNotFound) {
		return nil, "", sluice.ErrNoDatabase(org, name)
	}
	return d, sdl, err
}

// Databases returns every database, ordered by org and name.
func (t *Tx) Databases(ctx context.Context) ([]*sluice.Database, error) {
	return databases(ctx, t.tx)
}

// listedColumns are databaseColumns without schema_sdl, for listings,
// which show no schema: a schema may be up to max_schema_bytes, and a
// listing has many.
const listedColumns = `d.id, d.org, d.name, d.label, d.comment, d.epoch, c.schema_version, d.log_retention_seconds`

// ReadableDatabases returns the databases, _system excluded, on which user
// userID holds at least the read role, with that role, ordered by org and
// name; for the super user, every one, each with the admin role. They are
// read without their schemas (Database's SDL).
//
// Only the user's own rows are read (the role's primary key leads with
// user_id): listing every database and filtering by role read every
// organization's databases, labels and schemas, for a user who holds none.
func (db *DB) ReadableDatabases(ctx context.Context, userID int64, superuser bool) ([]*sluice.Database, []sluice.Role, error) {
	var rows pgx.Rows
	var err error
	if superuser {
		rows, err = db.pool.Query(ctx, `SELECT `+listedColumns+`, $2::smallint
			FROM sluice.databases d JOIN sluice.commit_counters c ON c.db_id = d.id
			WHERE d.org <> $1
			ORDER BY d.org, d.name`, sluice.SystemOrg, int(sluice.RoleAdmin))
	} else {
		rows, err = db.pool.Query(ctx, `SELECT `+listedColumns+`, r.role
			FROM sluice.roles r JOIN sluice.databases d ON d.id = r.db_id JOIN sluice.commit_counters c ON c.db_id = d.id
			WHERE r.user_id = $1 AND r.role >= $2 AND d.org <> $3
			ORDER BY d.org, d.name`, userID, int(sluice.RoleRead), sluice.SystemOrg)
	}
	if err != nil {
		return nil, nil, mapError(err)
	}
	defer rows.Close()
	var out []*sluice.Database
	var roles []sluice.Role
	for rows.Next() {
		var d sluice.Database
		var retention *int64
		var role int
		if err := rows.Scan(&d.ID, &d.Org, &d.Name, &d.Label, &d.Comment, &d.Epoch, &d.SchemaVersion, &retention, &role); err != nil {
			return nil, nil, mapError(err)
		}
		d.LogRetention = retentionOf(retention)
		out = append(out, &d)
		roles = append(roles, sluice.Role(role))
	}
	return out, roles, mapError(rows.Err())
}

func databases(ctx context.Context, q querier) ([]*sluice.Database, error) {
	rows, err := q.Query(ctx, `SELECT `+databaseColumns+`
		FROM sluice.databases d JOIN sluice.commit_counters c ON c.db_id = d.id
		ORDER BY d.org, d.name`)
	if err != nil {
		return nil, mapError(err)
	}
	defer rows.Close()
	var out []*sluice.Database
	for rows.Next() {
		d, _, err := scanDatabase(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, mapError(rows.Err())
}

// newEpoch returns a random lower-case token that identifies one
// incarnation of a database in stream positions.
func newEpoch() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 10)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// Creator is the user a database is made by (ID 0: none), counted
// against the cap of databases one user may make (Max; 0: no cap, as for
// the super user).
type Creator struct {
	ID   int64
	Name string
	Max  int
}

// CreateDatabase creates database d (Org, Name, Label, Comment) with schema
// s, made by creator: its row, its commit counter, its Postgres schema and
// one table per document class. It fills in d.ID, d.Epoch and
// d.SchemaVersion. It returns a Conflict error when the name is taken or
// the creator made creator.Max databases already, and NotFound when the
// organization does not exist.
func (t *Tx) CreateDatabase(ctx context.Context, d *sluice.Database, s *sluice.Schema, creator Creator) error {
	for _, f := range [][2]string{{"organization", d.Org}, {"database name", d.Name}, {"label", d.Label}, {"comment", d.Comment}} {
		if err := checkText(f[0], f[1]); err != nil {
			return err
		}
	}
	if creator.Max > 0 {
		// One user's creations take turns on the user's own row, which
		// no other Postgres role may lock, so that concurrent ones cannot
		// all pass the count (an advisory lock's key could be taken by
		// any role that may log in). A password change updates the row
		// too: both then lock the user's row before _system's counter.
		if _, err := t.tx.Exec(ctx, "SELECT 1 FROM sluice.users WHERE id = $1 FOR NO KEY UPDATE", creator.ID); err != nil {
			return mapError(err)
		}
		var n int
		if err := t.tx.QueryRow(ctx, "SELECT count(*) FROM sluice.databases WHERE creator_id = $1", creator.ID).Scan(&n); err != nil {
			return mapError(err)
		}
		if n >= creator.Max {
			return sluice.Errorf(sluice.CodeConflict, "user %s made %d databases, the most a user may (config max_databases_per_user); delete one first", creator.Name, n)
		}
	}
	var exists bool
	if err := t.tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM sluice.organizations WHERE name = $1)", d.Org).Scan(&exists); err != nil {
		return mapError(err)
	}
	if !exists {
		return sluice.Errorf(sluice.CodeNotFound, "organization %q does not exist", d.Org)
	}
	d.Epoch = newEpoch()
	d.SchemaVersion = 1
	// creator_id (migration 26) is named only for a database made by a
	// user: _system's, made by none, is made as before it, as are the
	// databases of the tests of older schema versions.
	insert := `INSERT INTO sluice.databases (org, name, label, comment, epoch, schema_sdl)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (org, name) DO NOTHING RETURNING id`
	args := []any{d.Org, d.Name, d.Label, d.Comment, d.Epoch, s.SDL}
	if creator.ID != 0 {
		insert = `INSERT INTO sluice.databases (org, name, label, comment, epoch, schema_sdl, creator_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (org, name) DO NOTHING RETURNING id`
		args = append(args, creator.ID)
	}
	err := t.tx.QueryRow(ctx, insert, args...).Scan(&d.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		return sluice.Errorf(sluice.CodeConflict, "database %s/%s already exists", d.Org, d.Name)
	}
	if err != nil {
		return mapError(err)
	}
	if _, err := t.tx.Exec(ctx, "INSERT INTO sluice.commit_counters (db_id) VALUES ($1)", d.ID); err != nil {
		return mapError(err)
	}
	if _, err := t.tx.Exec(ctx, "INSERT INTO sluice.schema_versions (db_id, version, sdl, first_seq) VALUES ($1, 1, $2, 1)", d.ID, s.SDL); err != nil {
		return mapError(err)
	}
	if err := t.createSchema(ctx, d); err != nil {
		return err
	}
	role, err := t.db.writerRole(ctx)
	if err != nil {
		return err
	}
	return syncTables(ctx, t.tx, d.ID, role, nil, s)
}

// createSchema makes database d's Postgres schema, owned by Sluice's
// role. A schema of that name that exists already was made by another
// role (Sluice drops a database's schema with it), which may create
// schemas in Sluice's database: it is not used (see checkOwnSchema). The
// database is refused, with an Unavailable error, and the log names the
// schema and its owner; a retry takes the next id, and so another schema.
// CREATE SCHEMA without IF NOT EXISTS fails alike for one made since the
// look up.
func (t *Tx) createSchema(ctx context.Context, d *sluice.Database) error {
	schema := schemaName(d.ID)
	owner := "another role"
	err := t.tx.QueryRow(ctx, "SELECT pg_get_userbyid(nspowner)::text FROM pg_namespace WHERE nspname = $1", schema).Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) {
		_, err = t.tx.Exec(ctx, "CREATE SCHEMA "+ident(schema)+" AUTHORIZATION CURRENT_USER")
		var pe *pgconn.PgError
		if err == nil || !errors.As(err, &pe) || pe.Code != "42P06" { // duplicate_schema
			return mapError(err)
		}
	} else if err != nil {
		return mapError(err)
	}
	t.db.logger.Warn("a new database's Postgres schema exists already, made by another role: the database is refused (a retry takes another schema); "+
		"have a superuser drop the schema, and let no role but Sluice's create in its database (REVOKE CREATE ON DATABASE … FROM each role but Sluice's that has it)",
		"database", d.Path(), "schema", schema, "owner", owner)
	return &refusedError{shown: sluice.Errorf(sluice.CodeUnavailable,
		"database %s cannot be made now: the Postgres schema it would use exists already, made by another Postgres role (the server's log names it); nothing was changed: retry, and tell the server's operator", d.Path()),
		err: fmt.Errorf("schema %s exists, owned by %s", schema, owner)}
}

// DeleteDatabase removes database d with its tables and its history.
//
// Nothing is dropped with CASCADE, for the reason syncTables gives: other
// roles' objects that depend on the database's tables (a view over them,
// a function taking a row type, a column of another table of one) are
// theirs, and DROP SCHEMA … CASCADE destroyed them with the database.
// They are looked up first (schemaDependents) and the deletion refused
// with a Conflict naming them; then the tables are dropped, and the
// schema, without CASCADE, so that one made since that look up makes
// Postgres refuse (2BP01), answered with the same Conflict. Sluice makes
// nothing in the schema but the tables (their indexes and triggers go
// with them), and where migration 7 installed its event triggers no
// other role may either; an object some role made there all the same
// makes DROP SCHEMA fail alike, a Conflict naming it, not a loss.
//
// Its waits for locks are bounded as a schema change's are
// (LockForSchemaChange):
// the tables' ACCESS EXCLUSIVE locks wait for every transaction using
// them, other roles' included, and the database's API reads and writes
// queue behind them meanwhile.
func (t *Tx) DeleteDatabase(ctx context.Context, d *sluice.Database) error {
	return t.boundLockWaits(ctx, "the deletion", d, true, func() error { return t.deleteDatabase(ctx, d) })
}

// deleteDatabase is DeleteDatabase once its lock waits are bounded.
func (t *Tx) deleteDatabase(ctx context.Context, d *sluice.Database) error {
	const refused = "deleting database %s would drop tables that objects of other Postgres roles depend on: %s; they must be dropped first (a temporary table goes when its session ends)"
	others, err := schemaDependents(ctx, t.tx, d.ID)
	if err != nil {
		return err
	}
	if len(others) > 0 {
		return sluice.Errorf(sluice.CodeConflict, refused, d.Path(), strings.Join(others, ", "))
	}
	schema := pgx.Identifier{schemaName(d.ID)}.Sanitize()
	rows, err := t.tx.Query(ctx, `SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') ORDER BY c.relname`, schemaName(d.ID))
	if err != nil {
		return mapError(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return mapError(err)
	}
	// The tables in one statement, which drops them with their indexes,
	// triggers and row types, then the schema, empty.
	stmts := []string{"DROP SCHEMA " + schema}
	if len(tables) > 0 {
		stmts = append([]string{"DROP TABLE " + strings.Join(tables, ", ")}, stmts...)
	}
	// A savepoint, to ask after a failed DROP whether the database is
	// still there: a deletion of it on its own may have committed since
	// its tables were read (or while the DROP waited for their locks).
	if _, err := t.tx.Exec(ctx, "SAVEPOINT drop_database"); err != nil {
		return mapError(err)
	}
	for _, s := range stmts {
		if _, err := t.tx.Exec(ctx, s); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "2BP01" { // dependent_objects_still_exist
				// Made since schemaDependents looked: Postgres' detail
				// names them ("view app.v depends on table …").
				return sluice.Errorf(sluice.CodeConflict, refused, d.Path(), pe.Detail)
			}
			if errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "3F000") { // undefined_table, invalid_schema_name
				return t.deletedMeanwhile(ctx, d, err)
			}
			return mapError(err)
		}
	}
	if _, err := t.tx.Exec(ctx, "RELEASE SAVEPOINT drop_database"); err != nil {
		return mapError(err)
	}
	// The counter row before the database's (which cascades to the
	// webhooks'): in the order of a schema change and of a webhook's
	// creation, resume or replay (history), so that none of them waits
	// for this deletion while holding what it waits for. A prune holds
	// one database's counter row at a time (pruneDatabase), so it never
	// holds the system database's, which this deletion's commit locks,
	// while it waits for this one's (TestPruneRacesDatabaseDeletion).
	if _, err := t.tx.Exec(ctx, "SELECT 1 FROM sluice.commit_counters WHERE db_id = $1 FOR UPDATE", d.ID); err != nil {
		return mapError(err)
	}
	if _, err := t.tx.Exec(ctx, "DELETE FROM sluice.changes WHERE commit_uid IN (SELECT uid FROM sluice.commits WHERE db_id = $1)", d.ID); err != nil {
		return mapError(err)
	}
	tag, err := t.tx.Exec(ctx, "DELETE FROM sluice.databases WHERE id = $1", d.ID)
	if err != nil {
		return mapError(err)
	}
	if tag.RowsAffected() == 0 {
		return sluice.Errorf(sluice.CodeNotFound, "database %s does not exist", d.Path())
	}
	t.changeAccess(sluice.AccessChange{Kind: sluice.AccessDatabase, DatabaseID: d.ID, Org: d.Org})
	return nil
}

// deletedMeanwhile is deleteDatabase's error when dropping d's tables or
// schema failed with dropErr, a table or the schema missing: NotFound when
// d's row is gone too, deleted on its own by a transaction that committed
// since d was read, which deleted all that this deletion would have (its
// tables, history, webhooks, roles) and recorded it in the access log;
// otherwise dropErr, mapped.
func (t *Tx) deletedMeanwhile(ctx context.Context, d *sluice.Database, dropErr error) error {
	if _, err := t.tx.Exec(ctx, "ROLLBACK TO SAVEPOINT drop_database"); err != nil {
		return mapError(err)
	}
	var exists bool
	if err := t.tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM sluice.databases WHERE id = $1)", d.ID).Scan(&exists); err != nil {
		return mapError(err)
	}
	if !exists {
		return sluice.Errorf(sluice.CodeNotFound, "database %s does not exist", d.Path())
	}
	return mapError(dropErr)
}

// CurrentSchemaVersion returns the current schema version of database d,
// or NotFound when it was deleted (or re-created: another epoch).
func (db *DB) CurrentSchemaVersion(ctx context.Context, d *sluice.Database) (int, error) {
	var v int
	var epoch string
	err := db.pool.QueryRow(ctx, `SELECT c.schema_version, d.epoch FROM sluice.commit_counters c
		JOIN sluice.databases d ON d.id = c.db_id WHERE c.db_id = $1`, d.ID).Scan(&v, &epoch)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && d.Epoch != "" && epoch != d.Epoch {
		return 0, sluice.ErrNoDatabase(d.Org, d.Name)
	}
	return v, mapError(err)
}

// LockForSchemaChange takes, for a schema change of database d whose
// current schema is s, the ACCESS EXCLUSIVE locks of its class tables,
// then its counter row (LockDatabase), and returns a Conflict error (a
// *SchemaMovedError) when the schema version moved since d was read. A write holds its tables'
// locks from its first statement and takes the counter row's last; a
// schema change that took the counter row first, then waited for a table
// a write holds, while that write waited for the counter row, was a
// deadlock that Postgres broke by failing one of them. In this order the
// change waits for the writes in flight, and the writes that come later
// wait for it, then find the schema moved (ErrSchemaChanged) and run
// again.
//
// Each wait for one of these locks is bounded by lockTimeout
// (boundLockWaits). The tables' locks wait for every transaction using
// them, those of other Postgres roles granted SQL access included (a
// report, a psql session left open in a transaction), and Sluice's own
// long reads (a large listing to a slow client); every API read and write
// of the tables queues behind them while they wait: unbounded, one such
// transaction held the database's whole API for up to statement_timeout.
// Past lockTimeout both are let go (a savepoint), the reads and writes
// queued behind them go on, and both are asked for again, until
// statement_timeout; then the change gives up, nothing of it applied
// (one transaction), with an Unavailable error. The counter row is asked
// for in the same try, so that no try holds the tables while it waits for
// the counter row (which a prune of the database holds while it runs).
func (t *Tx) LockForSchemaChange(ctx context.Context, d *sluice.Database, s *sluice.Schema) error {
	var names []string
	for _, name := range s.Order {
		if s.Classes[name].Kind == sluice.KindDocument {
			names = append(names, tableName(d.ID, name))
		}
	}
	var v int
	err := t.boundLockWaits(ctx, "the schema change", d, true, func() error {
		if len(names) > 0 {
			if _, err := t.tx.Exec(ctx, "LOCK TABLE "+strings.Join(names, ", ")+" IN ACCESS EXCLUSIVE MODE"); err != nil {
				return err
			}
		}
		return t.tx.QueryRow(ctx, lockCounterSQL, d.ID).Scan(&v)
	})
	return lockedVersion(d, v, err)
}

// boundLockWaits runs fn, a step of a schema change or a deletion of
// database d in t, with its waits for locks bounded by lockTimeout
// (setLockTimeout, set back to the connection's own once fn is done, so
// that the transaction's later statements wait as any write does). With
// retry, a lock wait that runs out rolls fn back to a savepoint taken
// before it (its locks let go), lets the reads and writes queued behind
// it go on for a moment, and tries fn again, for as long as a statement
// may run (the DB's statement timeout, 30 s when it has none, counted
// from the transaction's first such wait). Past that, or at once without
// retry (a step that holds the tables already: letting go of its own
// lock would not free them), it returns an Unavailable error (503,
// Retry-After): a lock timeout is not a conflict of the request with
// another (409), and the same request succeeds once those sessions'
// transactions end. The sessions it waited for (watchBlockers) are
// logged, for an operator who may end them or ask them to commit, and
// not shown to the client: they are other Postgres roles' (their names,
// and an application_name any role sets to any text), or Sluice's own
// serving other users.
func (t *Tx) boundLockWaits(ctx context.Context, what string, d *sluice.Database, retry bool, fn func() error) error {
	if t.lockPatienceEnds.IsZero() {
		patience := t.db.opts.statementTimeout
		if patience <= 0 {
			patience = DefaultStatementTimeout
		}
		t.lockPatienceEnds = time.Now().Add(patience)
	}
	pause := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		if retry {
			if _, err := t.tx.Exec(ctx, "SAVEPOINT lock_wait"); err != nil {
				return mapError(err)
			}
		}
		if err := setLockTimeout(ctx, t.tx); err != nil {
			return mapError(err)
		}
		names, err := t.db.watchBlockers(ctx, t.tx.conn.Conn().PgConn().PID(), fn)
		if !isLockTimeout(err) {
			if err != nil {
				return err
			}
			if _, err := t.tx.Exec(ctx, "SET LOCAL lock_timeout TO DEFAULT"); err != nil {
				return mapError(err)
			}
			if retry {
				_, err = t.tx.Exec(ctx, "RELEASE SAVEPOINT lock_wait")
			}
			return mapError(err)
		}
		if !retry || time.Now().Add(pause+lockTimeout).After(t.lockPatienceEnds) {
			t.db.logger.Warn(what+" gave up waiting for locks other sessions hold", "database", d.Path(), "attempts", attempt, "sessions", names)
			return &refusedError{shown: sluice.Errorf(sluice.CodeUnavailable,
				"%s of database %s waited %d times %s for locks that other transactions hold on its tables or its commit counter (the server's log names their sessions); nothing was changed: retry once they end",
				what, d.Path(), attempt, lockTimeout), err: err}
		}
		// Also sets lock_timeout back: SET LOCAL is undone with the savepoint.
		if _, err := t.tx.Exec(ctx, "ROLLBACK TO SAVEPOINT lock_wait"); err != nil {
			return mapError(err)
		}
		t.db.logger.Info(what+" waits for locks other sessions hold; trying again", "database", d.Path(), "attempt", attempt, "sessions", names)
		timer := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			timer.Stop()
			return context.Cause(ctx)
		case <-timer.C:
		}
		pause = min(2*pause, time.Second)
	}
}

// LockDatabase locks database d's commit counter: it waits for commits
// in flight and makes later ones wait until the Tx ends. It returns a
// Conflict error when the schema version moved since d was read. (A
// schema change takes it with its tables: LockForSchemaChange.)
func (t *Tx) LockDatabase(ctx context.Context, d *sluice.Database) error {
	var v int
	err := t.tx.QueryRow(ctx, lockCounterSQL, d.ID).Scan(&v)
	return lockedVersion(d, v, err)
}

// lockCounterSQL locks a database's counter row, reading its schema
// version.
const lockCounterSQL = "SELECT schema_version FROM sluice.commit_counters WHERE db_id = $1 FOR UPDATE"

// lockedVersion returns the error of locking d's counter row, which read
// version v, or err: NotFound when d is gone, a *SchemaMovedError when its
// schema moved since d was read.
func lockedVersion(d *sluice.Database, v int, err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return sluice.Errorf(sluice.CodeNotFound, "database %s does not exist", d.Path())
	}
	if err != nil {
		return mapError(err)
	}
	if v != d.SchemaVersion {
		return &SchemaMovedError{Current: v, err: sluice.Errorf(sluice.CodeConflict, "the schema of %s changed concurrently; retry", d.Path())}
	}
	return nil
}

// SchemaMovedError is the error of locking a database whose schema
// version moved since it was read: a Conflict (Unwrap) that keeps the
// version the lock found, for a schema change that was asked to expect a
// version (engine.PutSchemaOptions.Version), which answers 412 naming it
// instead of asking for a retry that would fail the same way.
type SchemaMovedError struct {
	// Current is the schema version the lock read.
	Current int
	err     *sluice.Error
}

func (e *SchemaMovedError) Error() string { return e.err.Error() }
func (e *SchemaMovedError) Unwrap() error { return e.err }

// ChangeSchema replaces database d's schema prev by next, altering its
// tables to match, and increments d.SchemaVersion. Call
// LockForSchemaChange first in the same Tx.
func (t *Tx) ChangeSchema(ctx context.Context, d *sluice.Database, prev, next *sluice.Schema) error {
	role, err := t.db.writerRole(ctx)
	if err != nil {
		return err
	}
	if err := t.boundLockWaits(ctx, "the schema change", d, false, func() error {
		return syncTables(ctx, t.tx, d.ID, role, prev, next)
	}); err != nil {
		return err
	}
	if _, err := t.tx.Exec(ctx, "UPDATE sluice.databases SET schema_sdl = $2 WHERE id = $1", d.ID, next.SDL); err != nil {
		return mapError(err)
	}
	var last int64
	if err := t.tx.QueryRow(ctx, "UPDATE sluice.commit_counters SET schema_version = schema_version + 1 WHERE db_id = $1 RETURNING schema_version, last_seq", d.ID).Scan(&d.SchemaVersion, &last); err != nil {
		return mapError(err)
	}
	// The counter row is locked (LockDatabase): the next commit is last+1.
	_, err = t.tx.Exec(ctx, "INSERT INTO sluice.schema_versions (db_id, version, sdl, first_seq) VALUES ($1, $2, $3, $4)", d.ID, d.SchemaVersion, next.SDL, last+1)
	return mapError(err)
}
