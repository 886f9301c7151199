-- Stream tickets: short-lived, single-use secrets that let a browser's
-- native EventSource (which cannot send an Authorization header) open a
-- stream with ?ticket=. A ticket is created by an authenticated request and
-- carries that request's credential, so the stream it opens ends when that
-- credential is revoked, like any stream (see internal/auth/ticket.go).
--
-- Tickets live here rather than in a replica's memory so that one created
-- through any replica can be used on any other, and used once only: a
-- ticket is redeemed by DELETE … RETURNING, and of two replicas redeeming
-- it at once, the second finds the row gone.
--
-- hash: SHA-256 of the secret (the secret itself is never stored).
-- token_id: the API token that created it; NULL for a password or a JWT.
-- password_sum: SHA-256 of the password hash the creating request was
--   checked against (a password created it), so a password change since
--   refuses the ticket without a copy of the hash being kept here.
-- db_path: the database (org/name) it may open a stream on; NULL: any.
-- credential_expires_at: the creating credential's expiry (a JWT's exp);
--   the stream it opens ends then.
-- expires_at: when the ticket itself can no longer be redeemed.
CREATE TABLE sluice.stream_tickets (
    hash                   bytea PRIMARY KEY,
    user_id                bigint NOT NULL REFERENCES sluice.users (id) ON DELETE CASCADE,
    token_id               bigint REFERENCES sluice.tokens (id) ON DELETE CASCADE,
    password_sum           bytea,
    db_path                text,
    credential_expires_at  timestamptz,
    expires_at             timestamptz NOT NULL,
    created_at             timestamptz NOT NULL DEFAULT now()
);
-- Expired tickets are deleted when new ones are made.
CREATE INDEX stream_tickets_expires_at ON sluice.stream_tickets (expires_at);
-- The per-user cap counts a user's live tickets.
CREATE INDEX stream_tickets_user_id ON sluice.stream_tickets (user_id);
