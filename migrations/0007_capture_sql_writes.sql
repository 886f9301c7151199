-- Writes made directly in Postgres join the commit log.
--
-- Sluice's class tables are plain tables, and other roles (services,
-- migrations, people with psql) may be granted INSERT, UPDATE and DELETE
-- on them. Each such SQL transaction becomes one commit of the database's
-- log, in the same transaction, numbered in the same gapless sequence as
-- Sluice's own commits:
--
--   * an AFTER ROW trigger on every class table (sluice_capture) records
--     each changed row, in statement order, as a change row with the row's
--     image before and after (row_to_json; Sluice turns it into a
--     document when it reads the log, commits.row_images);
--   * the first change of a transaction to a database registers a pending
--     commit (sluice.pending_commits), whose deferred constraint trigger
--     runs at COMMIT, after every statement: it increments the database's
--     counter row and writes the commit row, exactly what Sluice does as
--     the last step of its own commits, so the counter row's lock orders
--     SQL and API commits alike;
--   * a BEFORE UPDATE trigger (sluice_stamp) points the row's _commit_uid
--     at the new commit; column defaults give an INSERT that leaves out
--     _id a random key and _commit_uid the transaction's commit;
--   * TRUNCATE becomes one commit deleting every document of the table.
--
-- Sluice's own writes skip all of it, at the cost of the triggers' WHEN
-- condition per row: Sluice connects as the role recorded here with the
-- setting sluice.writer = on. Every replica must use that role (checked
-- at start). Another role cannot pass for Sluice by setting sluice.writer.
--
-- The triggers, defaults and their validation arguments are (re)made by
-- Sluice from each database's schema (internal/postgres/capture.go), which
-- records what it made in databases.capture.
CREATE TABLE sluice.settings (
    key    text PRIMARY KEY,
    value  text NOT NULL
);
INSERT INTO sluice.settings (key, value) VALUES ('writer_role', current_user);

ALTER TABLE sluice.commits ADD COLUMN row_images boolean NOT NULL DEFAULT false;
ALTER TABLE sluice.databases ADD COLUMN capture text NOT NULL DEFAULT '';

-- At most one row per database a running transaction wrote through SQL;
-- inserted by its first change, deleted by capture_finish before COMMIT.
CREATE UNLOGGED TABLE sluice.pending_commits (
    uid    bigint PRIMARY KEY,
    db_id  bigint NOT NULL,
    role   text NOT NULL
);

-- is_writer reports whether the session is Sluice's own.
CREATE FUNCTION sluice.is_writer() RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(current_setting('sluice.writer', true) = 'on'
        AND session_user = (SELECT value FROM sluice.settings WHERE key = 'writer_role')::name, false)
$$;

-- tx_uid returns the uid of the commit the current transaction makes in
-- database db through SQL, drawing it on first use. It is the default of
-- every class table's _commit_uid, so it runs as the writing role.
CREATE FUNCTION sluice.tx_uid(db bigint) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v text := current_setting('sluice.capture_uid_' || db, true);
    uid bigint;
BEGIN
    IF v IS NOT NULL AND v <> '' THEN
        RETURN v::bigint;
    END IF;
    uid := nextval('sluice.commit_uid_seq');
    PERFORM set_config('sluice.capture_uid_' || db, uid::text, true);
    RETURN uid;
END
$$;

-- new_id returns a new document id of class: 16 characters of
-- a-z2-7, about 80 random bits, as Sluice's own.
CREATE FUNCTION sluice.new_id(class text) RETURNS text
LANGUAGE sql VOLATILE AS $$
    SELECT class || '/' || string_agg(substr('abcdefghijklmnopqrstuvwxyz234567', (get_byte(u, i) & 31) + 1, 1), '' ORDER BY i)
    FROM (SELECT uuid_send(gen_random_uuid()) AS u) r, generate_series(0, 15) AS i
$$;

-- check_document refuses a row Sluice could not read back as a document
-- of class: an id that is not "<class>/<key>" with a printable key, a
-- missing required field, an enum value the schema does not have, a list
-- or subdocument column that holds the wrong JSON. spec holds the
-- trigger's arguments: the database id, then "req:<field>",
-- "list:<field>", "obj:<field>" and "enum:<field>:<V1|V2…>".
CREATE FUNCTION sluice.check_document(class text, doc jsonb, spec text[]) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    id text := doc ->> '_id';
    key text;
    item text;
    kind text;
    field text;
    v jsonb;
    allowed text[];
BEGIN
    IF id IS NULL OR left(id, length(class) + 1) <> class || '/' THEN
        RAISE EXCEPTION 'document id % of class %: an id is "%/<key>"', coalesce(quote_literal(id), 'NULL'), class, class
            USING ERRCODE = 'check_violation';
    END IF;
    key := substr(id, length(class) + 2);
    IF key = '' OR octet_length(key) > 255 OR key ~ '[[:space:][:cntrl:]]' THEN
        RAISE EXCEPTION 'document id %: the key must be 1 to 255 bytes without whitespace or control characters', quote_literal(id)
            USING ERRCODE = 'check_violation';
    END IF;
    -- spec[first] is the database id (a trigger's TG_ARGV starts at 0).
    FOR i IN array_lower(spec, 1) + 1 .. coalesce(array_upper(spec, 1), 0) LOOP
        item := spec[i];
        kind := split_part(item, ':', 1);
        field := split_part(item, ':', 2);
        v := doc -> field;
        IF v = 'null'::jsonb THEN
            v := NULL;
        END IF;
        IF kind = 'req' AND v IS NULL THEN
            RAISE EXCEPTION 'document %: field %.% is required', id, class, field USING ERRCODE = 'not_null_violation';
        ELSIF v IS NULL THEN
            CONTINUE;
        ELSIF kind = 'list' AND jsonb_typeof(v) <> 'array' THEN
            RAISE EXCEPTION 'document %: field %.% is a list: a JSON array, not %', id, class, field, v USING ERRCODE = 'check_violation';
        ELSIF kind = 'obj' AND jsonb_typeof(v) <> 'object' THEN
            RAISE EXCEPTION 'document %: field %.% is a subdocument: a JSON object, not %', id, class, field, v USING ERRCODE = 'check_violation';
        ELSIF kind = 'enum' THEN
            allowed := string_to_array(split_part(item, ':', 3), '|');
            IF jsonb_typeof(v) = 'array' THEN
                IF EXISTS (SELECT 1 FROM jsonb_array_elements(v) e WHERE jsonb_typeof(e) <> 'string' OR NOT (e #>> '{}') = ANY (allowed)) THEN
                    RAISE EXCEPTION 'document %: field %.% holds a value that is not one of %', id, class, field, allowed USING ERRCODE = 'check_violation';
                END IF;
            ELSIF jsonb_typeof(v) <> 'string' OR NOT (v #>> '{}') = ANY (allowed) THEN
                RAISE EXCEPTION 'document %: field %.% is %, not one of %', id, class, field, v, allowed USING ERRCODE = 'check_violation';
            END IF;
        END IF;
    END LOOP;
END
$$;

-- begin_change returns the uid of the transaction's commit in database db
-- and the index of its next change, registering the pending commit on its
-- first change.
CREATE FUNCTION sluice.begin_change(db bigint, n integer, OUT uid bigint, OUT idx integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c text := current_setting('sluice.capture_n_' || db, true);
BEGIN
    uid := sluice.tx_uid(db);
    IF c IS NULL OR c = '' THEN
        INSERT INTO sluice.pending_commits (uid, db_id, role) VALUES (uid, db, session_user);
        idx := 0;
    ELSE
        idx := c::integer;
    END IF;
    PERFORM set_config('sluice.capture_n_' || db, (idx + n)::text, true);
END
$$;

-- capture_change records one changed row (the AFTER ROW trigger
-- sluice_capture; TG_ARGV as check_document's spec).
CREATE FUNCTION sluice.capture_change() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    db bigint := TG_ARGV[0]::bigint;
    c record;
BEGIN
    c := sluice.begin_change(db, 1);
    IF TG_OP = 'INSERT' THEN
        PERFORM sluice.check_document(TG_TABLE_NAME, to_jsonb(NEW), TG_ARGV);
        IF NEW._commit_uid IS DISTINCT FROM c.uid THEN
            RAISE EXCEPTION 'document %: _commit_uid is Sluice''s own: leave it out of an INSERT', NEW._id
                USING ERRCODE = 'check_violation';
        END IF;
        INSERT INTO sluice.changes (commit_uid, idx, doc_ids, ops, befores, afters)
        VALUES (c.uid, c.idx, ARRAY[NEW._id], ARRAY[1::smallint], NULL, '[' || row_to_json(NEW)::text || ']');
    ELSIF TG_OP = 'UPDATE' THEN
        PERFORM sluice.check_document(TG_TABLE_NAME, to_jsonb(NEW), TG_ARGV);
        INSERT INTO sluice.changes (commit_uid, idx, doc_ids, ops, befores, afters)
        VALUES (c.uid, c.idx, ARRAY[NEW._id], ARRAY[2::smallint], '[' || row_to_json(OLD)::text || ']', '[' || row_to_json(NEW)::text || ']');
    ELSE
        INSERT INTO sluice.changes (commit_uid, idx, doc_ids, ops, befores, afters)
        VALUES (c.uid, c.idx, ARRAY[OLD._id], ARRAY[3::smallint], '[' || row_to_json(OLD)::text || ']', NULL);
    END IF;
    RETURN NULL;
END
$$;

-- capture_stamp points an updated row at the transaction's commit (the
-- BEFORE UPDATE trigger sluice_stamp). A row's _id does not change: that
-- would be another document.
CREATE FUNCTION sluice.capture_stamp() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NEW._id IS DISTINCT FROM OLD._id THEN
        RAISE EXCEPTION 'document %: _id cannot change (that would be another document): delete it and insert the new one', OLD._id
            USING ERRCODE = 'check_violation';
    END IF;
    NEW._commit_uid := sluice.tx_uid(TG_ARGV[0]::bigint);
    RETURN NEW;
END
$$;

-- capture_truncate records a TRUNCATE of a class table as the deletion of
-- every document it held (the BEFORE TRUNCATE trigger sluice_truncate).
CREATE FUNCTION sluice.capture_truncate() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    db bigint := TG_ARGV[0]::bigint;
    n bigint;
    c record;
BEGIN
    IF sluice.is_writer() THEN
        RETURN NULL;
    END IF;
    EXECUTE format('SELECT count(*) FROM %I.%I', TG_TABLE_SCHEMA, TG_TABLE_NAME) INTO n;
    IF n = 0 THEN
        RETURN NULL;
    END IF;
    c := sluice.begin_change(db, n::integer);
    EXECUTE format('INSERT INTO sluice.changes (commit_uid, idx, doc_ids, ops, befores, afters)
        SELECT $1, $2 + (row_number() OVER (ORDER BY t._id COLLATE "C"))::integer - 1, ARRAY[t._id], ARRAY[3::smallint],
            ''['' || row_to_json(t)::text || '']'', NULL
        FROM %I.%I t', TG_TABLE_SCHEMA, TG_TABLE_NAME) USING c.uid, c.idx;
    RETURN NULL;
END
$$;

-- capture_finish ends the pending commit of one database at COMMIT (the
-- deferred constraint trigger below): as the last step, as Sluice's own
-- commits do, it takes the next sequence number from the counter row,
-- whose lock it holds until COMMIT, writes the commit row and wakes the
-- change feeds. After it, the transaction's next change to the database
-- (possible after SET CONSTRAINTS ALL IMMEDIATE) starts another commit.
CREATE FUNCTION sluice.capture_finish() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    n integer := coalesce(nullif(current_setting('sluice.capture_n_' || NEW.db_id, true), ''), '0')::integer;
    seq bigint;
BEGIN
    UPDATE sluice.commit_counters SET last_seq = last_seq + 1 WHERE db_id = NEW.db_id RETURNING last_seq INTO seq;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'the Sluice database with id % was deleted while this transaction wrote to it', NEW.db_id
            USING ERRCODE = 'serialization_failure';
    END IF;
    INSERT INTO sluice.commits (db_id, seq, uid, author, message, user_name, n_changes, row_images)
    VALUES (NEW.db_id, seq, NEW.uid, left(coalesce(current_setting('sluice.author', true), ''), 1000),
        left(coalesce(current_setting('sluice.message', true), ''), 10000), 'pg:' || NEW.role, n, true);
    DELETE FROM sluice.pending_commits WHERE uid = NEW.uid;
    PERFORM set_config('sluice.capture_uid_' || NEW.db_id, '', true);
    PERFORM set_config('sluice.capture_n_' || NEW.db_id, '', true);
    PERFORM pg_notify('sluice_commits', NEW.db_id::text);
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER finish AFTER INSERT ON sluice.pending_commits
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION sluice.capture_finish();

-- Only the triggers (which run these as their owner) and column defaults
-- (tx_uid, new_id, which run as the writing role) call them.
REVOKE EXECUTE ON FUNCTION sluice.check_document(text, jsonb, text[]), sluice.begin_change(bigint, integer),
    sluice.capture_change(), sluice.capture_stamp(), sluice.capture_truncate(), sluice.capture_finish() FROM PUBLIC;
GRANT USAGE ON SCHEMA sluice TO PUBLIC;

-- DDL on Sluice's tables by anyone but Sluice is refused, where Sluice may
-- install an event trigger (a superuser). Elsewhere other roles cannot
-- alter tables they do not own anyway. GRANT, REVOKE and COMMENT pass:
-- granting other roles access is how SQL writers are set up.
CREATE FUNCTION sluice.guard_ddl() RETURNS event_trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    obj record;
BEGIN
    IF TG_TAG IN ('GRANT', 'REVOKE', 'COMMENT', 'ALTER DEFAULT PRIVILEGES', 'SECURITY LABEL') THEN
        RETURN;
    END IF;
    FOR obj IN SELECT * FROM pg_event_trigger_ddl_commands() LOOP
        IF (obj.schema_name = 'sluice' OR obj.schema_name LIKE 'sluice\_db\_%') AND NOT sluice.is_writer() THEN
            RAISE EXCEPTION '% of %: Sluice''s tables change only through Sluice (a database''s classes and fields through its schema API, PUT /api/schema/{org}/{db})', TG_TAG, obj.object_identity
                USING ERRCODE = 'insufficient_privilege';
        END IF;
    END LOOP;
END
$$;

CREATE FUNCTION sluice.guard_drop() RETURNS event_trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    obj record;
BEGIN
    FOR obj IN SELECT * FROM pg_event_trigger_dropped_objects() LOOP
        IF (obj.schema_name = 'sluice' OR obj.schema_name LIKE 'sluice\_db\_%' OR obj.object_name LIKE 'sluice\_db\_%')
            AND NOT sluice.is_writer() THEN
            RAISE EXCEPTION 'DROP of %: Sluice''s tables change only through Sluice (a class through its schema API, PUT /api/schema/{org}/{db}, a database through DELETE /api/db/{org}/{db})', obj.object_identity
                USING ERRCODE = 'insufficient_privilege';
        END IF;
    END LOOP;
END
$$;

DO $$
BEGIN
    IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        CREATE EVENT TRIGGER sluice_guard_ddl ON ddl_command_end EXECUTE FUNCTION sluice.guard_ddl();
        CREATE EVENT TRIGGER sluice_guard_drop ON sql_drop EXECUTE FUNCTION sluice.guard_drop();
    END IF;
END
$$;
