-- Webhooks: each database's commits pushed to HTTP endpoints, in order.
--
-- position (seq, idx) is the last position delivered (answered 2xx), or
-- the one delivery starts after; the epoch is the database's. An active
-- webhook holds history back from pruning after it (postgres.Prune); a
-- paused, failing or revoked one does not, so a forgotten webhook cannot
-- make the log grow without bound, and it reports the gap on resume.
--
-- secret and old_secret are the signing secrets sealed with AES-256-GCM
-- (internal/webhook/secret.go): they must be recoverable to sign, unlike
-- passwords; the key is not in this table.
--
-- version increases with every change made through the API; the deliverer
-- records a delivery only under the version it read, so a delivery in
-- flight cannot undo a replay, a pause or a change of URL.
CREATE TABLE sluice.webhooks (
    id                bigserial PRIMARY KEY,
    db_id             bigint NOT NULL REFERENCES sluice.databases (id) ON DELETE CASCADE,
    url               text NOT NULL,
    description       text NOT NULL DEFAULT '',
    classes           text[] NOT NULL DEFAULT '{}',
    ops               text[] NOT NULL,
    filter            jsonb,
    batch             text NOT NULL,
    creator_id        bigint NOT NULL,
    creator_name      text NOT NULL,
    creator_token_id  bigint,
    secret            bytea NOT NULL,
    old_secret        bytea,
    old_secret_until  timestamptz,
    state             text NOT NULL,
    status_message    text NOT NULL DEFAULT '',
    seq               bigint NOT NULL,
    idx               integer NOT NULL,
    attempt           integer NOT NULL DEFAULT 0,
    next_attempt_at   timestamptz,
    delivered         bigint NOT NULL DEFAULT 0,
    delivered_events  bigint NOT NULL DEFAULT 0,
    failed            bigint NOT NULL DEFAULT 0,
    attempts          bigint NOT NULL DEFAULT 0,
    last_success_at   timestamptz,
    version           bigint NOT NULL DEFAULT 1,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhooks_db_id ON sluice.webhooks (db_id);

-- The attempts log, bounded per webhook: attempt n takes slot n % 100, so
-- a webhook keeps its last 100 attempts whatever it delivered.
CREATE TABLE sluice.webhook_attempts (
    webhook_id   bigint NOT NULL REFERENCES sluice.webhooks (id) ON DELETE CASCADE,
    slot         integer NOT NULL,
    n            bigint NOT NULL,
    at           timestamptz NOT NULL,
    message_id   text NOT NULL,
    events       integer NOT NULL,
    attempt      integer NOT NULL,
    status       integer NOT NULL,
    error        text NOT NULL,
    duration_ms  double precision NOT NULL,
    response     text NOT NULL,
    PRIMARY KEY (webhook_id, slot)
);

-- The deliverer's lease: one replica at a time delivers every webhook. A
-- holder renews it well within its term; a replica that dies stops
-- renewing and another takes it over once it expires. generation grows
-- with every takeover and fences the holder's writes: a delivery is
-- recorded only under the generation that holds the lease.
CREATE TABLE sluice.webhook_lease (
    one         boolean PRIMARY KEY DEFAULT true CHECK (one),
    holder      text NOT NULL DEFAULT '',
    generation  bigint NOT NULL DEFAULT 0,
    expires_at  timestamptz NOT NULL DEFAULT '-infinity'
);
INSERT INTO sluice.webhook_lease DEFAULT VALUES;
