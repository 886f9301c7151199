-- sluice:readable-by 16
-- A user's tokens are counted (at most 1,000 unrevoked ones each) and
-- listed by user: without an index, each token made scanned every
-- user's tokens. Older binaries do not use it, and run beside it
-- unchanged.
CREATE INDEX tokens_by_user ON sluice.tokens (user_id) WHERE revoked_at IS NULL;
CREATE INDEX tokens_revoked_by_user ON sluice.tokens (user_id, id DESC) WHERE revoked_at IS NOT NULL;
