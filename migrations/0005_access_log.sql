-- The access log: every change to credentials or access (a token revoked, a
-- password changed, a user deleted, a role granted, narrowed or revoked, a
-- database or an organization deleted) is one row, written in the same
-- transaction as the change.
--
-- Its version comes from one counter row, incremented in that transaction,
-- so its lock orders access changes: versions are gapless and equal commit
-- order, exactly like a database's commit sequence. Every process's change
-- feed reads the counter in the same statement (one snapshot) as the
-- commits it delivers, and applies the access changes up to that version
-- to its open streams first. A commit made after an access change answered
-- is therefore never delivered to a stream that change ends, on any
-- replica, whatever the timing.
CREATE TABLE sluice.access_counter (
    one      boolean PRIMARY KEY DEFAULT true CHECK (one),
    version  bigint NOT NULL DEFAULT 0
);
INSERT INTO sluice.access_counter DEFAULT VALUES;

-- kind: token (token_id revoked), password (user_id's password changed),
-- user (user_id deleted), role (user_id's role on db_id is now role, 0 for
-- none), database (db_id deleted), organization (org deleted, with its
-- users and databases). Rows are pruned after a while; a process that finds
-- the versions it missed pruned re-checks every open stream.
CREATE TABLE sluice.access_changes (
    version     bigint PRIMARY KEY,
    kind        text NOT NULL,
    user_id     bigint,
    token_id    bigint,
    db_id       bigint,
    org         text,
    role        smallint,
    changed_at  timestamptz NOT NULL DEFAULT now()
);

-- Each database's schema versions, so that history is shown through the
-- schema a commit was made under as well as the current one: commits with
-- seq >= first_seq (up to the next version's first_seq) were made under
-- version. Versions older than this migration are not known; their commits
-- are shown through the current schema only.
CREATE TABLE sluice.schema_versions (
    db_id      bigint NOT NULL REFERENCES sluice.databases (id) ON DELETE CASCADE,
    version    integer NOT NULL,
    sdl        text NOT NULL,
    first_seq  bigint NOT NULL,
    PRIMARY KEY (db_id, version)
);
INSERT INTO sluice.schema_versions (db_id, version, sdl, first_seq)
SELECT d.id, c.schema_version, d.schema_sdl, c.last_seq + 1
FROM sluice.databases d JOIN sluice.commit_counters c ON c.db_id = d.id;
