-- sluice:readable-by 16
-- A SQL write whose changes of one document would be logged out of the
-- order they were made fails.
--
-- The capture triggers (sluice_capture) are AFTER ROW triggers: Postgres
-- runs them when their statement ends, and a statement run inside it (by
-- a function it calls, for each row: any role may create one, in pg_temp)
-- ends first. Such a statement that changed a document the outer one had
-- changed already had its change logged before the outer one's:
--
--   UPDATE t SET text = CASE WHEN _id = 'Note/a' THEN 'outer' ELSE f() END
--
-- with f() updating Note/a to 'inner' logged 'outer' last, while the table
-- held 'inner'. Replaying the log no longer gave the table, and every
-- stream, webhook and read of the past showed a state the document did
-- not have; an INSERT whose row the inner statement deleted, or a DELETE
-- whose document it inserted again, alike.
--
-- When a change is logged, the row it leaves must still be the document's
-- row: for an INSERT or UPDATE, the row version it wrote (no later
-- statement replaced or deleted it); for a DELETE, no row of the
-- document's id. Otherwise a statement run inside this one changed the
-- document since, and its change is in the log already: the write fails,
-- naming the document. A DELETE and an INSERT of the same id in one
-- statement (a data-modifying WITH) fail too, though logged in their
-- order: the trigger cannot tell them from the case above. Sluice's own
-- writes skip the triggers.
--
-- Cost, per row, of what is looked at (the row's own header first, then
-- only what could have changed it):
--   - an INSERT's row no statement touched since has no xmax, and nothing
--     more is read; an UPDATE's row has one (the lock its BEFORE trigger
--     took, which the new version keeps), and currtid2 follows its update
--     chain (the row version a later UPDATE made is the latest one);
--   - a row deleted since is not on that chain: the id is looked up in
--     the table (a statement built per row, tens of microseconds) only if
--     this transaction deleted from the table, or, for a DELETE, inserted
--     into it, as its counts of tuples deleted and inserted say (kept
--     whenever track_counts is on, as by default; only a superuser can
--     turn it off, and then every such row is looked up).
-- Measured on a shared, loaded machine (20,000 rows in one statement,
-- six runs of each build in turns): an UPDATE of every row took 4.5 s
-- against 4.1 s before (within the runs' spread, 3.0 to 5.6 s), the
-- INSERT and the DELETE of them the same.
--
-- The body is that of migration 20 with the check. Expand: the signature
-- and the triggers are the same.

CREATE OR REPLACE FUNCTION sluice.capture_change() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp SET extra_float_digits = 3 SET TimeZone = 'UTC' SET DateStyle = 'ISO, MDY'
SET IntervalStyle = 'postgres' SET standard_conforming_strings = on AS $$
DECLARE
    db bigint := TG_ARGV[0]::bigint;
    u bigint := sluice.tx_uid(db);
    i integer := sluice.next_change(u);
    img text;
    cur tid;
    again boolean := false;
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        -- NEW is read when the trigger runs: a row version no statement
        -- replaced, deleted or locked since has no xmax.
        IF NEW.xmax <> '0'::xid THEN
            IF currtid2(quote_ident(TG_TABLE_SCHEMA) || '.' || quote_ident(TG_TABLE_NAME), NEW.ctid) <> NEW.ctid THEN
                again := true;
            ELSIF pg_stat_get_xact_tuples_deleted(TG_RELID) > 0 OR NOT current_setting('track_counts')::boolean THEN
                EXECUTE format('SELECT ctid FROM %I.%I WHERE _id = $1', TG_TABLE_SCHEMA, TG_TABLE_NAME) INTO cur USING NEW._id;
                again := cur IS DISTINCT FROM NEW.ctid;
            END IF;
            IF again THEN
                RAISE EXCEPTION 'document %: changed again, before the statement that wrote it ended, by a statement it ran (a function it called): Sluice records a statement''s changes when it ends, and would log them out of order; change it in separate statements', NEW._id
                    USING ERRCODE = 'feature_not_supported';
            END IF;
        END IF;
        -- The row's image, made once: measured here, recorded below.
        img := row_to_json(NEW)::text;
        IF octet_length(img) > 16777216 THEN
            RAISE EXCEPTION 'document %: its row is % bytes as JSON, more than 16 MiB (16777216 bytes), the most Sluice records of a row written in SQL', NEW._id, octet_length(img)
                USING ERRCODE = 'program_limit_exceeded';
        END IF;
        PERFORM sluice.check_document(TG_TABLE_NAME, to_jsonb(NEW), TG_ARGV);
    -- A row of the deleted id can be there again only if this transaction
    -- inserted into the table.
    ELSIF pg_stat_get_xact_tuples_inserted(TG_RELID) > 0 OR NOT current_setting('track_counts')::boolean THEN
        EXECUTE format('SELECT EXISTS (SELECT FROM %I.%I WHERE _id = $1)', TG_TABLE_SCHEMA, TG_TABLE_NAME) INTO again USING OLD._id;
        IF again THEN
            RAISE EXCEPTION 'document %: written again, before the statement that deleted it ended (by a statement it ran, a function it called, or by the same statement through a data-modifying WITH): Sluice records a statement''s changes when it ends, and cannot tell their order; delete and insert it in separate statements', OLD._id
                USING ERRCODE = 'feature_not_supported';
        END IF;
    END IF;
    IF TG_OP = 'INSERT' THEN
        IF NEW._commit_uid IS DISTINCT FROM u THEN
            RAISE EXCEPTION 'document %: _commit_uid is Sluice''s own: leave it out of an INSERT (and leave Sluice''s constraints deferred: no SET CONSTRAINTS … IMMEDIATE)', NEW._id
                USING ERRCODE = 'check_violation';
        END IF;
        INSERT INTO sluice.changes (commit_uid, idx, doc_ids, ops, befores, afters)
        VALUES (u, i, ARRAY[NEW._id], ARRAY[1::smallint], NULL, '[' || img || ']');
    ELSIF TG_OP = 'UPDATE' THEN
        IF NEW._commit_uid IS DISTINCT FROM u THEN
            RAISE EXCEPTION 'document %: its commit ended while the statement ran (leave Sluice''s constraints deferred: no SET CONSTRAINTS … IMMEDIATE)', NEW._id
                USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;
        INSERT INTO sluice.changes (commit_uid, idx, doc_ids, ops, befores, afters)
        VALUES (u, i, ARRAY[NEW._id], ARRAY[2::smallint], '[' || row_to_json(OLD)::text || ']', '[' || img || ']');
    ELSE
        INSERT INTO sluice.changes (commit_uid, idx, doc_ids, ops, befores, afters)
        VALUES (u, i, ARRAY[OLD._id], ARRAY[3::smallint], '[' || row_to_json(OLD)::text || ']', NULL);
    END IF;
    RETURN NULL;
END
$$;
