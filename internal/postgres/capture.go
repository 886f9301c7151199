package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/schema"
)

// Writes made directly in Postgres (another role granted DML on a class
// table, psql, a migration) join the commit log: migration 7 holds the
// trigger functions and says how, and migration 11 keeps their state
// (each transaction's commit, its changes' count) where only Sluice's
// role can write it. This file makes each class table's
// triggers and column defaults from the database's schema, whenever its
// tables change, and at start for databases made before (or whose
// schema changed under an older Sluice).

// writerSetting is the session setting that, with the writer role,
// marks a connection as Sluice's own: the capture triggers skip its
// writes, which record themselves.
const writerSetting = "sluice.writer"

// captureLevel is the level of the triggers this binary makes: the
// record (databases.capture) begins with "capture/<level> ". It must grow
// whenever captureSpec or captureSQL make triggers that check more (or
// otherwise differ) for the same schema, because it is what tells this
// binary's triggers from an older or a newer one's:
//
//   - a record of a lower level (or none) was made by an older Sluice,
//     whose triggers check less (an older one knew no ref: items, say):
//     this binary makes them again, at start and every little while
//     (RepairCapture), since an older replica running beside it during a
//     rolling upgrade makes its own again when it starts or changes a
//     schema;
//   - a record of a higher level was made by a newer Sluice: this binary
//     keeps its triggers (ensureCapture), which check at least as much
//     as its own would, and the functions they call are the database's
//     (its migrations are the newer binary's).
//
// Sluices before level 2 all recorded "capture/1", whatever their
// triggers checked, and compare records for equality only: they make
// their own triggers again over any other record, which is why the
// newer replicas repair them rather than trust the older ones to stay
// away.
//
// Level 3 adds the statement trigger refusing other roles' triggers
// (migration 29, guardTrigger); level 4 leaves it out where Sluice's DDL
// guard refuses other roles' triggers before they exist (guardMode), and
// records which guard the tables have.
const captureLevel = 4

// guardTrigger is the name of the statement trigger that fails a write
// to a class table while the table has a trigger Sluice did not make
// (sluice.refuse_foreign_triggers, migration 29). Triggers of one kind
// fire in the byte order of their names: no other trigger's name can
// sort before this one (a name cannot be empty nor hold a NUL), so no
// other role's trigger runs before it, and through it, none runs in the
// session of Sluice (or of any role) writing the table.
const guardTrigger = `U&"\0001"`

// The guards that keep other roles' triggers on class tables from running
// (guardModeSQL tells which this database has):
//
//   - guardDDL: Sluice's event trigger (sluice_guard_ddl, made where
//     Sluice's role is a superuser, as with the embedded Postgres)
//     refuses CREATE TRIGGER on Sluice's tables by any role but Sluice's
//     own sessions: no such trigger is ever made, and only a superuser
//     can disable or drop it. The tables need no statement guard, which
//     cost a catalog look per statement, about a tenth of the pace of
//     Sluice's writes (docs/benchmarks.md).
//   - guardStatement: without the event trigger (Sluice's role is not a
//     superuser), a role granted TRIGGER can make one between Sluice's
//     looks (RemoveForeign): each class table has the statement guard
//     (guardTrigger), which refuses every write while it is there.
//   - guardNone: a schema older than migration 29 (tests that stop
//     there) has no guard function.
//
// A superuser who drops or disables the event trigger turns a database to
// guardStatement; RepairCapture notices within captureRepairEvery and
// gives its tables the statement guard (docs/security.md).
const (
	guardDDL       = "ddl"
	guardStatement = "statement"
	guardNone      = "none"
)

// guardModeSQL returns the guard (above) that class tables have now.
// Event triggers fire unless disabled, or with session_replication_role
// set to replica for the "O" (origin) ones, which only a superuser can set.
const guardModeSQL = `SELECT CASE
	WHEN to_regprocedure('sluice.refuse_foreign_triggers()') IS NULL THEN 'none'
	WHEN EXISTS (SELECT FROM pg_event_trigger WHERE evtname = 'sluice_guard_ddl' AND evtenabled IN ('O', 'A')) THEN 'ddl'
	ELSE 'statement' END`

// guardMode returns the guard class tables have now (guardModeSQL).
func guardMode(ctx context.Context, q querier) (string, error) {
	var mode string
	if err := q.QueryRow(ctx, guardModeSQL).Scan(&mode); err != nil {
		return "", mapError(err)
	}
	return mode, nil
}

// recordLevel returns the level of a recorded capture (0 for none, or
// one that does not begin with "capture/<number> ").
func recordLevel(record string) int {
	rest, ok := strings.CutPrefix(record, "capture/")
	if !ok {
		return 0
	}
	num, _, _ := strings.Cut(rest, " ")
	n, err := strconv.Atoi(num)
	if err != nil {
		return 0
	}
	return n
}

// captureStale reports whether the capture recorded for a database must
// be made again for schema s and guard mode: it was made by an older
// Sluice, or by this one's level for another schema, role or guard. A
// newer Sluice's is kept.
func captureStale(record, role, mode string, s *sluice.Schema) bool {
	if recordLevel(record) > captureLevel {
		return false
	}
	return record != captureRecord(role, mode, s)
}

// captureSpec returns the validation arguments of class c's capture
// trigger (see sluice.check_document, migrations 7, 14 and 17): its
// required fields, lists and the kind of their elements, subdocuments and
// the fields of their types, enums, references (migration 23: an id of a
// class the field's type covers), and the Float, BigInt and DateTime
// fields, whose columns can hold values the API cannot read (NaN,
// infinities, times outside years 1 to 9999).
func captureSpec(s *sluice.Schema, c *sluice.Class) []string {
	spec := fieldSpec(s, c.Fields, false)
	// The subdocument types the class holds, at any depth, for the sub:
	// items (migration 17).
	types := map[string][]string{}
	var collect func(fields []*sluice.Field)
	collect = func(fields []*sluice.Field) {
		for _, f := range fields {
			if f.Type.Kind != sluice.TypeSubdocument {
				continue
			}
			if _, seen := types[f.Type.Name]; seen {
				continue
			}
			sc := s.Class(f.Type.Name)
			if sc == nil {
				continue
			}
			types[f.Type.Name] = fieldSpec(s, sc.Fields, true)
			collect(sc.Fields)
		}
	}
	collect(c.Fields)
	if len(types) > 0 {
		b, _ := json.Marshal(types) // strings only: cannot fail; keys sorted
		spec = append(spec, "types:"+string(b))
	}
	return spec
}

// fieldSpec returns the spec items of fields: a class's (its columns), or
// a subdocument type's (sub, whose scalar fields are JSON values: each
// gets a val: item of its kind).
func fieldSpec(s *sluice.Schema, fields []*sluice.Field, sub bool) []string {
	var spec []string
	for _, f := range fields {
		if f.Type.Kind == sluice.TypeSubdocument {
			spec = append(spec, "sub:"+f.Name+":"+f.Type.Name)
		}
		if f.Required {
			spec = append(spec, "req:"+f.Name)
		}
		switch {
		case f.List:
			spec = append(spec, "list:"+f.Name)
			if kind := elementKind(f.Type); kind != "" {
				spec = append(spec, "elems:"+f.Name+":"+kind)
			}
		case f.Type.Kind == sluice.TypeSubdocument:
			spec = append(spec, "obj:"+f.Name)
		case sub && f.Type.Kind != sluice.TypeEnum:
			spec = append(spec, "val:"+f.Name+":"+elementKind(f.Type))
		case f.Type.Kind == sluice.TypeScalar:
			switch f.Type.Name {
			case sluice.ScalarFloat:
				spec = append(spec, "float:"+f.Name)
			case sluice.ScalarBigInt:
				spec = append(spec, "bigint:"+f.Name)
			case sluice.ScalarDateTime:
				spec = append(spec, "time:"+f.Name)
			}
		}
		if f.Type.Kind == sluice.TypeEnum {
			if e := s.Enums[f.Type.Name]; e != nil {
				spec = append(spec, "enum:"+f.Name+":"+strings.Join(e.Values, "|"))
			}
		}
		if f.Type.Kind == sluice.TypeReference {
			spec = append(spec, "ref:"+f.Name+":"+strings.Join(refClasses(s, f.Type.Name), "|"))
		}
	}
	return spec
}

// refClasses returns the classes a reference to class may name, as the
// API checks one (schema's validator.reference): class and those that
// inherit from it, with documents of their own (an id names no other).
func refClasses(s *sluice.Schema, class string) []string {
	var out []string
	for _, name := range s.Descendants(class) {
		if s.Classes[name].Kind == sluice.KindDocument {
			out = append(out, name)
		}
	}
	return out
}

// elementKind returns the kind sluice.is_value checks the elements of a
// list of t against ("" for enums, which their own argument checks).
func elementKind(t sluice.FieldType) string {
	switch t.Kind {
	case sluice.TypeEnum:
		return ""
	case sluice.TypeReference:
		return "string"
	case sluice.TypeSubdocument:
		return "obj"
	}
	switch t.Name {
	case sluice.ScalarInt:
		return "int"
	case sluice.ScalarFloat:
		return "float"
	case sluice.ScalarBigInt:
		return "bigint"
	case sluice.ScalarBoolean:
		return "bool"
	case sluice.ScalarDateTime:
		return "time"
	case sluice.ScalarString, sluice.ScalarID:
		return "string"
	}
	return "any"
}

// captureSQL returns the statements that give the table of class c of
// database dbID its capture triggers and defaults, and the guard of mode
// (guardDDL...); role is Sluice's own.
func captureSQL(dbID int64, role, mode string, s *sluice.Schema, c *sluice.Class) []string {
	tbl := tableName(dbID, c.Name)
	db := strconv.FormatInt(dbID, 10)
	// Sluice's own rows skip the triggers by this condition, evaluated
	// per row: no trigger call, no queued event.
	when := fmt.Sprintf("WHEN (session_user <> %s::name OR current_setting('%s', true) IS DISTINCT FROM 'on')", quoteLiteral(role), writerSetting)
	args := []string{quoteLiteral(db)}
	for _, a := range captureSpec(s, c) {
		args = append(args, quoteLiteral(a))
	}
	stmts := []string{
		fmt.Sprintf("ALTER TABLE %s ALTER COLUMN %s SET DEFAULT sluice.new_id(%s), ALTER COLUMN %s SET DEFAULT sluice.tx_uid(%s)",
			tbl, colID, quoteLiteral(c.Name), colCommitUID, db),
		fmt.Sprintf("CREATE OR REPLACE TRIGGER sluice_capture AFTER INSERT OR UPDATE OR DELETE ON %s FOR EACH ROW %s EXECUTE FUNCTION sluice.capture_change(%s)",
			tbl, when, strings.Join(args, ", ")),
		fmt.Sprintf("CREATE OR REPLACE TRIGGER sluice_stamp BEFORE UPDATE ON %s FOR EACH ROW %s EXECUTE FUNCTION sluice.capture_stamp(%s)",
			tbl, when, quoteLiteral(db)),
		fmt.Sprintf("CREATE OR REPLACE TRIGGER sluice_truncate BEFORE TRUNCATE ON %s FOR EACH STATEMENT EXECUTE FUNCTION sluice.capture_truncate(%s)",
			tbl, quoteLiteral(db)),
	}
	switch mode {
	case guardStatement:
		// For every role's statements, not only Sluice's: a trigger of
		// one role runs as whichever role writes (an operator's psql as
		// a superuser too). Its cost is one catalog look per statement.
		stmts = append(stmts, fmt.Sprintf("CREATE OR REPLACE TRIGGER %s BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON %s FOR EACH STATEMENT EXECUTE FUNCTION sluice.refuse_foreign_triggers()",
			guardTrigger, tbl))
	case guardDDL:
		// Made while the event trigger was not there, or by a Sluice of
		// level 3, which made it whatever the mode.
		stmts = append(stmts, fmt.Sprintf("DROP TRIGGER IF EXISTS %s ON %s", guardTrigger, tbl))
	}
	return stmts
}

// likeExactly returns a LIKE pattern matching name alone.
func likeExactly(name string) string {
	return strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`).Replace(name)
}

// captureRecord returns what databases.capture records for schema s: the
// form of the triggers and their arguments, and on its second line the
// guard mode (RepairCapture reads it there), so that a change of any
// makes them again.
func captureRecord(role, mode string, s *sluice.Schema) string {
	var b strings.Builder
	b.WriteString("capture/" + strconv.Itoa(captureLevel) + " " + role + "\nguard: " + mode)
	for _, name := range s.Order {
		c := s.Classes[name]
		if c.Kind != sluice.KindDocument {
			continue
		}
		b.WriteString("\n" + name + ": " + strings.Join(captureSpec(s, c), " "))
	}
	return b.String()
}

// syncCapture gives every table of schema s of database dbID its capture
// triggers and the guard the database calls for now (guardMode), and
// records them.
func syncCapture(ctx context.Context, q querier, dbID int64, role string, s *sluice.Schema) error {
	mode, err := guardMode(ctx, q)
	if err != nil {
		return err
	}
	for _, name := range s.Order {
		c := s.Classes[name]
		if c.Kind != sluice.KindDocument {
			continue
		}
		for _, stmt := range captureSQL(dbID, role, mode, s, c) {
			if _, err := q.Exec(ctx, stmt); err != nil {
				return fmt.Errorf("capture triggers of %s: %w", c.Name, err)
			}
		}
	}
	if _, err := removeForeign(ctx, q, likeExactly(schemaName(dbID))); err != nil {
		return err
	}
	_, err = q.Exec(ctx, "UPDATE sluice.databases SET capture = $2 WHERE id = $1", dbID, captureRecord(role, mode, s))
	return mapError(err)
}

// foreignSQL lists, for Sluice's tables in the schemas matching any of
// the LIKE patterns $1, the statements removing what other roles attached or
// may attach: a DROP TRIGGER for each trigger Sluice did not make (as
// sluice.refuse_foreign_triggers judges one: not internal, its function
// outside schema sluice) and a REVOKE of TRIGGER and REFERENCES for each
// role granted either. TRIGGER lets a role attach code that runs as
// whoever writes the table, Sluice included; REFERENCES, a foreign key
// that refuses Sluice's deletes (and a foreign key made already stays:
// only its table's owner can drop it). GRANT ALL grants both, as do
// default privileges granting ALL. CASCADE takes them also from the roles
// a grantee granted them to. And a REVOKE of CREATE on each of those
// schemas that Sluice's role owns, for each other role granted it (GRANT
// ALL ON SCHEMA grants it): with it a role made a relation named as an
// index or table Sluice would make there (checkDatabaseSchema). A role is
// named as its name quoted once: regrole's text is quoted already, and
// quoted again it named a role that does not exist ("App-Writer" as
// """App-Writer"""), so the revoke failed, and with it every schema
// change of a database granting that role ALL
// (TestGrantsToRolesOfAnyNameAreRevoked). The revokes come first: the
// drops, each waiting for its table's lock, came first, and a role that
// kept making triggers, each holding the table a moment, kept the grant
// (and the table's writes refused) for as long as the drops took, while
// it made more (TestRoleMakingTriggersLosesTheGrantFirst).
const foreignSQL = `
SELECT stmt FROM (
	SELECT DISTINCT 0 AS step, format('REVOKE CREATE ON SCHEMA %I FROM %s CASCADE', n.nspname,
		CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END) AS stmt
	FROM pg_namespace n, aclexplode(n.nspacl) a
	WHERE n.nspname LIKE ANY ($1) AND n.nspowner = (SELECT oid FROM pg_roles WHERE rolname = current_user) AND a.privilege_type = 'CREATE' AND a.grantee <> n.nspowner
UNION ALL
	SELECT DISTINCT 1, format('REVOKE TRIGGER, REFERENCES ON %I.%I FROM %s CASCADE', n.nspname, c.relname,
		CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END)
	FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace, aclexplode(c.relacl) a
	WHERE n.nspname LIKE ANY ($1) AND c.relowner = (SELECT oid FROM pg_roles WHERE rolname = current_user) AND a.privilege_type IN ('TRIGGER', 'REFERENCES') AND a.grantee <> c.relowner
UNION ALL
	SELECT 2, format('DROP TRIGGER %I ON %I.%I', t.tgname, n.nspname, c.relname)
	FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_proc p ON p.oid = t.tgfoid
	WHERE n.nspname LIKE ANY ($1) AND c.relowner = (SELECT oid FROM pg_roles WHERE rolname = current_user) AND NOT t.tgisinternal AND p.pronamespace <> 'sluice'::regnamespace
) s ORDER BY step, stmt`

// removeForeign drops the triggers other roles made on Sluice's tables in
// the schemas matching any of patterns, and revokes the privileges that
// let them (foreignSQL). It returns the statements it ran, for the log.
func removeForeign(ctx context.Context, q querier, patterns ...string) ([]string, error) {
	rows, err := q.Query(ctx, foreignSQL, patterns)
	if err != nil {
		return nil, mapError(err)
	}
	stmts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, mapError(err)
	}
	for _, stmt := range stmts {
		if _, err := q.Exec(ctx, stmt); err != nil {
			return nil, fmt.Errorf("%s: %w", stmt, mapError(err))
		}
	}
	return stmts, nil
}

// checkWriterRole returns Sluice's role (the one migration 7 recorded)
// and an error when this connection's role is another: the capture
// triggers skip that role's writes only, so a replica connected as
// another would have its writes recorded twice.
func (db *DB) checkWriterRole(ctx context.Context) (string, error) {
	var role, user string
	if err := db.pool.QueryRow(ctx, "SELECT value, session_user FROM sluice.settings WHERE key = 'writer_role'").Scan(&role, &user); err != nil {
		return "", fmt.Errorf("read Sluice's role: %w", err)
	}
	if role != user {
		return "", fmt.Errorf("this database is Sluice's as Postgres role %q, and this process connects as %q: every replica must connect as %q (Sluice tells its own writes from other roles' by the role)", role, user, role)
	}
	return role, nil
}

// ensureCapture makes the capture triggers of every database whose
// recorded capture is stale (captureStale): databases made before
// migration 7, by an older Sluice, or whose schema changed under one.
// Each is made in a transaction of its own holding the database's tables
// and then its counter row, as a schema change does, so replicas starting
// at once do it once. Making them takes each table's ACCESS EXCLUSIVE lock
// (ALTER TABLE … SET DEFAULT), which waits for the transactions reading
// the table (the API's too): each wait for a lock is bounded by
// lockTimeout, so that the writes queued behind it are not held up behind
// a long transaction for longer. With retry, a database whose locks were
// not had is tried again (retryLocked) until ctx ends; without, it is
// left for the next call.
// It returns the number of databases whose triggers it made.
func (db *DB) ensureCapture(ctx context.Context, role string, retry bool) (int, error) {
	mode, err := guardMode(ctx, db.pool)
	if err != nil {
		return 0, err
	}
	rows, err := db.pool.Query(ctx, "SELECT id, schema_sdl, capture FROM sluice.databases ORDER BY id")
	if err != nil {
		return 0, mapError(err)
	}
	var todo []int64
	// errs holds each database's failure: one does not keep the others'
	// triggers from being made.
	var errs []error
	for rows.Next() {
		var id int64
		var sdl, capture string
		if err := rows.Scan(&id, &sdl, &capture); err != nil {
			rows.Close()
			return 0, mapError(err)
		}
		s, err := parseStored(id, sdl)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if captureStale(capture, role, mode, s) {
			todo = append(todo, id)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, mapError(err)
	}
	made := 0
	for _, id := range todo {
		var did bool // the last try made them (a try may time out after)
		remake := func() error {
			did = false
			tablesGone := false
			err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
				return db.namingBlockers(ctx, tx.Conn().PgConn().PID(), func() error {
					if err := setLockTimeout(ctx, tx); err != nil {
						return err
					}
					// The locks in a schema change's order (LockForSchemaChange): the
					// tables first, the counter row next. The other order
					// could deadlock with one, and the tables without
					// waiting (NOWAIT) were never had while any transaction
					// read them, as the API's do all the time on a busy
					// database. The schema naming the tables is read first,
					// without a lock, and again under the counter row.
					var sdl, capture string
					err := tx.QueryRow(ctx, "SELECT schema_sdl, capture FROM sluice.databases WHERE id = $1", id).Scan(&sdl, &capture)
					if err == pgx.ErrNoRows {
						return nil // deleted meanwhile
					}
					if err != nil {
						return err
					}
					s, err := parseStored(id, sdl)
					if err != nil {
						return err
					}
					mode, err := guardMode(ctx, tx)
					if err != nil {
						return err
					}
					if !captureStale(capture, role, mode, s) {
						return nil // another replica made them meanwhile
					}
					// Each table's wait is bounded by lockTimeout: past it
					// this try fails, and is tried again (retryLocked) or
					// left for the next call.
					if err := lockClassTables(ctx, tx, id, s); err != nil {
						if gone(err) {
							// A schema change or deletion dropped one
							// while this waited for it: the schema read
							// is not the database's any more, and the next
							// call reads the new one.
							tablesGone = true
						}
						return err
					}
					var locked string
					err = tx.QueryRow(ctx, `SELECT d.schema_sdl, d.capture FROM sluice.databases d
						JOIN sluice.commit_counters c ON c.db_id = d.id WHERE d.id = $1 FOR UPDATE OF c`, id).Scan(&locked, &capture)
					if err == pgx.ErrNoRows {
						return nil // deleted meanwhile
					}
					if err != nil {
						return err
					}
					if locked != sdl {
						// Another replica changed the schema while this
						// waited for the tables: those locked may not be
						// its tables. This try gives up; the next call
						// (the next RepairCapture, or this replica's
						// next start) reads the new schema, and the
						// replica that changed it made triggers for it.
						return nil
					}
					if !captureStale(capture, role, mode, s) {
						return nil // another replica made them meanwhile
					}
					did = true
					return syncCapture(ctx, tx, id, role, s)
				})
			})
			if tablesGone {
				return nil
			}
			return err
		}
		what := fmt.Sprintf("making the capture triggers of database %d", id)
		if retry {
			err = db.retryLocked(ctx, what, remake)
		} else {
			err = remake()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, mapError(err)))
			continue
		}
		if did {
			made++
		}
	}
	return made, errors.Join(errs...)
}

// RepairCapture makes again the capture triggers of the databases whose
// recorded capture is of a lower level than this binary's (captureLevel):
// an older replica, during a rolling upgrade, made them when it started
// or changed a schema, and its triggers check less than this one's (SQL
// writes would then store what the API refuses). It also makes again
// those of this level recorded with another guard than the one the
// database calls for now (guardMode: a superuser dropped or disabled the
// DDL guard, so the tables need the statement guard). The daemon calls it
// every little while; the usual answer (nothing to do) costs one query.
// A database whose tables another transaction holds locked longer than
// lockTimeout is left for the next call. It returns the number of
// databases whose triggers it made.
func (db *DB) RepairCapture(ctx context.Context) (int, error) {
	var older bool
	if err := db.pool.QueryRow(ctx, `WITH r AS (SELECT coalesce(substring(left(capture, 24) from '^capture/([0-9]{1,9}) ')::int, 0) AS level,
			split_part(capture, E'\n', 2) AS guard FROM sluice.databases)
		SELECT EXISTS (SELECT FROM r WHERE level < $1 OR level = $1 AND guard <> 'guard: ' || (`+guardModeSQL+`))`, captureLevel).Scan(&older); err != nil || !older {
		return 0, mapError(err)
	}
	role, err := db.writerRole(ctx)
	if err != nil {
		return 0, err
	}
	return db.ensureCapture(ctx, role, false)
}

// parseStored parses the stored schema of database id.
func parseStored(id int64, sdl string) (*sluice.Schema, error) {
	if sdl == "" {
		return &sluice.Schema{Classes: map[string]*sluice.Class{}, Enums: map[string]*sluice.Enum{}}, nil
	}
	s, err := schema.Parse(sdl)
	if err != nil {
		return nil, fmt.Errorf("the stored schema of database %d does not parse: %w", id, err)
	}
	return s, nil
}

// lockClassTables locks the class tables of database id's schema s as a
// schema change does (LockForSchemaChange, in the same order), each wait bounded
// by the lock_timeout of tx (setLockTimeout).
func lockClassTables(ctx context.Context, tx pgx.Tx, id int64, s *sluice.Schema) error {
	var names []string
	for _, name := range s.Order {
		if s.Classes[name].Kind == sluice.KindDocument {
			names = append(names, tableName(id, name))
		}
	}
	if len(names) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, "LOCK TABLE "+strings.Join(names, ", ")+" IN ACCESS EXCLUSIVE MODE")
	return err
}

// RemoveForeign drops the triggers other roles made on Sluice's tables
// (those of schema sluice and of every database's schema) and revokes
// TRIGGER and REFERENCES on them, and CREATE on those schemas, from every
// role (foreignSQL). A schema
// change does so for its database's tables; the daemon calls this at
// start and every little while, for the grants and triggers made since.
// Until then a class table's guard (sluice.refuse_foreign_triggers)
// refuses every write to a table holding such a trigger, so the trigger
// never runs; where the DDL guard is in force (guardDDL) none is made
// after Sluice's first look at start. Each statement waits for its table's lock at most
// lockTimeout (a DROP TRIGGER takes the table's ACCESS EXCLUSIVE lock,
// and the API's writes queue behind it); one that times out is left for
// the next call. The usual answer (nothing to do) costs one query. It
// returns the statements it ran.
func (db *DB) RemoveForeign(ctx context.Context) ([]string, error) {
	patterns := []string{"sluice", `sluice\_db\_%`}
	rows, err := db.pool.Query(ctx, foreignSQL, patterns)
	if err != nil {
		return nil, mapError(err)
	}
	stmts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(stmts) == 0 {
		return nil, mapError(err)
	}
	var done []string
	var errs []error
	for _, stmt := range stmts {
		err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
			if err := setLockTimeout(ctx, tx); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, stmt)
			return err
		})
		if err != nil {
			var pe *pgconn.PgError
			if !gone(err) && !(errors.As(err, &pe) && pe.Code == "42704") { // dropped meanwhile: no error
				errs = append(errs, fmt.Errorf("%s: %w", stmt, mapError(err)))
			}
			continue
		}
		done = append(done, stmt)
	}
	return done, errors.Join(errs...)
}
