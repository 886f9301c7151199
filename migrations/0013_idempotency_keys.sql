-- sluice:readable-by 12
-- Idempotency keys. A document write that carries an Idempotency-Key
-- header records, in the same transaction as its commit, what it
-- answered: a retry with the same key from the same user then answers the
-- same again without a second commit, on any replica. A write that fails
-- records nothing, so a retry runs it again. Binaries that do not know
-- this table run beside it (they ignore keys), hence readable-by.
--
-- request is a SHA-256 of what the request asked (method, path, query,
-- conditional headers and body), so that the same key with another
-- request is refused; answer is what the write answered besides its
-- commit (the ids it wrote, as JSON); seq and uid are the commit's, from
-- which the answer's commit id, position and version are made again.
CREATE TABLE sluice.idempotency_keys (
    user_id     bigint NOT NULL REFERENCES sluice.users (id) ON DELETE CASCADE,
    key         text NOT NULL,
    db_id       bigint NOT NULL REFERENCES sluice.databases (id) ON DELETE CASCADE,
    request     bytea NOT NULL,
    seq         bigint NOT NULL,
    uid         bigint NOT NULL,
    answer      bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, key)
);

-- Pruning deletes keys older than idempotency_retention. (A key goes with
-- its user and its database too; those deletions are rare enough to scan.)
CREATE INDEX idempotency_keys_created ON sluice.idempotency_keys (created_at);
