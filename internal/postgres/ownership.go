package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
)

// Sluice keeps its own tables in schema sluice, and each database's in a
// schema sluice_db_<id>. It uses a schema only if its own role owns it
// and everything in it: whatever another Postgres role owns there is
// that role's to change, and runs as Sluice when Sluice uses it. A role
// that may create schemas in Sluice's database (CREATE on the database)
// could otherwise make schema sluice before Sluice first starts, with a
// table sluice.locks whose trigger Sluice's start then ran as Sluice's
// role (a superuser, often), and keep owning the schema: dropping,
// renaming or locking Sluice's tables, and ignoring migration 14's
// REVOKE, which only the owner's grants obey.

// notOwnedSQL lists what schema $1 holds that Sluice's role (current_user)
// does not own: the schema itself, its relations, functions, types and
// other objects (not indexes, always their table's owner's), and, if $2,
// the triggers on its tables that run a function of another role's (the
// built-in ones, of pg_catalog, aside). Each row is what it is, its name,
// and its owner; the first 11 rows.
const notOwnedSQL = `WITH n AS (SELECT oid, nspname, nspowner FROM pg_namespace WHERE nspname = $1),
o AS (
	SELECT 1 AS k, 'schema' AS what, format('%I', n.nspname) AS name, n.nspowner AS owner FROM n
	UNION ALL
	SELECT 2, CASE c.relkind WHEN 'r' THEN 'table' WHEN 'p' THEN 'table' WHEN 'S' THEN 'sequence' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'c' THEN 'type'
		WHEN 'f' THEN 'foreign table' ELSE 'relation' END,
		format('%I.%I', n.nspname, c.relname), c.relowner FROM pg_class c JOIN n ON c.relnamespace = n.oid
		WHERE c.relkind NOT IN ('i', 'I')
	UNION ALL
	SELECT 3, 'function', p.oid::regprocedure::text, p.proowner FROM pg_proc p JOIN n ON p.pronamespace = n.oid
	UNION ALL
	SELECT 4, 'type', format('%I.%I', n.nspname, t.typname), t.typowner FROM pg_type t JOIN n ON t.typnamespace = n.oid
		WHERE t.typrelid = 0 AND t.typcategory <> 'A'
	UNION ALL
	SELECT 5, 'operator', p.oid::regoperator::text, p.oprowner FROM pg_operator p JOIN n ON p.oprnamespace = n.oid
	UNION ALL
	SELECT 6, 'collation', format('%I.%I', n.nspname, c.collname), c.collowner FROM pg_collation c JOIN n ON c.collnamespace = n.oid
	UNION ALL
	SELECT 6, 'conversion', format('%I.%I', n.nspname, c.conname), c.conowner FROM pg_conversion c JOIN n ON c.connamespace = n.oid
	UNION ALL
	SELECT 6, 'operator class', format('%I.%I', n.nspname, c.opcname), c.opcowner FROM pg_opclass c JOIN n ON c.opcnamespace = n.oid
	UNION ALL
	SELECT 6, 'operator family', format('%I.%I', n.nspname, f.opfname), f.opfowner FROM pg_opfamily f JOIN n ON f.opfnamespace = n.oid
	UNION ALL
	SELECT 6, 'text search configuration', format('%I.%I', n.nspname, c.cfgname), c.cfgowner FROM pg_ts_config c JOIN n ON c.cfgnamespace = n.oid
	UNION ALL
	SELECT 6, 'text search dictionary', format('%I.%I', n.nspname, d.dictname), d.dictowner FROM pg_ts_dict d JOIN n ON d.dictnamespace = n.oid
	UNION ALL
	SELECT 6, 'statistics object', format('%I.%I', n.nspname, s.stxname), s.stxowner FROM pg_statistic_ext s JOIN n ON s.stxnamespace = n.oid
	UNION ALL
	SELECT 7, 'trigger', format('%I on %I.%I, which runs %s', g.tgname, n.nspname, c.relname, p.oid::regprocedure), p.proowner
		FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid JOIN n ON c.relnamespace = n.oid JOIN pg_proc p ON p.oid = g.tgfoid
		WHERE NOT g.tgisinternal AND p.pronamespace <> 'pg_catalog'::regnamespace
)
SELECT what, name, quote_ident(pg_get_userbyid(owner)) FROM o
WHERE owner <> (SELECT oid FROM pg_roles WHERE rolname = current_user) AND (k < 7 OR $2)
ORDER BY k, name LIMIT 11`

// notOwned is a row of notOwnedSQL.
type notOwned struct{ what, name, owner string }

// listNotOwned returns what schema holds that Sluice's role does not own
// (notOwnedSQL; the triggers running another role's function if triggers),
// at most 11.
func listNotOwned(ctx context.Context, q querier, schema string, triggers bool) ([]notOwned, error) {
	rows, err := q.Query(ctx, notOwnedSQL, schema, triggers)
	if err != nil {
		return nil, fmt.Errorf("check the owners of schema %s: %w", schema, err)
	}
	found, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (notOwned, error) {
		var o notOwned
		err := r.Scan(&o.what, &o.name, &o.owner)
		return o, err
	})
	if err != nil {
		return nil, fmt.Errorf("check the owners of schema %s: %w", schema, err)
	}
	return found, nil
}

// describeNotOwned names what listNotOwned found, and their owners.
func describeNotOwned(found []notOwned) string {
	names := make([]string, 0, len(found))
	for i, o := range found {
		if i == 10 {
			names = append(names, "and more")
			break
		}
		of := "owned by"
		if o.what == "trigger" {
			of = "its function owned by"
		}
		names = append(names, fmt.Sprintf("%s %s (%s %s)", o.what, o.name, of, o.owner))
	}
	return strings.Join(names, ", ")
}

// checkOwnSchema returns an error naming what schema holds that the role
// Sluice connects as does not own (the schema itself first), and what the
// operator can do about it; nil if it owns all of it, or the schema does
// not exist.
func checkOwnSchema(ctx context.Context, q querier, schema string) error {
	found, err := listNotOwned(ctx, q, schema, true)
	if err != nil {
		return err
	}
	if len(found) == 0 {
		return nil
	}
	var me string
	if err := q.QueryRow(ctx, "SELECT quote_ident(current_user)").Scan(&me); err != nil {
		return fmt.Errorf("check the owners of schema %s: %w", schema, err)
	}
	// A schema another role owns may be Sluice's all the same, made by a
	// replica connecting as that role: this one should too. It is not
	// read to find out (sluice.settings names Sluice's role): a read of a
	// table of another role's can run its code (a row security policy).
	wrongRole := ""
	if found[0].what == "schema" {
		wrongRole = fmt.Sprintf("If Sluice made it, connecting as %s, every replica must connect as %s. Otherwise a", found[0].owner, found[0].owner)
	} else {
		wrongRole = "A"
	}
	return fmt.Errorf("schema %s is not Sluice's own: %s. Sluice, connecting as role %s, uses schema %s only if that role owns it and all it holds: "+
		"what another role owns there is that role's to change, and runs as Sluice when Sluice uses it. "+
		"%snother role, one that may create in this database, made them: check what it made, have a superuser drop it "+
		"(or, if it is Sluice's own, give it to %s: ALTER SCHEMA %s OWNER TO %s, and alike for each object), "+
		"and let no role but Sluice's create in this database (REVOKE CREATE ON DATABASE … FROM each role but Sluice's that has it)",
		schema, describeNotOwned(found), me, schema, wrongRole, me, schema, me)
}

// checkDatabaseSchema returns a Conflict naming what database dbID's
// schema holds that Sluice's role does not own, nil if nothing. Sluice
// makes a table there per class and an index per @index and reference
// field, under names known beforehand; a role granted CREATE on the
// schema (GRANT ALL ON SCHEMA grants it) could make a relation of such a
// name first, and CREATE INDEX IF NOT EXISTS then kept it in the index's
// place (no index was built, and nothing said so), or the class's CREATE
// TABLE failed. Sluice revokes CREATE on its schemas from other roles
// (RemoveForeign), but what was made before stays, for a superuser to
// drop. Triggers are left to RemoveForeign, which drops them.
func checkDatabaseSchema(ctx context.Context, q querier, dbID int64) error {
	schema := schemaName(dbID)
	found, err := listNotOwned(ctx, q, schema, false)
	if err != nil || len(found) == 0 {
		return err
	}
	return sluice.Errorf(sluice.CodeConflict, "the database's Postgres schema %s holds what another Postgres role made: %s; "+
		"Sluice changes the database's tables only while its own role owns all the schema holds, since such an object could stand in for a table or index Sluice makes: "+
		"have a superuser drop them, and grant other roles no CREATE on the schema", schema, describeNotOwned(found))
}

// reachSQL lists the roles that may log in, other than Sluice's own (and
// its members) and superusers, that may read or write a table of schema
// sluice, each with whether it may write; the first 21. Sluice grants no
// role anything there, but Postgres lets a member of pg_read_all_data or
// pg_write_all_data read or write every table whatever its schema's and
// its own grants, and a superuser may grant what Sluice did not.
const reachSQL = `SELECT quote_ident(r.rolname), bool_or(has_table_privilege(r.oid, c.oid, 'INSERT, UPDATE, DELETE, TRUNCATE'))
FROM pg_roles r CROSS JOIN pg_class c
WHERE c.relnamespace = 'sluice'::regnamespace AND c.relkind IN ('r', 'p')
	AND r.rolcanlogin AND NOT r.rolsuper AND NOT pg_has_role(r.oid, current_user, 'MEMBER')
	AND has_schema_privilege(r.oid, 'sluice', 'USAGE')
	AND has_table_privilege(r.oid, c.oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE')
GROUP BY r.rolname ORDER BY r.rolname LIMIT 21`

// RoleReach is a role other than Sluice's that reaches Sluice's own
// tables (OtherRolesReach).
type RoleReach struct {
	Role   string // quoted as an identifier
	Writes bool   // it may write them too
}

// OtherRolesReach returns the roles that may log in, other than Sluice's
// own, its members and superusers, that may read or write Sluice's own
// tables (schema sluice), at most 21: roles granted pg_read_all_data or
// pg_write_all_data, which Postgres lets past any grant, or roles a
// superuser granted them to. Such a role reads the password hashes and the
// key of webhook secrets kept in Postgres, and one that writes can make
// any user Sluice's super user (docs/security.md).
func (db *DB) OtherRolesReach(ctx context.Context) ([]RoleReach, error) {
	rows, err := db.pool.Query(ctx, reachSQL)
	if err != nil {
		return nil, mapError(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (RoleReach, error) {
		var x RoleReach
		err := r.Scan(&x.Role, &x.Writes)
		return x, err
	})
	return out, mapError(err)
}

// subscriptionsSQL lists the logical replication subscriptions of the
// Postgres database Sluice is connected to: name, owner and whether it is
// enabled; the first 21 (pg_subscription is readable by every role but
// its connection strings).
const subscriptionsSQL = `SELECT quote_ident(s.subname), quote_ident(pg_get_userbyid(s.subowner)), s.subenabled
FROM pg_subscription s WHERE s.subdbid = (SELECT oid FROM pg_database WHERE datname = current_database())
ORDER BY s.subname LIMIT 21`

// Subscription is a logical replication subscription of Sluice's Postgres
// database (Subscriptions).
type Subscription struct {
	Name, Owner string // quoted as identifiers
	Enabled     bool
}

// Subscriptions returns the logical replication subscriptions of Sluice's
// Postgres database, at most 21. A subscription's worker applies its rows
// with session_replication_role = replica, in which the capture triggers
// do not fire: what it writes to a class table is not in the log
// (docs/security.md, "Writes that fire no trigger").
func (db *DB) Subscriptions(ctx context.Context) ([]Subscription, error) {
	rows, err := db.pool.Query(ctx, subscriptionsSQL)
	if err != nil {
		return nil, mapError(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Subscription, error) {
		var s Subscription
		err := r.Scan(&s.Name, &s.Owner, &s.Enabled)
		return s, err
	})
	return out, mapError(err)
}
