-- sluice:readable-by 16
-- The counter row of a database keeps the stamp (uid and committed_at) of
-- its newest commit, set in the statement that advances last_seq, so that
-- the position a read reflects (read with the counter row as the read
-- begins) is tagged with its commit's stamp as a write's position is,
-- without finding the commit's row: a lookup by id in every read's counter
-- statement cost 4-14% more of Postgres' CPU.
--
-- stamped_seq is the commit the stamp is of. Binaries that know only
-- earlier migrations run on beside this one (expand) and advance last_seq
-- without setting the stamp: a read tags its position only when
-- stamped_seq = last_seq, so a stamp they left behind names no newer
-- commit. SQL writes set it whatever the binary: capture_commit is
-- replaced below.
ALTER TABLE sluice.commit_counters
    ADD COLUMN last_uid bigint,
    ADD COLUMN last_committed_at timestamptz,
    ADD COLUMN stamped_seq bigint;

UPDATE sluice.commit_counters h SET last_uid = c.uid, last_committed_at = c.committed_at, stamped_seq = c.seq
FROM sluice.commits c WHERE c.db_id = h.db_id AND c.seq = h.last_seq;

-- As migration 21 defined it, but for the counter row's stamp and the
-- commit row's committed_at, which equals it.
CREATE OR REPLACE FUNCTION sluice.capture_commit() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    p record;
    n bigint;
    last integer;
    seq bigint;
    stamped timestamptz;
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
    UPDATE sluice.commit_counters SET last_seq = last_seq + 1, last_uid = NEW.commit_uid,
        last_committed_at = clock_timestamp(), stamped_seq = last_seq + 1
    WHERE db_id = p.db_id RETURNING last_seq, last_committed_at INTO seq, stamped;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'the Sluice database with id % was deleted while this transaction wrote to it', p.db_id
            USING ERRCODE = 'serialization_failure';
    END IF;
    INSERT INTO sluice.commits (db_id, seq, uid, author, message, user_name, n_changes, row_images, committed_at)
    VALUES (p.db_id, seq, NEW.commit_uid, left(coalesce(current_setting('sluice.author', true), ''), 1000),
        left(coalesce(current_setting('sluice.message', true), ''), 10000), 'pg:' || p.role, n, true, stamped);
    PERFORM pg_notify((SELECT value FROM sluice.settings WHERE key = 'commits_channel'), p.db_id::text);
    RETURN NULL;
END
$$;
