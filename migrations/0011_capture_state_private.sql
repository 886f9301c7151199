-- The capture of SQL writes keeps its state where only Sluice can write it.
--
-- Migration 7 kept a transaction's commit uid and its count of changes in
-- session settings (sluice.capture_uid_<db>, sluice.capture_n_<db>), which
-- any role can SET, and let any role call sluice.tx_uid. A role granted
-- DML on one database could so hide its writes from the log, attach
-- changes to commits of other databases, plant changes under the uids
-- Sluice's next commits would draw, and record a commit claiming any
-- number of changes. Now:
--
--   * a transaction's commit in a database is registered, with its uid, in
--     sluice.capture_commits, keyed by the transaction (pg_current_xact_id,
--     never reused) and the database. Only Sluice's role may touch the
--     table; the SECURITY DEFINER trigger functions write it as their
--     owner. A uid is drawn there and nowhere else, so a SQL write cannot
--     choose one;
--   * a change's index is the next after the changes its commit already
--     stored (read through the primary key of sluice.changes), not a
--     counter anyone can reset;
--   * the commit row is written at COMMIT by a deferred constraint trigger
--     on the commit's first change row (sluice.changes, idx 0), and its
--     n_changes is the number of change rows stored, checked to run from
--     0 without gaps. A commit therefore exists exactly when a change
--     does; a registration no change followed (an INSERT … ON CONFLICT DO
--     NOTHING that inserted nothing, a direct call of tx_uid) is removed
--     at COMMIT;
--   * the commit row must be written after every change of its
--     transaction: SET CONSTRAINTS … IMMEDIATE, which would fire the
--     trigger as soon as the first change is stored, makes the write fail;
--   * other roles may execute only the two functions the class tables'
--     column defaults call (tx_uid and new_id).
--
-- Sluice's own writes still skip every trigger of a class table (their
-- WHEN condition), and the trigger on sluice.changes skips them by the same
-- condition, evaluated once per change row (a run of up to 250 changes).
--
-- The rows earlier attacks may have left are repaired: change rows of no
-- commit are deleted, commits whose uid lies ahead of the uid sequence
-- (planted under uids Sluice would draw) get fresh uids, change rows past
-- their commit's count are deleted, and SQL commits record the number of
-- changes they hold.

CREATE UNLOGGED TABLE sluice.capture_commits (
    xid    xid8 NOT NULL,
    db_id  bigint NOT NULL,
    uid    bigint NOT NULL UNIQUE,
    role   text NOT NULL,
    PRIMARY KEY (xid, db_id)
);

-- tx_uid returns the uid of the commit the current transaction makes in
-- database db through SQL, registering it on first use. It is the default
-- of every class table's _commit_uid, so any role may execute it; what it
-- writes is keyed by the calling transaction, and a registration without
-- changes leaves nothing (capture_forget).
CREATE OR REPLACE FUNCTION sluice.tx_uid(db bigint) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    x xid8 := pg_current_xact_id();
    u bigint;
BEGIN
    SELECT c.uid INTO u FROM sluice.capture_commits c WHERE c.xid = x AND c.db_id = db;
    IF NOT FOUND THEN
        u := nextval('sluice.commit_uid_seq');
        INSERT INTO sluice.capture_commits (xid, db_id, uid, role) VALUES (x, db, u, session_user);
    END IF;
    RETURN u;
END
$$;

-- next_change returns the index of the next change of the commit with
-- uid u: one past the highest stored (the primary key's last entry).
CREATE FUNCTION sluice.next_change(u bigint) RETURNS integer
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(max(idx) + 1, 0) FROM sluice.changes WHERE commit_uid = u
$$;

CREATE OR REPLACE FUNCTION sluice.capture_change() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    db bigint := TG_ARGV[0]::bigint;
    u bigint := sluice.tx_uid(db);
    i integer := sluice.next_change(u);
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM sluice.check_document(TG_TABLE_NAME, to_jsonb(NEW), TG_ARGV);
        IF NEW._commit_uid IS DISTINCT FROM u THEN
            RAISE EXCEPTION 'document %: _commit_uid is Sluice''s own: leave it out of an INSERT (and leave Sluice''s constraints deferred: no SET CONSTRAINTS … IMMEDIATE)', NEW._id
                USING ERRCODE = 'check_violation';
        END IF;
        INSERT INTO sluice.changes (commit_uid, idx, doc_ids, ops, befores, afters)
        VALUES (u, i, ARRAY[NEW._id], ARRAY[1::smallint], NULL, '[' || row_to_json(NEW)::text || ']');
    ELSIF TG_OP = 'UPDATE' THEN
        PERFORM sluice.check_document(TG_TABLE_NAME, to_jsonb(NEW), TG_ARGV);
        IF NEW._commit_uid IS DISTINCT FROM u THEN
            RAISE EXCEPTION 'document %: its commit ended while the statement ran (leave Sluice''s constraints deferred: no SET CONSTRAINTS … IMMEDIATE)', NEW._id
                USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;
        INSERT INTO sluice.changes (commit_uid, idx, doc_ids, ops, befores, afters)
        VALUES (u, i, ARRAY[NEW._id], ARRAY[2::smallint], '[' || row_to_json(OLD)::text || ']', '[' || row_to_json(NEW)::text || ']');
    ELSE
        INSERT INTO sluice.changes (commit_uid, idx, doc_ids, ops, befores, afters)
        VALUES (u, i, ARRAY[OLD._id], ARRAY[3::smallint], '[' || row_to_json(OLD)::text || ']', NULL);
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION sluice.capture_truncate() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    u bigint;
BEGIN
    IF sluice.is_writer() THEN
        RETURN NULL;
    END IF;
    u := sluice.tx_uid(TG_ARGV[0]::bigint);
    EXECUTE format('INSERT INTO sluice.changes (commit_uid, idx, doc_ids, ops, befores, afters)
        SELECT $1, $2 + (row_number() OVER (ORDER BY t._id COLLATE "C"))::integer - 1, ARRAY[t._id], ARRAY[3::smallint],
            ''['' || row_to_json(t)::text || '']'', NULL
        FROM %I.%I t', TG_TABLE_SCHEMA, TG_TABLE_NAME) USING u, sluice.next_change(u);
    RETURN NULL;
END
$$;

-- capture_commit writes the commit of the SQL transaction whose first
-- change row NEW is (the deferred constraint trigger capture_commit on
-- sluice.changes), at COMMIT: as the last step, as Sluice's own commits
-- do, it takes the next sequence number from the counter row, whose lock
-- it holds until COMMIT, writes the commit row with the number of changes
-- stored, and wakes the change feeds. After it, the transaction's next
-- change to the database (possible after SET CONSTRAINTS ALL IMMEDIATE
-- between statements) starts another commit.
--
-- Fired inside another trigger, it was made immediate while a statement
-- still records its changes: it refuses, or later changes of the commit
-- would follow its commit row.
CREATE FUNCTION sluice.capture_commit() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    p record;
    n bigint;
    last integer;
    seq bigint;
BEGIN
    IF pg_trigger_depth() > 1 THEN
        RAISE EXCEPTION 'a write to Sluice''s tables is committed to its log at COMMIT: leave Sluice''s constraints deferred (no SET CONSTRAINTS … IMMEDIATE before such a write)'
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    DELETE FROM sluice.capture_commits WHERE uid = NEW.commit_uid RETURNING db_id, role INTO p;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'change row of commit uid % has no pending commit: Sluice''s log is written by Sluice only', NEW.commit_uid
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT count(*), max(idx) INTO n, last FROM sluice.changes WHERE commit_uid = NEW.commit_uid;
    IF n IS DISTINCT FROM last + 1 THEN
        RAISE EXCEPTION 'the commit of this transaction in Sluice database % holds % change rows whose last index is %', p.db_id, n, last
            USING ERRCODE = 'internal_error';
    END IF;
    UPDATE sluice.commit_counters SET last_seq = last_seq + 1 WHERE db_id = p.db_id RETURNING last_seq INTO seq;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'the Sluice database with id % was deleted while this transaction wrote to it', p.db_id
            USING ERRCODE = 'serialization_failure';
    END IF;
    INSERT INTO sluice.commits (db_id, seq, uid, author, message, user_name, n_changes, row_images)
    VALUES (p.db_id, seq, NEW.commit_uid, left(coalesce(current_setting('sluice.author', true), ''), 1000),
        left(coalesce(current_setting('sluice.message', true), ''), 10000), 'pg:' || p.role, n, true);
    PERFORM pg_notify('sluice_commits', p.db_id::text);
    RETURN NULL;
END
$$;

-- capture_forget removes, at COMMIT, a registration no change followed
-- (the deferred constraint trigger capture_forget on capture_commits).
-- Deferred triggers fire in the order they were queued, so it runs before
-- the registration's capture_commit.
CREATE FUNCTION sluice.capture_forget() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    DELETE FROM sluice.capture_commits c WHERE c.uid = NEW.uid
        AND NOT EXISTS (SELECT 1 FROM sluice.changes ch WHERE ch.commit_uid = NEW.uid);
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER capture_forget AFTER INSERT ON sluice.capture_commits
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION sluice.capture_forget();

-- The condition names Sluice's role as a literal: the trigger's WHEN is
-- evaluated for each of Sluice's own change rows, and cannot read a table.
DO $$
BEGIN
    EXECUTE format($f$CREATE CONSTRAINT TRIGGER capture_commit AFTER INSERT ON sluice.changes
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
        WHEN (NEW.idx = 0 AND (session_user <> %L::name OR current_setting('sluice.writer', true) IS DISTINCT FROM 'on'))
        EXECUTE FUNCTION sluice.capture_commit()$f$, (SELECT value FROM sluice.settings WHERE key = 'writer_role'));
END
$$;

DROP TABLE sluice.pending_commits;
DROP FUNCTION sluice.capture_finish();
DROP FUNCTION sluice.begin_change(bigint, integer);

-- The event triggers' functions run as the role whose DDL fired them, and
-- call is_writer, which other roles may no longer execute.
ALTER FUNCTION sluice.guard_ddl() SECURITY DEFINER;
ALTER FUNCTION sluice.guard_drop() SECURITY DEFINER;

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA sluice FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sluice.tx_uid(bigint), sluice.new_id(text) TO PUBLIC;

-- Repairs. Change rows of no commit: hidden writes, or planted under uids
-- Sluice's commits would draw (transactions in flight are not seen).
DELETE FROM sluice.changes ch WHERE NOT EXISTS (SELECT 1 FROM sluice.commits c WHERE c.uid = ch.commit_uid);

-- Commits whose uid the sequence has not reached were planted there: they
-- take fresh uids, with their changes and the rows that name them.
DO $$
DECLARE
    c record;
    t record;
    fresh bigint;
    drawn bigint := (SELECT last_value FROM sluice.commit_uid_seq);
BEGIN
    FOR c IN SELECT db_id, uid FROM sluice.commits WHERE uid > drawn LOOP
        fresh := nextval('sluice.commit_uid_seq');
        UPDATE sluice.changes SET commit_uid = fresh WHERE commit_uid = c.uid;
        UPDATE sluice.commits SET uid = fresh WHERE uid = c.uid;
        FOR t IN SELECT table_name FROM information_schema.tables
            WHERE table_schema = 'sluice_db_' || c.db_id AND table_type = 'BASE TABLE' LOOP
            EXECUTE format('UPDATE %I.%I SET _commit_uid = $1 WHERE _commit_uid = $2', 'sluice_db_' || c.db_id, t.table_name)
                USING fresh, c.uid;
        END LOOP;
    END LOOP;
END
$$;

-- Change rows at or past the count of a commit of Sluice's were attached
-- to it by another transaction (a row's idx is the index of its first
-- change).
DELETE FROM sluice.changes ch USING sluice.commits c
WHERE c.uid = ch.commit_uid AND NOT c.row_images AND ch.idx >= c.n_changes;

-- A change's index is never negative; a SQL commit's change rows hold
-- one change each: they are numbered from 0 in their order, and its count
-- is theirs.
DELETE FROM sluice.changes WHERE idx < 0;
UPDATE sluice.changes ch SET idx = -r.n FROM (
    SELECT ch2.commit_uid, ch2.idx, row_number() OVER (PARTITION BY ch2.commit_uid ORDER BY ch2.idx) AS n
    FROM sluice.changes ch2 JOIN sluice.commits c ON c.uid = ch2.commit_uid AND c.row_images) r
WHERE ch.commit_uid = r.commit_uid AND ch.idx = r.idx AND ch.idx <> r.n - 1;
UPDATE sluice.changes SET idx = -idx - 1 WHERE idx < 0;
UPDATE sluice.commits c SET n_changes = (SELECT count(*) FROM sluice.changes ch WHERE ch.commit_uid = c.uid)
WHERE c.row_images AND c.n_changes <> (SELECT count(*) FROM sluice.changes ch WHERE ch.commit_uid = c.uid);
