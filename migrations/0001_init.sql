-- Organizations own users and databases.
CREATE TABLE sluice.organizations (
    name        text PRIMARY KEY,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- Users log in with Basic auth (name + password) or a bearer token. Names are
-- unique across organizations because Basic auth carries only the name.
CREATE TABLE sluice.users (
    id             bigserial PRIMARY KEY,
    org            text NOT NULL REFERENCES sluice.organizations (name) ON DELETE CASCADE,
    name           text NOT NULL UNIQUE,
    password_hash  text NOT NULL,
    superuser      boolean NOT NULL DEFAULT false,
    created_at     timestamptz NOT NULL DEFAULT now()
);

-- API tokens: only a SHA-256 of the secret is stored.
CREATE TABLE sluice.tokens (
    id          bigserial PRIMARY KEY,
    user_id     bigint NOT NULL REFERENCES sluice.users (id) ON DELETE CASCADE,
    name        text NOT NULL DEFAULT '',
    hash        bytea NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);

CREATE TABLE sluice.databases (
    id              bigserial PRIMARY KEY,
    org             text NOT NULL REFERENCES sluice.organizations (name),
    name            text NOT NULL,
    label           text NOT NULL DEFAULT '',
    comment         text NOT NULL DEFAULT '',
    epoch           text NOT NULL,
    schema_sdl      text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (org, name)
);

-- Per-database roles: 1 read, 2 write, 3 admin.
CREATE TABLE sluice.roles (
    user_id  bigint NOT NULL REFERENCES sluice.users (id) ON DELETE CASCADE,
    db_id    bigint NOT NULL REFERENCES sluice.databases (id) ON DELETE CASCADE,
    role     smallint NOT NULL CHECK (role BETWEEN 1 AND 3),
    PRIMARY KEY (user_id, db_id)
);

-- The per-database commit counter. A commit increments last_seq as its last
-- statement before COMMIT, so the row lock orders commits and the sequence is
-- gapless and equal to commit order. schema_version lives here too: a commit
-- only succeeds against the schema version it validated with, and a schema
-- change bumps it under the same row lock.
CREATE TABLE sluice.commit_counters (
    db_id           bigint PRIMARY KEY REFERENCES sluice.databases (id) ON DELETE CASCADE,
    last_seq        bigint NOT NULL DEFAULT 0,
    schema_version  integer NOT NULL DEFAULT 1,
    -- Commits with seq <= pruned_seq were removed by retention; a stream
    -- position before it can no longer be resumed.
    pruned_seq      bigint NOT NULL DEFAULT 0
);

-- uid joins a commit to its changes: the changes are written before the
-- commit's sequence number exists (it is allocated last), so they are keyed
-- by a uid drawn from this sequence at the start of the transaction.
CREATE SEQUENCE sluice.commit_uid_seq;

CREATE TABLE sluice.commits (
    db_id         bigint NOT NULL REFERENCES sluice.databases (id) ON DELETE CASCADE,
    seq           bigint NOT NULL,
    uid           bigint NOT NULL UNIQUE,
    author        text NOT NULL DEFAULT '',
    message       text NOT NULL DEFAULT '',
    user_name     text NOT NULL DEFAULT '',
    committed_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    n_changes     integer NOT NULL,
    PRIMARY KEY (db_id, seq)
);
CREATE INDEX commits_time ON sluice.commits (db_id, committed_at);

-- One row per changed document, found through its commit's uid (no
-- db_id column or second index: every byte here is paid on every write); before/after are the document in its API
-- form ("@id", "@type", fields), null when absent; json, not jsonb, keeps
-- the bytes as written (deterministic field order) and is cheaper to write. op: 1 added, 2 updated,
-- 3 deleted.
CREATE TABLE sluice.changes (
    commit_uid  bigint NOT NULL,
    idx         integer NOT NULL,
    class       text NOT NULL,
    doc_id      text NOT NULL,
    op          smallint NOT NULL,
    before      json,
    after       json,
    PRIMARY KEY (commit_uid, idx)
);
