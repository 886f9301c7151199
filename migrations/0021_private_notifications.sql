-- sluice:readable-by 16
-- Commits, access changes and webhook changes are announced on channels
-- whose names only Sluice's role can read.
--
-- Postgres has no permissions on LISTEN and NOTIFY: any role that may
-- connect can listen on any channel and notify any channel. On the fixed
-- channels sluice_commits and sluice_webhooks, another role learnt which
-- Sluice database committed when (the payload is its id), and could make
-- every replica read the counter rows once per notification it sent. The
-- names are now those two followed by 32 random hex digits (a random
-- UUID's, from the server's strong random source), kept in sluice.settings,
-- which only Sluice's role may read (it also holds the webhooks' key). The
-- daemon reads them once; capture_commit, which announces SQL writes and
-- runs as Sluice's role, reads them as it notifies.
--
-- Expand: binaries that know only earlier migrations run on beside this
-- one, notifying and listening on the fixed names. While both kinds run
-- (a rolling upgrade) each learns of the other's commits by its change
-- feed's poll (every 500 ms) instead of at once; nothing is lost.
INSERT INTO sluice.settings (key, value) VALUES
    ('commits_channel', 'sluice_commits_' || replace(gen_random_uuid()::text, '-', '')),
    ('webhooks_channel', 'sluice_webhooks_' || replace(gen_random_uuid()::text, '-', ''));

-- As migration 11 defined it, but for the channel's name.
CREATE OR REPLACE FUNCTION sluice.capture_commit() RETURNS trigger
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
    PERFORM pg_notify((SELECT value FROM sluice.settings WHERE key = 'commits_channel'), p.db_id::text);
    RETURN NULL;
END
$$;
