-- sluice:readable-by 16
-- Code other roles attach to Sluice's tables never runs as Sluice.
--
-- A role granted TRIGGER on a class table (GRANT ALL ON ALL TABLES
-- grants it) could create a trigger of its own there, and every write of
-- Sluice's to the table then ran its function as Sluice's role. Three
-- things stop that:
--
--   - guard_ddl (where Sluice is a superuser) refused DDL by the schema
--     of each object, and a trigger has none (schema_name is NULL for
--     CREATE TRIGGER): it let every trigger through. It now judges a
--     trigger, and a rule or a policy, by its table's schema.
--   - refuse_foreign_triggers is the function of a statement trigger
--     Sluice gives every class table (internal/postgres/capture.go). It
--     fires before every other trigger of a statement (triggers fire in
--     the order of their names, and its name, U&"\0001", is the lowest a
--     trigger can have), and fails the statement while the table has a
--     trigger Sluice did not make. It runs when the statement already holds
--     the table's lock, which CREATE TRIGGER waits for, and reads the
--     catalog afresh (writes run READ COMMITTED): no trigger is created
--     between its look and the statement's rows.
--   - Sluice drops the triggers it did not make, and revokes TRIGGER and
--     REFERENCES on its tables, when it makes a database's triggers and
--     every little while (RepairCapture).
--
-- A trigger is Sluice's when it is internal (a foreign key's) or its
-- function is in schema sluice, where only Sluice's role may create.

CREATE OR REPLACE FUNCTION sluice.guard_ddl() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    obj record;
    nsp text;
BEGIN
    IF TG_TAG IN ('GRANT', 'REVOKE', 'COMMENT', 'ALTER DEFAULT PRIVILEGES', 'SECURITY LABEL') THEN
        RETURN;
    END IF;
    FOR obj IN SELECT * FROM pg_event_trigger_ddl_commands() LOOP
        nsp := obj.schema_name;
        -- Triggers, rules and policies have no schema of their own: that
        -- of their table is theirs.
        IF obj.classid = 'pg_trigger'::regclass THEN
            SELECT c.relnamespace::regnamespace::text INTO nsp FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid WHERE t.oid = obj.objid;
        ELSIF obj.classid = 'pg_rewrite'::regclass THEN
            SELECT c.relnamespace::regnamespace::text INTO nsp FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class WHERE r.oid = obj.objid;
        ELSIF obj.classid = 'pg_policy'::regclass THEN
            SELECT c.relnamespace::regnamespace::text INTO nsp FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid WHERE p.oid = obj.objid;
        END IF;
        IF (nsp = 'sluice' OR nsp LIKE 'sluice\_db\_%') AND NOT sluice.is_writer() THEN
            RAISE EXCEPTION '% of %: Sluice''s tables change only through Sluice (a database''s classes and fields through its schema API, PUT /api/schema/{org}/{db})', TG_TAG, obj.object_identity
                USING ERRCODE = 'insufficient_privilege';
        END IF;
    END LOOP;
END
$$;

-- refuse_foreign_triggers fails the statement firing it while its table
-- has a trigger Sluice did not make (see above), with SQLSTATE SLFT1,
-- which the API answers 503 (retry: Sluice drops the trigger within
-- seconds). It runs as the role writing, which reads pg_trigger as any
-- role may.
CREATE FUNCTION sluice.refuse_foreign_triggers() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    names text;
BEGIN
    -- It runs for every statement writing a class table: the look reads
    -- the table's few triggers and each one's function by its oid (a
    -- join of pg_trigger and pg_proc took twice as long, about 75 µs a
    -- statement in BenchmarkWriteStatements, against about 35 µs).
    IF EXISTS (SELECT FROM pg_trigger t WHERE t.tgrelid = TG_RELID AND NOT t.tgisinternal
            AND (SELECT p.pronamespace FROM pg_proc p WHERE p.oid = t.tgfoid) <> 'sluice'::regnamespace) THEN
        SELECT string_agg(quote_ident(t.tgname), ', ' ORDER BY t.tgname) INTO names
        FROM pg_trigger t WHERE t.tgrelid = TG_RELID AND NOT t.tgisinternal
            AND (SELECT p.pronamespace FROM pg_proc p WHERE p.oid = t.tgfoid) <> 'sluice'::regnamespace;
        RAISE EXCEPTION 'table %.% has triggers Sluice did not make (%): it is not written while they are there; Sluice drops them within seconds', TG_TABLE_SCHEMA, TG_TABLE_NAME, names
            USING ERRCODE = 'SLFT1', HINT = 'Grant other roles only SELECT, INSERT, UPDATE, DELETE and TRUNCATE on Sluice''s tables, never ALL, TRIGGER or REFERENCES.';
    END IF;
    RETURN NULL;
END
$$;
-- Trigger functions need no EXECUTE to fire; only CREATE TRIGGER needs
-- it, and nobody but Sluice should attach this one.
REVOKE EXECUTE ON FUNCTION sluice.refuse_foreign_triggers() FROM PUBLIC;

-- tx_uid, the default of every class table's _commit_uid, is executable
-- by PUBLIC (any role writing a table runs it), and a default can be
-- copied: a role granted only SELECT made a temporary table LIKE a class
-- table INCLUDING DEFAULTS and, inserting into it, drew Sluice's commit
-- uids and wrote sluice.capture_commits as Sluice. It now registers a
-- commit only for a session whose role may become one that may insert,
-- update, delete or truncate a table of the database (or own it): SQL writers as
-- the documentation grants them need nothing new. The check runs once per
-- transaction and database, when the commit is registered.
CREATE OR REPLACE FUNCTION sluice.tx_uid(db bigint) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    x xid8 := pg_current_xact_id();
    u bigint;
BEGIN
    SELECT c.uid INTO u FROM sluice.capture_commits c WHERE c.xid = x AND c.db_id = db;
    IF NOT FOUND THEN
        IF NOT EXISTS (SELECT FROM pg_class c
                WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = 'sluice_db_' || db) AND c.relkind = 'r'
                AND (pg_has_role(session_user, c.relowner, 'MEMBER')
                    OR EXISTS (SELECT FROM aclexplode(c.relacl) a
                        WHERE a.privilege_type IN ('INSERT', 'UPDATE', 'DELETE', 'TRUNCATE')
                        AND (a.grantee = 0 OR pg_has_role(session_user, a.grantee, 'MEMBER'))))) THEN
            RAISE EXCEPTION 'role % may not write the tables of Sluice''s database %: only a role that may insert, update, delete or truncate them registers a commit', session_user, db
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        u := nextval('sluice.commit_uid_seq');
        INSERT INTO sluice.capture_commits (xid, db_id, uid, role) VALUES (x, db, u, session_user);
    END IF;
    RETURN u;
END
$$;
